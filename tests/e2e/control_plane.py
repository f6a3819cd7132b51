"""A real control plane on loopback, shared by the end-to-end tests (conftest.py) and `make cluster`
(cluster.py): one implementation, used as context managers that tear everything down on exit.

- ``running_control_plane``: etcd and kube-apiserver (and optionally kube-scheduler) built by
  build-control-plane.sh, on free loopback ports in a work directory, with a client-certificate admin
  kubeconfig (CN admin, O system:masters) that verifies the apiserver's serving certificate; with
  ``controllers=True`` also kube-controller-manager (real Deployments, ReplicaSets, Jobs...) and
  kwok, the fake kubelets that make bound pods Running and Ready.
- ``running_webhook``: the real `gpu-admission serve`, with the Deployment's own command and the
  ConfigMap's policy from the rendered manifests; ``register`` points the rendered webhook
  configurations at it (clientConfig.url instead of the Service).
- ``gpu_node`` / ``create_nodes``: fake GPU Nodes labelled as GPU Feature Discovery labels them.

Failures raise ``ControlPlaneError`` with the tail of the process log; nothing here uses pytest.
"""

from __future__ import annotations

import base64
import copy
import datetime
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from objects import GPU, PRODUCT_LABEL, vllm_pod
from webhook.cli import install as webhook_install

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120.0
"""Seconds for etcd + kube-apiserver to become ready on a loaded 2-core machine (~8 s idle)."""
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


class ControlPlaneError(RuntimeError):
    """A component did not start, or a step against it failed; the message has the log tail."""


RESERVED_PORTS = frozenset({8443, 18443, 28443, 38443})
"""`make run` and the developers' own servers listen there: never hand them out."""


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in RESERVED_PORTS:
            return port


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _exited(procs: dict[str, tuple[subprocess.Popen, Path]]) -> None:
    for name, (proc, log) in procs.items():
        if proc.poll() is not None:
            raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{_tail(log)}")


def _wait(what: str, ready, procs: dict[str, tuple[subprocess.Popen, Path]], timeout: float,
          log: Path, interval: float = 0.3) -> None:
    """Poll ``ready()`` until true; fail early when a process exits, late after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        _exited(procs)
        if ready():
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s:\n{_tail(log)}")
        time.sleep(interval)


# --- kubectl --------------------------------------------------------------------------------------

@dataclass
class ControlPlane:
    kubectl: Path
    kubeconfig: Path
    url: str
    log: Path
    """kube-apiserver's log."""
    scheduler_log: Path | None = None
    controller_manager_log: Path | None = None
    kwok_log: Path | None = None
    processes: dict[str, tuple[subprocess.Popen, Path]] = field(default_factory=dict, repr=False)
    """name -> (process, log) of every component started for it."""
    audit_log: Path | None = None
    """kube-apiserver's audit log, when started with ``audit_log=True``."""

    def check(self) -> None:
        """Raise ControlPlaneError when a component has exited."""
        _exited(self.processes)

    def run(self, *args: str, stdin: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """kubectl against this control plane; stdout and stderr as text."""
        done = subprocess.run([str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def apply(self, docs: list[dict], *extra: str, check: bool = True) -> subprocess.CompletedProcess:
        """`kubectl apply -f -` of the documents, in order."""
        stream = "\n---\n".join(json.dumps(d) for d in docs)
        return self.run("apply", "-f", "-", *extra, stdin=stream, check=check)

    def get(self, resource: str, name: str | None = None, namespace: str | None = None,
            *extra: str) -> dict | None:
        """The stored object (or list) as JSON; None when it does not exist."""
        args = ["get", resource, *([name] if name else []), *(["-n", namespace] if namespace else []),
                "-o", "json", *extra]
        done = self.run(*args, check=False)
        if done.returncode != 0:
            if "NotFound" in done.stderr:
                return None
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return json.loads(done.stdout)

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.apply([{"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": name, "labels": labels or {}}}])


# --- etcd, kube-apiserver, kube-scheduler ---------------------------------------------------------

def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def client_credentials(out: Path, users: dict[str, tuple[str, ...]]) -> tuple[Path, dict[str, tuple[bytes, bytes]]]:
    """A client CA for kube-apiserver's --client-ca-file and one certificate per user, signed by it.
    ``users``: common name -> organizations (groups). Returns (ca path, {common name: (cert, key)})."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-admission e2e client CA")])

    def cert(subject: x509.Name, public, *extensions) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
                   .public_key(public).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=7)))
        for ext, critical in extensions:
            builder = builder.add_extension(ext, critical=critical)
        return builder.sign(ca_key, hashes.SHA256())

    ca = cert(ca_name, ca_key.public_key(), (x509.BasicConstraints(ca=True, path_length=0), True),
              (x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                             key_encipherment=False, data_encipherment=False, key_agreement=False,
                             encipher_only=False, decipher_only=False), True))
    issued = {}
    for common_name, orgs in users.items():
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                             x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        issued[common_name] = (_pem_cert(cert(subject, key.public_key(),
                                              (x509.BasicConstraints(ca=False, path_length=None), True),
                                              (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False))),
                               _pem_key(key))
    out.mkdir(parents=True, exist_ok=True)
    (out / "client-ca.crt").write_bytes(_pem_cert(ca))
    return out / "client-ca.crt", issued


CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
"""The user RBAC's bootstrap policy binds to the controller-manager's own role; with
--use-service-account-credentials each controller then acts as its own service account."""


def admin_credentials(out: Path) -> tuple[Path, bytes, bytes]:
    """The client CA and an admin certificate (CN admin, O system:masters: every permission under
    RBAC). Returns (ca path, cert, key)."""
    ca, issued = client_credentials(out, {"admin": ("system:masters",)})
    return ca, *issued["admin"]


def _kubeconfig(path: Path, url: str, server_ca: Path, cert: bytes, key: bytes) -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gpu-admission-e2e",
        "clusters": [{"name": "gpu-admission-e2e",
                      "cluster": {"server": url, "certificate-authority": str(server_ca)}}],
        "users": [{"name": "admin", "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)}}],
        "contexts": [{"name": "gpu-admission-e2e", "context": {"cluster": "gpu-admission-e2e", "user": "admin"}}],
    }, indent=1))
    os.chmod(path, 0o600)


def _healthz(port: int, *, tls: bool = True) -> bool:
    """``/healthz`` on loopback answers 200: kube-scheduler's and kube-controller-manager's (served
    without authentication, self-signed certificate), or kwok's plain-HTTP one (``tls=False``)."""
    if tls:
        ctx = ssl._create_unverified_context()  # noqa: S323 - loopback health probe of a test process
        conn: http.client.HTTPConnection = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=3)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _scheduler_config_args(config: Path | None, kubeconfig: Path, workdir: Path) -> list[str]:
    """``--config`` for kube-scheduler: ``config`` with clientConnection.kubeconfig pointed here."""
    if config is None:
        return []
    doc = yaml.safe_load(config.read_text())
    doc.setdefault("clientConnection", {})["kubeconfig"] = str(kubeconfig)
    path = workdir / "kube-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return ["--config", str(path)]


def kwok_stages(shipped: Path, workdir: Path, job_pods_run_ms: int) -> Path:
    """The kwok stages file to run with: ``shipped`` as is, or (``job_pods_run_ms`` > 0) a copy in
    ``workdir`` whose pod-complete stage waits that long by default before a Job's pod succeeds."""
    if job_pods_run_ms <= 0:
        return shipped
    docs = list(yaml.safe_load_all(shipped.read_text()))
    stages = [d for d in docs if isinstance(d, dict) and d.get("metadata", {}).get("name") == "pod-complete"]
    if len(stages) != 1 or "delay" not in stages[0].get("spec", {}):
        raise ControlPlaneError(f"{shipped}: no pod-complete stage with a delay (build-control-plane.sh writes one)")
    stages[0]["spec"]["delay"]["durationMilliseconds"] = job_pods_run_ms
    path = workdir / "kwok-stages.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


@contextmanager
def running_control_plane(bin_dir: Path, workdir: Path, *, scheduler: bool = False,
                          timeout: float = STARTUP_TIMEOUT,
                          scheduler_config: Path | None = None,
                          controllers: bool = False, audit_log: bool = False,
                          job_pods_run_ms: int = 0) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver (+ kube-scheduler) (+ kube-controller-manager and kwok) on free loopback
    ports; stopped on exit, whatever happens inside the block. Yields once `/readyz` answers and
    bootstrap objects exist.

    ``controllers``: run kube-controller-manager (``--controllers=*``, its own client certificate,
    the service-account signing key, each controller with its own service account) so Deployments,
    ReplicaSets, StatefulSets, Jobs and CronJobs make real pods through the webhook; and kwok
    (``--manage-all-nodes``: every node here is fake) as the kubelets of the fake nodes, so bound
    pods become Running and Ready, nodes keep their heartbeats and rollouts finish.

    ``scheduler_config``: a KubeSchedulerConfiguration file to run kube-scheduler with (``--config``;
    implies ``scheduler``). kube-scheduler ignores ``--kubeconfig`` once it has ``--config``, so a copy
    with ``clientConnection.kubeconfig`` set to this control plane's kubeconfig is what it reads.

    ``job_pods_run_ms``: how long kwok keeps a Job's Running pod before it succeeds, for pods without
    the ``pod-complete.stage.kwok.x-k8s.io/delay`` annotation (default 0: at once, kwok's "fast"
    stages). A pod that has succeeded leaves kube-scheduler's cache, so a group's pod affinity no
    longer counts it: where Jobs stand for training runs (``make cluster``), their pods must run.

    ``audit_log``: kube-apiserver writes its audit log (JSON lines, level ``Metadata`` for every
    request: enough for the webhooks' ``auditAnnotations``) to ``workdir/audit.log``
    (:attr:`ControlPlane.audit_log`)."""
    scheduler = scheduler or scheduler_config is not None
    workdir.mkdir(parents=True, exist_ok=True)
    procs: dict[str, tuple[subprocess.Popen, Path]] = {}

    def start(name: str, argv: list[str]) -> Path:
        log = workdir / f"{name}.log"
        procs[name] = (subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("w")), log)
        return log

    try:
        etcd_client, etcd_peer = free_port(), free_port()
        start("etcd", [
            str(bin_dir / "etcd"), "--name", "e2e", "--data-dir", str(workdir / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--log-level", "warn"])

        sa_key = ec.generate_private_key(ec.SECP256R1())
        (workdir / "sa.key").write_bytes(_pem_key(sa_key))
        (workdir / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        client_ca, users = client_credentials(workdir / "pki", {"admin": ("system:masters",),
                                                                CONTROLLER_MANAGER_USER: ()})
        admin_cert, admin_key = users["admin"]
        port = free_port()
        cert_dir = workdir / "apiserver-certs"
        audit_args: list[str] = []
        if audit_log:
            # Metadata for everything: the admission webhooks' auditAnnotations are recorded at every
            # level; events are written when the response is complete (one line per request)
            (workdir / "audit-policy.yaml").write_text(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                "rules:\n  - level: Metadata\n")
            audit_args = ["--audit-policy-file", str(workdir / "audit-policy.yaml"),
                          "--audit-log-path", str(workdir / "audit.log"), "--audit-log-format", "json"]
        api_log = start("kube-apiserver", [
            str(bin_dir / "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{etcd_client}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(port),
            # a self-signed serving pair (its CA included) for 127.0.0.1, which the kubeconfig trusts
            "--cert-dir", str(cert_dir),
            "--client-ca-file", str(client_ca), "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(workdir / "sa.pub"),
            "--service-account-signing-key-file", str(workdir / "sa.key"),
            "--service-cluster-ip-range", "10.96.0.0/16",
            # no controller-manager creates `default` ServiceAccounts here
            "--disable-admission-plugins", "ServiceAccount",
            "--enable-priority-and-fairness=false", "--profiling=false", *audit_args])

        url = f"https://127.0.0.1:{port}"
        kubeconfig = workdir / "kubeconfig"
        _kubeconfig(kubeconfig, url, cert_dir / "apiserver.crt", admin_cert, admin_key)
        cp = ControlPlane(bin_dir / "kubectl", kubeconfig, url, api_log, processes=procs,
                          audit_log=workdir / "audit.log" if audit_log else None)

        def apiserver_ready() -> bool:
            # the default namespace and the system priority classes exist once bootstrap is done
            return all(cp.run(*args, check=False, timeout=10).returncode == 0 for args in (
                ("get", "--raw", "/readyz"), ("get", "namespace", "default"),
                ("get", "priorityclass", "system-cluster-critical")))

        _wait("kube-apiserver", apiserver_ready, procs, timeout, api_log, interval=0.5)

        if scheduler:
            sched_port = free_port()
            cp.scheduler_log = start("kube-scheduler", [
                str(bin_dir / "kube-scheduler"), "--kubeconfig", str(kubeconfig),
                "--authentication-kubeconfig", str(kubeconfig), "--authorization-kubeconfig", str(kubeconfig),
                "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(sched_port),
                "--cert-dir", str(workdir / "scheduler-certs"), "--profiling=false",
                *_scheduler_config_args(scheduler_config, kubeconfig, workdir)])
            _wait("kube-scheduler", lambda: _healthz(sched_port), procs, timeout, cp.scheduler_log)
        if controllers:
            kcm_kubeconfig = workdir / "kube-controller-manager.kubeconfig"
            _kubeconfig(kcm_kubeconfig, url, cert_dir / "apiserver.crt", *users[CONTROLLER_MANAGER_USER])
            kcm_port = free_port()
            kcm_log = start("kube-controller-manager", [
                str(bin_dir / "kube-controller-manager"), "--kubeconfig", str(kcm_kubeconfig),
                "--authentication-kubeconfig", str(kcm_kubeconfig),
                "--authorization-kubeconfig", str(kcm_kubeconfig),
                "--controllers=*", "--use-service-account-credentials=true",
                "--service-account-private-key-file", str(workdir / "sa.key"),
                "--root-ca-file", str(cert_dir / "apiserver.crt"),
                "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", str(kcm_port),
                "--cert-dir", str(workdir / "controller-manager-certs"), "--profiling=false",
                # quick reactions for a test cluster: rollouts and Job pods without the default pauses
                "--concurrent-deployment-syncs=5", "--concurrent-replicaset-syncs=5"])
            _wait("kube-controller-manager", lambda: _healthz(kcm_port), procs, timeout, kcm_log)
            kwok_port = free_port()
            kwok_log = start("kwok", [
                str(bin_dir / "kwok"), "--kubeconfig", str(kubeconfig), "--manage-all-nodes=true",
                "--config", str(kwok_stages(bin_dir / "kwok-stages.yaml", workdir, job_pods_run_ms)),
                "--cidr", "10.244.0.0/16", "--node-ip", "127.0.0.1",
                "--server-address", f"127.0.0.1:{kwok_port}"])
            _wait("kwok", lambda: _healthz(kwok_port, tls=False), procs, timeout, kwok_log)
            cp.controller_manager_log, cp.kwok_log = kcm_log, kwok_log
        yield cp
    finally:
        for proc, _ in reversed(list(procs.values())):
            stop(proc)


# --- the manifests --------------------------------------------------------------------------------

class ManifestTree:
    """A copy of manifests/ whose generated-certs overlay has been filled in as `make manifests`
    does, from a `gpu-admission certs` directory (with an IP SAN 127.0.0.1 for local serving)."""

    def __init__(self, root: Path, certs_dir: Path, kubectl: Path) -> None:
        self.root, self.certs_dir, self.kubectl = root, certs_dir, kubectl

    @classmethod
    def prepare(cls, workdir: Path, certs_dir: Path, kubectl: Path) -> "ManifestTree":
        root = workdir / "manifests"
        shutil.copytree(ROOT / "manifests", root, ignore=shutil.ignore_patterns("*.crt", "*.key", "_test-*"))
        webhook_install.write_overlay_tls(certs_dir, root / "overlays/generated-certs")
        return cls(root, certs_dir, kubectl)

    def render(self, rel: str) -> list[dict]:
        """`kubectl kustomize` of one kustomization directory (relative to manifests/)."""
        done = subprocess.run([str(self.kubectl), "kustomize", str(self.root / rel)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ControlPlaneError(f"kubectl kustomize manifests/{rel} failed:\n{done.stderr}")
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    def with_components(self, *components: str, base: str = "base") -> str:
        """A throwaway overlay of `base` with the given components; returns its relative path."""
        name = "_test-" + "-".join(Path(c).name for c in components) + "-on-" + Path(base).name
        overlay = self.root / "overlays" / name
        overlay.mkdir(parents=True, exist_ok=True)
        lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization",
                 "resources:", f"  - ../../{base}", "components:",
                 *[f"  - ../../{c}" for c in components]]
        (overlay / "kustomization.yaml").write_text("\n".join(lines) + "\n")
        return f"overlays/{name}"


# --- the webhook ----------------------------------------------------------------------------------

@dataclass
class Webhook:
    port: int
    ca: Path
    log: Path | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)
    probe_port: int | None = None

    def probe(self, path: str) -> tuple[int, str]:
        """GET ``path`` on the plain-HTTP probe port, as the kubelet's probes and Prometheus do."""
        assert self.probe_port is not None, "this webhook was started without a probe port"
        conn = http.client.HTTPConnection("127.0.0.1", self.probe_port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, str]:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def requests_total(self) -> float:
        """Sum of the server's own gpu_admission_requests_total over all its labels."""
        _, text = self.probe("/metrics")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("gpu_admission_requests_total{"))

    @contextmanager
    def counting(self) -> Iterator[list[float]]:
        """Yields a list that holds, after the block, how many reviews the webhook answered in it."""
        delta: list[float] = []
        before = self.requests_total()
        yield delta
        delta.append(self.requests_total() - before)

    @property
    def processes(self) -> dict[str, tuple[subprocess.Popen, Path]]:
        return {"gpu-admission serve": (self.process, self.log)} if self.process and self.log else {}

    def check(self) -> None:
        """Raise ControlPlaneError when the server has exited."""
        _exited(self.processes)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)


def _ready(hook: Webhook) -> bool:
    try:
        return (hook.probe("/readyz") if hook.probe_port else hook.get("/readyz"))[0] == 200
    except OSError:
        return False


@contextmanager
def kubeconfig_env(path: Path) -> Iterator[None]:
    """KUBECONFIG set to ``path`` inside the block, as it was after: a webhook started inside
    (`running_webhook`) then has its node watch (the GPU inventory, `serve --inventory auto`) read
    this control plane's nodes."""
    saved = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = saved


@contextmanager
def running_webhook(docs: list[dict], certs_dir: Path, workdir: Path, *, port: int | None = None,
                    timeout: float = 30, more_paths: dict[str, str] | None = None,
                    probe_port: int | None = None) -> Iterator[Webhook]:
    """`gpu-admission serve` exactly as the rendered Deployment runs it (command, args, env), with
    the rendered ConfigMap's policy; only the in-container paths and the bind address are mapped to
    local ones (``more_paths``: more of them, e.g. components/extender's bind address and client CA).
    Stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    policy = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["policy.yaml"]
    (workdir / "policy.yaml").write_text(policy)
    port = port or free_port()
    probe_port = probe_port or free_port()
    paths = {"/etc/gpu-admission/policy.yaml": str(workdir / "policy.yaml"),
             "/etc/gpu-admission/tls/tls.crt": str(certs_dir / "tls.crt"),
             "/etc/gpu-admission/tls/tls.key": str(certs_dir / "tls.key"),
             "0.0.0.0:8443": f"127.0.0.1:{port}", "0.0.0.0:8081": f"127.0.0.1:{probe_port}",
             **(more_paths or {})}
    argv = [str(Path(sys.executable).parent / container["command"][0]),
            *container["command"][1:], *(paths.get(a, a) for a in container["args"])]
    if any(a in argv for a in paths) or any(a.startswith(("/etc/", "0.0.0.0:")) for a in argv):
        raise ControlPlaneError("the Deployment's args changed: update the path mapping of running_webhook")
    env = dict(os.environ, **{e["name"]: e["value"] for e in container["env"]})
    env["PROMETHEUS_MULTIPROC_DIR"] = str(workdir / "metrics")
    env["TMPDIR"] = str(workdir)
    log = workdir / "server.log"
    server = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    hook = Webhook(port, certs_dir / "ca.crt", log, server,
                   probe_port if f"127.0.0.1:{probe_port}" in argv else None)
    try:
        _wait("gpu-admission serve", lambda: _ready(hook), hook.processes, timeout, log, interval=0.2)
        yield hook
    finally:
        stop(server)


def local_client_config(docs: list[dict], port: int) -> list[dict]:
    """The rendered webhook configurations, with the Service reference replaced by a loopback URL."""
    out = []
    for doc in docs:
        if doc["kind"] not in WEBHOOK_KINDS:
            continue
        doc = copy.deepcopy(doc)
        for w in doc["webhooks"]:
            service = w["clientConfig"].pop("service")
            if service["port"] != 443:
                raise ControlPlaneError(f"{w['name']}: the Service port is {service['port']}, not 443")
            w["clientConfig"]["url"] = f"https://127.0.0.1:{port}{service['path']}"
        out.append(doc)
    return out


def register(cp: ControlPlane, docs: list[dict], port: int) -> None:
    """Apply the rendered webhook configurations (same names as shipped), pointed at ``port``.
    The apiserver picks them up asynchronously: see ``wait_until_served``."""
    cp.apply(local_client_config(docs, port))


def wait_until_served(cp: ControlPlane, hook: Webhook, namespace: str = "default", timeout: float = 60) -> None:
    """Until a server-side dry run of a GPU pod in ``namespace`` (an enforcing one; nothing is
    stored) is answered by ``hook`` itself: proof that the registered configurations point at it."""
    probe = json.dumps(vllm_pod("probe", namespace))

    def served() -> bool:
        before = hook.requests_total()
        done = cp.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=probe, check=False)
        return done.returncode == 0 and hook.requests_total() > before

    _wait("webhook registration", served, {**cp.processes, **hook.processes}, timeout, cp.log, interval=0.5)


@dataclass(frozen=True)
class Installed:
    """The webhook installed from the rendered manifests, served by ``hook``."""

    cp: ControlPlane
    hook: Webhook
    docs: list[dict]
    certs_dir: Path

    def reinstall(self) -> None:
        """(Re)point the webhook configurations at ``hook`` and wait until they take effect."""
        register(self.cp, self.docs, self.hook.port)
        wait_until_served(self.cp, self.hook)


def install(cp: ControlPlane, hook: Webhook, docs: list[dict], certs_dir: Path) -> Installed:
    """What `kubectl apply -k manifests/overlays/generated-certs` does that matters without a
    cluster network: the namespace and the webhook configurations (pointed at ``hook``)."""
    cp.apply([d for d in docs if d["kind"] == "Namespace"])
    installed = Installed(cp, hook, docs, certs_dir)
    installed.reinstall()
    return installed


# --- fake GPU nodes -------------------------------------------------------------------------------

GFD = {
    # product label value: (MiB per GPU, family, compute capability)
    "NVIDIA-A100-SXM4-80GB": ("81920", "ampere", ("8", "0")),
    "NVIDIA-H100-80GB-HBM3": ("81559", "hopper", ("9", "0")),
    "NVIDIA-L40S": ("46068", "ada-lovelace", ("8", "9")),
    "NVIDIA-L4": ("23034", "ada-lovelace", ("8", "9")),
}
FLEET = (("a100", "NVIDIA-A100-SXM4-80GB", 4), ("l40s", "NVIDIA-L40S", 4), ("h100", "NVIDIA-H100-80GB-HBM3", 2))
"""(name prefix, product, nodes): the mixed fleet of the scheduling test and `make cluster`."""


def gpu_node(name: str, product: str, *, gpus: int = 8, taints: list[dict] | None = None) -> dict:
    """A Node as GPU Feature Discovery and the device plugin describe it, with no kubelet behind
    it: status.capacity/allocatable carry nvidia.com/gpu, which is all kube-scheduler reads."""
    memory, family, (major, minor) = GFD[product]
    resources = {"cpu": "96", "memory": "1000Gi", "pods": "110", "ephemeral-storage": "1Ti", GPU: str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "nvidia.com/gpu.present": "true", PRODUCT_LABEL: product, "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.memory": memory, "nvidia.com/gpu.family": family,
            "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor}},
        "spec": {"taints": taints or []},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "FakeNode",
                                   "message": "no kubelet: a fake node for scheduling tests"}]},
    }


def fleet(taints: list[dict] | None = None, counts: tuple[tuple[str, str, int], ...] = FLEET) -> list[dict]:
    """The nodes of ``counts`` (:data:`FLEET` by default), interleaved (a100-0, l40s-0, h100-0,
    a100-1, ...) as nodes of several purchase waves join a cluster over time. The order matters:
    kube-scheduler breaks ties between equally scored nodes in its node list order."""
    names = [[(f"{kind}-{i}", product) for i in range(count)] for kind, product, count in counts]
    order = [n for row in itertools.zip_longest(*names) for n in row if n]
    return [gpu_node(name, product, taints=taints) for name, product in order]


def create_nodes(cp: ControlPlane, nodes: list[dict]) -> None:
    """Create the Nodes (status.capacity/allocatable are kept on create) and remove the not-ready
    taint that the TaintNodesByCondition admission plugin puts on every new Node, as the node
    lifecycle controller would once a kubelet reports Ready (the scheduler honours taints, not
    conditions)."""
    cp.run("create", "-f", "-", stdin="\n---\n".join(json.dumps(n) for n in nodes))
    for node in nodes:
        # with kube-controller-manager and kwok running, the node lifecycle controller may have
        # removed the taint already (kwok reported Ready): "not found" is then the expected answer
        done = cp.run("taint", "nodes", node["metadata"]["name"], "node.kubernetes.io/not-ready:NoSchedule-",
                      check=False)
        if done.returncode != 0 and "not found" not in done.stderr:
            raise ControlPlaneError(f"kubectl taint {node['metadata']['name']} failed: {done.stderr}")


# --- applying objects and waiting on the webhook's view --------------------------------------------

def apply_object(cp: ControlPlane, obj: dict, *extra: str) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -f -`` of one object (``extra``: e.g. ``--dry-run=server``), never raising:
    a denial is an answer the tests read."""
    return cp.run("apply", "-f", "-", *extra, stdin=json.dumps(obj), check=False)


def wait_for(what: str, predicate, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it holds: the webhook's node watch and policy reload are eventual."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)

