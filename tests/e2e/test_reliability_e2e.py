"""The webhook server stopped and restarted while pods are being created, against a real kube-apiserver
(the session's control plane), with the webhook configurations installed from the manifests.

Three creators run side by side for the whole scenario, each creating pods back to back through the
API (one HTTPS call per pod, as a controller does): GPU pods in an enforcing namespace, GPU pods in an
audit namespace, CPU pods in the enforcing namespace. The webhook is up, then stopped (SIGTERM) for a
few seconds, then started again on the same address. Every attempt is classified by when it was made
(up / down / back) and by its outcome, and the stored pods are read back:

- enforcing GPU pods follow ``failurePolicy: Fail``: refused while the webhook is down ("failed calling
  webhook"), never stored unpinned; pinned to their tier whenever they were admitted;
- audit GPU pods follow ``Ignore``: admitted during the outage (unchecked), judged again once back;
- CPU pods never reach the webhook (matchConditions): every one is created, outage or not.

The counts are printed and, with ``RELIABILITY_OUT=FILE``, written as JSON for RELIABILITY.md.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from control_plane import Installed, free_port, register, running_webhook, wait_until_served
from objects import product_affinity, vllm_pod

pytestmark = pytest.mark.e2e

ENFORCE, AUDIT = "reliability-enforce", "reliability-audit"
UP_SECONDS, DOWN_SECONDS, BACK_SECONDS = 5.0, 6.0, 6.0


def cpu_pod(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "1d"]}]}}


class Api:
    """Pod creation straight against kube-apiserver with the admin kubeconfig's client certificate
    (kubectl's start-up would make a call take ~0.5 s; a controller's client keeps its connection)."""

    def __init__(self, kubeconfig: Path, url: str) -> None:
        doc = json.loads(kubeconfig.read_text())
        user = doc["users"][0]["user"]
        cluster = doc["clusters"][0]["cluster"]
        self._dir = tempfile.TemporaryDirectory(prefix="reliability-e2e-")
        cert, key = Path(self._dir.name) / "admin.crt", Path(self._dir.name) / "admin.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self.ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.ctx.load_cert_chain(str(cert), str(key))
        self.host, self.port = url.removeprefix("https://").rsplit(":", 1)

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx, timeout=30)

    def close(self) -> None:
        self._dir.cleanup()


@dataclass
class Attempt:
    kind: str
    name: str
    started: float
    ended: float
    status: int
    message: str


class Creator(threading.Thread):
    """Creates pods of one ``kind`` ("gpu-enforce", "gpu-audit", "cpu-enforce") back to back."""

    def __init__(self, api: Api, kind: str) -> None:
        super().__init__(daemon=True)
        self.api, self.kind = api, kind
        self.attempts: list[Attempt] = []
        self.stop = threading.Event()

    def body(self, n: int) -> tuple[str, dict[str, Any]]:
        name = f"{self.kind}-{n}"
        if self.kind == "gpu-enforce":
            return ENFORCE, vllm_pod(name, ENFORCE)
        if self.kind == "gpu-audit":
            return AUDIT, vllm_pod(name, AUDIT)
        return ENFORCE, cpu_pod(name, ENFORCE)

    def run(self) -> None:
        conn = self.api.connection()
        n = 0
        while not self.stop.is_set():
            namespace, pod = self.body(n)
            started = time.monotonic()
            try:
                conn.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=json.dumps(pod),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                try:
                    message = json.loads(raw).get("message", "")
                except ValueError:
                    message = raw[:200].decode(errors="replace")
            except (OSError, http.client.HTTPException) as exc:
                status, message = -1, repr(exc)
                conn.close()
                conn = self.api.connection()
            self.attempts.append(Attempt(self.kind, pod["metadata"]["name"], started, time.monotonic(), status,
                                         message))
            n += 1
            time.sleep(0.02)
        conn.close()


def outcome(a: Attempt) -> str:
    if a.status == 201:
        return "created"
    if a.status == 403 and "denied the request" in a.message:
        return "denied by the webhook"
    if "failed calling webhook" in a.message:
        return "refused: webhook unreachable (failurePolicy Fail)"
    return f"other ({a.status}: {a.message[:80]})"


def test_webhook_stopped_and_restarted_while_pods_are_created(installed: Installed, tmp_path: Path) -> None:
    cp = installed.cp
    cp.namespace(ENFORCE)
    cp.namespace(AUDIT, {"gpu-admission.io/mode": "audit"})
    port = free_port()
    api = Api(cp.kubeconfig, cp.url)
    creators = [Creator(api, kind) for kind in ("gpu-enforce", "gpu-audit", "cpu-enforce")]
    phases: dict[str, float] = {}
    try:
        with running_webhook(installed.docs, installed.certs_dir, tmp_path / "hook-1", port=port) as hook:
            register(cp, installed.docs, port)
            wait_until_served(cp, hook)
            phases["up"] = time.monotonic()
            for c in creators:
                c.start()
            time.sleep(UP_SECONDS)
            phases["stopping"] = time.monotonic()
        phases["down"] = time.monotonic()  # running_webhook's exit: SIGTERM, waited for
        time.sleep(DOWN_SECONDS)
        phases["restarting"] = time.monotonic()
        with running_webhook(installed.docs, installed.certs_dir, tmp_path / "hook-2", port=port):
            phases["back"] = time.monotonic()  # /readyz answers again
            time.sleep(BACK_SECONDS)
            phases["end"] = time.monotonic()
            for c in creators:
                c.stop.set()
            for c in creators:
                c.join(timeout=60)
    finally:
        for c in creators:
            c.stop.set()
        api.close()
        installed.reinstall()  # point the configurations back at the session's webhook

    def phase(a: Attempt) -> str:
        if a.ended < phases["stopping"]:
            return "up"
        if a.started > phases["down"] and a.ended < phases["restarting"]:
            return "down"
        if a.started > phases["back"] + 1.0:  # the apiserver's connection pool may need a moment
            return "back"
        return "transition"

    table: dict[str, dict[str, dict[str, int]]] = {}
    attempts = [a for c in creators for a in c.attempts]
    for a in attempts:
        row = table.setdefault(a.kind, {}).setdefault(phase(a), {})
        row[outcome(a)] = row.get(outcome(a), 0) + 1

    stored = {p["metadata"]["name"]: p for ns in (ENFORCE, AUDIT) for p in cp.get("pods", None, ns)["items"]}
    created = {a.name for a in attempts if a.status == 201}
    unpinned_enforce = sorted(n for n in created if n.startswith("gpu-enforce") and not product_affinity(stored[n]))
    report = {"phases_s": {k: round(v - phases["up"], 2) for k, v in phases.items()}, "outcomes": table,
              "attempts": len(attempts), "stored_enforce_gpu_pods_without_pin": len(unpinned_enforce)}
    print("\n" + json.dumps(report, indent=1))
    if os.environ.get("RELIABILITY_OUT"):
        Path(os.environ["RELIABILITY_OUT"]).write_text(json.dumps(report, indent=2))

    refused = "refused: webhook unreachable (failurePolicy Fail)"
    gpu, audit, cpu = table["gpu-enforce"], table["gpu-audit"], table["cpu-enforce"]
    # up and back: every pod created, enforcing GPU pods pinned
    for rows in (gpu, audit, cpu):
        assert set(rows["up"]) == {"created"} and set(rows["back"]) == {"created"}, rows
    # down: enforcing GPU pods refused (fail closed), audit GPU pods admitted (fail open), CPU pods untouched
    assert set(gpu["down"]) == {refused} and gpu["down"][refused] >= 3, gpu
    assert set(audit["down"]) == {"created"} and audit["down"]["created"] >= 3, audit
    assert set(cpu["down"]) == {"created"} and cpu["down"]["created"] >= 3, cpu
    # in the transitions only those two outcomes, never anything else (no 5xx from the webhook itself)
    for rows in (gpu, audit, cpu):
        assert set(rows.get("transition", {})) <= {"created", refused}, rows
    assert unpinned_enforce == [], f"enforcing GPU pods stored without the tier pin: {unpinned_enforce}"
    cp.run("delete", "pods", "--all", "-n", ENFORCE, "--wait=false")
    cp.run("delete", "pods", "--all", "-n", AUDIT, "--wait=false")
