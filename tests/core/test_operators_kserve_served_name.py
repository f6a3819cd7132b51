"""Issue 28: an LLMInferenceService's ``spec.model.name`` is the name the model is served under
(``--served-model-name`` in KServe's presets), not the checkpoint. It sizes the pods only when
``spec.model.uri`` names no model the catalog or the name rules know (a ``pvc://`` claim, an
``s3://`` bucket, a path) and the name does, and a note then says the size comes from it."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import operators, settings as settings_mod
from webhook.core.operators import kserve
from tests.judging import judge

R1 = "deepseek-ai/DeepSeek-R1-0528"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def model(uri: str | None = None, name: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if uri is not None:
        out["uri"] = uri
    if name is not None:
        out["name"] = name
    return {"model": out}


SERVED = [
    pytest.param(model("pvc://llm-test-pvc-deepseek", R1), R1, "names no model", id="pvc-claim-names-no-model"),
    pytest.param(model("s3://bucket/weights", LLAMA), LLAMA, "names no model", id="s3-bucket-names-no-model"),
    pytest.param(model("/mnt/data/ckpt", LLAMA), LLAMA, "names no model", id="a-path-names-no-model"),
    pytest.param(model(None, LLAMA), LLAMA, "spec.model.uri is not set", id="no-uri"),
    pytest.param(model("hf://Qwen/Qwen2.5-7B-Instruct", LLAMA), "hf://Qwen/Qwen2.5-7B-Instruct", None,
                 id="hf-uri-is-the-checkpoint-whatever-the-name"),
    pytest.param(model("pvc://models/Meta-Llama-3.1-70B-Instruct", "llama"), "pvc://models/Meta-Llama-3.1-70B-Instruct",
                 None, id="pvc-path-that-names-a-model-wins"),
    pytest.param(model("pvc://llm-test-pvc-deepseek", "my-chat-model"), "pvc://llm-test-pvc-deepseek", None,
                 id="a-served-name-of-no-known-size-is-not-taken"),
    pytest.param(model("pvc://llm-test-pvc-deepseek"), "pvc://llm-test-pvc-deepseek", None, id="no-name"),
    pytest.param(model(None, None), "/mnt/models", None, id="neither"),
    pytest.param({"model": {"uri": 7, "name": ["x"]}}, "/mnt/models", None, id="not-strings"),
]


@pytest.mark.parametrize(("spec", "ref", "note"), SERVED)
def test_served_name_sizes_only_when_the_uri_names_no_model(spec: dict[str, Any], ref: str, note: str | None) -> None:
    got, said = kserve._served_model(spec, "svc")
    assert got == ref
    if note is None:
        assert said is None
    else:
        assert said is not None and note in said and "spec.model.name" in said and "--served-model-name" in said


def dp_ep(**model_spec: Any) -> dict[str, Any]:
    def pod() -> dict[str, Any]:
        return {"containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "r1"},
            "spec": {"model": model_spec, "replicas": 1,
                     "parallelism": {"data": 32, "dataLocal": 8, "expert": True, "tensor": 1},
                     "template": pod(), "worker": pod()}}


def test_the_served_name_sizes_leader_and_workers_with_a_note() -> None:
    results = judge(dp_ep(uri="pvc://llm-test-pvc-deepseek", name=R1), settings_mod.default())
    assert [r.template.role for r in results] == ["leader", "worker"]
    for r in results:
        assert r.profile.model == R1 and r.profile.params_b is not None and r.profile.params_b > 600
        assert (r.profile.gpus_per_pod, r.profile.pods) == (8, 4)
        assert any("the model size comes from spec.model.name" in n for n in r.template.notes)


def test_an_own_command_keeps_its_model_and_gets_no_note() -> None:
    obj = dp_ep(uri="pvc://llm-test-pvc-deepseek", name=R1)
    obj["spec"]["template"]["containers"][0]["command"] = ["vllm", "serve", "/mnt/models"]
    leader, worker = operators.templates(obj, {})
    assert leader.holder["containers"][0]["command"] == ["vllm", "serve", "/mnt/models"]
    assert not any("spec.model.name" in n for n in leader.notes)
    assert worker.holder["containers"][0]["command"] == ["vllm", "serve", R1]
    assert any("spec.model.name" in n for n in worker.notes)
