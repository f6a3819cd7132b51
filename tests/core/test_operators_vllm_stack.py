"""vLLM production-stack VLLMRuntime (issue 28): the pod the operator writes, its command line built as
``deploymentForVLLMRuntime`` / ``buildVLLMArgsForNode`` build it, single or prefill/decode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.operators import vllm_stack

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()


def runtime(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": vllm_stack.API_VERSION, "kind": "VLLMRuntime", "metadata": {"name": "r", "namespace": "n"},
            "spec": spec}


NODE = {"model": {"modelURL": "meta-llama/Llama-3.1-70B-Instruct", "dtype": "bfloat16"},
        "vllmConfig": {"tensorParallelSize": 4, "extraArgs": ["--enforce-eager"]},
        "deploymentConfig": {"replicas": 3, "resources": {"gpu": "4", "gpuType": "nvidia.com/gpu"}}}


@pytest.mark.parametrize(("model", "config", "args"), [
    pytest.param({"modelURL": "m"}, {}, ["m", "--host", "0.0.0.0", "--port", "8000", "--no-enable-chunked-prefill",
                                         "--no-enable-prefix-caching"], id="minimal"),
    pytest.param({"modelURL": "m", "enableLoRA": True, "maxModelLen": 4096, "dtype": "bfloat16", "maxNumSeqs": 32},
                 {"port": 9000, "enablePrefixCaching": True, "tensorParallelSize": 2, "gpuMemoryUtilization": "0.8",
                  "maxLoras": 4, "extraArgs": ["--disable-log-requests"]},
                 ["m", "--host", "0.0.0.0", "--port", "9000", "--enable-lora", "--no-enable-chunked-prefill",
                  "--enable-prefix-caching", "--max-model-len", "4096", "--dtype", "bfloat16",
                  "--tensor-parallel-size", "2", "--max-num-seqs", "32", "--gpu_memory_utilization", "0.8",
                  "--max_loras", "4", "--disable-log-requests"], id="every-flag"),
    pytest.param({"modelURL": "m"}, {"tensorParallelSize": 0}, ["m", "--host", "0.0.0.0", "--port", "8000",
                                                                "--no-enable-chunked-prefill",
                                                                "--no-enable-prefix-caching"], id="tp-0-omitted"),
])
def test_command_line(model: dict[str, Any], config: dict[str, Any], args: list[str]) -> None:
    assert vllm_stack.vllm_args(model, config) == args


def test_single_mode_pod() -> None:
    terms = [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]}]
    obj = runtime(**{**NODE, "deploymentConfig": {**NODE["deploymentConfig"], "nodeSelectorTerms": terms,
                                                  "toleration": [{"key": "gpu", "operator": "Exists"}]}})
    found = operators.templates(obj)
    assert [(f.path, f.role, f.pods, f.group, f.synthesized, f.notes) for f in found] == [
        ((), "vllm", 3, 1, True, ())]
    pod = found[0].holder["spec"]
    assert pod["containers"][0]["command"] == ["/opt/venv/bin/vllm", "serve"]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms
    r = judge(obj, S)[0]
    assert (r.profile.model, r.profile.tensor_parallel, r.profile.gpus_per_pod, r.profile.pods) == (
        "meta-llama/Llama-3.1-70B-Instruct", 4, 4, 1)
    assert r.patch == ()


def test_unpinned_single_mode_names_where_the_pin_goes() -> None:
    found = operators.templates(runtime(**NODE))
    assert any("nodeSelectorTerms" in n for n in found[0].notes)


def test_prefill_decode_topology() -> None:
    obj = runtime(enablePDDisaggregation=True, topology={"prefill": NODE, "decode": {
        **NODE, "deploymentConfig": {"replicas": 1, "resources": {"gpu": "2"}}}})
    found = operators.templates(obj)
    assert [(f.path, f.role, f.pods, f.group) for f in found] == [
        (("spec", "topology", "prefill"), "prefill", 3, 1), (("spec", "topology", "decode"), "decode", 1, 1)]
    assert all("affinity" not in f.holder["spec"] for f in found)
    assert [(r.profile.gpus_per_pod, r.profile.tensor_parallel) for r in judge(obj, S)] == [(4, 4), (2, 4)]


@pytest.mark.parametrize(("gpu", "limits", "note"), [
    pytest.param("1", {"nvidia.com/gpu": "1"}, None, id="one"),
    pytest.param(None, None, None, id="none"),
    pytest.param("0.5", None, "not a whole number", id="fraction"),
])
def test_gpu_request(gpu: Any, limits: Any, note: str | None) -> None:
    resources = {} if gpu is None else {"gpu": gpu}
    found = operators.templates(runtime(model={"modelURL": "m"}, deploymentConfig={"resources": resources}))
    container = found[0].holder["spec"]["containers"][0]
    assert mapping_or_none(container.get("resources"), "limits") == limits
    assert (note is None) == (not any("whole number" in n for n in found[0].notes))


def mapping_or_none(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def test_example_is_read() -> None:
    obj = yaml.safe_load((ROOT / "examples" / "vllmruntime-llama-3.1-8b-tp2.yaml").read_text())
    r = judge(obj, S)[0]
    assert (r.profile.model, r.profile.tensor_parallel, r.profile.gpus_per_pod) == ("meta-llama/Llama-3.1-8B-Instruct", 2, 2)


@pytest.mark.parametrize("spec", [None, "x", {"deploymentConfig": "x", "model": 3, "vllmConfig": []},
                                  {"enablePDDisaggregation": True, "topology": {"prefill": "x", "decode": None}},
                                  {"vllmConfig": {"port": "-1", "extraArgs": [1, None, "--x"], "env": ["a", {}]}}])
def test_hostile_shapes_never_raise(spec: Any) -> None:
    judge(runtime() | {"spec": spec}, S)
