"""The GPU inventory and DRA claims against a real kube-apiserver and kube-scheduler (issue 6).

Its own control plane (the nodes here are untainted, so they must not be shared with the other
modules' pods) and its own `gpu-admission serve`, started exactly as the Deployment runs it but with
a kubeconfig for this control plane, so the server's node watch (list + watch) sees the fake fleet:
- a tier with no usable product in the fleet is denied with a message naming what exists, and the
  same pod is admitted once the watch sees a fitting node join (the module's policy sets
  ``inventory.absentTier: deny``, the behaviour before issue 13; the default, ``warn``, admits the
  pod with a warning, which a test switches to by rewriting the live policy file);
- a Karpenter NodePool (a minimal karpenter.sh/v1 CRD is installed) whose requirements name H100
  makes the tier present with no H100 node: the 70B pod is admitted and pinned to H100;
- a mixed node (gpu.count label 4, capacity 8) is kept away from multi-GPU pods by the injected
  hostname exclusion, even when it is the only node with free GPUs left;
- a ResourceClaim for 4 GPUs without a productName constraint is patched by the mutating webhook,
  and refused as written by the validating one.
"""

from __future__ import annotations

import copy
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from control_plane import ControlPlane, ManifestTree, apply_object as apply, create_nodes, gpu_node, install, \
    kubeconfig_env, running_control_plane, running_webhook, wait_for
from objects import vllm_pod

pytestmark = pytest.mark.e2e

NS = "inv-enforce"
MIXED = "a100-mixed"
H100 = "NVIDIA-H100-80GB-HBM3"
NODEPOOL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "nodepools.karpenter.sh"},
    "spec": {"group": "karpenter.sh", "scope": "Cluster",
             "names": {"plural": "nodepools", "singular": "nodepool", "kind": "NodePool", "listKind": "NodePoolList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
"""Karpenter's NodePool CRD reduced to its coordinates (the real one validates far more): enough for
the apiserver to serve karpenter.sh/v1 nodepools to the webhook's watch."""
H100_NODEPOOL = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu-h100"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]},
                         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}


@dataclass(frozen=True)
class Cluster:
    cp: ControlPlane
    policy: Path
    """The live policy file of the module's webhook (reloaded when it changes)."""


def mixed_node() -> dict:
    node = gpu_node(MIXED, "NVIDIA-A100-SXM4-80GB")
    node["metadata"]["labels"]["nvidia.com/gpu.count"] = "4"  # 8 GPUs, but GFD saw only one model's 4
    return node


def with_requests(pod: dict) -> dict:
    """The scheduler's only reason to prefer a node here is room: give the pod real requests."""
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    return pod


@pytest.fixture(scope="module")
def cluster(control_plane_bin: Path, manifest_tree: ManifestTree,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("inventory")
    with running_control_plane(control_plane_bin, work / "cp", scheduler=True) as cp:
        create_nodes(cp, [gpu_node("l40s-0", "NVIDIA-L40S"), gpu_node("l40s-1", "NVIDIA-L40S"), mixed_node(),
                          gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB")])
        cp.apply([NODEPOOL_CRD])  # before the webhook starts, so its NodePool watch finds the CRD at once
        cp.run("wait", "--for=condition=Established", "crd/nodepools.karpenter.sh", "--timeout=30s")
        docs = manifest_tree.render(_generated_certs_with_dra(manifest_tree))
        config = next(d for d in docs if d["kind"] == "ConfigMap")
        assert "  absentTier: warn\n" in config["data"]["policy.yaml"]
        config["data"]["policy.yaml"] = config["data"]["policy.yaml"].replace("  absentTier: warn\n",
                                                                              "  absentTier: deny\n")
        with kubeconfig_env(cp.kubeconfig):  # the server's node watch reads this cluster
            hook_cm = running_webhook(docs, manifest_tree.certs_dir, work / "webhook")
            hook = hook_cm.__enter__()
        try:
            install(cp, hook, docs, manifest_tree.certs_dir)
            cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
            yield Cluster(cp, work / "webhook" / "policy.yaml")
        finally:
            hook_cm.__exit__(None, None, None)


def _generated_certs_with_dra(tree: ManifestTree) -> str:
    """The generated-certs overlay with the dra component listed IN it, as the README says: its
    caBundle replacements then reach the claim entries too (a component added by an outer overlay
    comes after them and would have no caBundle)."""
    src = tree.root / "overlays/generated-certs"
    dst = tree.root / "overlays/_test-generated-certs-dra"
    shutil.copytree(src, dst, dirs_exist_ok=True)
    kustomization = dst / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "\ncomponents:\n  - ../../components/dra\n")
    return "overlays/_test-generated-certs-dra"




def test_tier_without_a_usable_node_is_denied_until_one_joins(cluster: Cluster) -> None:
    cp = cluster.cp
    pod = with_requests(vllm_pod("llama-early", NS))
    assert apply(cp, pod, "--dry-run=server").returncode == 0
    # the only trusted HBM node leaves: the watch sees the DELETE, the tier has no usable node left
    cp.run("delete", "node", "a100-0")
    wait_for("the node inventory", lambda: "tier-not-in-cluster" in apply(cp, pod, "--dry-run=server").stderr)
    done = apply(cp, pod)
    assert done.returncode != 0
    assert "tier-not-in-cluster" in done.stderr and "NVIDIA-L40S (2 nodes, 8 GPUs max)" in done.stderr
    assert cp.get("pod", "llama-early", NS) is None
    create_nodes(cp, [gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB")])
    wait_for("the new node in the inventory", lambda: apply(cp, pod, "--dry-run=server").returncode == 0)


def product_values(pod: dict) -> list[str]:
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    return [v for term in terms for e in term["matchExpressions"] if e["key"] == "nvidia.com/gpu.product"
            for v in e["values"]]


def test_a_nodepool_makes_the_tier_present_with_no_node(cluster: Cluster) -> None:
    cp = cluster.cp
    pod = with_requests(vllm_pod("llama-scaled", NS))
    cp.run("delete", "node", "a100-0")
    try:
        wait_for("the tier to be absent", lambda: "tier-not-in-cluster" in apply(cp, pod, "--dry-run=server").stderr)
        cp.apply([H100_NODEPOOL])
        wait_for("the NodePool in the inventory", lambda: apply(cp, pod, "--dry-run=server").returncode == 0)
        done = apply(cp, pod)
        assert done.returncode == 0, done.stderr
        assert product_values(cp.get("pod", "llama-scaled", NS)) == [H100]  # what the NodePool can launch
        assert cp.get("nodes", None, None, "-l", f"nvidia.com/gpu.product={H100}")["items"] == []
    finally:
        cp.run("delete", "pod", "llama-scaled", "-n", NS, "--ignore-not-found", "--wait=false", check=False)
        cp.run("delete", "nodepool", "gpu-h100", "--ignore-not-found", check=False)
        create_nodes(cp, [gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB")])
    # the next tests need the A100 node back in the inventory (and the NodePool gone): admitted again
    wait_for("the node back in the inventory", lambda: apply(cp, pod, "--dry-run=server").returncode == 0)


def test_absent_tier_warn_admits_with_a_warning(cluster: Cluster) -> None:
    cp = cluster.cp
    pod = with_requests(vllm_pod("llama-waiting", NS))
    deny = cluster.policy.read_text()
    cp.run("delete", "node", "a100-0")
    try:
        wait_for("the tier to be absent", lambda: "tier-not-in-cluster" in apply(cp, pod, "--dry-run=server").stderr)
        cluster.policy.write_text(deny.replace("  absentTier: deny\n", "  absentTier: warn\n"))
        wait_for("the policy reload", lambda: apply(cp, pod, "--dry-run=server").returncode == 0)
        done = apply(cp, pod)
        assert done.returncode == 0, done.stderr
        assert "tier-not-in-cluster (admitted, inventory.absentTier: warn)" in done.stderr
        assert "NVIDIA-A100-SXM4-80GB" in product_values(cp.get("pod", "llama-waiting", NS))
    finally:
        cluster.policy.write_text(deny)
        cp.run("delete", "pod", "llama-waiting", "-n", NS, "--ignore-not-found", "--wait=false", check=False)
        create_nodes(cp, [gpu_node("a100-0", "NVIDIA-A100-SXM4-80GB")])
    wait_for("the deny policy and the node back", lambda: apply(cp, pod, "--dry-run=server").returncode == 0
             and "absentTier" not in apply(cp, pod, "--dry-run=server").stderr)


def test_mixed_node_is_avoided_by_multi_gpu_pods(cluster: Cluster) -> None:
    cp = cluster.cp
    names = ["llama-a", "llama-b", "llama-c"]
    for name in names:
        done = apply(cp, with_requests(vllm_pod(name, NS)))
        assert done.returncode == 0, done.stderr
        assert "untrusted" in done.stderr  # the mutating webhook says why it excludes a node
    stored = cp.get("pod", "llama-a", NS)
    exprs = stored["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [MIXED]} in exprs

    def bound() -> dict[str, str | None]:
        return {n: (cp.get("pod", n, NS) or {}).get("spec", {}).get("nodeName") for n in names}

    wait_for("two pods bound", lambda: sum(1 for v in bound().values() if v) == 2)
    time.sleep(3)  # give the scheduler time to (wrongly) use the mixed node for the third
    placed = bound()
    assert sorted(v for v in placed.values() if v) == ["a100-0", "a100-0"], placed
    assert MIXED not in placed.values()
    (pending,) = [n for n, v in placed.items() if v is None]  # the mixed node had 8 free GPUs: unused
    assert pending in names


def test_single_gpu_pod_goes_to_the_cost_tier(cluster: Cluster) -> None:
    cp = cluster.cp
    pod = vllm_pod("small", NS, gpus=1)
    pod["spec"]["containers"][0]["command"] = ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]
    done = apply(cp, with_requests(pod))
    assert done.returncode == 0, done.stderr
    wait_for("the small pod bound", lambda: (cp.get("pod", "small", NS) or {}).get("spec", {}).get("nodeName"))
    assert cp.get("pod", "small", NS)["spec"]["nodeName"].startswith("l40s-")


CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "four-gpus", "namespace": NS},
         "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
             "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 4}}]}}}


def test_dra_claim_gets_the_product_constraint(cluster: Cluster) -> None:
    cp = cluster.cp
    done = apply(cp, CLAIM)
    assert done.returncode == 0, done.stderr
    stored = cp.get("resourceclaim", "four-gpus", NS)
    assert stored["spec"]["devices"]["constraints"] == [
        {"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/productName"}]
    cpu_claim = copy.deepcopy(CLAIM)
    cpu_claim["metadata"]["name"] = "nics"
    cpu_claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nic.example.com"
    done = apply(cp, cpu_claim)
    assert done.returncode == 0 and "constraints" not in cp.get("resourceclaim", "nics", NS)["spec"]["devices"]
