"""What a pod spec pinned, whatever the label (issue 24, point 5): the policy's label, another
scheme's, an instance type of any cloud, or labels only an inventory can resolve; selections that
never choose a GPU are not pins, and a pin that cannot be read is reported, not overridden."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import instance_types, pins, settings as settings_mod
from webhook.core.inventory import Inventory, from_nodes
from webhook.core.operators.model_servers import AZURE_SKUS
from webhook.core.pins import FOREIGN, NONE, POLICY, RESOLVED, UNREADABLE, Pin, read_pin

S = settings_mod.default()  # GFD scheme: nvidia.com/gpu.product
GFD, GKE = "nvidia.com/gpu.product", "cloud.google.com/gke-accelerator"
ITYPE, HOST = "node.kubernetes.io/instance-type", "kubernetes.io/hostname"


def gpu_node(name: str, value: str | None, gpus: int = 8, **labels: str) -> dict[str, Any]:
    node_labels = {HOST: name, "kubernetes.io/os": "linux", **labels}
    if value is not None:
        node_labels[GFD] = value
    res = {"cpu": "64", "nvidia.com/gpu": str(gpus)}
    return {"kind": "Node", "metadata": {"name": name, "labels": node_labels},
            "status": {"capacity": res, "allocatable": res}}


def fleet(*nodes: dict[str, Any]) -> Inventory:
    return from_nodes(nodes, label_key=S.label_key, scheme=S.label_scheme, catalog=S.catalog,
                      gpu_resources=S.gpu_resources)


FLEET = fleet(
    gpu_node("a10g-1", "NVIDIA-A10G", 4, NodeGroupType="gpu-a10g", **{ITYPE: "ml.g5.12xlarge"}),
    gpu_node("a10g-2", "NVIDIA-A10G", 4, NodeGroupType="gpu-a10g", **{ITYPE: "ml.g5.12xlarge"}),
    gpu_node("l4-1", "NVIDIA-L4", 8, NodeGroupType="gpu-l4", **{"eks.amazonaws.com/nodegroup": "inference"}),
    gpu_node("gb200-1", "NVIDIA-GB200", 4, **{ITYPE: "BM.GPU.GB200.4", "cloud.google.com/gke-nodepool": "big"}),
    gpu_node("bare-1", None, 8, NodeGroupType="gpu-mystery", agentpool="gpupool"),
    gpu_node("mixed-1", "NVIDIA-L4", 8, NodeGroupType="gpu-l4", **{"nvidia.com/gpu.count": "4"}),
    {"kind": "Node", "metadata": {"name": "cpu-1", "labels": {HOST: "cpu-1", "NodeGroupType": "cpu"}},
     "status": {"capacity": {"cpu": "8"}}},
)
EMPTY = fleet()


def sel(**labels: str) -> dict[str, Any]:
    return {"nodeSelector": dict(labels)}


def nsel(labels: dict[str, str]) -> dict[str, Any]:
    return {"nodeSelector": labels}


def aff(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}}


def ex(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


BY_NAME = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchFields": [ex("metadata.name", "In", "l4-1")]}]}}}}


def read(spec: Any, inventory: Inventory | None = None, *, label_key: str = S.label_key,
         scheme: str = S.label_scheme) -> Pin:
    return read_pin(spec, catalog=S.catalog, label_key=label_key, scheme=scheme, inventory=inventory)


@pytest.mark.parametrize(("spec", "inventory", "kind", "key", "values", "products"), [
    # the policy's own label
    pytest.param(nsel({GFD: "NVIDIA-A10G"}), None, POLICY, GFD, ("NVIDIA-A10G",), ("A10G",), id="policy-node-selector"),
    pytest.param(aff([ex(GFD, "In", "NVIDIA-L4", "NVIDIA-A10G")]), FLEET, POLICY, GFD, ("NVIDIA-A10G", "NVIDIA-L4"),
                 ("A10G", "L4"), id="policy-affinity-with-inventory"),
    # another scheme's product label, instance types of every cloud
    pytest.param(nsel({GKE: "nvidia-l4"}), None, FOREIGN, GKE, ("nvidia-l4",), ("L4",), id="foreign-gke"),
    pytest.param(nsel({ITYPE: "p5.48xlarge"}), None, FOREIGN, ITYPE, ("p5.48xlarge",), ("H100-SXM5-80GB",), id="ec2"),
    pytest.param(nsel({ITYPE: "ml.g5.8xlarge"}), None, FOREIGN, ITYPE, ("ml.g5.8xlarge",), ("A10G",),
                 id="sagemaker-ml-g5-is-a10g"),
    pytest.param(nsel({ITYPE: "BM.GPU.H100.8"}), None, FOREIGN, ITYPE, ("BM.GPU.H100.8",), ("H100-SXM5-80GB",),
                 id="oci-bm-gpu-h100-8"),
    pytest.param(aff([ex(ITYPE, "In", "Standard_ND96isr_H100_v5", "standard_nd96isr_h200_v5")]), None, FOREIGN, ITYPE,
                 ("Standard_ND96isr_H100_v5", "standard_nd96isr_h200_v5"), ("H100-SXM5-80GB", "H200"), id="azure"),
    pytest.param(nsel({ITYPE: "a3-highgpu-8g"}), None, FOREIGN, ITYPE, ("a3-highgpu-8g",), ("H100-SXM5-80GB",),
                 id="gce"),
    # an instance type no table knows: unknown, not wrong
    pytest.param(nsel({ITYPE: "BM.GPU.B300.8"}), None, UNREADABLE, ITYPE, ("BM.GPU.B300.8",), (),
                 id="oci-unknown-shape"),
    pytest.param(nsel({ITYPE: "ml.g7e.2xlarge"}), None, UNREADABLE, ITYPE, ("ml.g7e.2xlarge",), (),
                 id="sagemaker-unknown-family"),
    pytest.param(aff([ex(ITYPE, "In", "g5.xlarge", "m5.large")]), None, UNREADABLE, ITYPE, ("m5.large",), (),
                 id="one-unknown-value-of-two"),
    pytest.param(nsel({ITYPE: "BM.GPU.GB200.4"}), FLEET, RESOLVED, ITYPE, ("NVIDIA-GB200",), ("GB200",),
                 id="unknown-instance-type-resolved-by-inventory"),
    # hostname
    pytest.param(nsel({HOST: "a10g-1"}), None, UNREADABLE, HOST, ("a10g-1",), (), id="hostname-without-inventory"),
    pytest.param(nsel({HOST: "a10g-1"}), FLEET, RESOLVED, HOST, ("NVIDIA-A10G",), ("A10G",), id="hostname-resolved"),
    pytest.param(aff([ex(HOST, "In", "a10g-2", "l4-1")]), FLEET, RESOLVED, HOST, ("NVIDIA-A10G", "NVIDIA-L4"),
                 ("A10G", "L4"), id="hostnames-of-two-products"),
    pytest.param(BY_NAME, FLEET, RESOLVED, "metadata.name", ("NVIDIA-L4",), ("L4",), id="match-fields-node-name"),
    pytest.param(BY_NAME, None, UNREADABLE, "metadata.name", ("l4-1",), (), id="match-fields-without-inventory"),
    # custom node-group labels
    pytest.param(sel(NodeGroupType="gpu-a10g"), FLEET, RESOLVED, "NodeGroupType", ("NVIDIA-A10G",), ("A10G",),
                 id="node-group-type-resolved"),
    pytest.param(sel(NodeGroupType="gpu-a10g"), None, UNREADABLE, "NodeGroupType", ("gpu-a10g",), (),
                 id="node-group-type-without-inventory"),
    pytest.param(nsel({"eks.amazonaws.com/nodegroup": "inference"}), FLEET, RESOLVED, "eks.amazonaws.com/nodegroup",
                 ("NVIDIA-L4",), ("L4",), id="eks-nodegroup"),
    pytest.param(nsel({"cloud.google.com/gke-nodepool": "big"}), FLEET, RESOLVED, "cloud.google.com/gke-nodepool",
                 ("NVIDIA-GB200",), ("GB200",), id="gke-nodepool"),
    pytest.param(aff([ex("NodeGroupType", "In", "gpu-a10g", "gpu-l4")]), FLEET, RESOLVED, "NodeGroupType",
                 ("NVIDIA-A10G", "NVIDIA-L4"), ("A10G", "L4"), id="node-groups-of-two-products"),
    pytest.param({**sel(**{"kubernetes.io/os": "linux"}), **aff([ex("NodeGroupType", "Exists")])}, FLEET, RESOLVED,
                 "NodeGroupType", ("NVIDIA-A10G", "NVIDIA-L4"), ("A10G", "L4"), id="custom-exists-resolved"),
    pytest.param(sel(NodeGroupType="gpu-h100"), FLEET, UNREADABLE, "NodeGroupType", ("gpu-h100",), (),
                 id="no-node-of-the-inventory-matches"),
    pytest.param(sel(NodeGroupType="cpu"), FLEET, UNREADABLE, "NodeGroupType", ("cpu",), (), id="only-cpu-nodes-match"),
    pytest.param(sel(agentpool="gpupool"), FLEET, UNREADABLE, "agentpool", ("gpupool",), (),
                 id="matched-node-has-no-product-label"),
    pytest.param(sel(NodeGroupType="gpu-a10g"), EMPTY, UNREADABLE, "NodeGroupType", ("gpu-a10g",), (),
                 id="empty-inventory"),
    # a product pin on one path only: the other path decides what the pod lands on
    pytest.param(aff([ex(GFD, "In", "NVIDIA-A10G")], [ex(HOST, "In", "l4-1")]), FLEET, RESOLVED, GFD,
                 ("NVIDIA-A10G", "NVIDIA-L4"), ("A10G", "L4"), id="policy-pin-on-one-term-resolved"),
    pytest.param(aff([ex(GFD, "In", "NVIDIA-A10G")], [ex(HOST, "In", "l4-1")]), None, UNREADABLE, HOST, ("l4-1",), (),
                 id="policy-pin-on-one-term-blames-hostname"),
    pytest.param(aff([ex(GFD, "In", "NVIDIA-A10G")], [ex(GKE, "In", "nvidia-l4")]), None, UNREADABLE, GFD, (), (),
                 id="known-pins-ored-across-schemes"),
    pytest.param(aff([ex("nvidia.com/gpu.memory", "Gt", "40000")]), None, UNREADABLE, "nvidia.com/gpu.memory",
                 ("40000",), (), id="gpu-memory-gt"),
    # not pins: selections that never choose a GPU product
    pytest.param(sel(**{"kubernetes.io/os": "linux"}), FLEET, NONE, None, (), (), id="os"),
    pytest.param(sel(**{"kubernetes.io/arch": "amd64"}), None, NONE, None, (), (), id="arch"),
    pytest.param(sel(**{"topology.kubernetes.io/zone": "us-east-1a"}), None, NONE, None, (), (), id="zone"),
    pytest.param(sel(**{"failure-domain.beta.kubernetes.io/region": "us-east-1"}), None, NONE, None, (), (),
                 id="beta-region"),
    pytest.param(sel(**{"karpenter.sh/capacity-type": "spot"}), None, NONE, None, (), (), id="karpenter-spot"),
    pytest.param(sel(**{"cloud.google.com/gke-spot": "true"}), None, NONE, None, (), (), id="gke-spot"),
    pytest.param(sel(**{"eks.amazonaws.com/capacityType": "SPOT"}), None, NONE, None, (), (), id="eks-spot"),
    pytest.param(sel(**{"kubernetes.azure.com/scalesetpriority": "spot"}), None, NONE, None, (), (), id="aks-spot"),
    pytest.param(sel(**{"nvidia.com/gpu.present": "true"}), None, NONE, None, (), (), id="gpu-present"),
    pytest.param(sel(**{"nvidia.com/gpu.deploy.driver": "true"}), None, NONE, None, (), (), id="gpu-deploy"),
    pytest.param(sel(**{"nvidia.com/mig.config": "all-disabled"}), None, NONE, None, (), (), id="mig-config"),
    pytest.param(aff([ex("nvidia.com/gpu.count", "Gt", "4")]), None, NONE, None, (), (), id="gpu-count-gt"),
    pytest.param(sel(**{"feature.node.kubernetes.io/pci-10de.present": "true"}), None, NONE, None, (), (),
                 id="nfd-nvidia-present"),
    pytest.param(aff([ex(GFD, "Exists")]), FLEET, NONE, None, (), (), id="product-label-exists"),
    pytest.param(aff([ex(ITYPE, "Exists")]), FLEET, NONE, None, (), (), id="instance-type-exists"),
    pytest.param(aff([ex(HOST, "Exists")]), FLEET, NONE, None, (), (), id="hostname-exists-is-every-node"),
    pytest.param(sel(**{"feature.node.kubernetes.io/pci-10de_2330.present": "true"}), None, UNREADABLE,
                 "feature.node.kubernetes.io/pci-10de_2330.present", ("true",), (), id="nfd-device-id-can-pin"),
    pytest.param(aff([ex(HOST, "NotIn", "a10g-1")]), FLEET, NONE, None, (), (), id="hostname-notin"),
    pytest.param(aff([ex(ITYPE, "NotIn", "BM.GPU.B300.8")]), None, NONE, None, (), (), id="instance-type-notin"),
    pytest.param(aff([ex("NodeGroupType", "DoesNotExist")]), None, NONE, None, (), (), id="doesnotexist"),
    pytest.param({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [ex(HOST, "In", "a10g-1")]}}]}}}, FLEET, NONE, None, (), (),
                 id="preferred-affinity"),
    pytest.param({}, FLEET, NONE, None, (), (), id="no-selection"),
    pytest.param("spec", FLEET, NONE, None, (), (), id="spec-not-a-mapping"),
])
def test_read_pin(spec: Any, inventory: Inventory | None, kind: str, key: str | None, values: tuple[str, ...],
                  products: tuple[str, ...]) -> None:
    pin = read(spec, inventory)
    assert (pin.kind, pin.key, pin.values, pin.products) == (kind, key, values, products)


def test_resolved_pin_says_which_nodes_and_which_labels() -> None:
    pin = read({**sel(**{"kubernetes.io/os": "linux"}), **aff([ex("NodeGroupType", "In", "gpu-l4", "gpu-mystery")])},
               FLEET)
    assert pin.kind == RESOLVED and pin.selecting == ("NodeGroupType",) and pin.products == ("L4",)
    assert pin.resolution is not None and pin.resolution.nodes == ("l4-1", "mixed-1", "bare-1")
    assert pin.resolution.untrusted == ("mixed-1", "bare-1")  # a count below capacity; no product label
    assert pin.unknown == ("bare-1",) and not pin.via_node_selector


def test_foreign_pin_keeps_the_schemes_reading() -> None:
    pin = read(nsel({ITYPE: "ml.p5.48xlarge"}))
    assert pin.kind == FOREIGN and pin.scheme == "instance-type" and pin.via_node_selector
    assert pin.foreign is not None and pin.foreign.values == frozenset({"ml.p5.48xlarge"})


def test_policy_pin_reports_unknown_values() -> None:
    pin = read(aff([ex(GFD, "In", "NVIDIA-A10G", "NVIDIA-RTX-PRO-6000-Blackwell")]))
    assert pin.kind == POLICY and pin.products == ("A10G",) and pin.unknown == ("NVIDIA-RTX-PRO-6000-Blackwell",)


def test_a_gke_policy_reads_a_gfd_pin_as_foreign() -> None:
    pin = read(nsel({GFD: "NVIDIA-L4"}), label_key=GKE, scheme="gke")
    assert (pin.kind, pin.scheme, pin.products) == (FOREIGN, "gfd", ("L4",))


def test_unreadable_names_the_label_and_every_selecting_key() -> None:
    pin = read({**sel(**{"kubernetes.io/os": "linux", "NodeGroupType": "gpu-x"}), **aff([ex(HOST, "In", "h")])})
    assert pin.kind == UNREADABLE and pin.key == "NodeGroupType" and pin.via_node_selector
    assert pin.selecting == ("NodeGroupType", HOST)


@pytest.mark.parametrize(("spec", "inventory", "annotation", "expected"), [
    pytest.param(nsel({ITYPE: "BM.GPU.B300.8"}), None, None,
                 "cannot tell which GPU node.kubernetes.io/instance-type=BM.GPU.B300.8 is: give an inventory",
                 id="plain"),
    pytest.param(sel(NodeGroupType="gpu-a10g"), None, pins.PRODUCT_ANNOTATION,
                 "cannot tell which GPU NodeGroupType=gpu-a10g is: set gpu-admission.io/gpu-product or give an "
                 "inventory",
                 id="with-annotation"),
    pytest.param(nsel({ITYPE: "ml.g7e.12xlarge"}), None, pins.PRODUCT_ANNOTATION,
                 "unknown GPU: node.kubernetes.io/instance-type=ml.g7e.12xlarge; set gpu-admission.io/gpu-product "
                 "or an inventory", id="compact-when-long"),
    pytest.param(sel(NodeGroupType="gpu-h100"), FLEET, None,
                 "cannot tell which GPU NodeGroupType=gpu-h100 is: no GPU node in the inventory matches it",
                 id="no-node-matches"),
    pytest.param(sel(agentpool="gpupool"), FLEET, None,
                 "cannot tell which GPU agentpool=gpupool is: its GPU nodes have no product label the catalog knows",
                 id="nodes-without-product"),
    pytest.param(aff([ex("NodeGroupType", "Exists")]), None, None,
                 "cannot tell which GPU label NodeGroupType selects: give an inventory", id="exists"),
    pytest.param(aff([ex("nvidia.com/gpu.memory", "Gt", "40000")]), None, None,
                 "cannot tell which GPU nvidia.com/gpu.memory Gt 40000 selects: give an inventory", id="gt"),
    pytest.param(aff([ex(GFD, "In", "NVIDIA-A10G")], [ex(GKE, "In", "nvidia-l4")]), None, None,
                 f"cannot tell which GPU selection on {GFD}, {GKE} selects: give an inventory", id="ored-schemes"),
])
def test_warning_text(spec: Any, inventory: Inventory | None, annotation: str | None, expected: str) -> None:
    pin = read(spec, inventory)
    assert pins.warning(pin, annotation=annotation) == expected and len(expected) <= pins.WARNING_LIMIT


@pytest.mark.parametrize("value", ["Standard_ND96isr_B200_v6" + "x" * 30, "y" * 63])
def test_warning_shortens_a_long_value_to_the_limit(value: str) -> None:
    text = pins.warning(read(nsel({ITYPE: value})), annotation=pins.PRODUCT_ANNOTATION)
    assert len(text) == pins.WARNING_LIMIT and "…" in text and text.startswith("unknown GPU: " + ITYPE + "=")


def test_warning_is_only_for_unreadable_pins() -> None:
    with pytest.raises(ValueError):
        pins.warning(read(nsel({GFD: "NVIDIA-A10G"})))


# ------------------------------------------------------------------ instance types


@pytest.mark.parametrize(("value", "product"), [
    pytest.param("g5.8xlarge", "A10G", id="ec2"), pytest.param("p6-b200.48xlarge", "B200", id="ec2-hyphenated-family"),
    pytest.param("ml.g5.8xlarge", "A10G", id="sagemaker"), pytest.param("ml.p4de.24xlarge", "A100-SXM4-80GB",
                                                                           id="sagemaker-p4de"),
    pytest.param("ml.g5", None, id="sagemaker-without-size"), pytest.param("ml.m5.large", None, id="sagemaker-cpu"),
    pytest.param("m5.large", None, id="ec2-cpu"), pytest.param("g6f.xlarge", None, id="ec2-fractional-gpu"),
    pytest.param("Standard_NC24ads_A100_v4", "A100-PCIE-80GB", id="azure-nc-a100"),
    pytest.param("Standard_ND96asr_v4", "A100-SXM4-40GB", id="azure-nd-a100-40gb"),
    pytest.param("STANDARD_NC40ADS_H100_V5", "H100-NVL", id="azure-case-insensitive"),
    pytest.param("Standard_NC4as_T4_v3_Promo", "T4", id="azure-promo"),
    pytest.param("Standard_NV6ads_A10_v5", None, id="azure-fraction-of-a10"),
    pytest.param("Standard_ND96isr_H100_v5", "H100-SXM5-80GB", id="azure-nd-h100"),
    pytest.param("Standard_NC48ads_A100_v4", "A100-PCIE-80GB", id="azure-nc48-a100"),
    pytest.param("Standard_NCC40ads_H100_v5", "H100-NVL", id="azure-confidential-nc-h100"),
    pytest.param("Standard_NC32ads_A10_v4", "A10", id="azure-nc-a10-v4"),
    pytest.param("ml.p5.48xlarge", "H100-SXM5-80GB", id="sagemaker-p5"),
    pytest.param("BM.GPU.H100.8", "H100-SXM5-80GB", id="oci-h100"),
    pytest.param("BM.GPU4.8", "A100-SXM4-40GB", id="oci-a100"),
    pytest.param("VM.GPU.A10.1", "A10", id="oci-vm-a10"), pytest.param("bm.gpu.h100.8", None, id="oci-case-sensitive"),
    pytest.param("BM.GPU.B4.8", None, id="oci-unconfirmed"),
    pytest.param("a2-ultragpu-8g", "A100-SXM4-80GB", id="gce-a2-ultra"),
    pytest.param("g2-standard-96", "L4", id="gce-g2"), pytest.param("a3-ultragpu-8g", "H200", id="gce-a3-ultra"),
    pytest.param("a3-highgpu-1g-gdc", None, id="gdc-h100-94gb"),
    pytest.param("a3-edgegpu-8g", None, id="gce-unconfirmed"), pytest.param("n1-standard-8", None, id="gce-cpu"),
    pytest.param("gpu-h100-sxm-8gpu-128vcpu-1600gb", "H100-SXM5-80GB", id="nebius-h100"),
    pytest.param("gpu-b200-sxm-a-8gpu-160vcpu-1792gb", "B200", id="nebius-b200-a"),
    pytest.param("gpu-h100-sxm", None, id="nebius-platform-without-preset"),
    pytest.param("cpu-d3-16vcpu-64gb", None, id="nebius-cpu"),
    pytest.param("", None, id="empty"),
])
def test_instance_product(value: str, product: str | None) -> None:
    assert instance_types.instance_product(value) == product


def test_instance_tables_name_catalog_products() -> None:
    tables = [instance_types.INSTANCE_FAMILIES, instance_types.AZURE_SIZES, instance_types.OCI_SHAPES,
              instance_types.GCP_MACHINE_FAMILIES]
    assert {p for t in tables for p in t.values()} <= set(S.catalog.products)
    assert all(k == k.lower() for k in instance_types.AZURE_SIZES)


def test_gce_families_agree_with_the_catalogs_gke_accelerator_names() -> None:
    assert instance_types.GCP_ACCELERATORS.keys() == instance_types.GCP_MACHINE_FAMILIES.keys()
    for family, accelerator in instance_types.GCP_ACCELERATORS.items():
        named = S.catalog.named_products(accelerator, "gke")
        assert not named or instance_types.GCP_MACHINE_FAMILIES[family] in named, family


def test_azure_sizes_agree_with_kaito() -> None:
    for size, (_gpus, product) in AZURE_SKUS.items():
        if product is not None and size.lower() in instance_types.AZURE_SIZES:
            assert instance_types.AZURE_SIZES[size.lower()] == product, size


@pytest.mark.parametrize("name", ["ml.g5.xlarge", "ml.g6.48xlarge", "ml.g6e.8xlarge", "ml.gr6.4xlarge",
                                  "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.4xlarge", "ml.p5e.48xlarge",
                                  "ml.p5en.48xlarge", "ml.p6-b200.48xlarge"])
def test_hyperpod_types_carry_the_ec2_familys_gpu(name: str) -> None:
    """The ``ml.`` types HyperPod's own chart pins its NVIDIA device plugin to (the catalog's families)."""
    product = instance_types.instance_product(name)
    assert product is not None and product == instance_types.instance_product(name.removeprefix("ml."))
