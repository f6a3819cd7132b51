"""Issue 28: a model named only by the object. When nothing in a GPU pod names its model, a
well-known label of the pod template or the object's own name that names a catalog model (or
states a size) gives the size, with a note saying where it came from and how to state it; it never
overrides a model the pod names, a size the user annotates, or a controller-made pod's per-copy name.
Also the ``gpu-admission.io/pipeline-parallel`` annotation the Ray readers use."""

from __future__ import annotations

from typing import Any

import pytest

from tests.judging import judge
from webhook.core import models, object_names, settings as settings_mod

S = settings_mod.default()
CUSTOM = "registry.example.com/team/custom-server:1.4"


def size(model_id: str) -> float:
    """The catalog's size of `model_id`: a name hint must size a model as its own id would."""
    info = models.describe(model_id)
    assert info is not None and info.source == "catalog"
    return round(info.params_b, 2)


def deployment(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               command: list[str] | None = None, gpus: str | None = "1", env: list[dict[str, Any]] | None = None,
               kind: str = "Deployment") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "server", "image": CUSTOM}
    if command is not None:
        container["command"] = command
    if env is not None:
        container["env"] = env
    if gpus is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    meta: dict[str, Any] = {"labels": labels or {}, **({"annotations": annotations} if annotations else {})}
    template: dict[str, Any] = {"metadata": meta, "spec": {"containers": [container]}}
    if kind == "Job":
        template["spec"]["restartPolicy"] = "Never"
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "template": template}}


def pod(name: str, *, owned: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "server", "image": CUSTOM,
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


GEMMA_9B, GEMMA_2B = size("google/gemma-2-9b-it"), size("google/gemma-2-2b-it")
LLAMA_70B, MISTRAL_7B = size("meta-llama/Llama-3.1-70B-Instruct"), size("mistralai/Mistral-7B-Instruct-v0.3")
JOB_OWNER = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]
NAME, HIDDEN = "the object's name", [{"name": "MODEL", "valueFrom": {"secretKeyRef": {"name": "s", "key": "m"}}}]

# object, the profile's (model, params_b), where the note says the suggestion comes from (None: no
# suggestion). A name only suggests: it never sizes or places the pod (a name says neither the
# precision nor the split: an AWQ llama-3-70b image on one L4 would otherwise be pinned to B200)
CASES = [
    pytest.param(deployment("gemma-2-9b-it-server"), (None, None), NAME, id="object-name-catalog"),
    pytest.param(deployment("vllm-qwen2.5-32b"), (None, None), NAME, id="object-name-size"),
    pytest.param(deployment("inference", labels={"app": "llama-3-70b"}), (None, None), "label app",
                 id="app-label"),
    pytest.param(deployment("llama-3-70b", labels={"ai.gke.io/model": "gemma-2-2b-it", "app": "llama-3-70b"}),
                 (None, None), "label ai.gke.io/model", id="gke-model-label-first"),
    pytest.param(deployment("server", labels={"app.kubernetes.io/name": "mistral-7b-instruct"}),
                 (None, None), "label app.kubernetes.io/name", id="recommended-name-label"),
    pytest.param(pod("mistral-7b-instruct"), (None, None), NAME, id="bare-pod-name"),
    pytest.param(deployment("llama-3-70b", command=["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]),
                 ("Qwen/Qwen2.5-7B-Instruct", size("Qwen/Qwen2.5-7B-Instruct")), None, id="a-named-model-wins"),
    pytest.param(deployment("llama-3-70b", annotations={"gpu-admission.io/params": "13B"}), (None, 13.0), None,
                 id="a-declared-size-wins"),
    pytest.param(deployment("llama-3-70b", command=["vllm", "serve", "$(MODEL)"], env=HIDDEN),
                 (None, None), NAME, id="hidden-model-is-only-suggested"),
    pytest.param(pod("llama-3-70b-7d9f8b6c4-x2x4q", owned=True), (None, None), None,
                 id="controller-made-pod-name-not-read"),
    pytest.param(deployment("llama-3-70b", gpus=None), (None, None), None, id="cpu-pod"),
    pytest.param(deployment("llama-3-8b-finetune", command=["torchrun", "--nproc-per-node=1", "train.py"],
                            kind="Job"), (None, None), None, id="training-launch-not-hinted"),
    pytest.param(deployment("llama-3-70b", kind="Job"), (None, None), None, id="job-named-after-a-model"),
    pytest.param(dict(pod("p"), metadata={"name": "p", "labels": {"app": "llama-3-70b"}, "ownerReferences": JOB_OWNER}),
                 (None, None), None, id="job-pod-label-not-read"),
    pytest.param(deployment("my-server", labels={"app": "frontend"}), (None, None), None, id="no-size-in-names"),
    pytest.param(deployment("llama-3-70b", gpus="8"), (None, None), NAME, id="unstated-split-suggested"),
    pytest.param(deployment("llama-3-70b", gpus="8", annotations={"gpu-admission.io/tensor-parallel": "8"}),
                 (None, None), NAME, id="stated-split-suggested"),
    pytest.param(deployment("llama-3-70b", gpus="4", command=["vllm", "serve", "$(MODEL)", "-tp", "4"], env=HIDDEN),
                 (None, None), NAME, id="launch-split-suggested"),
]


@pytest.mark.parametrize(("obj", "expected", "source"), CASES)
def test_model_named_by_the_object(obj: dict[str, Any], expected: tuple[Any, ...], source: str | None) -> None:
    (r,) = judge(obj, S)
    params = round(r.profile.params_b, 2) if r.profile.params_b is not None else None
    assert (r.profile.model, params) == expected
    hinted = [w for w in r.decision.warnings if "suggests a" in w]
    if source is None:
        assert not hinted
    else:
        assert len(hinted) == 1 and hinted[0].startswith(source) and "gpu-admission.io/model" in hinted[0]
        assert "not used to size or place" in hinted[0]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param({"kind": "Deployment", "metadata": {"name": "a"}}, ("a", False), id="deployment"),
    pytest.param({"kind": "Pod", "metadata": {"name": "a"}}, ("a", False), id="bare-pod"),
    pytest.param({"kind": "Pod", "metadata": {"name": "a", "ownerReferences": [{"kind": "ReplicaSet"}]}},
                 (None, False), id="owned-pod"),
    pytest.param({"kind": "Pod", "metadata": {"name": "a", "ownerReferences": JOB_OWNER}}, (None, True), id="job-pod"),
    pytest.param({"kind": "PyTorchJob", "metadata": {"name": "a"}}, ("a", True), id="training-job"),
    pytest.param({"kind": "Deployment", "metadata": {"generateName": "a-"}}, (None, False), id="generate-name-only"),
    pytest.param({"kind": "Deployment", "metadata": {"name": "x" * 254}}, (None, False), id="over-long"),
    pytest.param({"kind": "Deployment", "metadata": "nope"}, (None, False), id="malformed-metadata"),
    pytest.param([], (None, False), id="not-an-object"),
])
def test_holder(obj: Any, expected: tuple[str | None, bool]) -> None:
    held = object_names.holder(obj)
    assert (held.name, held.job) == expected


@pytest.mark.parametrize(("annotations", "expected", "problem"), [
    pytest.param({"gpu-admission.io/tensor-parallel": "4", "gpu-admission.io/pipeline-parallel": "2"}, (4, 2, 8), False,
                 id="tp-and-pp"),
    pytest.param({"gpu-admission.io/tensor-parallel": "4", "gpu-admission.io/pipeline-parallel": "two"}, (4, None, 4),
                 True, id="pp-not-a-count"),
    pytest.param({"gpu-admission.io/pipeline-parallel": "0"}, (None, None, None), True, id="pp-zero"),
])
def test_pipeline_parallel_annotation(annotations: dict[str, str], expected: tuple[Any, ...], problem: bool) -> None:
    obj = deployment("server", annotations={"gpu-admission.io/model": "meta-llama/Llama-3.1-70B-Instruct",
                                            **annotations}, gpus="8")
    (r,) = judge(obj, S)
    assert (r.profile.tensor_parallel, r.profile.pipeline_parallel, r.profile.gpus_used) == expected
    codes = [v.path for v in r.decision.violations if v.code == "invalid-annotation"]
    assert (codes == ["/spec/template/metadata/annotations/gpu-admission.io~1pipeline-parallel"]) == problem


def test_an_unused_hint_is_said() -> None:
    (r,) = judge(deployment("mixtral-8x22b-instruct-server", gpus="8"), S)
    assert r.profile.model is None and r.decision.allowed
    said = [w for w in r.decision.warnings if "suggests a" in w]
    assert len(said) == 1 and "8 GPUs" in said[0] and "gpu-admission.io/model" in said[0]


def test_a_name_never_places_a_quantized_image() -> None:
    """An image of an AWQ 70B on one GPU, named after the model: the pod is not pinned to the cards
    that hold the bf16 weights, only told how to state its model."""
    obj = deployment("llama-3-70b")  # CUSTOM: an image that names no model
    (r,) = judge(obj, S)
    assert r.decision.allowed and r.patch == () and r.profile.params_b is None
