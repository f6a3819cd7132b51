"""The scheduler extender with a real kube-scheduler: the shipped
manifests/scheduler/kube-scheduler-config.yaml, with only the URL (loopback) and the TLS files (the
test's CA, and a client certificate for kube-scheduler, as caData/certData/keyData) rewritten, drives
kube-scheduler's default-scheduler profile against the real `gpu-admission serve`, started as the
Deployment of overlays/generated-certs with components/extender runs it: the extender on its own
port (8444 in the pod, a free one here), mutual TLS with the client CA of that certificate.

Its own control plane (running_control_plane with ``scheduler_config``), so the session's scheduler
and the scheduling module's fleet play no part. Three fake GPU nodes of 8 GPUs:
- ``mixed-0``: labelled A100 but ``nvidia.com/gpu.count=4`` (what GPU Feature Discovery writes on a
  node with two GPU models), and ten times the CPU and memory of the others, so kube-scheduler's
  own scoring (least allocated first) prefers it for every pod;
- ``a100-0`` and ``l40s-0``: homogeneous.
The pods carry no product selector at all, in a namespace labelled gpu-admission.io/mode=off (the
admission webhook is not even registered here): only the extender stands between them and the
mixed node. Five 4-GPU pods: four fill the two homogeneous nodes, the fifth stays Pending with the
extender's reason although mixed-0 has 8 free GPUs; then a 1-GPU pod, which the extender does not
restrict, lands on mixed-0 (the only node with a free GPU left).

The control: the same configuration without its ``extenders`` entry, where the same 4-GPU pods go
to mixed-0 first (kube-scheduler sees one nvidia.com/gpu like another).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from client_pki import make_ca, make_client, write_ca
from control_plane import (
    ControlPlane, Webhook, create_nodes, free_port, gpu_node, running_control_plane, running_webhook,
)
from objects import GPU

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "manifests/scheduler/kube-scheduler-config.yaml"
NAMESPACE = "extender-e2e"
SETTLE = 60.0
"""Seconds for the scheduler to bind (or give up on) a wave of pods; each takes well under one."""


def local_config(port: int, ca: Path, client: tuple[Path, Path], out: Path, *, extender: bool = True) -> Path:
    """The shipped configuration, pointed at the server's extender port on loopback, trusting the
    test CA and presenting the test's client certificate (without the extender for the control run)."""
    doc = yaml.safe_load(SHIPPED.read_text())
    (ext,) = doc["extenders"]
    assert ext["urlPrefix"].startswith("https://gpu-admission.gpu-admission.svc:8444/")
    ext["urlPrefix"] = ext["urlPrefix"].replace("gpu-admission.gpu-admission.svc:8444", f"127.0.0.1:{port}")
    assert set(ext["tlsConfig"]) == {"caFile", "certFile", "keyFile"}, ext["tlsConfig"]

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()  # []byte: base64 in YAML

    ext["tlsConfig"] = {"caData": data(ca), "certData": data(client[0]), "keyData": data(client[1])}
    if not extender:
        del doc["extenders"]
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def nodes() -> list[dict]:
    mixed = gpu_node("mixed-0", "NVIDIA-A100-SXM4-80GB", gpus=8)
    mixed["metadata"]["labels"]["nvidia.com/gpu.count"] = "4"
    big = dict(mixed["status"]["capacity"], cpu="960", memory="10000Gi")
    mixed["status"]["capacity"], mixed["status"]["allocatable"] = big, dict(big)
    return [mixed, gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB", gpus=8), gpu_node("l40s-0", "NVIDIA-L40S", gpus=8)]


def gpu_pod(name: str, gpus: int) -> dict:
    """A GPU pod with no product selector, affinity or group: nothing but the GPU count."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                              "limits": {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}}}]}}


def start(control_plane_bin: Path, manifest_tree, work: Path, *, extender: bool
          ) -> Iterator[tuple[ControlPlane, Webhook]]:
    docs = manifest_tree.render(manifest_tree.with_components("components/extender", base="overlays/generated-certs"))
    work.mkdir(parents=True, exist_ok=True)
    scheduler_ca = make_ca("kube-scheduler client CA")
    client = make_client(scheduler_ca, work / "scheduler-client", name="system:kube-scheduler")
    port = free_port()
    more_paths = {"0.0.0.0:8444": f"127.0.0.1:{port}",
                  "/etc/gpu-admission/extender/client-ca.crt": str(write_ca(scheduler_ca, work / "client-ca.crt"))}
    with running_webhook(docs, manifest_tree.certs_dir, work / "webhook", more_paths=more_paths) as hook:
        config = local_config(port, manifest_tree.certs_dir / "ca.crt", client, work / "scheduler-config.yaml",
                              extender=extender)
        with running_control_plane(control_plane_bin, work / "cp", scheduler_config=config) as cp:
            cp.namespace(NAMESPACE, {"gpu-admission.io/mode": "off"})
            create_nodes(cp, nodes())
            yield cp, hook


@pytest.fixture(scope="module")
def cluster(control_plane_bin: Path, manifest_tree, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ControlPlane, Webhook]]:
    yield from start(control_plane_bin, manifest_tree, tmp_path_factory.mktemp("extender"), extender=True)


@pytest.fixture()  # one test: torn down before the extender's cluster starts
def control(control_plane_bin: Path, manifest_tree, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[ControlPlane, Webhook]]:
    yield from start(control_plane_bin, manifest_tree, tmp_path_factory.mktemp("no-extender"), extender=False)


def pods(cp: ControlPlane) -> dict[str, dict]:
    listed = cp.get("pods", None, NAMESPACE)
    assert listed is not None
    return {p["metadata"]["name"]: p for p in listed["items"]}


def scheduled_condition(pod: dict) -> dict:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})


def settle(cp: ControlPlane, names: list[str]) -> dict[str, dict]:
    """Wait until every named pod is bound or reported unschedulable; return them."""
    deadline = time.monotonic() + SETTLE
    while True:
        current = pods(cp)
        done = {n: current[n] for n in names if n in current and (
            current[n]["spec"].get("nodeName") or scheduled_condition(current[n]).get("reason") == "Unschedulable")}
        if len(done) == len(names):
            return done
        if time.monotonic() > deadline:
            log = cp.scheduler_log.read_text()[-3000:] if cp.scheduler_log else ""
            pytest.fail(f"pods not settled after {SETTLE} s: {sorted(set(names) - set(done))}\n{log}")
        time.sleep(0.5)


TP4 = [f"tp4-{i}" for i in range(5)]


def place_tp4(cp: ControlPlane) -> tuple[dict[str, dict], dict[str, str]]:
    """Submit the five 4-GPU pods; (settled pods, pod -> node of those bound)."""
    cp.apply([gpu_pod(n, 4) for n in TP4])
    placed = settle(cp, TP4)
    return placed, {n: p["spec"]["nodeName"] for n, p in placed.items() if p["spec"].get("nodeName")}


def test_control_without_the_extender_uses_the_mixed_node(control: tuple[ControlPlane, Webhook]) -> None:
    _, bound = place_tp4(control[0])
    assert "mixed-0" in bound.values(), bound


def test_multi_gpu_pods_never_land_on_the_mixed_node(cluster: tuple[ControlPlane, Webhook]) -> None:
    cp, hook = cluster
    placed, bound = place_tp4(cp)
    names = TP4
    assert "mixed-0" not in bound.values(), bound
    assert sorted(bound.values()) == ["a100-0", "a100-0", "l40s-0", "l40s-0"], bound
    (pending,) = [p for n, p in placed.items() if n not in bound]
    message = scheduled_condition(pending)["message"]
    assert "gpu-admission" in message and "may mix them" in message, message
    # the server's own log names the node it refused, for each 4-GPU pod it was asked about
    refusals = [json.loads(line) for line in (hook.log.read_text().splitlines() if hook.log else [])
                if '"extender filter"' in line]
    assert refusals and all(r["refused"] == ["mixed-0"] for r in refusals)
    assert {r["pod"] for r in refusals} >= {f"{NAMESPACE}/{n}" for n in names}
    # every call of kube-scheduler authenticated with its client certificate
    assert '"extender_unauthenticated"' not in hook.log.read_text()


def test_a_single_gpu_pod_may_use_the_mixed_node(cluster: tuple[ControlPlane, Webhook]) -> None:
    cp, _ = cluster
    cp.apply([gpu_pod("single", 1)])
    placed = settle(cp, ["single"])
    # the homogeneous nodes are full: mixed-0 is the only node with a free GPU, and the extender
    # does not keep a one-GPU pod off it (one GPU is always one model)
    assert placed["single"]["spec"].get("nodeName") == "mixed-0", scheduled_condition(placed["single"])
