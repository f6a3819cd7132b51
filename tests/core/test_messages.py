"""Every answer tells the user exactly what to change (issue 15, point 5): for each violation code, a
case that produces it; the kubectl line (``code: fix``) fits 120 characters and names no placeholder;
the whole message names the numbers; and doing what the fix says makes the object pass."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from webhook.core import settings as settings_mod
from webhook.core.domain import Violation
from tests.judging import judge
from webhook.core.inventory import from_nodes
from webhook.core.fixes import FIX_BUDGET as WARNING_MAX_CHARS  # kubectl's 120: review.WARNING_MAX_CHARS

S = settings_mod.default()
KEY = "nvidia.com/gpu.product"
GKE = "cloud.google.com/gke-accelerator"
PLACEHOLDERS = re.compile(r"\[a fitting product\]|\[\]|None|\{|\}")


def pod(command: list[str], gpus: Any = 4, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ai"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    c = {"name": "c", "image": "vllm/vllm-openai:v0.10.1", "command": command,
         "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **spec}}


TP4 = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]
QWEN32_TP4 = ["vllm", "serve", "Qwen/Qwen2.5-32B-Instruct", "--tensor-parallel-size", "4"]
"""61 GiB of bf16 weights (more than one cost card holds) that fit 4x L4: the trap on GKE's labels."""
TRAIN = ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py", "--model_name_or_path=meta-llama/Llama-3.1-8B"]
TRAIN4 = ["torchrun", "--nproc-per-node=4", "train.py", "--model_name_or_path=meta-llama/Llama-3.1-8B"]


def affinity(key: str, *values: str) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}}


def offered(v: Violation) -> list[str]:
    """The values the fix offers (its bracketed list, without '+N more')."""
    inside = re.search(r"\[([^\]]*)\]", v.fix)
    assert inside, v.fix
    return [x for x in inside.group(1).split(", ") if not x.startswith("+")]


def node(name: str, product: str, gpus: int = 8) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {KEY: product, "nvidia.com/gpu.count": str(gpus)}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus)}}}


def inventory(*nodes: dict[str, Any]) -> Any:
    return from_nodes(nodes, label_key=KEY, scheme=S.label_scheme, catalog=S.catalog, gpu_resources=S.gpu_resources)


def strict(**doc: Any) -> settings_mod.Settings:
    import yaml
    return settings_mod.parse_text(yaml.safe_dump({"apiVersion": "gpu-admission.io/v1alpha1", "kind": "Policy", **doc}),
                                   source="test")


@dataclass(frozen=True)
class Case:
    obj: dict[str, Any]
    code: str
    follow: Callable[[dict[str, Any], Violation], dict[str, Any]]
    """The object after doing what the fix says."""
    kw: dict[str, Any]
    settings: settings_mod.Settings = S


def set_selector(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    obj["spec"]["nodeSelector"] = {KEY: offered(v)[0]}
    return obj


def remove_selector(obj: dict[str, Any], _v: Violation) -> dict[str, Any]:
    obj["spec"].pop("nodeSelector")
    return obj


def pin_affinity(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    obj["spec"].update(affinity(KEY, *offered(v)))
    return obj


def set_gke(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    obj["spec"]["nodeSelector"] = {GKE: offered(v)[0]}
    return obj


def request_more(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    wanted = re.match(r"request (\d+) ", v.fix)
    assert wanted, v.fix
    obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = int(wanted.group(1))
    return obj


def fix_annotation(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    obj["metadata"]["annotations"]["gpu-admission.io/tier"] = v.fix.rsplit(" ", 1)[-1].split(",")[0]
    return obj


def remove_node_name(obj: dict[str, Any], _v: Violation) -> dict[str, Any]:
    obj["spec"].pop("nodeName")
    return obj


MISPLACED_DENY = strict(misplaced="deny")
SMALL_FLEET = inventory(node("a1", "NVIDIA-A100-SXM4-80GB"), node("h1", "NVIDIA-H100-80GB-HBM3"))
BIG_FLEET = inventory(*(node(f"h{i}", "NVIDIA-H100-80GB-HBM3") for i in range(4)))
L40S_ONLY = inventory(node("l1", "NVIDIA-L40S"))
L40S_AND_H100 = inventory(node("l1", "NVIDIA-L40S"), node("h1", "NVIDIA-H100-80GB-HBM3"))

CASES = [
    pytest.param(Case(pod(TP4), "missing-homogeneous-selector", pin_affinity, {"mutate": False}), id="missing-selector"),
    # a misplacement with no inventory warns; under misplaced: deny its fix must work too
    pytest.param(Case(pod(TP4, nodeSelector={KEY: "NVIDIA-L40S"}), "tier-mismatch", set_selector, {}, MISPLACED_DENY),
                 id="tier-mismatch-node-selector-set"),
    pytest.param(Case(pod(TP4, nodeSelector={KEY: "NVIDIA-L40S"}), "tier-mismatch", remove_selector, {},
                      MISPLACED_DENY), id="tier-mismatch-node-selector-removed"),
    pytest.param(Case(pod(TP4, **affinity(KEY, "NVIDIA-L40S")), "tier-mismatch", pin_affinity, {}, MISPLACED_DENY),
                 id="tier-mismatch-affinity"),
    pytest.param(Case(pod(QWEN32_TP4, nodeSelector={GKE: "nvidia-l4"}), "tier-mismatch", set_gke, {}, MISPLACED_DENY),
                 id="tier-mismatch-gke-scheme"),
    pytest.param(Case(pod(TP4, nodeSelector={KEY: "NVIDIA-L4"}), "model-does-not-fit", set_selector, {}),
                 id="does-not-fit-pinned-node-selector"),
    pytest.param(Case(pod(TP4, nodeSelector={GKE: "nvidia-l4"}), "model-does-not-fit", set_gke, {}),
                 id="does-not-fit-pinned-gke-scheme"),
    pytest.param(Case(pod(TP4, nodeSelector={KEY: "NVIDIA-L40S"}), "tier-mismatch", set_selector,
                      {"inventory": L40S_AND_H100}), id="tier-mismatch-with-inventory"),
    pytest.param(Case(pod(TP4 + ["--pipeline-parallel-size", "2"]), "tp-exceeds-gpus", request_more, {}),
                 id="tp-exceeds-gpus"),
    pytest.param(Case(pod(TP4, annotations={"gpu-admission.io/tier": "nope"}), "invalid-annotation", fix_annotation,
                      {}), id="invalid-tier-annotation"),
    pytest.param(Case(pod(TP4, nodeName="gpu-node-1"), "missing-homogeneous-selector", remove_node_name, {}),
                 id="node-name"),
]


@pytest.mark.parametrize("case", CASES)
def test_each_code_says_what_to_change_and_the_change_works(case: Case) -> None:
    (r,) = judge(case.obj, case.settings, **case.kw)
    found = [v for v in r.decision.violations if v.code == case.code]
    assert found, r.decision.violations
    v = found[0]
    line = v.short()
    assert len(line) <= WARNING_MAX_CHARS, line
    assert "\n" not in line  # one line: kubectl shows it whole
    assert not PLACEHOLDERS.search(line), line
    assert not PLACEHOLDERS.search(v.message), v.message
    fixed = case.follow(copy.deepcopy(case.obj), v)
    (after,) = judge(fixed, case.settings, **case.kw)
    assert case.code not in [x.code for x in after.decision.violations], (line, after.decision.violations)


@pytest.mark.parametrize(("obj", "kw", "settings", "code"), [
    pytest.param(pod(TP4), {"inventory": L40S_ONLY},
                 strict(inventory={"absentTier": "deny"}), "tier-not-in-cluster", id="tier-not-in-cluster"),
    pytest.param(pod(TRAIN, 8, labels={"jobset.sigs.k8s.io/jobset-name": "js"}), {"inventory": SMALL_FLEET},
                 strict(inventory={"groupFit": "deny"}), "group-does-not-fit", id="group-does-not-fit"),
])
def test_capacity_codes_name_the_numbers_and_fit_a_line(obj: dict[str, Any], kw: dict[str, Any],
                                                        settings: settings_mod.Settings, code: str) -> None:
    (r,) = judge(obj, settings, **kw)
    (v,) = [v for v in r.decision.violations if v.code == code]
    assert len(v.short()) <= WARNING_MAX_CHARS and not PLACEHOLDERS.search(v.short())
    assert re.search(r"\d", v.message)  # measured: GPUs, pods, nodes
    if code == "group-does-not-fit":
        (after,) = judge(obj, settings, inventory=BIG_FLEET)  # what the fix says: nodes of one product
        assert code not in [x.code for x in after.decision.violations]


def test_the_tier_annotation_is_not_offered_for_the_trap() -> None:
    """A multi-GPU pod pinned to L40S: annotation gpu-admission.io/tier=cost would only move the trap,
    so the advice names NVLink GPUs, not the annotation."""
    (r,) = judge(pod(TP4, nodeSelector={KEY: "NVIDIA-L40S"}), S, inventory=L40S_AND_H100)
    (v,) = r.decision.violations
    assert v.trap and "gpu-admission.io/tier" not in v.message and "NVIDIA-H100-80GB-HBM3" in v.fix


def test_a_single_gpu_pod_on_a_premium_gpu_is_admitted_with_the_cheaper_fit() -> None:
    (r,) = judge(pod(["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"], 1, nodeSelector={KEY: "NVIDIA-H100-80GB-HBM3"}), S)
    assert r.decision.allowed and not r.decision.violations
    (v,) = r.decision.misplaced
    assert v.kind == "misplaced" and "fits one NVIDIA-L4" in v.fix and v.short() in r.decision.warnings
    assert len(v.short()) <= WARNING_MAX_CHARS
    (denied,) = judge(pod(["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"], 1,
                          nodeSelector={KEY: "NVIDIA-H100-80GB-HBM3"}), MISPLACED_DENY)
    assert not denied.decision.allowed and [x.code for x in denied.decision.violations] == ["tier-mismatch"]
    fixed = set_selector(pod(["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"], 1,
                             nodeSelector={KEY: "NVIDIA-H100-80GB-HBM3"}), v)
    (after,) = judge(fixed, MISPLACED_DENY)
    assert after.decision.allowed and not after.decision.misplaced


def set_tp_and_gpus(obj: dict[str, Any], v: Violation) -> dict[str, Any]:
    tp = re.search(r"raise TP to (\d+)", v.fix)
    assert tp, v.fix
    c = obj["spec"]["containers"][0]
    c["command"] = [*c["command"][:3], "--tensor-parallel-size", tp.group(1)]
    c["resources"]["limits"]["nvidia.com/gpu"] = int(tp.group(1))
    return obj


def whole_gpus(obj: dict[str, Any], _v: Violation) -> dict[str, Any]:
    obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 4
    return obj


def guaranteed(obj: dict[str, Any], _v: Violation) -> dict[str, Any]:
    obj["spec"]["containers"][0]["resources"]["limits"].update(cpu="32", memory="256Gi")
    return obj


MORE_CASES = [
    pytest.param(Case(pod(["vllm", "serve", "meta-llama/Llama-3.1-405B-Instruct", "--tensor-parallel-size", "2"], 2),
                      "model-does-not-fit", set_tp_and_gpus, {}), id="model-does-not-fit"),
    pytest.param(Case(pod(TP4, "4.5"), "invalid-gpu-request", whole_gpus, {}), id="invalid-gpu-request"),
    pytest.param(Case(pod(TRAIN4), "numa-unaligned", guaranteed, {}, strict(numa="deny")), id="numa-unaligned"),
]


@pytest.mark.parametrize("case", MORE_CASES)
def test_the_other_codes_too(case: Case) -> None:
    test_each_code_says_what_to_change_and_the_change_works(case)


def test_every_code_the_policy_can_give_is_in_a_table() -> None:
    """A new code without a row here would be a message nobody checked."""
    from webhook.core import rules

    codes = {v for k, v in vars(rules).items() if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z]+(-[a-z]+)+", v)}
    tested = {c.values[0].code for c in CASES + MORE_CASES} | {"tier-not-in-cluster", "group-does-not-fit"}
    assert codes <= tested, codes - tested


@pytest.mark.parametrize(("values", "budget", "expected"), [
    pytest.param(["A", "B"], 40, "A, B", id="all-fit"),
    pytest.param(["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"], 35,
                 "NVIDIA-A100-SXM4-80GB, +2 more", id="cut-with-count"),
    pytest.param(["NVIDIA-A100-SXM4-80GB"], 5, "NVIDIA-A100-SXM4-80GB", id="one-value-never-cut"),
    pytest.param([], 10, "", id="empty"),
])
def test_listed_never_cuts_a_value(values: list[str], budget: int, expected: str) -> None:
    from webhook.core.fixes import listed
    assert listed(values, budget) == expected


def test_fix_line_always_fits_with_its_code() -> None:
    from webhook.core.fixes import FIX_BUDGET, fix_line
    for n in range(0, 12):
        values = [f"NVIDIA-PRODUCT-{i:02d}-WITH-A-LONG-NAME" for i in range(n)]
        line = fix_line("tier-mismatch", "tier hbm-nvlink: drop nodeSelector nvidia.com/gpu.product or set one of ", values)
        assert len("tier-mismatch: " + line) <= FIX_BUDGET, line
