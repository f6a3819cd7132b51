"""OME InferenceService: judged with its ClusterServingRuntime / ServingRuntime and BaseModel from the
same input (the runtime's engineConfig / decoderConfig under the InferenceService's fields, MODEL_PATH
and PARALLELISM_SIZE as OME sets them), without them (a warning, judged from the InferenceService
alone), never with a KServe object of the same kind and name; the merge OME does, and hostile shapes.
Objects are the shipped example and inline objects written from the API types' fields."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.engine import runtime_context
from webhook.core.operators import ome

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()
API = ome.API_VERSION
MODEL, RUNTIME, ISVC = (d for d in yaml.safe_load_all(
    (ROOT / "examples" / "ome-isvc-deepseek-v3-multinode.yaml").read_text()) if d)
CONTEXT = runtime_context([MODEL, RUNTIME])


def isvc(namespace: str | None = "ome-serving", **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "svc"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": "InferenceService", "metadata": meta, "spec": spec}


def runner(gpus: int, *command: str) -> dict[str, Any]:
    return {"name": "ome-container", "image": "lmsysorg/sglang:v0.5.5",
            "command": list(command or ("python3", "-m", "sglang.launch_server", "--model-path", "$(MODEL_PATH)",
                                        "--tp-size", "$(PARALLELISM_SIZE)")),
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}


def runtime(kind: str = "ClusterServingRuntime", name: str = "rt", namespace: str | None = None,
            api: str = API, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


SINGLE_RT = runtime(engineConfig={"runner": runner(4)})
PD_RT = runtime(engineConfig={"runner": runner(2)}, decoderConfig={"runner": runner(4)})
QWEN = {"apiVersion": API, "kind": "ClusterBaseModel", "metadata": {"name": "qwen2-5-72b-instruct"},
        "spec": {"modelParameterSize": "72B", "storage": {"storageUri": "hf://Qwen/Qwen2.5-72B-Instruct",
                                                          "path": "/raid/models/qwen/qwen2-5-72b-instruct"}}}
WITH_MODEL = {"model": {"name": "qwen2-5-72b-instruct"}, "runtime": {"name": "rt"}}


def env(result: Any) -> dict[str, str]:
    container = result.template.spec["containers"][0]
    return {e["name"]: e.get("value") for e in container.get("env", [])}


CASES = [
    # object, context, [(role, GPUs per pod, pods in the group, TP)]
    pytest.param(ISVC, CONTEXT, [("engine-leader", 8, 2, 16), ("engine-worker", 8, 2, 16)],
                 id="example-with-runtime-and-model"),
    pytest.param(isvc(engine={"minReplicas": 2}, **WITH_MODEL), runtime_context([SINGLE_RT, QWEN]),
                 [("engine", 4, 1, 4)], id="single-node-parallelism-is-the-pod-gpus"),
    pytest.param(isvc(engine={"minReplicas": 1, "runner": {"name": "ome-container",
                                                           "resources": {"limits": {"nvidia.com/gpu": "8"}}}},
                      **WITH_MODEL), runtime_context([SINGLE_RT, QWEN]),
                 [("engine", 8, 1, 8)], id="isvc-runner-resources-win"),
    pytest.param(isvc(engine={}, decoder={}, **WITH_MODEL), runtime_context([PD_RT, QWEN]),
                 [("engine", 2, 1, 2), ("decoder", 4, 1, 4)], id="prefill-decode"),
    pytest.param(isvc(engine={}, **WITH_MODEL), runtime_context([PD_RT, QWEN]),
                 [("engine", 2, 1, 2)], id="no-decoder-unless-the-isvc-states-it"),
    pytest.param(isvc(engine={"worker": {"size": 3}}, model={"name": "deepseek-v3"},
                      runtime={"name": "srt-deepseek-v3-multinode"}), CONTEXT,
                 [("engine-leader", 8, 4, 32), ("engine-worker", 8, 4, 32)], id="isvc-worker-size-wins"),
]


@pytest.mark.parametrize(("obj", "context", "expected"), CASES)
def test_ome_templates_groups_and_parallelism(obj: dict[str, Any], context: dict[tuple[str, str, str], Any],
                                              expected: list[tuple[str, int, int, int]]) -> None:
    results = judge(obj, S, context=context)
    got = [(r.template.role, r.profile.gpus_per_pod, r.profile.pods, r.profile.tensor_parallel) for r in results]
    assert got == expected
    assert not any(r.template.patchable for r in results)  # built from several objects: never patched


def test_the_example_reads_the_model_and_the_env_ome_sets() -> None:
    leader, worker = judge(ISVC, S, context=CONTEXT)
    assert leader.profile.model == "deepseek-ai/DeepSeek-V3" and leader.profile.params_b == 671
    assert env(leader)[ome.MODEL_PATH] == "/raid/models/deepseek-ai/deepseek-v3"
    assert env(leader)[ome.PARALLELISM_SIZE] == env(worker)[ome.PARALLELISM_SIZE] == "16"
    assert [f.pods for f in operators.templates(ISVC, CONTEXT)] == [1, 1]
    assert not leader.template.notes


@pytest.mark.parametrize(("context", "note"), [
    pytest.param({}, "runtime ClusterServingRuntime/srt-deepseek-v3-multinode is not in the input", id="alone"),
    pytest.param(runtime_context([MODEL]), "runtime ClusterServingRuntime/srt-deepseek-v3-multinode is not in",
                 id="model-only"),
    pytest.param(runtime_context([RUNTIME]), "model ClusterBaseModel/deepseek-v3 is not in the input", id="runtime-only"),
    # a KServe ClusterServingRuntime of the same name is another group's object
    pytest.param(runtime_context([MODEL, runtime(name="srt-deepseek-v3-multinode", api="serving.kserve.io/v1alpha1",
                                                 engineConfig=RUNTIME["spec"]["engineConfig"])]),
                 "runtime ClusterServingRuntime/srt-deepseek-v3-multinode is not in the input", id="kserve-runtime-not-taken"),
])
def test_what_is_elsewhere_is_a_warning(context: dict[tuple[str, str, str], Any], note: str) -> None:
    results = judge(ISVC, S, context=context)
    assert results and any(note in n for n in results[0].template.notes)
    assert all(r.decision.allowed for r in results)


def test_the_isvc_alone_is_judged_from_its_engine() -> None:
    (result,) = judge(ISVC, S)
    assert result.template.role == "engine" and result.profile.gpus_per_pod == 0
    assert result.profile.model == "deepseek-v3"  # the model reference's name stands in for the model
    assert any("no runner container in the input" in n for n in result.template.notes)


@pytest.mark.parametrize(("rt", "namespace", "found"), [
    pytest.param(runtime("ServingRuntime", namespace="ome-serving", engineConfig={"runner": runner(4)}), "ome-serving",
                 True, id="namespaced-same-namespace"),
    pytest.param(runtime("ServingRuntime", engineConfig={"runner": runner(4)}), "ome-serving", True,
                 id="namespaced-written-without-namespace"),
    pytest.param(runtime("ServingRuntime", namespace="other", engineConfig={"runner": runner(4)}), "ome-serving",
                 False, id="namespaced-other-namespace"),
    pytest.param(runtime(namespace="anything", engineConfig={"runner": runner(4)}), "ome-serving", True,
                 id="cluster-scoped-namespace-ignored"),
])
def test_the_runtime_lookup(rt: dict[str, Any], namespace: str, found: bool) -> None:
    obj = isvc(namespace, engine={}, model={"name": "qwen2-5-72b-instruct"},
               runtime={"name": "rt", "kind": rt["kind"]})
    (result,) = judge(obj, S, context=runtime_context([rt, QWEN]))
    assert (result.profile.gpus_per_pod == 4) is found


@pytest.mark.parametrize(("rt", "expected"), [
    pytest.param(RUNTIME, [("engine-leader", "/spec/engineConfig/leader", 8, 2, 16),
                           ("engine-worker", "/spec/engineConfig/worker", 8, 2, 16)], id="example-runtime-multinode"),
    pytest.param(PD_RT, [("engine", "/spec/engineConfig", 2, 1, 2), ("decoder", "/spec/decoderConfig", 4, 1, 4)],
                 id="pd-runtime"),
    pytest.param(runtime("ServingRuntime", namespace="n", engineConfig={"runner": runner(4)}),
                 [("engine", "/spec/engineConfig", 4, 1, 4)], id="namespaced-runtime"),
])
def test_a_runtime_alone_is_judged_as_an_isvc_naming_it_runs_it(rt: dict[str, Any],
                                                                 expected: list[tuple[str, str, int, int, int]]) -> None:
    results = judge(rt, S)
    got = [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods, r.profile.tensor_parallel)
           for r in results]
    assert got == expected
    assert not any(r.template.patchable for r in results)


def test_a_kserve_runtime_is_not_read_as_an_ome_one() -> None:
    kserve = runtime(api="serving.kserve.io/v1alpha1", containers=[{"name": "kserve-container", "image": "x:1"}],
                     engineConfig={"runner": runner(4)})
    assert operators.templates(kserve) == []


def test_the_deprecated_predictor_names_model_and_runtime() -> None:
    obj = isvc(predictor={"minReplicas": 3, "model": {"baseModel": "qwen2-5-72b-instruct", "runtime": "rt"}})
    (result,) = judge(obj, S, context=runtime_context([SINGLE_RT, QWEN]))
    assert (result.profile.model, result.profile.gpus_per_pod) == ("Qwen/Qwen2.5-72B-Instruct", 4)
    assert [f.pods for f in operators.templates(obj, runtime_context([SINGLE_RT, QWEN]))] == [3]


@pytest.mark.parametrize(("base", "override", "merged"), [
    pytest.param({"a": 1, "b": {"c": 1, "d": 2}}, {"b": {"c": 3}}, {"a": 1, "b": {"c": 3, "d": 2}}, id="maps"),
    pytest.param({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                 {"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                 {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                 id="named-lists-by-name"),
    pytest.param({"command": ["a", "b"]}, {"command": ["c"]}, {"command": ["c"]}, id="plain-lists-replaced"),
    pytest.param({"runner": {"name": "x", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}}}},
                 {"runner": {"resources": {"limits": {"nvidia.com/gpu": "4"}}}},
                 {"runner": {"name": "x", "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "4"}}}},
                 id="runner-resources"),
])
def test_merge_as_ome_merges(base: Any, override: Any, merged: Any) -> None:
    assert ome.merge(base, override) == merged


@pytest.mark.parametrize("spec", [
    pytest.param({"engine": "x", "runtime": {"name": 3}, "model": []}, id="wrong-types"),
    pytest.param({"engine": {"worker": {"size": "many"}, "leader": []}}, id="worker-size-not-a-count"),
    pytest.param({"engine": {"runner": {"env": "x", "resources": {"limits": {"nvidia.com/gpu": "x"}}}}}, id="junk-runner"),
])
def test_hostile_shapes_do_not_raise(spec: dict[str, Any]) -> None:
    obj = isvc(**spec)
    for context in ({}, CONTEXT):
        judge(obj, S, context=context)


def test_deep_nesting_is_not_followed_past_the_limit() -> None:
    deep: Any = {"x": 1}
    for _ in range(200):
        deep = {"x": deep}
    assert ome.merge(copy.deepcopy(deep), copy.deepcopy(deep)) is not None
