"""The JobSet and LeaderWorkerSet controllers, real, against a running e2e control plane
(control_plane.running_control_plane): ``running_operators`` installs their CRDs and starts them,
and tears them down on exit. Built from their Go modules by build-control-plane.sh (bin/
jobset-controller, bin/lws-controller; CRDs, ClusterRole and webhook kustomize directory in bin/jobset
and bin/lws, all from the same module download).

What is real and what is not:
- Real: the controllers' binaries at their release tags (sigs.k8s.io/jobset v0.10.1, sigs.k8s.io/lws
  v0.8.0) with their own reconcilers, their CRDs as the release installs them, their own ClusterRole
  (config/.../rbac/role.yaml, generated from their kubebuilder markers) bound to a ServiceAccount
  whose token they use, and their own admission webhooks: the JobSet defaulting/validating webhooks
  and the JobSet pod webhooks; the LWS defaulting/validating webhooks and the LWS pod webhook, which is
  what sets leaderworkerset.sigs.k8s.io/group-key (and group-index, the LWS_* env) on leader pods. The
  webhook configurations are the module's own (config/.../webhook, rendered by kubectl kustomize,
  named as the release names them, jobset-*/lws-*, since the apiserver orders mutating webhooks by
  configuration name), failurePolicy and objectSelectors unchanged.
- Not real, and why:
  * No Deployment, Pod or Service for the controllers: there is no container runtime and no cluster
    network here, so each controller runs as a local process and its webhook configurations get
    ``clientConfig.url: https://127.0.0.1:<port>/<path>`` instead of ``clientConfig.service``.
  * No internal cert management (the cert-controller rotator writes a Secret for a Service and
    patches the caBundle of the configurations it owns by name): it is switched off
    (``internalCertManagement.enable: false`` in each controller's Configuration file) and a CA and a
    serving certificate for 127.0.0.1 are made here with the project's own generator
    (webhook/cli/certs.py, `gpu-admission certs`; only called), whose CA is the caBundle.
  * No leader election (one replica) and no metrics server (``bindAddress: "0"``: it would need the
    apiserver's TokenReview/SubjectAccessReview filter for nothing).
  * The ServiceAccount token comes from ``kubectl create token`` (TokenRequest) instead of a projected
    volume; RBAC is enforced as in a real install (the session's apiserver runs --authorization-mode=RBAC).

Nothing here uses pytest; failures raise ControlPlaneError with the tail of the controller's log.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import yaml

from control_plane import (STARTUP_TIMEOUT, WEBHOOK_KINDS, ControlPlane, ControlPlaneError, _exited, _wait,
                           free_port, stop)
from webhook.cli import certs

TOKEN_DURATION = "48h"
"""Lifetime of the controllers' ServiceAccount tokens: longer than any test session."""
LWS = "leaderworkerset.sigs.k8s.io"


@dataclass(frozen=True)
class OperatorSpec:
    name: str
    """jobset or lws: bin/<name>-controller, bin/<name>/, the <name>-system namespace, <name>- prefix."""
    config_api: str
    """apiVersion of the controller's Configuration file (api/config/v1alpha1)."""
    crds: tuple[str, ...]
    extra_args: tuple[str, ...] = ()

    @property
    def namespace(self) -> str:
        return f"{self.name}-system"

    @property
    def service_account(self) -> str:
        return f"{self.name}-controller-manager"


OPERATORS = {
    "jobset": OperatorSpec("jobset", "config.jobset.x-k8s.io/v1alpha1", ("jobsets.jobset.x-k8s.io",)),
    # LWS's --leader-elect flag defaults to true and wins over the file only when given
    "lws": OperatorSpec("lws", "config.lws.x-k8s.io/v1alpha1", ("leaderworkersets.leaderworkerset.x-k8s.io",),
                        ("--leader-elect=false",)),
}


@dataclass
class Operator:
    spec: OperatorSpec
    process: subprocess.Popen = field(repr=False)
    log: Path
    webhook_port: int
    health_port: int
    ca_bundle: str
    """base64 of the CA PEM that signed the controller's webhook serving certificate."""
    configurations: list[tuple[str, str]] = field(default_factory=list)
    """(kind, name) of the webhook configurations registered for it."""


@dataclass
class Operators:
    cp: ControlPlane
    running: dict[str, Operator] = field(default_factory=dict)

    @property
    def processes(self) -> dict[str, tuple[subprocess.Popen, Path]]:
        return {f"{name}-controller": (op.process, op.log) for name, op in self.running.items()}

    def check(self) -> None:
        """Raise ControlPlaneError when a controller has exited."""
        _exited(self.processes)


# --- pieces ---------------------------------------------------------------------------------------

def _credentials(cp: ControlPlane, spec: OperatorSpec, role: dict, workdir: Path) -> Path:
    """A ServiceAccount bound to the controller's own ClusterRole, and a kubeconfig with its token
    (the apiserver's CA from the admin kubeconfig)."""
    role = dict(role, metadata={"name": f"{spec.name}-manager-role"})
    cp.apply([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec.namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": spec.service_account, "namespace": spec.namespace}},
        role,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{spec.name}-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
         "subjects": [{"kind": "ServiceAccount", "name": spec.service_account, "namespace": spec.namespace}]},
    ])
    return token_kubeconfig(cp, spec.service_account, spec.namespace, workdir / "kubeconfig")


def token_kubeconfig(cp: ControlPlane, service_account: str, namespace: str, path: Path) -> Path:
    """A kubeconfig at ``path`` that authenticates as ``service_account`` with a token the apiserver
    issues (``kubectl create token``), and trusts the apiserver as the admin kubeconfig does."""
    token = cp.run("create", "token", service_account, "-n", namespace,
                   f"--duration={TOKEN_DURATION}").stdout.strip()
    admin = json.loads(cp.kubeconfig.read_text())
    config = dict(admin, users=[{"name": service_account, "user": {"token": token}}],
                  contexts=[{"name": service_account, "context": {"cluster": admin["clusters"][0]["name"],
                                                                  "user": service_account}}],
                  **{"current-context": service_account})
    path.write_text(json.dumps(config, indent=1))
    os.chmod(path, 0o600)
    return path


def wait_established(cp: ControlPlane, names: tuple[str, ...], timeout: float = 60) -> None:
    """Until each CRD is Established. Polled here: `kubectl wait --for=condition=Established` (1.36)
    fails at once with ".status.conditions accessor error" when it reads a CRD before the apiserver
    has written any condition."""
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = cp.get("crd", name) or {}
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in crd.get("status", {}).get("conditions") or []):
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f} s: {crd.get('status')}")
            time.sleep(0.2)


def install_crds(cp: ControlPlane, path: Path, names: tuple[str, ...], timeout: float = 60) -> None:
    """Server-side apply (the JobSet CRD is ~780 kB, over the 256 kB client-side apply annotation
    limit) and wait until each is Established."""
    cp.run("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=120)
    wait_established(cp, names, timeout)


def _config(spec: OperatorSpec, webhook_port: int, health_port: int, cert_dir: Path, path: Path) -> None:
    path.write_text(yaml.safe_dump({
        "apiVersion": spec.config_api, "kind": "Configuration",
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "leaderElection": {"leaderElect": False},
        # the cert rotator needs a Service and a Secret; the serving pair is made here instead
        "internalCertManagement": {"enable": False},
    }, sort_keys=False))


def _http_ok(port: int, path: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _tls_ok(port: int, ca: Path) -> bool:
    """The webhook server answers TLS with a certificate for 127.0.0.1 signed by ``ca``."""
    ctx = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=3)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        conn.close()


def webhook_configurations(cp: ControlPlane, bin_dir: Path, op: Operator) -> list[dict]:
    """The module's webhook configurations (kubectl kustomize of bin/<op>/webhook), named as the
    release names them (namePrefix <op>-), pointed at the controller on loopback with our caBundle."""
    done = subprocess.run([str(cp.kubectl), "kustomize", str(bin_dir / op.spec.name / "webhook")],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ControlPlaneError(f"kubectl kustomize {op.spec.name}/webhook failed:\n{done.stderr}")
    out = []
    for doc in yaml.safe_load_all(done.stdout):
        if not doc or doc["kind"] not in WEBHOOK_KINDS:
            continue
        doc["metadata"]["name"] = f"{op.spec.name}-{doc['metadata']['name']}"
        for w in doc["webhooks"]:
            path = w["clientConfig"].pop("service")["path"]
            w["clientConfig"]["url"] = f"https://127.0.0.1:{op.webhook_port}{path}"
            w["clientConfig"]["caBundle"] = op.ca_bundle
        out.append(doc)
    if not out:
        raise ControlPlaneError(f"{op.spec.name}: no webhook configuration in bin/{op.spec.name}/webhook")
    return out


# --- probes: the apiserver calls the controller's own webhooks ------------------------------------

def _dry_run(cp: ControlPlane, doc: dict) -> dict | None:
    done = cp.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(doc), check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _jobset_served(cp: ControlPlane) -> bool:
    """The JobSet defaulting webhook sets completionMode Indexed on every replicated Job (the CRD
    has no default for it)."""
    probe = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
             "metadata": {"name": "webhook-probe", "namespace": "default"},
             "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
                 "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}]}}
    out = _dry_run(cp, probe)
    return bool(out) and out["spec"]["replicatedJobs"][0]["template"]["spec"].get("completionMode") == "Indexed"


def _lws_served(cp: ControlPlane) -> bool:
    """The LWS pod webhook labels a leader pod (worker-index 0) with its group-key."""
    probe = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "webhook-probe-0", "namespace": "default",
                          "labels": {f"{LWS}/name": "webhook-probe", f"{LWS}/worker-index": "0"},
                          "annotations": {f"{LWS}/size": "2"}},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    out = _dry_run(cp, probe)
    return bool(out) and f"{LWS}/group-key" in out["metadata"].get("labels", {})


SERVED: dict[str, Callable[[ControlPlane], bool]] = {"jobset": _jobset_served, "lws": _lws_served}


# --- the context manager --------------------------------------------------------------------------

@contextmanager
def running_operators(cp: ControlPlane, bin_dir: Path, workdir: Path, *, names: tuple[str, ...] = ("jobset", "lws"),
                      timeout: float = STARTUP_TIMEOUT) -> Iterator[Operators]:
    """Install the CRDs of the named operators, start their controllers against ``cp`` and register
    their webhooks; yields once each controller is ready and the apiserver calls its webhooks. On
    exit the webhook configurations are deleted first (they fail closed, and would refuse the pods
    they select once the controller is gone), then the controllers are stopped. The CRDs stay."""
    workdir.mkdir(parents=True, exist_ok=True)
    ops = Operators(cp)
    try:
        for name in names:
            spec = OPERATORS[name]
            work = workdir / name
            work.mkdir(parents=True, exist_ok=True)
            install_crds(cp, bin_dir / name / "crds.yaml", spec.crds)
            role = next(d for d in yaml.safe_load_all((bin_dir / name / "role.yaml").read_text())
                        if d and d["kind"] == "ClusterRole")
            kubeconfig = _credentials(cp, spec, role, work)
            issued = certs.issue(service=f"{name}-webhook-service", namespace=spec.namespace, ips=["127.0.0.1"])
            certs.write(issued, work / "certs")
            webhook_port, health_port = free_port(), free_port()
            _config(spec, webhook_port, health_port, work / "certs", work / "config.yaml")
            log = work / f"{name}-controller.log"
            env = dict(os.environ, KUBECONFIG=str(kubeconfig))
            env.pop("ENABLE_WEBHOOKS", None)  # LWS skips its webhooks when this is "false"
            proc = subprocess.Popen([str(bin_dir / f"{name}-controller"), "--config", str(work / "config.yaml"),
                                     *spec.extra_args], env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
            op = ops.running[name] = Operator(spec, proc, log, webhook_port, health_port, issued.ca_bundle)
            _wait(f"{name}-controller /readyz", lambda: _http_ok(health_port, "/readyz"), ops.processes, timeout, log)
            _wait(f"{name}-controller webhook server", lambda: _tls_ok(webhook_port, work / "certs" / "ca.crt"),
                  ops.processes, timeout, log)
            docs = webhook_configurations(cp, bin_dir, op)
            op.configurations = [(d["kind"], d["metadata"]["name"]) for d in docs]
            cp.apply(docs)
            _wait(f"{name} webhooks called by kube-apiserver", lambda: SERVED[name](cp), ops.processes, 60, log,
                  interval=0.5)
        yield ops
    finally:
        try:
            for op in ops.running.values():
                for kind, name in op.configurations:
                    # short and bounded: on Ctrl-C the whole process group, etcd included, may be
                    # gone already, and then there is nothing left to clean up
                    cp.run("delete", kind.lower(), name, "--ignore-not-found", "--request-timeout=5s",
                           check=False, timeout=10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            for op in ops.running.values():
                stop(op.process)
