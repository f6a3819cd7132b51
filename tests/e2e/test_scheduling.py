"""Real scheduling (issue 5, scenario 7): the default kube-scheduler places a mixed batch of GPU
workloads on a fake mixed fleet, once with the webhook (an enforcing namespace) and once without it
(a namespace labelled gpu-admission.io/mode=off), and the placements are counted.

The fleet (control_plane.FLEET): 4 x A100-SXM4-80GB, 4 x L40S and 2 x H100-80GB-HBM3 nodes of 8
GPUs, labelled as GPU Feature Discovery labels them, with nvidia.com/gpu in capacity/allocatable and
kwok as their kubelets (bound pods become Running). The nodes carry a taint that only this
module's pods tolerate, so pods left by other modules are never bound to them.

The batch (54 of the fleet's 80 GPUs; the HBM/NVLink nodes have exactly the 48 its pods need), with
8 CPUs and 64 GiB of memory requested per GPU:
- Llama-3.1-405B with vLLM at TP8 x PP2 over two plain 8-GPU pods (leader `vllm serve`, worker
  `ray start`) labelled gpu-admission.io/group;
- the two pods the LeaderWorkerSet controller makes from examples/lws-vllm-405b.yaml (labels
  leaderworkerset.sigs.k8s.io/name, group-key, group-index, worker-index; annotation size "2");
- a Deployment of 4 x Llama-3.1-70B TP4 (4 GPUs each);
- Deployments of 3 x Mistral-7B and 3 x bge-m3 embeddings, one GPU each.
The Deployments' pods are made by the real deployment and ReplicaSet controllers, so each one
reaches the webhook as a controller's pod does; the groups stay plain pods (the LeaderWorkerSet
controller is not run here, so its two pods are written as it writes them).
The groups go first and are bound before the rest is submitted, as a big job usually is, so that
"pending" measures placement rules and not submission order.

Counted per run: pods on a wrong tier (a multi-GPU or large-model pod on L40S, a small single-GPU pod
on A100/H100), groups whose pods run on more than one product, pods left pending or refused. With
the webhook every count must be zero. Without it the counts are only recorded: the default scheduler
sees one nvidia.com/gpu like another and scores nodes on CPU and memory (least allocated first,
ties in node list order, which is why the fleet's nodes are created interleaved by product).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from control_plane import FLEET, ControlPlane, Installed, create_nodes, fleet
from objects import GPU, PRODUCT_LABEL

pytestmark = pytest.mark.e2e

FLEET_TAINT = {"key": "gpu-admission.io/e2e-fleet", "value": "scheduling", "effect": "NoSchedule"}
TIER_OF_PRODUCT = {"NVIDIA-A100-SXM4-80GB": "hbm-nvlink", "NVIDIA-H100-80GB-HBM3": "hbm-nvlink",
                   "NVIDIA-L40S": "cost"}
SETTLE_TIMEOUT = 60.0
"""Seconds to wait for a wave of pods to be bound (binding takes well under a second per pod)."""
LWS = "leaderworkerset.sigs.k8s.io"
VLLM = "vllm/vllm-openai:v0.10.1"


# --- the batch ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    pod: dict
    """A Pod, or a Deployment whose ``replicas`` pods the controllers make."""
    tier: str
    """The tier the pod belongs on: hbm-nvlink for multi-GPU, grouped or large-model pods, cost for
    small single-GPU models."""
    group: str | None = None

    @property
    def name(self) -> str:
        return self.pod["metadata"]["name"]

    @property
    def replicas(self) -> int:
        return self.pod["spec"]["replicas"] if self.pod["kind"] == "Deployment" else 1


def _deployment(name: str, namespace: str, container: dict, gpus: int, replicas: int) -> dict:
    pod = _pod(name, namespace, container, gpus, labels={"app": name})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}}}


def _pod(name: str, namespace: str, container: dict, gpus: int, *, labels: dict | None = None,
         annotations: dict | None = None) -> dict:
    # host resources in proportion to the GPUs, as real GPU pods request them (8 CPUs and 64 GiB of
    # memory per GPU); kube-scheduler scores nodes on CPU and memory only
    resources = {"cpu": str(8 * gpus), "memory": f"{64 * gpus}Gi"}
    container = dict(container, name=container.get("name", "main"),
                     resources={"requests": resources, "limits": {GPU: str(gpus), **resources}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"containers": [container], "terminationGracePeriodSeconds": 0,
                     "tolerations": [dict(FLEET_TAINT, operator="Equal")]}}


def plain_group(namespace: str) -> list[Workload]:
    """vLLM multi-node with Ray, as plain pods: the leader serves TP8 x PP2 over both pods."""
    labels = {"gpu-admission.io/group": "llama-405b", "app": "llama-405b"}
    leader = {"image": VLLM, "command": ["vllm", "serve", "meta-llama/Llama-3.1-405B-Instruct",
                                         "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                                         "--distributed-executor-backend", "ray"]}
    worker = {"image": VLLM, "command": ["ray", "start", "--block", "--address=llama-405b-0.llama-405b:6379"]}
    return [Workload(_pod(f"llama-405b-{i}", namespace, c, 8, labels=labels), "hbm-nvlink", "llama-405b")
            for i, c in enumerate((leader, worker))]


def lws_group(namespace: str) -> list[Workload]:
    """The two pods the LeaderWorkerSet controller creates from examples/lws-vllm-405b.yaml (group 0)."""
    leader_name = "vllm-405b-0"
    key = hashlib.sha1(f"{namespace}/{leader_name}".encode()).hexdigest()
    env = [{"name": "LWS_LEADER_ADDRESS", "value": f"{leader_name}.vllm-405b.{namespace}"},
           {"name": "LWS_GROUP_SIZE", "value": "2"}]
    leader = {"name": "vllm-leader", "image": VLLM, "command": ["sh", "-c"], "env": env, "args": [
        "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader "
        "--ray_cluster_size=$(LWS_GROUP_SIZE) && vllm serve meta-llama/Llama-3.1-405B-Instruct "
        "--tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"]}
    worker = {"name": "vllm-worker", "image": VLLM, "command": ["sh", "-c"], "env": env, "args": [
        "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker "
        "--ray_address=$(LWS_LEADER_ADDRESS)"]}
    out = []
    for index, (name, container) in enumerate(((leader_name, leader), (f"{leader_name}-1", worker))):
        labels = {f"{LWS}/name": "vllm-405b", f"{LWS}/group-index": "0", f"{LWS}/worker-index": str(index),
                  f"{LWS}/group-key": key}
        annotations = {f"{LWS}/size": "2", **({f"{LWS}/leader-name": leader_name} if index else {})}
        out.append(Workload(_pod(name, namespace, container, 8, labels=labels, annotations=annotations),
                            "hbm-nvlink", "vllm-405b"))
    return out


def singles(namespace: str) -> list[Workload]:
    tp4 = {"image": VLLM, "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]}
    mistral = {"image": VLLM, "command": ["vllm", "serve", "mistralai/Mistral-7B-Instruct-v0.3"]}
    embed = {"image": VLLM, "command": ["vllm", "serve", "BAAI/bge-m3", "--task", "embed", "--dtype", "float16"]}
    return [Workload(_deployment("llama-70b", namespace, tp4, 4, 4), "hbm-nvlink"),
            Workload(_deployment("mistral-7b", namespace, mistral, 1, 3), "cost"),
            Workload(_deployment("bge-m3", namespace, embed, 1, 3), "cost")]


# --- a run ----------------------------------------------------------------------------------------

@dataclass
class Run:
    label: str
    namespace: str
    workloads: list[Workload]
    node_product: dict[str, str]
    node_of: dict[str, str | None] = field(default_factory=dict)
    """pod -> its node (None: stored, not bound)."""
    refused: dict[str, str] = field(default_factory=dict)
    """workload -> why pods are missing: kubectl's error, or the pods a controller did not create."""
    workload_of: dict[str, Workload] = field(default_factory=dict)
    """pod -> the workload it belongs to (a Deployment's pods have generated names)."""

    @property
    def pods(self) -> int:
        return sum(w.replicas for w in self.workloads)

    @property
    def product_of(self) -> dict[str, str | None]:
        return {pod: self.node_product[node] if node else None for pod, node in self.node_of.items()}

    @property
    def wrong_tier(self) -> list[str]:
        products = self.product_of
        return [f"{pod}@{products[pod]}" for pod, w in self.workload_of.items()
                if products.get(pod) and TIER_OF_PRODUCT[products[pod]] != w.tier]

    @property
    def groups(self) -> dict[str, set[str]]:
        products = self.product_of
        found: dict[str, set[str]] = {}
        for pod, w in self.workload_of.items():
            if w.group:
                found.setdefault(w.group, set()).update([products[pod]] if products.get(pod) else [])
        return found

    @property
    def split_groups(self) -> list[str]:
        return [f"{g}@{'+'.join(sorted(p))}" for g, p in self.groups.items() if len(p) > 1]

    @property
    def pending(self) -> list[str]:
        return [name for name, node in self.node_of.items() if node is None]

    def summary(self) -> str:
        scheduled = sum(1 for node in self.node_of.values() if node)
        return (f"{self.label}: {self.pods} pods, {scheduled} scheduled, "
                f"{len(self.wrong_tier)} on a wrong tier {self.wrong_tier}, "
                f"{len(self.split_groups)}/{len(self.groups)} groups split across products {self.split_groups}, "
                f"{len(self.pending)} pending {self.pending}, {len(self.refused)} refused {sorted(self.refused)}")

    def placements(self) -> str:
        def where(name: str) -> str:
            node = self.node_of.get(name)
            return f"{node} ({self.node_product[node]})" if node else self.refused.get(name, "pending")

        rows = [f"    {pod:<28} belongs on {w.tier:<10} -> {where(pod)}" for pod, w in sorted(self.workload_of.items())]
        rows += [f"    {name:<28} {why}" for name, why in sorted(self.refused.items())]
        return "\n".join(rows)


def _wave_pods(cp: ControlPlane, namespace: str, wave: list[Workload]) -> dict[str, dict]:
    """The stored pods of a wave by name: a Pod by its own name, a Deployment's by its app label."""
    apps = {w.name for w in wave if w.pod["kind"] == "Deployment"}
    names = {w.name for w in wave if w.pod["kind"] == "Pod"}
    return {p["metadata"]["name"]: p for p in cp.get("pods", None, namespace)["items"]
            if p["metadata"]["name"] in names or p["metadata"].get("labels", {}).get("app") in apps}


def _settle(cp: ControlPlane, namespace: str, wave: list[Workload]) -> dict[str, str | None]:
    """pod -> node once the wave's pods exist (all of a Deployment's replicas, or nothing changing
    for a few polls) and every one is bound, or has been reported unschedulable with nothing
    changing for a few polls, or SETTLE_TIMEOUT passed."""
    deadline, last, stable = time.monotonic() + SETTLE_TIMEOUT, None, 0
    expected = sum(w.replicas for w in wave)
    while True:
        pods = _wave_pods(cp, namespace, wave)
        nodes = {name: p["spec"].get("nodeName") for name, p in pods.items()}
        if all(nodes.values()) and len(nodes) >= expected:
            return nodes
        unschedulable = all(node or any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                                        for c in pods[name]["status"].get("conditions", []))
                            for name, node in nodes.items())
        stable = stable + 1 if unschedulable and nodes == last else 0
        if stable >= 4 or time.monotonic() > deadline:
            return nodes
        last = nodes
        time.sleep(0.5)


def run_batch(cp: ControlPlane, label: str, namespace: str, node_product: dict[str, str]) -> Run:
    run = Run(label, namespace, plain_group(namespace) + lws_group(namespace) + singles(namespace), node_product)
    waves = [[w for w in run.workloads if w.group], [w for w in run.workloads if not w.group]]
    for wave in waves:
        done = cp.apply([w.pod for w in wave], check=False)
        nodes = _settle(cp, namespace, wave)
        pods = _wave_pods(cp, namespace, wave)
        for w in wave:
            mine = sorted(n for n, p in pods.items() if n == w.name or p["metadata"].get("labels", {}).get("app") == w.name
                          and w.pod["kind"] == "Deployment")
            run.workload_of.update({n: w for n in mine})
            if len(mine) < w.replicas:
                run.refused[w.name] = next((line for line in done.stderr.splitlines()
                                            if f"{namespace}/{w.name}:" in line or f'"{w.name}"' in line),
                                           f"{w.replicas - len(mine)} of {w.replicas} pods not created")
        run.node_of.update(nodes)
    return run


def _delete_pods(cp: ControlPlane, namespace: str) -> None:
    """Free the fleet: the Deployments first (their ReplicaSets would make the pods again), then
    every pod at once."""
    cp.run("delete", "deployments", "--all", "-n", namespace, "--wait=false")
    cp.run("delete", "pods", "--all", "-n", namespace, "--grace-period=0", "--force", "--wait=false")
    deadline = time.monotonic() + 30
    while cp.get("pods", None, namespace)["items"]:
        assert time.monotonic() < deadline, f"pods of {namespace} not deleted after 30 s"
        time.sleep(0.3)


# --- the test -------------------------------------------------------------------------------------

def test_7_the_webhook_keeps_every_pod_on_its_tier_and_every_group_on_one_product(
        installed: Installed, tmp_path: Path, capsys: pytest.CaptureFixture, record_property) -> None:
    cp = installed.cp
    nodes = fleet(taints=[FLEET_TAINT])
    create_nodes(cp, nodes)
    node_product = {n["metadata"]["name"]: n["metadata"]["labels"][PRODUCT_LABEL] for n in nodes}
    stored = [n for n in cp.get("nodes", None, None, "-l", "nvidia.com/gpu.present=true")["items"]
              if n["metadata"]["name"] in node_product]  # other modules' nodes may exist too
    assert sorted(n["status"]["allocatable"][GPU] for n in stored) == ["8"] * sum(c for _, _, c in FLEET)

    cp.namespace("sched-webhook")  # no label: enforced
    cp.namespace("sched-no-webhook", {"gpu-admission.io/mode": "off"})
    with_webhook = run_batch(cp, "with the webhook   ", "sched-webhook", node_product)
    _delete_pods(cp, "sched-webhook")
    without = run_batch(cp, "without the webhook", "sched-no-webhook", node_product)

    report = "\n".join([with_webhook.summary(), with_webhook.placements(), without.summary(), without.placements()])
    (tmp_path / "scheduling-summary.txt").write_text(report + "\n")
    record_property("with_webhook", with_webhook.summary())
    record_property("without_webhook", without.summary())
    with capsys.disabled():
        print(f"\nscheduling of the same batch on {len(nodes)} fake GPU nodes ({tmp_path / 'scheduling-summary.txt'}):")
        print(f"  {with_webhook.summary()}\n  {without.summary()}")

    context = f"\n{report}"
    assert not with_webhook.refused, f"pods refused with the webhook:{context}\n{with_webhook.refused}"
    assert not with_webhook.pending, f"pods left pending with the webhook:{context}"
    assert not with_webhook.wrong_tier, f"pods on a wrong tier with the webhook:{context}"
    assert not with_webhook.split_groups, f"groups split across products with the webhook:{context}"
    # without the webhook nothing is asserted: the run only records what the default scheduler does
    assert len(with_webhook.node_of) == with_webhook.pods == 14
    assert len(without.node_of) == without.pods or without.refused
