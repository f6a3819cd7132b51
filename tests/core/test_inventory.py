"""The GPU inventory: node facts and anomalies, pools, and how decisions use them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from kubernetes import client

from webhook.cli.inventory import summary
from webhook.core.resources import used_gpus
from webhook.cli.main import main
from webhook.core import settings as settings_mod
from tests.judging import judge
from webhook.core.inventory import Inventory, from_nodes

S = settings_mod.default()
S_DENY = settings_mod.from_mapping({"inventory": {"absentTier": "deny"}}, source="absentTier: deny")
"""Today's denials of an absent tier, kept as they were (``inventory.absentTier: deny``)."""
KEY = "nvidia.com/gpu.product"
A100, H100, L40S = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"
MEMORY = {A100: "81920", H100: "81559", L40S: "46068"}
FAMILY = {A100: "ampere", H100: "hopper", L40S: "ada-lovelace"}


def node(name: str, product: str | None, gpus: int = 8, *, count: int | None = None, memory: str | None = None,
         family: str | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if product is not None:
        labels[KEY] = product
        labels["nvidia.com/gpu.count"] = str(gpus if count is None else count)
        labels["nvidia.com/gpu.memory"] = memory or MEMORY.get(product, "81920")
        labels["nvidia.com/gpu.family"] = family or FAMILY.get(product, "ampere")
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": res, "allocatable": res}}


def fleet(*nodes: dict[str, Any]) -> Inventory:
    return from_nodes(nodes, label_key=S.label_key, scheme=S.label_scheme, catalog=S.catalog,
                      gpu_resources=S.gpu_resources)


@pytest.mark.parametrize(("n", "trusted", "needle"), [
    pytest.param(node("a", A100), True, None, id="clean"),
    pytest.param(node("m", A100, count=4), False, "mixed or mislabeled", id="count-below-capacity"),
    pytest.param(node("u", None), False, "no nvidia.com/gpu.product", id="no-product-label"),
    pytest.param(node("x", A100, memory="46068"), False, "labels disagree", id="memory-disagrees"),
    pytest.param(node("f", A100, family="ada-lovelace"), False, "labels disagree", id="family-disagrees"),
    pytest.param(node("s", "NVIDIA-A100-SXM4-80GB-SHARED"), False, "shared", id="shared"),
])
def test_node_facts(n: dict[str, Any], trusted: bool, needle: str | None) -> None:
    (facts,) = fleet(n).nodes.values()
    assert facts.trusted is trusted
    if needle:
        assert any(needle in a for a in facts.anomalies)


def test_cpu_nodes_are_not_indexed_and_pools_group_by_value() -> None:
    cpu = {"metadata": {"name": "cpu"}, "status": {"capacity": {"cpu": "8"}}}
    inv = fleet(node("a1", A100), node("a2", A100, gpus=4), node("l1", L40S), node("m", A100, count=2), cpu, "junk")
    assert set(inv.nodes) == {"a1", "a2", "l1", "m"}
    pools = inv.pools()
    assert pools[A100].nodes == ("a1", "a2", "m") and pools[A100].max_allocatable == 8
    assert pools[A100].allocatable == 12  # the mixed node does not count
    assert inv.values_with_room(8) == {A100, L40S} and inv.values_with_room(16) == set()
    assert "NVIDIA-L40S (1 node, 8 GPUs max)" in inv.describe()


def vllm_pod(model: str, gpus: int, *flags: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "vllm/vllm-openai:v0.10.1",
                                     "command": ["vllm", "serve", model, *flags],
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}], **spec}}


TP4 = vllm_pod("meta-llama/Llama-3.1-70B-Instruct", 4, "-tp", "4")
SMALL = vllm_pod("Qwen/Qwen2.5-7B-Instruct", 1)


def test_only_existing_products_are_offered() -> None:
    (r,) = judge(TP4, S, inventory=fleet(node("a", A100), node("l", L40S)))
    assert r.decision.allowed and r.decision.placement.values == (A100,)


@pytest.mark.parametrize(("mode", "allowed"), [("enforce", False), ("audit", True)])
def test_tier_missing_from_the_cluster(mode: str, allowed: bool) -> None:
    (r,) = judge(TP4, S_DENY, mode=mode, inventory=fleet(node("l1", L40S), node("l2", L40S)))
    assert r.decision.allowed is allowed
    (v,) = r.decision.violations
    assert v.code == "tier-not-in-cluster" and "NVIDIA-L40S (2 nodes, 8 GPUs max)" in v.message
    assert not r.patch


def test_no_node_big_enough() -> None:
    pod = vllm_pod("meta-llama/Llama-3.1-405B-Instruct-FP8", 8, "-tp", "8")
    (r,) = judge(pod, S_DENY, inventory=fleet(node("a", A100, gpus=4)))
    assert [v.code for v in r.decision.violations] == ["tier-not-in-cluster"]


def test_pinned_product_absent_from_the_cluster() -> None:
    pod = copy.deepcopy(TP4)
    pod["spec"]["nodeSelector"] = {KEY: H100}
    (r,) = judge(pod, S, inventory=fleet(node("a", A100)))
    # absentTier: warn (default): the pin is kept and the Pending pod asks an autoscaler for the node
    assert r.decision.allowed and r.decision.placement.values == (H100,)
    assert any(w.startswith("tier-not-in-cluster (admitted") for w in r.decision.warnings), r.decision.warnings
    (r,) = judge(pod, settings_mod.from_mapping({"inventory": {"absentTier": "deny"}}), inventory=fleet(node("a", A100)))
    assert [v.code for v in r.decision.violations] == ["tier-not-in-cluster"]


def test_small_model_moves_up_when_the_cheap_tier_is_absent() -> None:
    (r,) = judge(SMALL, S, inventory=fleet(node("a", A100)))
    assert r.decision.allowed and r.decision.tier == "hbm-nvlink" and r.decision.placement.values == (A100,)
    (r,) = judge(SMALL, S, inventory=fleet(node("a", A100), node("l", L40S)))
    assert r.decision.tier == "cost" and r.decision.placement.values == (L40S,)


def test_mixed_nodes_are_excluded_from_multi_gpu_pods() -> None:
    inv = fleet(node("a1", A100), node("a2", A100, count=4), node("l", L40S))
    (r,) = judge(TP4, S, inventory=inv)
    assert r.decision.allowed and r.decision.placement.exclude_nodes == ("a2",)
    assert any("untrusted" in w and "a2" in w for w in r.decision.warnings)
    patched = jsonpatch.apply_patch(copy.deepcopy(TP4), list(r.patch))
    exprs = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["a2"]} in exprs
    (again,) = judge(patched, S, inventory=inv)
    assert again.patch == ()
    (plain,) = judge(SMALL, S, inventory=inv)  # single-GPU pods may use them
    assert plain.decision.placement.exclude_nodes == ()


def test_mixed_nodes_only_warned_when_configured() -> None:
    warn = settings_mod.from_mapping({"inventory": {"mixedNodes": "warn"}})
    inv = from_nodes([node("a1", A100), node("a2", A100, count=4)], label_key=warn.label_key,
                     scheme=warn.label_scheme, catalog=warn.catalog, gpu_resources=warn.gpu_resources)
    (r,) = judge(TP4, warn, inventory=inv)
    assert r.decision.placement.exclude_nodes == () and any("may land on untrusted" in w for w in r.decision.warnings)


def test_check_with_saved_nodes(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("l", L40S)]}))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(TP4))
    assert main(["check", str(pod)]) == 0
    import io
    out = io.StringIO()
    deny = tmp_path / "deny.yaml"
    deny.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\ninventory:\n  absentTier: deny\n")
    assert main(["check", str(pod), "--inventory", str(nodes), "--config", str(deny), "--output", "json"], out=out) == 1
    assert json.loads(out.getvalue())["results"][0]["violations"][0]["code"] == "tier-not-in-cluster"
    warned = io.StringIO()
    assert main(["check", str(pod), "--inventory", str(nodes), "--output", "json"], out=warned) == 0
    assert any(w.startswith("tier-not-in-cluster (admitted") for w in json.loads(warned.getvalue())["results"][0]["warnings"])
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    err = io.StringIO()
    assert main(["check", str(pod), "--inventory", str(empty)], err=err) == 2 and "no Node objects" in err.getvalue()


def test_inventory_summary_counts_free_gpus() -> None:
    inv = fleet(node("a1", A100), node("a2", A100), node("m", A100, count=4), node("l", L40S))
    pods = [{"spec": {"nodeName": "a1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 4}}}]},
             "status": {"phase": "Running"}},
            {"spec": {"nodeName": "a2", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 8}}}]},
             "status": {"phase": "Succeeded"}}]
    data = summary(inv, S, used_gpus(pods, S.gpu_resources))
    a100 = next(p for p in data["pools"] if p["value"] == A100)
    assert a100["tier"] == "hbm-nvlink" and a100["free"] == 12 and a100["gpus"] == 24
    assert data["anomalies"][0]["node"] == "m"


class FakeApi:
    """Stands in for CoreV1Api in unit tests only; the live watch runs against a real apiserver in e2e."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    def list_node(self, **_kw: Any) -> Any:
        api = client.ApiClient()
        items = [api._ApiClient__deserialize(n, "V1Node") for n in self.nodes]
        return client.V1NodeList(items=items, metadata=client.V1ListMeta(resource_version="42"))




# ------------------------------------------------------------------ node labels (issue 24, point 5)


def labelled(name: str, rv: str, **extra: str) -> dict[str, Any]:
    n = node(name, A100)
    n["metadata"] = {**n["metadata"], "resourceVersion": rv, "labels": {**n["metadata"]["labels"], **extra}}
    return n


def test_inventory_keeps_each_nodes_labels_read_only() -> None:
    (facts,) = fleet(labelled("a", "1", NodeGroupType="gpu-a100")).nodes.values()
    assert facts.labels["NodeGroupType"] == "gpu-a100" and facts.labels[KEY] == A100
    with pytest.raises(TypeError):
        facts.labels["NodeGroupType"] = "other"  # type: ignore[index]
    assert hash(facts) == hash(facts) and "NodeGroupType" not in repr(facts)


def test_saved_nodes_keep_their_labels(tmp_path: Path) -> None:
    from webhook.cli.inventory import load_file

    saved = tmp_path / "nodes.yaml"
    saved.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [labelled("a", "1", pool="p1")]}))
    assert load_file(str(saved), S).nodes["a"].labels["pool"] == "p1"




def test_explain_takes_the_same_inventory_and_no_mutate_as_check(tmp_path: Path) -> None:
    """`explain` reasons with what `check` judged with (issue 26): the saved fleet and --no-mutate."""
    import io

    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("l", L40S)]}))
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(TP4))
    deny = tmp_path / "deny.yaml"
    deny.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\ninventory:\n  absentTier: deny\n")
    out = io.StringIO()
    assert main(["explain", str(pod), "--config", str(deny)], out=out) == 0
    assert "tier-not-in-cluster" not in out.getvalue()
    out = io.StringIO()
    assert main(["explain", str(pod), "--inventory", str(nodes), "--config", str(deny)], out=out) == 1
    assert "tier-not-in-cluster" in out.getvalue()
    check = main(["check", str(pod), "--no-mutate"])
    assert check == 1 and main(["explain", str(pod), "--no-mutate"], out=io.StringIO()) == check
    err = io.StringIO()
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    assert main(["explain", str(pod), "--inventory", str(empty)], err=err) == 2 and "no Node objects" in err.getvalue()
