"""A product pin written in another label scheme than the policy's (issue 15, point 2): read as the
pin it is and judged (kept, narrowed in its own scheme, refused with values of its own scheme); the
webhook never adds a pin in a second scheme beside it."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from webhook.core import pins, settings as settings_mod
from webhook.core.engine import TemplateResult
from tests.judging import judge

S = settings_mod.default()  # GFD scheme: nvidia.com/gpu.product
GFD = "nvidia.com/gpu.product"
GKE = "cloud.google.com/gke-accelerator"
KARPENTER = "karpenter.k8s.aws/instance-gpu-name"
COREWEAVE = "gpu.nvidia.com/class"
VKE = "machine.cluster.vke.volcengine.com/gpu-name"
ACK = "aliyun.accelerator/nvidia_name"


def pod(model: str, gpus: int, *flags: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    c = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve", model, *flags],
         "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    meta: dict[str, Any] = {"name": "p", "namespace": "ai"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **spec}}


def affinity(key: str, *values: str) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}}


def one(obj: Any, **kw: Any) -> TemplateResult:
    (r,) = judge(obj, S, **kw)
    return r


def keys_pinned(obj: dict[str, Any]) -> set[str]:
    terms = obj["spec"].get("affinity", {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    return {e["key"] for t in terms for e in t.get("matchExpressions", [])} | set(obj["spec"].get("nodeSelector", {}))


SMALL = ("meta-llama/Llama-3.1-8B-Instruct", 1)
UNKNOWN_VALUES = {"nvidia-tesla-p4", "A40", "NVIDIA-L20", "NVIDIA-A10"}
"""Values of known schemes the catalog does not know: warned about, never refused, nothing added."""
BIG = ("meta-llama/Llama-3.1-70B-Instruct", 4, "--tensor-parallel-size", "4")

CASES = [
    # pod, allowed, codes, keys pinned after the patch, placement key
    pytest.param(pod(*SMALL, nodeSelector={GKE: "nvidia-l4"}), True, [], {GKE}, GKE, id="gke-l4-small-model-kept"),
    pytest.param(pod(*BIG, nodeSelector={GKE: "nvidia-h100-80gb"}), True, [], {GKE}, GKE, id="gke-h100-70b-kept"),
    pytest.param(pod(*BIG, **affinity(KARPENTER, "h100")), True, [], {KARPENTER}, KARPENTER, id="karpenter-h100"),
    pytest.param(pod(*BIG, **affinity(GKE, "nvidia-l4", "nvidia-h100-80gb")), True, [], {GKE}, GKE,
                 id="gke-narrowed-in-its-own-scheme"),
    # 33 GiB of weights per 24 GB L4: cannot work, in the user's own scheme
    pytest.param(pod(*BIG, nodeSelector={GKE: "nvidia-l4"}), False, ["model-does-not-fit"], {GKE}, None,
                 id="gke-l4-70b-refused"),
    # a value the catalog does not know is not a wrong value: warned, nothing added beside it (issue 24)
    pytest.param(pod(*BIG, nodeSelector={GKE: "nvidia-tesla-p4"}), True, [], {GKE}, None,
                 id="gke-unknown-value"),
    pytest.param(pod(*BIG), True, [], {GFD}, GFD, id="no-pin-policy-scheme"),
    pytest.param(pod(*BIG, nodeSelector={"node.kubernetes.io/instance-type": "p5.48xlarge"}), True, [],
                 {"node.kubernetes.io/instance-type"}, "node.kubernetes.io/instance-type", id="aws-instance-type-p5"),
    pytest.param(pod(*BIG, nodeSelector={"node.kubernetes.io/instance-type": "g6.12xlarge"}), False,
                 ["model-does-not-fit"], {"node.kubernetes.io/instance-type"}, None, id="aws-instance-type-g6-refused"),
    pytest.param(pod(*BIG, nodeSelector={"karpenter.k8s.aws/instance-family": "p5"}), True, [],
                 {"karpenter.k8s.aws/instance-family"}, "karpenter.k8s.aws/instance-family", id="karpenter-family-p5"),
    pytest.param(pod(*BIG, nodeSelector={"karpenter.k8s.aws/instance-family": "g6"}), False, ["model-does-not-fit"],
                 {"karpenter.k8s.aws/instance-family"}, None, id="karpenter-family-g6-refused"),
    pytest.param(pod(*BIG, nodeSelector={"node.kubernetes.io/instance-type": "acme.gpu-mega"}), True,
                 [], {"node.kubernetes.io/instance-type"}, None, id="unknown-instance-type-kept-as-written"),
    # issue 28: CoreWeave, Volcano Engine VKE and Alibaba ACK product labels, judged in their own scheme
    pytest.param(pod(*BIG, **affinity(COREWEAVE, "H100_NVLINK_80GB")), True, [], {COREWEAVE}, COREWEAVE,
                 id="coreweave-h100-70b-kept"),
    pytest.param(pod(*BIG, **affinity(COREWEAVE, "Tesla_V100_NVLINK", "H100_NVLINK_80GB")), True, [], {COREWEAVE},
                 COREWEAVE, id="coreweave-narrowed-in-its-own-scheme"),
    pytest.param(pod(*BIG, **affinity(COREWEAVE, "Tesla_V100_NVLINK")), False, ["model-does-not-fit"], {COREWEAVE},
                 None, id="coreweave-v100-70b-refused"),
    pytest.param(pod(*BIG, nodeSelector={COREWEAVE: "A40"}), True, [], {COREWEAVE}, None,
                 id="coreweave-unknown-value"),
    pytest.param(pod(*BIG, nodeSelector={VKE: "Tesla-V100"}), False, ["model-does-not-fit"], {VKE}, None,
                 id="vke-v100-70b-refused"),
    pytest.param(pod(*BIG, nodeSelector={VKE: "NVIDIA-L20"}), True, [], {VKE}, None, id="vke-l20-unknown-value"),
    pytest.param(pod(*BIG, **affinity(ACK, "Tesla-V100-SXM2-16GB")), False, ["model-does-not-fit"], {ACK}, None,
                 id="ack-v100-70b-refused"),
    pytest.param(pod(*BIG, nodeSelector={ACK: "NVIDIA-A10"}), True, [], {ACK}, None, id="ack-unknown-value"),
]


@pytest.mark.parametrize(("obj", "allowed", "codes", "keys", "placement_key"), CASES)
def test_a_pin_in_any_scheme_is_judged_and_never_doubled(obj: dict[str, Any], allowed: bool, codes: list[str],
                                                         keys: set[str], placement_key: str | None) -> None:
    r = one(obj)
    assert r.decision.allowed is allowed
    assert [v.code for v in r.decision.violations] == codes
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), list(r.patch))
    assert keys_pinned(patched) == keys  # never a second scheme beside the user's
    if "unknown" in str(obj["spec"]) or set(obj["spec"].get("nodeSelector", {}).values()) & UNKNOWN_VALUES:
        assert any(w.startswith("cannot tell which GPU") for w in r.decision.warnings), r.decision.warnings
    assert (r.decision.placement.label_key if r.decision.placement else None) == placement_key


def test_narrowing_keeps_only_the_fitting_value_in_the_same_scheme() -> None:
    obj = pod(*BIG, **affinity(GKE, "nvidia-l4", "nvidia-h100-80gb"))
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), list(one(obj).patch))
    exprs = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": GKE, "operator": "In", "values": ["nvidia-h100-80gb"]} in exprs
    assert one(patched).patch == ()  # idempotent


def test_a_refusal_offers_values_of_the_users_scheme() -> None:
    (v,) = one(pod(*BIG, nodeSelector={GKE: "nvidia-l4"})).decision.violations
    assert f"does not fit the pinned {GKE} [nvidia-l4]" in v.message and "nvidia-h100-80gb" in v.message
    assert "NVIDIA-" not in v.message.split("it fits")[-1]  # no GFD spellings offered
    assert v.path == "/spec/nodeSelector"
    fixed = pod(*BIG, nodeSelector={GKE: "nvidia-h100-80gb"})
    assert one(fixed).decision.allowed  # following the advice passes


@pytest.mark.parametrize(("key", "wrong", "offered", "foreign"), [
    pytest.param(COREWEAVE, "Tesla_V100_NVLINK", ["A100_NVLINK_80GB", "H100_NVLINK_80GB"],
                 ["NVIDIA-", "nvidia-h100"], id="coreweave"),
    pytest.param(VKE, "Tesla-V100", [], ["NVIDIA-", "_NVLINK"], id="vke-has-no-fitting-value"),
    pytest.param(ACK, "Tesla-V100-SXM2-16GB", [], ["NVIDIA-", "_NVLINK"], id="ack-has-no-fitting-value"),
])
def test_a_refusal_in_a_new_scheme_speaks_that_scheme(key: str, wrong: str, offered: list[str],
                                                      foreign: list[str]) -> None:
    """A 70B TP4 pod pinned to V100s is refused in the pin's own scheme: the values it could take are
    that scheme's (CoreWeave names the HGX A100s and H100), never another scheme's spelling; where the
    scheme names no fitting card (VKE, ACK list only V100s) the fix says how much memory it needs."""
    (v,) = one(pod(*BIG, **affinity(key, wrong))).decision.violations
    assert v.code == "model-does-not-fit" and f"does not fit the pinned {key} [{wrong}]" in v.message
    assert v.path.startswith("/spec/affinity")
    advice = v.message.split("it fits")[-1] if offered else v.fix
    for value in offered:
        assert value in advice, advice
    for spelling in foreign:
        assert spelling not in advice, advice
    if not offered:
        assert "it fits" not in v.message and "GiB per GPU" in v.fix


@pytest.mark.parametrize(("key", "value", "scheme", "products"), [
    pytest.param(COREWEAVE, "A100_NVLINK_80GB", "coreweave", ("A100-SXM4-80GB",), id="coreweave"),
    pytest.param(VKE, "Tesla-V100", "vke", ("V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIE-32GB"), id="vke-coarse"),
    pytest.param(ACK, "Tesla-V100-SXM2-16GB", "ack", ("V100-SXM2-16GB",), id="ack"),
])
def test_a_pin_in_a_new_scheme_is_read_as_its_products(key: str, value: str, scheme: str,
                                                       products: tuple[str, ...]) -> None:
    pin = pins.read_pin({"nodeSelector": {key: value}}, catalog=S.catalog, label_key=S.label_key,
                        scheme=S.label_scheme)
    assert (pin.kind, pin.scheme, pin.key, pin.values, pin.products) == (pins.FOREIGN, scheme, key, (value,), products)


@pytest.mark.parametrize(("key", "value"), [
    pytest.param(COREWEAVE, "RTX_A6000", id="coreweave-card-not-in-catalog"),
    pytest.param(VKE, "NVIDIA-L20", id="vke-l20"),
    pytest.param(ACK, "NVIDIA-L20", id="ack-l20"),
])
def test_an_unknown_value_of_a_new_scheme_is_unreadable_not_wrong(key: str, value: str) -> None:
    """As for GKE's ``nvidia-tesla-p4``: a value the catalog lacks is reported as unreadable (and
    warned about by the policy), never read as "no pin" and never refused."""
    pin = pins.read_pin({"nodeSelector": {key: value}}, catalog=S.catalog, label_key=S.label_key,
                        scheme=S.label_scheme)
    assert (pin.kind, pin.key, pin.values) == (pins.UNREADABLE, key, (value,))
    assert pins.warning(pin) == f"cannot tell which GPU {key}={value} is: give an inventory"


def test_a_policy_in_the_coreweave_scheme_places_in_it() -> None:
    """The scheme is a policy scheme too: ``productLabel: gpu.nvidia.com/class`` derives ``coreweave``
    and a 70B TP4 pod is pinned to the HGX values of its large-model tier."""
    cw = settings_mod.from_mapping({"productLabel": COREWEAVE})
    assert cw.label_scheme == "coreweave"
    (r,) = judge(pod(*BIG), cw)
    assert r.decision.allowed and r.decision.placement is not None
    assert r.decision.placement.label_key == COREWEAVE
    assert set(r.decision.placement.values) <= {"A100_NVLINK", "A100_NVLINK_80GB", "H100_NVLINK_80GB"}
    assert "H100_NVLINK_80GB" in r.decision.placement.values


def test_a_group_on_a_gke_cluster_uses_the_gke_key_as_topology() -> None:
    obj = pod(*BIG, labels={"jobset.sigs.k8s.io/jobset-name": "js"}, nodeSelector={GKE: "nvidia-h100-80gb"})
    assert one(obj).decision.group is not None
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), list(one(obj).patch))
    (term,) = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == GKE


def amd_pod(tp: str = "4") -> dict[str, Any]:
    obj = pod("meta-llama/Llama-3.1-70B-Instruct", 4, "--tensor-parallel-size", tp)
    obj["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": 4}}
    return obj


def test_amd_gpus_count_by_default_but_are_never_pinned_to_nvidia_products() -> None:
    """issue 15: pods asking for amd.com/gpu were not seen as GPU pods. They count now (parallelism is
    checked), but a GFD-scheme policy has no label AMD nodes carry: pinning nvidia.com/gpu.product
    would make them unschedulable, so they are not placed, and a warning says how to judge them."""
    r = one(amd_pod())
    assert r.profile.gpus_per_pod == 4 and r.decision.allowed and r.patch == () and r.decision.placement is None
    assert any("AMD GPUs are counted but not placed" in w for w in r.decision.warnings)
    assert [v.code for v in one(amd_pod("8")).decision.violations] == ["tp-exceeds-gpus"]


def test_amd_gpus_are_placed_by_a_policy_in_the_amd_scheme() -> None:
    amd = settings_mod.from_mapping({"productLabel": "amd.com/gpu.product-name", "tiers": [
        {"name": "hbm-nvlink", "description": "AMD Instinct", "multiGpu": True, "products": ["MI300X"]},
        {"name": "cost", "description": "none", "multiGpu": False, "products": ["MI300X"]}]})
    (r,) = judge(amd_pod(), amd)
    assert r.decision.allowed and r.decision.placement is not None
    assert r.decision.placement.label_key == "amd.com/gpu.product-name"
    assert r.decision.placement.values == ("AMD_Instinct_MI300X_OAM",)
