"""Issue 24: deny only what cannot work (or the seed's trap where the cluster offers the way out).

Table-driven over pods written here: each row says what the default policy answers offline and
against an inventory, which kind each finding is, and what ``misplaced: deny`` changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import settings as settings_mod, tiering
from webhook.core.domain import WorkloadProfile
from tests.judging import judge
from webhook.core.inventory import from_nodes

S = settings_mod.default()
DENY = settings_mod.from_mapping({"misplaced": "deny"})
KEY = "nvidia.com/gpu.product"
GKE = "cloud.google.com/gke-accelerator"
A100, L40S, L4, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"


def pod(model: str, gpus: int, *args: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ai"},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                     "command": ["vllm", "serve", model, *args],
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}], **spec}}


def nodes(*products: str) -> Any:
    objs = [{"metadata": {"name": f"n{i}", "labels": {KEY: p, "nvidia.com/gpu.count": "8"}},
             "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}
            for i, p in enumerate(products)]
    return from_nodes(objs, label_key=KEY, scheme=S.label_scheme, catalog=S.catalog, gpu_resources=S.gpu_resources)


LLAMA70_TP4_L40S = pod("meta-llama/Llama-3.1-70B-Instruct", 4, "--tensor-parallel-size", "4", nodeSelector={KEY: L40S})
GOOGLE_7B_TP2_L4 = pod("google/gemma-7b-it", 2, "--tensor-parallel-size", "2", nodeSelector={GKE: "nvidia-l4"})
SEVEN_B_ON_H100 = pod("mistralai/Mistral-7B-Instruct-v0.3", 1, nodeSelector={KEY: H100})

CASES = [
    # id, pod, inventory, allowed, denying codes, misplaced codes, trap
    ("trap-denied-when-the-cluster-has-nvlink", LLAMA70_TP4_L40S, nodes(A100, L40S), False, ["tier-mismatch"], [],
     True),
    ("trap-warned-when-the-cluster-has-only-l40s", LLAMA70_TP4_L40S, nodes(L40S), True, [], ["tier-mismatch"], False),
    ("trap-warned-offline", LLAMA70_TP4_L40S, None, True, [], ["tier-mismatch"], False),
    ("google-7b-tp2-l4-offline", GOOGLE_7B_TP2_L4, None, True, [], [], False),
    ("google-7b-tp2-l4-on-l4-nodes", pod("google/gemma-7b-it", 2, "--tensor-parallel-size", "2",
                                         nodeSelector={KEY: L4}), nodes(L4), True, [], [], False),
    ("7b-on-h100-is-a-cost-note", SEVEN_B_ON_H100, None, True, [], ["tier-mismatch"], False),
    ("70b-tp4-on-l4-cannot-work", pod("meta-llama/Llama-3.1-70B-Instruct", 4, "--tensor-parallel-size", "4",
                                      nodeSelector={KEY: L4}), None, False, ["model-does-not-fit"], [], False),
]


@pytest.mark.parametrize(("obj", "inventory", "allowed", "codes", "misplaced", "trap"),
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_verdict_and_kind(obj: dict[str, Any], inventory: Any, allowed: bool, codes: list[str], misplaced: list[str],
                          trap: bool) -> None:
    (r,) = judge(obj, S, inventory=inventory)
    d = r.decision
    assert d.allowed is allowed, d
    assert [v.code for v in d.violations] == codes
    assert [v.code for v in d.misplaced] == misplaced
    assert all(v.kind == "misplaced" for v in d.misplaced)
    assert any(v.trap for v in d.violations) is trap
    for v in (*d.violations, *d.misplaced):
        assert len(v.short()) <= 120, v.short()
        assert v.short() in d.warnings or v in d.violations
    if not misplaced:
        assert not any("(misplaced)" in w for w in d.warnings), d.warnings


@pytest.mark.parametrize(("inventory", "allowed"), [pytest.param(None, True, id="offline-warned"),
                                                   pytest.param(nodes(A100, L40S), False, id="nvlink-in-cluster-denied")])
def test_a_tier_annotation_that_sends_the_trap_to_pcie_is_judged_as_a_pin(inventory: Any, allowed: bool) -> None:
    obj = pod("meta-llama/Llama-3.1-70B-Instruct", 4, "--tensor-parallel-size", "4")
    obj["metadata"]["annotations"] = {"gpu-admission.io/tier": "cost"}
    (r,) = judge(obj, S, inventory=inventory)
    (v,) = (*r.decision.violations, *r.decision.misplaced)
    assert r.decision.allowed is allowed and v.trap is (not allowed)
    assert v.path == "/metadata/annotations/gpu-admission.io~1tier" and "remove annotation" in v.fix
    assert len(v.short()) <= 120, v.short()


def test_the_trap_names_the_way_out_and_the_numbers() -> None:
    (r,) = judge(LLAMA70_TP4_L40S, S, inventory=nodes(A100, L40S))
    (v,) = r.decision.violations
    assert v.kind == "misplaced" and v.trap and A100 in v.fix and "ms/token" in v.message
    assert v.public()["kind"] == "misplaced" and v.public()["trap"] is True


@pytest.mark.parametrize("obj", [pytest.param(SEVEN_B_ON_H100, id="7b-on-h100"),
                                 pytest.param(LLAMA70_TP4_L40S, id="trap-offline")])
def test_misplaced_deny_turns_every_misplacement_into_a_denial(obj: dict[str, Any]) -> None:
    (warned,) = judge(obj, S)
    (denied,) = judge(obj, DENY)
    assert warned.decision.allowed and warned.decision.misplaced
    assert not denied.decision.allowed and not denied.decision.misplaced
    assert [v.code for v in denied.decision.violations] == [v.code for v in warned.decision.misplaced]


def profile(params: float, gpus: int, *, dtype: str | None = None, quantization: str | None = None,
            role: str = "inference") -> WorkloadProfile:
    return WorkloadProfile(params_b=params, gpus_per_pod=gpus, tensor_parallel=gpus, dtype=dtype,
                           quantization=quantization, role=role)


@pytest.mark.parametrize(("p", "needs"), [
    pytest.param(profile(7.2, 2), False, id="7b-bf16-tp2"),
    pytest.param(profile(70.6, 2, quantization="nf4"), False, id="70b-nf4-tp2"),
    pytest.param(profile(46.7, 2, quantization="nf4"), False, id="mixtral-nf4-tp2"),
    pytest.param(profile(27.4, 8), True, id="27b-bf16-tp8"),
    pytest.param(profile(70.6, 4), True, id="70b-bf16-tp4"),
    pytest.param(profile(70.6, 2, quantization="fp8"), True, id="70b-fp8"),
    pytest.param(profile(1.5, 4, role="training"), False, id="ddp-1.5b"),
    pytest.param(profile(9.2, 4, role="training"), True, id="full-fine-tune-9b"),
    pytest.param(WorkloadProfile(gpus_per_pod=2), None, id="size-unknown"),
    pytest.param(profile(405, 1), False, id="one-gpu-needs-no-link"),
])
def test_where_the_nvlink_line_falls(p: WorkloadProfile, needs: bool | None) -> None:
    assert tiering.needs_nvlink(p, S) is needs


def test_multi_gpu_tier_override_keeps_the_old_rule() -> None:
    forced = settings_mod.from_mapping({"rules": {"multiGpuTier": "hbm-nvlink"}})
    small = profile(7.2, 2)
    assert tiering.multi_gpu_tier(small, S)[0] == "cost"
    assert tiering.multi_gpu_tier(small, forced)[0] == "hbm-nvlink"
    (r,) = judge(pod("google/gemma-7b-it", 2, "--tensor-parallel-size", "2"), S)
    assert r.decision.tier == "cost" and L4 in r.decision.placement.values


def test_an_unknown_group_size_is_not_one_pod() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Serving", "metadata": {"name": "s", "namespace": "ai"},
           "spec": {"template": {"spec": {"containers": [{
               "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
               "command": ["vllm", "serve", "meta-llama/Llama-3.1-405B-Instruct", "--tensor-parallel-size", "16"],
               "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}
    results = [r for r in judge(obj, S) if r.profile.gpus_per_pod]
    assert results and all(r.template.found == "generic" for r in results)
    assert all("tp-exceeds-gpus" not in [v.code for v in r.decision.violations] for r in results)
    assert any("spans pods?" in w for r in results for w in r.decision.warnings)


def test_a_pytorchjob_with_too_many_processes_per_pod_names_them() -> None:
    container = {"name": "pytorch", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                 "command": ["torchrun", "--nproc-per-node", "4", "train.py", "--model_name_or_path",
                             "Qwen/Qwen2.5-1.5B"],
                 "resources": {"limits": {"nvidia.com/gpu": 1}}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ai"},
           "spec": {"pytorchReplicaSpecs": {
               "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
               "Worker": {"replicas": 7, "template": {"spec": {"containers": [container]}}}}}}
    codes = [(v.code, v.message) for r in judge(job, S) for v in r.decision.violations]
    assert codes and all(c == "tp-exceeds-gpus" for c, _ in codes), codes
    assert all("4 processes per pod x 8 pods" in m and "1 nvidia.com/gpu" in m for _, m in codes), codes


@pytest.mark.parametrize(("gpus", "allowed", "codes"), [
    pytest.param(1, True, [], id="one-gpu-on-a-mig-slice-is-unreadable-not-wrong"),
    pytest.param(2, False, ["tier-mismatch"], id="tensor-parallel-over-mig-slices-cannot-work"),
])
def test_mig_slices(gpus: int, allowed: bool, codes: list[str]) -> None:
    args = ("--tensor-parallel-size", str(gpus)) if gpus > 1 else ()
    obj = pod("Qwen/Qwen2.5-1.5B-Instruct", gpus, *args, nodeSelector={KEY: "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"})
    (r,) = judge(obj, S)
    assert r.decision.allowed is allowed and [v.code for v in r.decision.violations] == codes
    assert allowed is any(w.startswith("cannot tell which GPU") for w in r.decision.warnings), r.decision.warnings
    assert not r.patch  # nothing is added beside the pin


def test_a_pin_with_a_value_the_catalog_does_not_know_keeps_it_and_says_so() -> None:
    obj = pod("google/gemma-7b-it", 1, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": KEY, "operator": "In", "values": [L4, "ACME-GPU-9"]}]}]}}})
    (r,) = judge(obj, S)
    assert r.decision.allowed and set(r.decision.placement.values) == {L4, "ACME-GPU-9"}
    assert any("ACME-GPU-9" in w and w.startswith("cannot tell which GPU") for w in r.decision.warnings)


@pytest.mark.parametrize(("p", "tier", "link"), [
    pytest.param(profile(7.2, 2), "tier cost", "PCIe is enough", id="small"),
    pytest.param(profile(27.4, 8), "tier hbm-nvlink", "needs NVLink", id="needs-nvlink"),
    pytest.param(WorkloadProfile(gpus_per_pod=2), "tier hbm-nvlink", "size unknown", id="unknown"),
])
def test_explain_prints_where_the_line_falls(p: WorkloadProfile, tier: str, link: str) -> None:
    line = tiering.placement_rule(p, S)
    assert line is not None and tier in line and link in line, line


@pytest.mark.parametrize(("p", "chosen", "line"), [
    pytest.param(profile(7.2, 1), "cost", "single-GPU work -> tier cost (rule: 7.2B, at most largeModelParamsB 30B)",
                 id="small-single-gpu"),
    pytest.param(profile(70.6, 1), "hbm-nvlink",
                 "single-GPU work -> tier hbm-nvlink (rule: over largeModelParamsB 30B)", id="big-single-gpu"),
    pytest.param(profile(24.0, 1), "hbm-nvlink", "single-GPU work -> tier cost (rule: 24B, at most largeModelParamsB "
                 "30B); moved up to tier hbm-nvlink: no product of cost fits", id="escalated"),
    pytest.param(WorkloadProfile(gpus_per_pod=1), None,
                 "single-GPU work -> not constrained (rule: a single-GPU pod of unknown size is not pinned)",
                 id="unknown-single-gpu"),
    pytest.param(WorkloadProfile(gpus_per_pod=1, kind="embedding"), "cost",
                 "single-GPU work -> tier cost (rule: embedding model, size unknown: small-model work)", id="embedding"),
    pytest.param(WorkloadProfile(gpus_per_pod=4, tier_override="cost"), "cost",
                 "tier cost (rule: the pod's annotation gpu-admission.io/tier)", id="annotation"),
    pytest.param(profile(70.6, 0), None, None, id="no-gpus"),
])
def test_explain_names_the_rule_that_chose_the_tier(p: WorkloadProfile, chosen: str | None, line: str | None) -> None:
    assert tiering.placement_rule(p, S, chosen) == line


@pytest.mark.parametrize(("model", "quant"), [
    pytest.param("gemma3:27b", "gguf-q4_k_m", id="library-default-tag"),
    pytest.param("llama3", "gguf-q4_k_m", id="latest"),
    pytest.param("llama3.1:70b-instruct-q8_0", "gguf-q8_0", id="named-q8"),
    pytest.param("gemma3:27b-it-fp16", None, id="named-fp16"),
    pytest.param("hf.co/bartowski/google_gemma-3-27b-it-GGUF:Q4_K_M", None, id="hugging-face-file-left-to-name-rules"),
])
def test_ollama_tags_name_what_they_pull(model: str, quant: str | None) -> None:
    from webhook.core.launchers.llm_servers import ollama_quantization
    assert ollama_quantization(model) == quant


def test_ollamas_default_27b_tag_on_one_l4_is_admitted() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "o", "namespace": "ai"},
           "spec": {"nodeSelector": {GKE: "nvidia-l4"}, "containers": [{
               "name": "ollama", "image": "ollama/ollama:0.6.5",
               "command": ["/bin/sh", "-c", "ollama serve & sleep 5; ollama pull gemma3:27b; wait"],
               "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    (r,) = judge(obj, S)
    assert r.profile.quantization == "gguf-q4_k_m" and r.decision.allowed and r.decision.tier == "cost", r.decision


def test_the_rule_line_names_the_annotation_inference_reads() -> None:
    from webhook.core import inference
    assert tiering.TIER_ANNOTATION == inference.TIER
