"""KServe: InferenceService predictors (model merged with its ServingRuntime, custom containers,
multi-node head + workers counted as KServe counts them) and LLMInferenceService workloads (single
node, LeaderWorkerSet of GetSize pods, prefill). Rows are the facts of public sample manifests
(tests/data/operators, each naming the source it describes), the shipped examples and inline objects; then the
upstream arithmetic as tables and hostile input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core import operators, settings as settings_mod, tiering
from tests.judging import judge
from webhook.core.operators import kserve
from webhook.core.workloads import WORKLOAD_KINDS, pod_templates

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "operators"
S = settings_mod.default()
ISVC_API, LLM_API = "serving.kserve.io/v1beta1", "serving.kserve.io/v1alpha2"


def first(path: Path) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d)


DOC_MULTINODE = first(DATA / "kserve-isvc-huggingface-multinode.yaml")
MULTINODE_RT = first(DATA / "kserve-runtime-huggingfaceserver-multinode.yaml")
LLAMA_1B = first(DATA / "kserve-isvc-huggingface-llama3-1b.yaml")
QWEN_SINGLE = first(DATA / "kserve-llmisvc-qwen2-7b-gpu-no-scheduler.yaml")
QWEN_DP = first(DATA / "kserve-llmisvc-dp-ep-qwen3-30b.yaml")
EXAMPLE_ISVC = first(ROOT / "examples" / "kserve-isvc-llama-70b-multinode.yaml")
EXAMPLE_LLM = first(ROOT / "examples" / "kserve-llmisvc-llama-70b-pipeline.yaml")
RT_CONTEXT = {("serving.kserve.io/ServingRuntime", "", "kserve-huggingfaceserver-multinode"): MULTINODE_RT}
"""As operators.context_of keys a runtime: by its group and kind (OME has a ServingRuntime too)."""


def gpus(n: int) -> dict[str, Any]:
    return {"requests": {"nvidia.com/gpu": str(n)}, "limits": {"nvidia.com/gpu": str(n)}}


def isvc(predictor: dict[str, Any], **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": ISVC_API, "kind": "InferenceService", "metadata": meta, "spec": {"predictor": predictor}}


def llm(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": LLM_API, "kind": "LLMInferenceService", "metadata": {"name": "l"},
            "spec": {"model": {"uri": "hf://meta-llama/Llama-3.1-70B-Instruct"}, **spec}}


def main(n: int) -> dict[str, Any]:
    return {"containers": [{"name": "main", "resources": gpus(n)}]}


CUSTOM = isvc({"minReplicas": 2, "containers": [
    {"name": "kserve-container", "image": "vllm/vllm-openai:v0.10.1",
     "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"], "resources": gpus(2)}]})
SHORTCUT = isvc({"huggingface": {"args": ["--model_id=Qwen/Qwen2.5-7B-Instruct"], "resources": gpus(1)}})
PREFILL = llm(replicas=1, parallelism={"tensor": 8}, template=main(8),
              prefill={"replicas": 2, "parallelism": {"tensor": 4, "pipeline": 2}, "template": main(4), "worker": main(4)})
WORKER_ONLY = llm(replicas=2, parallelism={"data": 4, "dataLocal": 2}, worker=main(2))

CASES = [
    # object, context, [(role, spec pointer, GPUs per pod, pods in the group)]
    pytest.param(DOC_MULTINODE, {}, [("leader", "/spec/predictor", 1, 2), ("worker", "/spec/predictor/workerSpec", 1, 2)],
                 id="doc-multinode-pp2-tp1-no-gpu-requests"),
    pytest.param(DOC_MULTINODE, RT_CONTEXT, [("leader", "/spec/predictor", 1, 2),
                                             ("worker", "/spec/predictor/workerSpec", 1, 2)],
                 id="doc-multinode-with-its-runtime"),
    pytest.param(EXAMPLE_ISVC, {}, [("leader", "/spec/predictor", 8, 2), ("worker", "/spec/predictor/workerSpec", 8, 2)],
                 id="example-70b-tp8-pp2"),
    pytest.param(LLAMA_1B, {}, [("predictor", "/spec/predictor", 1, 1)], id="model-single-node"),
    pytest.param(CUSTOM, {}, [("predictor", "/spec/predictor", 2, 1)], id="custom-containers-replicas-independent"),
    pytest.param(SHORTCUT, {}, [("predictor", "/spec/predictor", 1, 1)], id="framework-shortcut"),
    pytest.param(QWEN_SINGLE, {}, [("main", "/spec/template", 1, 1)], id="llmisvc-single-node-3-replicas"),
    pytest.param(QWEN_DP, {}, [("leader", "/spec/template", 8, 2), ("worker", "/spec/worker", 8, 2)],
                 id="llmisvc-dp16-dplocal8-lws-of-2"),
    pytest.param(EXAMPLE_LLM, {}, [("leader", "/spec/template", 4, 2), ("worker", "/spec/worker", 4, 2)],
                 id="example-llmisvc-pp2"),
    pytest.param(PREFILL, {}, [("main", "/spec/template", 8, 1), ("prefill-leader", "/spec/prefill/template", 4, 2),
                               ("prefill-worker", "/spec/prefill/worker", 4, 2)], id="llmisvc-prefill-lws"),
    pytest.param(WORKER_ONLY, {}, [("worker", "/spec/worker", 2, 2)], id="llmisvc-worker-serves-the-leader"),
]


@pytest.mark.parametrize(("obj", "context", "expected"), CASES)
def test_kserve_templates_and_groups(obj: dict[str, Any], context: dict[tuple[str, str, str], Any],
                                     expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S, context=context)
    got = [(r.template.role, r.template.spec_pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results]
    assert got == expected
    for r in results:
        assert r.template.pointer == "" and r.template.patchable  # PodSpecs written in place
        assert all(op["path"].startswith(r.template.spec_pointer + "/") for op in r.patch)
        if r.profile.gpus_per_pod > 0 and r.profile.pods > 1:
            assert r.decision.tier == tiering.multi_gpu_tier(r.profile, S)[0], r.template.role


@pytest.mark.parametrize(("obj", "role", "pods"), [
    pytest.param(EXAMPLE_ISVC, "worker", 1, id="isvc-workers-node-count-minus-one"),
    pytest.param(CUSTOM, "predictor", 2, id="isvc-min-replicas"),
    pytest.param(isvc({"model": {"modelFormat": {"name": "huggingface"}}}), "predictor", 1, id="isvc-min-replicas-default"),
    pytest.param(QWEN_SINGLE, "main", 3, id="llmisvc-replicas"),
    pytest.param(EXAMPLE_LLM, "worker", 2, id="llmisvc-workers-replicas-x-size-minus-one"),
    pytest.param(WORKER_ONLY, "worker", 4, id="llmisvc-worker-only-replicas-x-size"),
    pytest.param(llm(scaling={"minReplicas": 3, "maxReplicas": 5}, template=main(1)), "main", 3, id="llmisvc-scaling-min"),
])
def test_pods_per_template(obj: dict[str, Any], role: str, pods: int) -> None:
    assert {f.role: f.pods for f in operators.templates(obj, {})}[role] == pods


def test_an_ome_runtime_of_the_same_name_does_not_hide_kserves() -> None:
    """OME's ServingRuntime (ome.io) shares the kind name: whichever comes last in the input, the
    InferenceService finds KServe's."""
    name = MULTINODE_RT["metadata"]["name"]
    ome = {"apiVersion": "ome.io/v1beta1", "kind": "ServingRuntime", "metadata": {"name": name}, "spec": {}}
    for objects in ([MULTINODE_RT, ome], [ome, MULTINODE_RT]):
        results = judge(DOC_MULTINODE, S, context=operators.context_of(objects))
        assert results[0].template.spec["containers"][0]["image"] == "kserve/huggingfaceserver:latest"


def test_the_model_container_is_merged_with_its_runtime() -> None:
    results = judge(DOC_MULTINODE, S, context=RT_CONTEXT)
    head = results[0].template.spec["containers"][0]
    assert head["name"] == "kserve-container" and head["image"] == "kserve/huggingfaceserver:latest"
    assert head["command"] == ["bash", "-c"]
    env = {e["name"]: e.get("value") for e in head["env"]}
    assert (env["TENSOR_PARALLEL_SIZE"], env["PIPELINE_PARALLEL_SIZE"], env["RAY_NODE_COUNT"]) == ("1", "2", "2")
    assert head["resources"]["requests"]["nvidia.com/gpu"] == "1"  # written by KServe
    assert results[0].template.spec["volumes"][0]["name"] == "shm"  # the runtime's pod fields
    assert results[1].template.spec["containers"][0]["image"] == "kserve/huggingfaceserver:latest"


def test_merge_container_as_kserve_merges() -> None:
    runtime = {"name": "kserve-container", "image": "rt:1", "args": ["--model_name={{.Name}}"],
               "env": [{"name": "A", "value": "rt"}, {"name": "B", "value": "b"}],
               "resources": {"limits": {"cpu": "1", "memory": "2Gi"}, "requests": {"cpu": "1"}}}
    merged = kserve.merge_container(runtime, {"args": ["--max-model-len=4096"], "env": [{"name": "A", "value": "isvc"}],
                                              "resources": {"limits": {"nvidia.com/gpu": "2"}}})
    assert merged["args"] == ["--model_name={{.Name}}", "--max-model-len=4096"]  # concatenated, runtime first
    assert merged["env"] == [{"name": "B", "value": "b"}, {"name": "A", "value": "isvc"}]
    assert merged["resources"] == {"limits": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "2"}, "requests": {"cpu": "1"}}
    assert merged["image"] == "rt:1"


def test_model_and_parallelism_are_read() -> None:
    [head, worker] = judge(EXAMPLE_ISVC, S)
    assert head.profile.model == "pvc://llama-models/Meta-Llama-3.1-70B-Instruct"
    assert (head.profile.tensor_parallel, head.profile.pipeline_parallel) == (8, 2)
    assert worker.profile.model == head.profile.model  # the worker runs the leader's model
    [single] = judge(LLAMA_1B, S)
    assert single.profile.model == "meta-llama/Llama-3.2-1B-Instruct" and single.profile.framework == "kserve-hf"
    [leader, _] = judge(QWEN_DP, S)
    assert leader.profile.model == "hf://Qwen/Qwen3-Coder-30B-A3B-Instruct" and leader.profile.data_parallel == 16


@pytest.mark.parametrize(("total", "head", "worker", "expected"), [
    pytest.param(16, 0, 8, (2, 8, 8), id="doc-case-1-head-from-rest"),
    pytest.param(16, 8, 8, (2, 8, 8), id="both-set"),
    pytest.param(8, 0, 8, (1, 0, 8), id="doc-case-3-head-only"),
    pytest.param(8, 8, 4, (1, 0, 8), id="head-holds-all"),
    pytest.param(2, 0, 0, (2, 1, 1), id="no-gpus-one-per-node"),
    pytest.param(16, 8, 0, (9, 1, 8), id="head-set-single-gpu-workers"),
    pytest.param(4, 8, 0, (1, 1, 8), id="head-more-than-total"),
    pytest.param(16, 2, 8, None, id="refused-insufficient"),
    pytest.param(12, 0, 8, (2, 8, 4), id="uneven-head-gets-rest"),
])
def test_ray_node_count(total: int, head: int, worker: int, expected: tuple[int, int, int] | None) -> None:
    assert kserve.ray_nodes(total, head, worker) == expected


@pytest.mark.parametrize(("parallelism", "size"), [
    pytest.param({"data": 16, "dataLocal": 8}, 2, id="data-over-local"),
    pytest.param({"data": 4}, 4, id="data-only"),
    pytest.param({"dataLocal": 8}, 1, id="local-only-at-least-one"),
    pytest.param({"data": 3, "dataLocal": 2}, 1, id="integer-division"),
    pytest.param({"pipeline": 2, "tensor": 8}, 2, id="pipeline"),
    pytest.param({"data": 8, "dataLocal": 4, "pipeline": 2}, 2, id="data-wins-over-pipeline"),
    pytest.param({"tensor": 8}, None, id="tensor-only-no-lws-size"),
    pytest.param({}, None, id="empty"),
    pytest.param("garbage", None, id="not-an-object"),
    pytest.param({"data": "-4", "pipeline": "3"}, 3, id="negative-data-string-pipeline"),
])
def test_lws_size(parallelism: Any, size: int | None) -> None:
    assert kserve.lws_size(parallelism) == size


def test_notes_say_what_kserve_does_with_the_gpus() -> None:
    obj = copy.deepcopy(EXAMPLE_ISVC)
    obj["spec"]["predictor"]["model"]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    obj["spec"]["predictor"]["workerSpec"]["tensorParallelSize"] = 0
    [head, *_] = operators.templates(obj, {})
    assert any("KServe rejects workerSpec.tensorParallelSize < 1" in n for n in head.notes)
    assert any("predictor.model sets GPU limits but no GPU requests" in n for n in head.notes)
    refused = copy.deepcopy(EXAMPLE_ISVC)
    refused["spec"]["predictor"]["model"]["resources"] = gpus(2)
    [head, *_] = operators.templates(refused, {})
    assert any("KServe refuses this GPU allocation" in n for n in head.notes)


def test_a_runtime_not_in_the_input_is_said() -> None:
    obj = isvc({"model": {"modelFormat": {"name": "vLLM"}, "runtime": "vllm-runtime", "resources": gpus(1)}})
    [found] = operators.templates(obj, {})
    assert found.notes == ("InferenceService m: runtime vllm-runtime is not in the input; the model container is "
                           "judged from spec.predictor alone",)
    builtin = isvc({"model": {"modelFormat": {"name": "huggingface"}, "resources": gpus(1)}})
    [found] = operators.templates(builtin, {})
    assert found.notes == () and found.holder["containers"][0]["image"] == "kserve/huggingfaceserver"


def test_llmisvc_without_template_is_said() -> None:
    [found] = operators.templates(llm(replicas=2), {})
    assert found.synthesized and found.notes and "presets" in found.notes[0]


def test_llmisvc_preset_command_only_where_none_is_written() -> None:
    own = llm(template={"containers": [{"name": "main", "image": "x", "args": ["--my-flag"]}]})
    [found] = operators.templates(own, {})
    assert found.holder["containers"][0] == {"name": "main", "image": "x", "args": ["--my-flag"]}
    [filled] = operators.templates(EXAMPLE_LLM, {})[:1]
    assert filled.holder["containers"][0]["command"] == ["vllm", "serve", "hf://meta-llama/Llama-3.3-70B-Instruct"]
    assert filled.holder["containers"][0]["args"] == ["--tensor-parallel-size", "4", "--pipeline-parallel-size", "2"]


def test_gpu_types_annotation() -> None:
    obj = copy.deepcopy(EXAMPLE_ISVC)
    obj["metadata"]["annotations"][kserve.GPU_TYPES_ANNOTATION] = '["nvidia.com/mig-3g.40gb"]'
    for c in (obj["spec"]["predictor"]["model"], obj["spec"]["predictor"]["workerSpec"]["containers"][0]):
        c["resources"] = {"requests": {"nvidia.com/mig-3g.40gb": "2"}, "limits": {"nvidia.com/mig-3g.40gb": "2"}}
    head = operators.templates(obj, {})[0]
    assert head.group == 8 and head.holder["containers"][0]["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "2"


@pytest.mark.parametrize("value", ["[not json", "[" * 4000, '{"a": 1}', "[1, null]", "x" * 10_000],
                         ids=["broken", "nested-past-the-recursion-limit", "object", "not-strings", "long"])
def test_a_hostile_gpu_types_annotation_adds_nothing(value: str) -> None:
    obj = {"metadata": {"annotations": {kserve.GPU_TYPES_ANNOTATION: value}}}
    assert kserve._gpu_types(obj) == kserve.GPU_TYPES


@pytest.mark.parametrize("predictor", [
    pytest.param("garbage", id="predictor-string"),
    pytest.param({"model": "llama"}, id="model-string"),
    pytest.param({"model": {"resources": gpus(1)}, "workerSpec": "x"}, id="workerspec-string"),
    pytest.param({"model": {"resources": gpus(1)}, "workerSpec": {"tensorParallelSize": "abc", "pipelineParallelSize": -2}},
                 id="sizes-hostile"),
    pytest.param({"model": {"resources": gpus(8)}, "workerSpec": {"tensorParallelSize": 10**12, "pipelineParallelSize": 10**12}},
                 id="sizes-huge"),
    pytest.param({"model": {"resources": {"requests": {"nvidia.com/gpu": "lots"}}, "args": "x", "env": 3},
                  "workerSpec": {"containers": ["x", None]}}, id="fields-hostile"),
    pytest.param({"containers": "x", "minReplicas": "-1"}, id="containers-string"),
    pytest.param({"containers": [{"name": "c", "resources": gpus(1)}], "workerSpec": {}}, id="custom-with-workerspec"),
    pytest.param({"model": {"runtime": ["x"], "storageUri": 5}}, id="runtime-not-a-string"),
])
def test_hostile_inference_services_never_raise(predictor: Any) -> None:
    obj = isvc({})
    obj["spec"]["predictor"] = predictor
    obj["metadata"]["annotations"] = {kserve.GPU_TYPES_ANNOTATION: "[not json"}
    for context in ({}, RT_CONTEXT, {("ServingRuntime", "", "x"): "garbage"}, "garbage"):
        for r in judge(obj, S, context=context):  # type: ignore[arg-type]
            assert 0 <= r.profile.pods <= operators.MAX_PODS


@pytest.mark.parametrize("spec", [
    pytest.param("garbage", id="spec-string"),
    pytest.param({"template": "x", "worker": ["y"]}, id="templates-not-objects"),
    pytest.param({"replicas": "many", "parallelism": {"data": 10**15, "dataLocal": 0}, "worker": main(1)}, id="huge-data"),
    pytest.param({"replicas": -3, "template": {"containers": "x"}, "prefill": "p"}, id="negative-replicas"),
    pytest.param({"model": {"uri": ["x"]}, "template": {"containers": [{"name": "main"}, 3]}, "baseRefs": [{"name": "c"}]},
                 id="uri-not-a-string"),
])
def test_hostile_llm_inference_services_never_raise(spec: Any) -> None:
    obj = {"apiVersion": LLM_API, "kind": "LLMInferenceService", "metadata": {"name": "l"}, "spec": spec}
    for r in judge(obj, S):
        assert 0 <= r.profile.pods <= operators.MAX_PODS


def test_both_llmisvc_versions_and_the_kinds_are_registered() -> None:
    v1 = copy.deepcopy(QWEN_SINGLE)
    v1["apiVersion"] = "serving.kserve.io/v1alpha1"
    assert [t.spec_pointer for t in pod_templates(v1)] == ["/spec/template"]
    assert {"InferenceService", "LLMInferenceService"} <= WORKLOAD_KINDS
    assert (ISVC_API, "InferenceService") in operators.REGISTRY.readers  # read with its ServingRuntime from the context


@pytest.mark.parametrize(("env", "tp"), [
    pytest.param([{"name": "VLLM_ADDITIONAL_ARGS", "value": "--tensor-parallel-size=8 --max-model-len 8192"}], 8,
                 id="additional-args-name-the-tp"),
    # vLLM's own default where nothing says: TP1
    pytest.param([{"name": "VLLM_ADDITIONAL_ARGS", "value": "--max-model-len 8192"}], 1, id="no-tp-in-them"),
    pytest.param([{"name": "VLLM_ADDITIONAL_ARGS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}], 1,
                 id="not-literal"),
    pytest.param([{"name": "VLLM_ADDITIONAL_ARGS", "value": "--tensor-parallel-size '8"}], 1, id="unbalanced-quote"),
])
def test_the_presets_additional_args_are_read(env: list[dict[str, Any]], tp: int | None) -> None:
    """The presets end ``vllm serve /mnt/models ... ${VLLM_ADDITIONAL_ARGS}``: a TP there is the engine's."""
    obj = llm(template={"containers": [{"name": "main", "env": env, "resources": gpus(8)}]})
    (r,) = [r for r in judge(obj, S) if r.profile.gpus_per_pod]
    assert r.profile.tensor_parallel == tp
    if tp == 8:
        assert r.decision.allowed and not r.decision.violations
