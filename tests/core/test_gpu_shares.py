"""Issue 28: GPU requests in other forms (webhook/core/gpu_shares.py), never passed in silence.

A MIG slice under the device plugin's mixed strategy (``nvidia.com/mig-3g.40gb``) and a KAI Scheduler
shared GPU (annotations ``gpu-fraction`` / ``gpu-memory``) request no ``nvidia.com/gpu``: the GPU
count is 0. Each pod here must come back as exactly one result, admitted, unpinned, with a warning
that says what was seen and what was and was not judged (never the generic not-judged result)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.judging import judge
from webhook.core import engine, gpu_shares, pins, settings as settings_mod

S = settings_mod.default()
QWEN_7B = "Qwen/Qwen2.5-7B-Instruct"
QWEN_1_5B = "Qwen/Qwen2.5-1.5B-Instruct"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def server(model: str, *flags: str, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "server", "image": "vllm/vllm-openai:v0.10.1",
                         "command": ["vllm", "serve", model, *flags]}
    if limits is not None:
        c["resources"] = {"limits": limits}
    return c


def pod(container: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ai"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def deployment(container: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {
                "metadata": {"labels": {"app": "d"}, "annotations": annotations}, "spec": {"containers": [container]}}}}


@dataclass(frozen=True)
class Case:
    obj: dict[str, Any]
    said: tuple[str, ...]
    """Fragments the warnings must hold, each in some warning."""
    not_said: tuple[str, ...] = ()


MIG = "nvidia.com/mig-3g.40gb"
A100_H100_80 = "a slice of A100-SXM4-80GB or A100-PCIE-80GB or H100-SXM5-80GB or H100-PCIE-80GB"

CASES = [
    pytest.param(Case(pod(server(QWEN_7B, limits={MIG: 1})),
                      (f"MIG: 1 x {MIG} ({A100_H100_80}, 40 GB each)", "no product pin added",
                       "on the 3g.40gb slice: fits"), ("does not fit", "NVLink")),
                 id="mig-7b-on-3g.40gb-fits"),
    pytest.param(Case(pod(server(LLAMA_70B, limits={MIG: 1})), ("on the 3g.40gb slice: does not fit",)),
                 id="mig-70b-on-3g.40gb-does-not-fit"),
    pytest.param(Case(pod(server(QWEN_1_5B, limits={"nvidia.com/mig-1g.5gb": "1"})),
                      ("(a slice of A100-SXM4-40GB or A100-PCIE-40GB, 5 GB each)",)),
                 id="mig-1g.5gb-implies-a100-40gb"),
    pytest.param(Case(pod(server(QWEN_1_5B, limits={"nvidia.com/mig-1g.18gb": 1})),
                      ("a MIG slice of a GPU the catalog has no profile for, 18 GB each", "1g.18gb slice: fits")),
                 id="mig-profile-without-catalog-product-still-sized"),
    pytest.param(Case(pod(server(QWEN_7B, "--tensor-parallel-size", "2", limits={MIG: 2})),
                      ("2-way parallelism over 3g.40gb slices has no NVLink or GPU peer-to-peer",)),
                 id="mig-tp2-over-two-slices-has-no-nvlink"),
    pytest.param(Case(pod(server(QWEN_7B, "--tensor-parallel-size", "4", limits={MIG: 2})),
                      ("the launch states 4 GPUs per pod but the pod gets 2 3g.40gb slice(s): cannot work",)),
                 id="mig-tp4-over-two-slices-cannot-work"),
    pytest.param(Case(pod({"name": "job", "image": "acme/trainer:1", "command": ["python", "train.py"],
                           "resources": {"requests": {MIG: "1"}, "limits": {MIG: "1"}}}),
                      (f"MIG: 1 x {MIG}", "model size unknown: fit not judged")),
                 id="mig-unknown-model-said-unsized"),
    pytest.param(Case(pod(server(QWEN_7B), {"gpu-fraction": "0.5"}),
                      ("GPU sharing (KAI Scheduler annotations): gpu-fraction=0.5 of a GPU, "
                       "no nvidia.com/gpu requested",
                       "as single-GPU work on a shared device", "fit not judged")),
                 id="kai-fraction-said"),
    pytest.param(Case(pod(server(QWEN_7B), {"gpu-memory": "2000"}),
                      ("gpu-memory=2000 MiB", "on the 2000 MiB share: does not fit")),
                 id="kai-memory-too-small"),
    pytest.param(Case(pod(server(QWEN_1_5B), {"gpu-memory": "40000"}), ("on the 40000 MiB share: fits",)),
                 id="kai-memory-fits"),
    pytest.param(Case(pod(server(QWEN_7B, "--tensor-parallel-size", "2"), {"gpu-fraction": "0.5"}),
                      ("the launch states 2 GPUs per pod but the pod gets a share of 1 device(s): cannot work",)),
                 id="kai-fraction-tp2-cannot-work"),
    pytest.param(Case(pod(server(QWEN_7B, "--tensor-parallel-size", "2"),
                          {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}),
                      ("on each of 2 devices", "shares of 2 devices: multi-GPU placement"), ("cannot work",)),
                 id="kai-fraction-two-devices-not-placed"),
    pytest.param(Case(pod(server(QWEN_7B), {"gpu-fraction": "half"}),
                      ("GPU sharing: gpu-fraction='half' is not a fraction of a GPU",)),
                 id="kai-fraction-not-a-number-said"),
    pytest.param(Case(deployment(server(QWEN_7B), {"gpu-fraction": "0.25"}), ("gpu-fraction=0.25 of a GPU",)),
                 id="kai-fraction-on-a-deployment-template"),
]


def claiming(obj: dict[str, Any], **claims: str) -> dict[str, Any]:
    """``obj``'s pod spec with ``spec.resourceClaims`` (name -> ResourceClaimTemplate), each named in
    the first container's ``resources.claims``."""
    spec = obj["spec"]
    spec["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": t} for n, t in claims.items()]
    spec["containers"][0].setdefault("resources", {})["claims"] = [{"name": n} for n in claims]
    return obj


CASES += [
    pytest.param(Case(claiming(pod(server(LLAMA_70B, "--tensor-parallel-size", "4")), gpus="four-gpus"),
                      ("DRA: Llama-3.1-70B-Instruct (70.6B) at TP4 with no nvidia.com/gpu",
                       "ResourceClaims [gpus (template four-gpus)]", "dra-missing-product-constraint",
                       "fit and the pod's tier are not judged, no pin added")),
                 id="dra-gpus-from-a-claim-template-said"),
]


@pytest.mark.parametrize("case", CASES)
def test_other_gpu_forms_are_judged_and_said(case: Case) -> None:
    (r,) = judge(case.obj, S)  # one result: never the generic not-judged one beside it
    assert r.template.found != "unjudged" and r.profile.gpus_per_pod == 0
    assert r.decision.allowed and not r.patch and r.decision.placement is None
    warnings = r.decision.warnings
    for fragment in case.said:
        assert any(fragment in w for w in warnings), (fragment, warnings)
    for fragment in case.not_said:
        assert not any(fragment in w for w in warnings), (fragment, warnings)
    assert set(r.template.notes) <= set(warnings)  # notes: what the server's reply carries for a 0-GPU pod


@pytest.mark.parametrize(("policy", "obj", "gpus", "mig_said"), [
    pytest.param({"gpuResources": ["nvidia.com/gpu", MIG]}, pod(server(QWEN_7B, limits={MIG: 1})), 1, False,
                 id="policy-counts-the-mig-resource-as-gpus"),
    pytest.param({}, pod(server(QWEN_7B, limits={"nvidia.com/gpu": 1}), {"gpu-fraction": "0.5"}), 1, False,
                 id="whole-gpu-request-wins-over-the-annotation"),
    pytest.param({}, pod(server(QWEN_7B, limits={MIG: 0})), 0, False, id="zero-slices-is-no-request"),
    pytest.param({}, pod(server(QWEN_7B, limits={MIG: 1})), 0, True, id="mixed-strategy-slice"),
])
def test_only_uncounted_requests_are_said(policy: dict[str, Any], obj: dict[str, Any], gpus: int,
                                          mig_said: bool) -> None:
    results = judge(obj, settings_mod.from_mapping(policy) if policy else S)
    assert [r.profile.gpus_per_pod for r in results] == [gpus]
    said = [w for r in results for w in r.decision.warnings if w.startswith(("MIG:", "GPU sharing"))]
    assert bool(said) is mig_said, said


@pytest.mark.parametrize(("obj", "gpus", "said"), [
    pytest.param(claiming(pod(server(QWEN_7B, limits={"nvidia.com/gpu": 4})), imex="imex-channel-0"), 4,
                 "DRA: besides 4 GPU(s) the pod claims devices through ResourceClaims [imex (template "
                 "imex-channel-0)]: not judged here", id="imex-channel-beside-gpus-said"),
    pytest.param(claiming(pod({"name": "app", "image": "acme/api:1", "command": ["./serve"]}), nic="rdma-nic"), 0,
                 None, id="claim-without-gpu-work-not-said"),
    pytest.param(pod(server(QWEN_7B, limits={"nvidia.com/gpu": 1})), 1, None, id="no-claims-nothing-said"),
])
def test_dra_claims_on_the_pod_are_said_where_they_may_be_gpus(obj: dict[str, Any], gpus: int,
                                                              said: str | None) -> None:
    """A claim beside counted GPUs is said (not judged); a claim on a pod with no sign of GPU work
    is not (most DRA devices are not GPUs); the GPU count and its pin are unchanged."""
    (r,) = judge(obj, S)
    assert r.profile.gpus_per_pod == gpus
    dra_said = [w for w in r.decision.warnings if w.startswith("DRA:")]
    if said is None:
        assert dra_said == []
    else:
        assert len(dra_said) == 1 and said in dra_said[0], dra_said
    if gpus:
        assert r.decision.placement is not None


@pytest.mark.parametrize(("obj", "where"), [
    pytest.param({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
                  "spec": {"slices": {"resources": {MIG: 2}}}}, f"/spec/slices/resources/{MIG.replace('/', '~1')}",
                 id="mig-in-an-unknown-kind"),
])
def test_mig_outside_any_pod_template_is_not_judged_and_said(obj: dict[str, Any], where: str) -> None:
    (r,) = judge(obj, S)
    assert r.template.found == "unjudged"
    assert any(w.startswith(engine.NOT_JUDGED) and where in w for w in r.decision.warnings), r.decision.warnings


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"containers": [{"resources": {"limits": {MIG: 2}}}]}, [(MIG, "3g.40gb", 3, 40, 2)], id="limits"),
    pytest.param({"containers": [{"resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}},
                                 {"resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]},
                 [("nvidia.com/mig-1g.10gb", "1g.10gb", 1, 10, 2)], id="summed-over-containers"),
    pytest.param({"initContainers": [{"resources": {"limits": {MIG: 1}}}], "containers": [{}]},
                 [(MIG, "3g.40gb", 3, 40, 1)], id="init-container"),
    pytest.param({"containers": [{"resources": {"limits": {"nvidia.com/mig-foo": 1, "nvidia.com/gpu": 1}}}]}, [],
                 id="not-a-mig-profile-name"),
])
def test_mig_slices_are_read_as_kubernetes_counts_them(spec: dict[str, Any], expected: list[tuple[Any, ...]]) -> None:
    got = gpu_shares.mig_slices(spec, "/spec", ("nvidia.com/gpu",))
    assert [(s.resource, s.profile, s.compute, s.memory_gb, s.count) for s in got] == expected


@pytest.mark.parametrize(("annotations", "expected"), [
    pytest.param({}, None, id="no-annotation"),
    pytest.param({"gpu-fraction": "0.5"}, (0.5, None, 1, 0), id="fraction"),
    pytest.param({"gpu-memory": "2000"}, (None, 2000, 1, 0), id="memory-mib"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "4"}, (0.5, None, 4, 0), id="devices"),
    pytest.param({"gpu-fraction": "1.5"}, (None, None, 1, 1), id="fraction-above-one"),
    pytest.param({"gpu-memory": "2Gi"}, (None, None, 1, 1), id="memory-with-a-unit"),
    pytest.param({"gpu-fraction": "\uff10.\uff15"}, (None, None, 1, 1), id="fullwidth-digits-are-no-fraction"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, (0.5, None, 1, 1), id="zero-devices"),
    pytest.param({"gpu-fraction-num-devices": "2"}, None, id="devices-alone-asks-nothing"),
])
def test_shared_gpu_annotations(annotations: dict[str, str], expected: tuple[Any, ...] | None) -> None:
    got = gpu_shares.shared_gpu(annotations)
    assert (None if got is None else (got.fraction, got.memory_mib, got.devices, len(got.problems))) == expected


TORCHRUN = {"name": "trainer", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
            "command": ["torchrun", "--nproc-per-node", "8", "train.py"],
            "resources": {"limits": {"nvidia.com/gpu": ""}}}


@pytest.mark.parametrize(("container", "stated"), [
    pytest.param(TORCHRUN, "torchrun in trainer at /spec states 8 GPU(s) per pod", id="torchrun-nproc-per-node"),
    pytest.param({**TORCHRUN, "command": ["torchrun", "--nproc_per_node=8", "train.py"]},
                 "torchrun in trainer at /spec states 8 GPU(s) per pod", id="torchrun-nproc_per_node"),
    pytest.param({**TORCHRUN, "command": ["python", "train.py"]}, None, id="no-launcher-states-nothing"),
])
def test_a_templated_gpu_quantity_keeps_what_the_launcher_states(container: dict[str, Any],
                                                                 stated: str | None) -> None:
    obj = pod(container)
    assert gpu_shares.launcher_statements(obj) == ((stated,) if stated else ())
    result = engine.templated(obj, "", (), "enforce")
    assert (stated in result.template.notes) if stated else not result.template.notes


@pytest.mark.parametrize(("value", "product"), [
    pytest.param("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-SXM4-40GB", id="single-strategy-a100-40gb"),
    pytest.param("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", "H100-SXM5-80GB", id="single-strategy-h100"),
])
def test_a_pin_on_a_mig_product_value_reads_the_base_product(value: str, product: str) -> None:
    spec = {"nodeSelector": {S.label_key: value}, "containers": [{}]}
    pin = pins.read_pin(spec, catalog=S.catalog, label_key=S.label_key, scheme=S.label_scheme)
    assert (pin.kind, pin.products, pin.unknown) == (pins.POLICY, (product,), ())
