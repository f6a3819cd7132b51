"""Autoscaled pools count as existing (issue 13, part 3): a table over nodes x NodePools x policy for a
Llama-3.1-70B TP4 pod (tier hbm-nvlink), then the NodePool reader's rows.

``absentTier: warn`` (default): a tier nothing offers is admitted with a warning and placed as if no
inventory were known; ``deny`` keeps today's ``tier-not-in-cluster`` denial. A NodePool or
``inventory.scalableProducts`` naming an HBM product makes the tier present: the pod is pinned to
what can appear.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.test_inventory import A100, H100, L40S, TP4, node
from webhook.core import nodepools, settings as settings_mod
from tests.judging import judge
from webhook.core.inventory import from_nodes


def nodepool(name: str, *requirements: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"},
                                           "requirements": [{"key": k, "operator": op, "values": v}
                                                            for k, op, v in requirements]}}}}


H100_POOL = nodepool("gpu-h100", ("karpenter.k8s.aws/instance-gpu-name", "In", ["h100"]))
P5_POOL = nodepool("p5", ("node.kubernetes.io/instance-type", "In", ["p5.48xlarge"]))
GFD_POOL = nodepool("gfd", ("nvidia.com/gpu.product", "In", [H100]))
ANY_GPU_POOL = nodepool("any", ("karpenter.k8s.aws/instance-gpu-name", "Exists", []))
L40S_POOL = nodepool("g6e", ("node.kubernetes.io/instance-type", "In", ["g6e.12xlarge", "g6e.48xlarge"]))

DEFAULT = {}
DENY = {"inventory": {"absentTier": "deny"}}
SCALABLE = {"inventory": {"scalableProducts": ["H100-SXM5-80GB"], "absentTier": "deny"}}
L40S_ONLY = [node("l1", L40S), node("l2", L40S)]

CASES = [
    # nodes, NodePools, policy, allowed, pinned values include, warning code, violation code
    pytest.param(L40S_ONLY, [], DEFAULT, True, A100, "tier-not-in-cluster", None, id="absent-tier-warns-by-default"),
    pytest.param(L40S_ONLY, [], DENY, False, None, None, "tier-not-in-cluster", id="absent-tier-deny"),
    pytest.param(L40S_ONLY, [H100_POOL], DENY, True, H100, None, None, id="karpenter-gpu-name-nodepool"),
    pytest.param(L40S_ONLY, [P5_POOL], DENY, True, H100, None, None, id="karpenter-instance-type-nodepool"),
    pytest.param(L40S_ONLY, [GFD_POOL], DENY, True, H100, None, None, id="nodepool-on-the-product-label"),
    pytest.param(L40S_ONLY, [ANY_GPU_POOL], DENY, False, None, None, "tier-not-in-cluster",
                 id="nodepool-that-names-no-product"),
    pytest.param(L40S_ONLY, [L40S_POOL], DENY, False, None, None, "tier-not-in-cluster",
                 id="nodepool-of-another-tier"),
    pytest.param(L40S_ONLY, [], SCALABLE, True, H100, None, None, id="policy-scalable-products"),
    pytest.param([node("a", A100)], [], DENY, True, A100, None, None, id="tier-present-on-nodes"),
]


@pytest.mark.parametrize(("nodes", "pools", "policy", "allowed", "pinned", "warning", "violation"), CASES)
def test_autoscaled_pools(nodes: list[dict], pools: list[dict], policy: dict, allowed: bool, pinned: str | None,
                          warning: str | None, violation: str | None) -> None:
    s = settings_mod.from_mapping(policy, source="test")
    inv = from_nodes(nodes, label_key=s.label_key, scheme=s.label_scheme, catalog=s.catalog,
                     gpu_resources=s.gpu_resources, nodepools=pools)
    (r,) = judge(TP4, s, inventory=inv)
    assert r.decision.allowed is allowed
    assert [v.code for v in r.decision.violations] == ([violation] if violation else [])
    if pinned:
        assert r.decision.placement is not None and pinned in r.decision.placement.values
        assert L40S not in r.decision.placement.values
        assert r.patch  # the mutating patch pins the pod to what can appear
    if warning:
        assert any(w.startswith(f"{warning} (admitted, inventory.absentTier: warn)") for w in r.decision.warnings)
    else:
        assert not any(w.startswith("tier-not-in-cluster") for w in r.decision.warnings)


def test_only_the_nodepool_products_are_offered_when_no_node_exists() -> None:
    s = settings_mod.from_mapping(DENY, source="test")
    inv = from_nodes(L40S_ONLY, label_key=s.label_key, scheme=s.label_scheme, catalog=s.catalog,
                     gpu_resources=s.gpu_resources, nodepools=[H100_POOL])
    (r,) = judge(TP4, s, inventory=inv)
    assert r.decision.placement.values == (H100,)
    assert "can scale up: NVIDIA-H100-80GB-HBM3 (NodePool gpu-h100)" in inv.describe()


@pytest.mark.parametrize(("pool", "products"), [
    pytest.param(H100_POOL, ("H100-SXM5-80GB",), id="gpu-name"),
    pytest.param(nodepool("a100", ("karpenter.k8s.aws/instance-gpu-name", "In", ["a100"])),
                 ("A100-SXM4-40GB", "A100-SXM4-80GB"), id="coarse-gpu-name-names-both"),
    pytest.param(P5_POOL, ("H100-SXM5-80GB",), id="instance-type"),
    pytest.param(nodepool("gke", ("cloud.google.com/gke-accelerator", "In", ["nvidia-h100-80gb"])),
                 ("H100-SXM5-80GB",), id="gke-accelerator"),
    pytest.param(ANY_GPU_POOL, (), id="exists-names-nothing"),
    pytest.param(nodepool("notin", ("karpenter.k8s.aws/instance-gpu-name", "NotIn", ["t4"])), (), id="not-in"),
    pytest.param(nodepool("cpu", ("karpenter.sh/capacity-type", "In", ["spot"])), (), id="no-gpu-key"),
    pytest.param({"kind": "NodePool", "spec": "garbage"}, (), id="malformed"),
])
def test_nodepool_products(pool: Any, products: tuple[str, ...]) -> None:
    assert nodepools.nodepool_products(pool, settings_mod.default().catalog) == products


def test_instance_families_name_catalog_products() -> None:
    catalog = settings_mod.default().catalog
    assert set(nodepools.INSTANCE_FAMILIES.values()) <= set(catalog.products)


def test_scalable_products_are_validated() -> None:
    with pytest.raises(settings_mod.SettingsError, match="scalableProducts"):
        settings_mod.from_mapping({"inventory": {"scalableProducts": ["H999"]}}, source="policy.yaml")


class FakeCustom:
    """Stands in for CustomObjectsApi in this unit test only; e2e lists real NodePools from a real apiserver."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **_kw: Any) -> dict[str, Any]:
        assert (group, version, plural) == ("karpenter.sh", "v1", "nodepools")
        return {"items": self.items, "metadata": {"resourceVersion": "7"}}






def test_check_reads_nodepools_from_the_inventory_file(tmp_path) -> None:
    import io
    import json

    import yaml

    from webhook.cli.main import main

    saved = tmp_path / "fleet.yaml"  # kubectl get nodes,nodepools -o yaml
    saved.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*L40S_ONLY, H100_POOL]}))
    deny = tmp_path / "deny.yaml"
    deny.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\ninventory:\n  absentTier: deny\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(TP4))
    out = io.StringIO()
    assert main(["check", str(pod), "--inventory", str(saved), "--config", str(deny), "--output", "json"], out=out) == 0
    (result,) = json.loads(out.getvalue())["results"]
    assert result["allowed"] and H100 in json.dumps(result)
