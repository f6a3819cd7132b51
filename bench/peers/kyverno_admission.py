"""Kyverno's admission controller, out of cluster, against a control plane of tests/e2e/control_plane.py.

- ``build()``: ``build-kyverno.sh`` (the binary from Kyverno's Go module, cached under
  ~/.cache/gpu-admission/kyverno-<version>/); returns the bin directory.
- ``running_kyverno(bin_dir, cp, workdir, namespace_labels=...)``: installs what Kyverno's own install
  would put in the cluster and that matters out of cluster (its CRDs, read from the module download in
  the Go module cache; its namespace; its ConfigMap, the install's default with the resource webhooks'
  namespaceSelector narrowed to ``namespace_labels``), starts ``kyverno`` with ``--kubeconfig`` and
  ``--serverIP=127.0.0.1:<port>`` (it then registers its webhooks by URL, https://<serverIP><path>,
  signs its own serving certificate for that IP and skips the checks of its in-cluster Deployment),
  waits until it is ready; stopped on exit.
- ``install_policy(cp, kyverno, path)``: applies the ClusterPolicy (kyverno-policy.yaml) and waits
  until Kyverno reports it Ready and its resource webhooks are registered.

Measured here (v1.19.1, 2 shared cores): ready 14-17 s after start, policy Ready within a second
after that, ~140 MiB RSS after a benchmark run.

Flags are the Helm chart's defaults for the admission controller, except what running out of cluster
beside other benchmarks needs: loopback ports, ``--admissionReports=false`` (no reports controller
runs here to aggregate and delete the EphemeralReports it would write for every pod) and
``--webhookTimeout=3`` (gpu-admission's timeoutSeconds; the chart's 10 s would not change a fast
answer, only how long a hung one blocks).
There is no flag to turn leader election off: a single instance takes the Lease in a second or two.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from bench import common

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build-kyverno.sh"
POLICY = HERE / "kyverno-policy.yaml"
NAMESPACE = "kyverno"
CRD_DIRS = ("kyverno", "policies.kyverno.io", "reports", "policyreport")
CA_SECRET = "kyverno-svc.kyverno.svc.kyverno-tls-ca"
TLS_SECRET = "kyverno-svc.kyverno.svc.kyverno-tls-pair"
MUTATING = "kyverno-resource-mutating-webhook-cfg"
VALIDATING = "kyverno-resource-validating-webhook-cfg"


class KyvernoError(RuntimeError):
    """Kyverno could not be built, installed or started; the message says why (with the log tail)."""


def build(timeout: float = 5400) -> Path:
    """The bin directory with ``kyverno`` (built once per version, then cached)."""
    try:
        done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise KyvernoError(f"build-kyverno.sh did not finish in {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise KyvernoError(f"build-kyverno.sh failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def module_info(bin_dir: Path) -> dict[str, str]:
    """``{"Version", "Dir", "GoMod"}`` of the Kyverno module the binary was built from."""
    return json.loads((bin_dir.parent / "module.json").read_text())


def build_stats(bin_dir: Path) -> dict[str, str]:
    """build-stats.txt of the cached build, as key: value (build seconds, binary size, ...)."""
    path = bin_dir.parent / "build-stats.txt"
    out: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out


def default_configmap(module_dir: Path) -> dict[str, Any]:
    """The ConfigMap ``kyverno`` of the module's own install manifest (config/install-latest-testing.yaml):
    resource filters, excluded groups, webhook defaults. Only its ConfigMap documents are parsed."""
    text = (module_dir / "config" / "install-latest-testing.yaml").read_text()
    for chunk in text.split("\n---\n"):
        if "kind: ConfigMap" not in chunk:
            continue
        doc = yaml.safe_load(chunk)
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and doc["metadata"].get("name") == "kyverno":
            return doc
    raise KyvernoError(f"no ConfigMap kyverno in {module_dir}/config/install-latest-testing.yaml")


@dataclass
class Kyverno:
    port: int
    version: str
    log: Path
    process: subprocess.Popen | None = field(default=None, repr=False)

    def get(self, path: str) -> int:
        """HTTP status of a GET on Kyverno's webhook server (self-signed: not verified, loopback probe)."""
        ctx = ssl._create_unverified_context()  # noqa: S323 - health probe of a process we started
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=3)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            conn.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def rss_mib(self) -> float | None:
        if self.process is None:
            return None
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None


def _wait(what: str, predicate, kyverno: Kyverno | None, timeout: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if kyverno is not None and not kyverno.alive():
            raise KyvernoError(f"kyverno exited ({kyverno.process.returncode}) while waiting for {what}:\n"
                               f"{kyverno.tail()}")
        if predicate():
            return
        if time.monotonic() > deadline:
            tail = kyverno.tail() if kyverno is not None else ""
            raise KyvernoError(f"{what}: not after {timeout:.0f} s\n{tail}")
        time.sleep(interval)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def install_crds(cp: Any, module_dir: Path) -> None:
    """Kyverno's CRDs from the module download (server-side apply: the ClusterPolicy CRD is 1.4 MB,
    past the client-side last-applied annotation limit), then wait until they are Established."""
    for sub in CRD_DIRS:
        path = module_dir / "config" / "crds" / sub
        if not path.is_dir():
            raise KyvernoError(f"no CRD directory {path}")
        cp.run("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=180)
    cp.run("wait", "--for=condition=Established", "--timeout=120s", "crd", "--all", timeout=150)


RESERVED_PORTS = frozenset({8443, 9443, 18443, 28443, 38443, 8000, 8080})
"""Developers' own servers and Kyverno's default ports: never handed out."""


def free_port() -> int:
    return common.free_port(avoid=RESERVED_PORTS)


@contextmanager
def running_kyverno(bin_dir: Path, cp: Any, workdir: Path, *, namespace_labels: dict[str, str],
                    timeout: float = 240) -> Iterator[Kyverno]:
    """Kyverno's admission controller against ``cp``, its resource webhooks sent only the namespaces
    labelled ``namespace_labels`` (on top of the install's default exclusions). Yields once its webhook
    server answers ready and its policy-validating webhook is registered (a ClusterPolicy can then be
    created). ``cp``: a tests/e2e/control_plane.ControlPlane (``run``, ``apply``, ``kubeconfig``)."""
    info = module_info(bin_dir)
    module_dir = Path(info["Dir"])
    workdir.mkdir(parents=True, exist_ok=True)
    install_crds(cp, module_dir)
    cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    config = default_configmap(module_dir)
    webhooks = json.loads(config["data"].get("webhooks") or "{}")
    selector = webhooks.setdefault("namespaceSelector", {}) or {}
    webhooks["namespaceSelector"] = selector
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), **namespace_labels}
    config["data"]["webhooks"] = json.dumps(webhooks, separators=(",", ":"))
    config["metadata"] = {"name": "kyverno", "namespace": NAMESPACE,
                          "labels": config["metadata"].get("labels", {})}
    metrics_config = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "kyverno-metrics", "namespace": NAMESPACE}, "data": {}}
    cp.apply([config, metrics_config])

    port = free_port()
    argv = [
        str(bin_dir / "kyverno"), "--kubeconfig", str(cp.kubeconfig),
        # out of cluster: webhooks registered by URL https://127.0.0.1:<port>/..., the serving
        # certificate signed by Kyverno's own CA for that IP
        f"--serverIP=127.0.0.1:{port}", "--webhookServerHost=127.0.0.1", f"--webhookServerPort={port}",
        f"--caSecretName={CA_SECRET}", f"--tlsSecretName={TLS_SECRET}", "--tlsKeyAlgorithm=RSA",
        # no reports controller here: nothing would aggregate or delete the admission reports
        "--admissionReports=false",
        # gpu-admission's timeoutSeconds (the chart's default is 10; a policy can only raise it)
        "--webhookTimeout=3",
        "--metricsHost=127.0.0.1", f"--metricsPort={free_port()}",
        f"--controllerRuntimeMetricsAddress=127.0.0.1:{free_port()}",
        # the Helm chart's defaults for the rest
        "--servicePort=443", "--resyncPeriod=15m", "--crdWatcher=false", "--disableMetrics=false",
        "--otelConfig=prometheus", "--autoUpdateWebhooks=true", "--excludeBootstrapResources=false",
        "--enableConfigMapCaching=true", "--enableDeferredLoading=true", "--dumpPayload=false",
        "--forceFailurePolicyIgnore=false", "--generateValidatingAdmissionPolicy=true",
        "--generateMutatingAdmissionPolicy=false", "--dumpPatches=false",
        "--maxAPICallResponseLength=2000000", "--apiCallTimeout=30s", "--loggingFormat=text", "--disableLogColor=true", "--v=2",
        "--omitEvents=PolicyApplied,PolicySkipped", "--enablePolicyException=false",
        "--protectManagedResources=false", "--allowInsecureRegistry=false",
        "--enableReporting=validate,mutate,mutateExisting,imageVerify,generate",
    ]
    # the variables the chart's Deployment sets (Kyverno refuses to start without them)
    env = dict(os.environ, KYVERNO_NAMESPACE=NAMESPACE, KYVERNO_POD_NAME="kyverno-bench",
               KYVERNO_SERVICEACCOUNT_NAME="kyverno-admission-controller",
               KYVERNO_DEPLOYMENT="kyverno-admission-controller", KYVERNO_SVC="kyverno-svc",
               INIT_CONFIG="kyverno", METRICS_CONFIG="kyverno-metrics", TMPDIR=str(workdir))
    log = workdir / "kyverno.log"
    proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    kyverno = Kyverno(port, info["Version"], log, proc)
    try:
        _wait("kyverno webhook server ready (/health/readiness)",
              lambda: kyverno.get("/health/readiness") == 200, kyverno, timeout)
        _wait("kyverno's policy webhook registered",
              lambda: cp.run("get", "validatingwebhookconfiguration", "kyverno-policy-validating-webhook-cfg",
                             check=False).returncode == 0, kyverno, timeout)
        yield kyverno
    finally:
        _stop(proc)


def install_policy(cp: Any, kyverno: Kyverno, path: Path = POLICY, timeout: float = 180) -> dict[str, Any]:
    """Apply the ClusterPolicy (retried while Kyverno's policy webhook comes up) and wait until its
    status says Ready and Kyverno's resource webhooks are registered. Returns the stored policy."""
    doc = yaml.safe_load(path.read_text())
    name = doc["metadata"]["name"]
    last = [""]

    def applied() -> bool:
        done = cp.run("apply", "-f", str(path), check=False)
        last[0] = done.stderr
        return done.returncode == 0

    try:
        _wait(f"ClusterPolicy {name} applied", applied, kyverno, timeout, interval=1.0)
    except KyvernoError as exc:
        raise KyvernoError(f"{exc}\nlast kubectl apply error: {last[0]}") from exc

    def ready() -> bool:
        done = cp.run("get", "clusterpolicy", name, "-o", "json", check=False)
        if done.returncode != 0:
            return False
        conditions = json.loads(done.stdout).get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    _wait(f"ClusterPolicy {name} Ready", ready, kyverno, timeout)
    for kind, cfg in (("mutatingwebhookconfiguration", MUTATING), ("validatingwebhookconfiguration", VALIDATING)):
        _wait(f"{kind} {cfg}", lambda: cp.run("get", kind, cfg, check=False).returncode == 0, kyverno, timeout)
    return json.loads(cp.run("get", "clusterpolicy", name, "-o", "json").stdout)
