"""Kubeflow Trainer v2: a TrainJob judged with the runtime it references (the runtime's templates with
the TrainJob's spec.trainer written over them), without it (spec.trainer alone, with a note), and the
runtimes alone. Rows are the facts of public sample manifests (tests/data/operators, each naming its source), the
shipped example and inline objects; then the runtime lookup and hostile input."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core import operators, settings as settings_mod
from webhook.core.engine import runtime_context
from tests.judging import judge
from webhook.core.operators import trainer
from webhook.core.workloads import WORKLOAD_KINDS, pod_templates

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "operators"
S = settings_mod.default()
API = "trainer.kubeflow.org/v1alpha1"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def sample(name: str) -> dict[str, Any]:
    return docs(DATA / name)[0]


def ctx(*objects: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    return runtime_context(objects)


TORCH_RT = sample("trainer-torch-distributed-runtime.yaml")
TORCHTUNE_RT = sample("trainer-torchtune-llama3.2-1b-runtime.yaml")
PATCHES_TJ = sample("trainer-runtime-patches-trainjob.yaml")
EXAMPLE_RT, EXAMPLE_TJ = docs(ROOT / "examples" / "trainjob-torch-llama.yaml")


def trainjob(runtime: str = "torch-distributed", *, kind: str | None = None, namespace: str | None = None,
             **trainer_fields: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": runtime}
    if kind:
        ref["kind"] = kind
    meta: dict[str, Any] = {"name": "tj"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": "TrainJob", "metadata": meta,
            "spec": {"runtimeRef": ref, "trainer": trainer_fields}}


GPUS8 = {"limits": {"nvidia.com/gpu": "8"}}
MPI_RT = {"apiVersion": API, "kind": "ClusterTrainingRuntime", "metadata": {"name": "mpi"}, "spec": {
    "mlPolicy": {"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": True}},
    "template": {"spec": {"replicatedJobs": [
        {"name": "launcher", "template": {"metadata": {"labels": {trainer.ANCESTOR_LABEL: "trainer"}},
                                          "spec": {"template": {"spec": {"containers": [
                                              {"name": "node", "image": "mpi:1"}]}}}}},
        {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "image": "mpi:1"}]}}}}}]}}}}

CASES = [
    # object, context, [(role, spec pointer, GPUs per pod, pods in the group)]
    pytest.param(EXAMPLE_TJ, ctx(EXAMPLE_RT), [("node", "/spec/trainer", 8, 4)], id="example-trainjob-with-runtime"),
    pytest.param(EXAMPLE_RT, {}, [("node", "/spec/template/spec/replicatedJobs/0/template/spec/template/spec", 0, 1)],
                 id="example-runtime-alone-cpu"),
    pytest.param(trainjob("torchtune-llama3.2-1b", numNodes=2), ctx(TORCHTUNE_RT), [
        ("dataset-initializer", "/spec/runtimeRef", 0, 1), ("model-initializer", "/spec/runtimeRef", 0, 1),
        ("node", "/spec/trainer", 2, 2)], id="torchtune-runtime-gpus-kept-numnodes-from-trainjob"),
    pytest.param(TORCHTUNE_RT, {}, [
        ("dataset-initializer", "/spec/template/spec/replicatedJobs/0/template/spec/template/spec", 0, 1),
        ("model-initializer", "/spec/template/spec/replicatedJobs/1/template/spec/template/spec", 0, 1),
        ("node", "/spec/template/spec/replicatedJobs/2/template/spec/template/spec", 2, 1)],
                 id="torchtune-runtime-alone-mlpolicy-numnodes"),
    pytest.param(trainjob(numNodes=3, resourcesPerNode=GPUS8), ctx(TORCH_RT), [("node", "/spec/trainer", 8, 3)],
                 id="resources-per-node-into-node-container"),
    pytest.param(trainjob(numNodes="3", resourcesPerNode=GPUS8), ctx(TORCH_RT), [("node", "/spec/trainer", 8, 3)],
                 id="numnodes-as-string"),
    pytest.param(trainjob(resourcesPerNode=GPUS8), ctx(TORCH_RT), [("node", "/spec/trainer", 8, 1)],
                 id="numnodes-from-mlpolicy"),
    pytest.param(trainjob(numNodes=2, resourcesPerNode=GPUS8), {}, [("node", "/spec/trainer", 8, 2)],
                 id="runtime-missing-judged-from-trainer"),
    pytest.param(trainjob("mpi", numNodes=4, resourcesPerNode=GPUS8), ctx(MPI_RT), [
        ("launcher", "/spec/trainer", 8, 4), ("node", "/spec/trainer", 8, 4)], id="mpi-launcher-as-node"),
]


@pytest.mark.parametrize(("obj", "context", "expected"), CASES)
def test_trainer_templates_and_groups(obj: dict[str, Any], context: dict[tuple[str, str, str], Any],
                                      expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S, context=context)
    got = [(r.template.role, r.template.spec_pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results]
    assert got == expected
    for r in results:
        if r.profile.gpus_per_pod > 0 and r.profile.pods > 1:
            assert r.decision.tier == "hbm-nvlink", r.template.role


def test_the_trainer_step_is_synthesized_and_never_patched() -> None:
    results = judge(EXAMPLE_TJ, S, context=ctx(EXAMPLE_RT))
    assert [(r.template.pointer, r.template.patchable, r.patch) for r in results] == [("", False, ())]
    template = results[0].template
    assert template.metadata is EXAMPLE_TJ["metadata"]  # the TrainJob's annotations apply
    container = template.spec["containers"][0]
    assert container["image"] == "nvcr.io/nvidia/pytorch:25.08-py3" and container["command"][0] == "torchrun"
    assert results[0].profile.model == "meta-llama/Llama-3.1-8B"


def test_the_runtime_alone_is_patchable_at_its_own_pointer() -> None:
    rt = copy.deepcopy(TORCHTUNE_RT)
    rt["spec"]["mlPolicy"]["numNodes"] = 2
    results = judge(rt, S)
    node = results[-1]
    assert node.profile.pods == 2 and node.template.patchable
    assert node.patch and all(op["path"].startswith("/spec/template/spec/replicatedJobs/2/template/spec/template/")
                              for op in node.patch)


def test_overrides_as_upstream_builder_applies_them() -> None:
    tj = trainjob(numNodes=2, image="img:2", command=["torchrun", "x.py"], args=["--a"],
                  env=[{"name": "A", "value": "new"}], resourcesPerNode=GPUS8)
    rt = copy.deepcopy(TORCH_RT)
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0].update(env=[{"name": "A", "value": "old"}, {"name": "B", "value": "b"}],
                                 resources={"limits": {"cpu": "1", "nvidia.com/gpu": "1"}})
    node["containers"].append({"name": "sidecar", "image": "side:1"})
    [found] = operators.templates(tj, ctx(rt))
    main, side = found.holder["containers"]
    assert (main["image"], main["command"], main["args"]) == ("img:2", ["torchrun", "x.py"], ["--a"])
    assert main["env"] == [{"name": "B", "value": "b"}, {"name": "A", "value": "new"}]
    assert main["resources"] == GPUS8  # replaced, not merged (builder.go WithResources)
    assert side == {"name": "sidecar", "image": "side:1"}  # only the container named node
    assert found.synthesized and found.inline and found.group is None and not found.notes


def test_runtime_patches_bring_placement() -> None:
    results = judge(PATCHES_TJ, S, context=ctx(TORCH_RT))
    [r] = results
    assert r.template.spec["nodeSelector"] == {"node-type": "training"}
    assert r.template.spec["tolerations"][0]["key"] == "training-workload"
    assert r.template.replicas == 2 and r.profile.gpus_per_pod == 0  # this sample asks for no GPUs


def test_older_pod_template_overrides_bring_placement() -> None:
    tj = trainjob(numNodes=2, resourcesPerNode=GPUS8)
    tj["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}],
                                           "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}]
    [found] = operators.templates(tj, ctx(TORCH_RT))
    assert found.holder["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


@pytest.mark.parametrize(("tj", "note"), [
    pytest.param(trainjob(numNodes=2, resourcesPerNode=GPUS8),
                 "TrainJob tj: runtime ClusterTrainingRuntime/torch-distributed is not in the input; "
                 "judged from spec.trainer alone", id="gpus-in-trainer"),
    pytest.param(trainjob(numNodes=2),
                 "TrainJob tj: runtime ClusterTrainingRuntime/torch-distributed is not in the input; judged from "
                 "spec.trainer alone; spec.trainer sets no resourcesPerNode, so the GPUs are the runtime's and "
                 "unknown here", id="no-gpus-anywhere"),
])
def test_a_missing_runtime_is_said(tj: dict[str, Any], note: str) -> None:
    [found] = operators.templates(tj, {})
    assert found.notes == (note,) and found.synthesized and found.path == ("spec", "trainer")
    [tpl] = pod_templates(tj, "", {})
    assert tpl.notes == (note,) and not tpl.patchable and tpl.spec_pointer == "/spec/trainer"


@pytest.mark.parametrize(("tj_ns", "rt_kind", "rt_ns", "found"), [
    pytest.param(None, "ClusterTrainingRuntime", None, True, id="cluster-runtime"),
    pytest.param("ml", "ClusterTrainingRuntime", None, True, id="cluster-runtime-namespaced-trainjob"),
    pytest.param("ml", "TrainingRuntime", "ml", True, id="same-namespace"),
    pytest.param("ml", "TrainingRuntime", None, True, id="runtime-without-namespace-shares-the-trainjobs"),
    pytest.param(None, "TrainingRuntime", None, True, id="neither-has-a-namespace"),
    pytest.param("ml", "TrainingRuntime", "other", False, id="other-namespace"),
    pytest.param(None, "TrainingRuntime", "ml", False, id="trainjob-without-namespace-runtime-in-one"),
])
def test_runtime_lookup(tj_ns: str | None, rt_kind: str, rt_ns: str | None, found: bool) -> None:
    rt = copy.deepcopy(TORCH_RT)
    rt["kind"] = rt_kind
    if rt_ns:
        rt["metadata"]["namespace"] = rt_ns
    tj = trainjob(kind=rt_kind if rt_kind != "ClusterTrainingRuntime" else None, namespace=tj_ns,
                  numNodes=2, resourcesPerNode=GPUS8)
    got, label = trainer.find_runtime(tj, ctx(rt))
    assert (got is rt) == found and label == f"{rt_kind}/torch-distributed"


def test_runtime_lookup_checks_kind_and_group() -> None:
    tj = trainjob(kind="TrainingRuntime")
    cluster_only = ctx(TORCH_RT)  # a ClusterTrainingRuntime of that name is not a TrainingRuntime
    assert trainer.find_runtime(tj, cluster_only)[0] is None
    other = copy.deepcopy(TORCH_RT)
    other["apiVersion"] = "example.com/v1"
    assert trainer.find_runtime(trainjob(), {("ClusterTrainingRuntime", "", "torch-distributed"): other})[0] is None
    foreign = trainjob()
    foreign["spec"]["runtimeRef"]["apiGroup"] = "example.com"
    assert trainer.find_runtime(foreign, ctx(TORCH_RT))[0] is None


@pytest.mark.parametrize("spec", [
    pytest.param({"runtimeRef": "torch-distributed", "trainer": {"resourcesPerNode": GPUS8}}, id="runtimeref-string"),
    pytest.param({"runtimeRef": ["x"], "trainer": "garbage"}, id="runtimeref-list-trainer-string"),
    pytest.param({"runtimeRef": {"name": 7}}, id="name-not-a-string"),
    pytest.param({"runtimeRef": {"name": "torch-distributed", "kind": ["x"]}, "trainer": {"numNodes": -3}},
                 id="kind-not-a-string-negative-nodes"),
    pytest.param({"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 10**12,
                                                                           "resourcesPerNode": GPUS8}}, id="huge-nodes"),
    pytest.param({"runtimeRef": {"name": "torch-distributed"},
                  "trainer": {"image": 3, "command": "sh", "env": "A=1", "resourcesPerNode": "8"}}, id="bad-fields"),
    pytest.param({"runtimeRef": {"name": "torch-distributed"}, "runtimePatches": "x", "podTemplateOverrides": [1, None]},
                 id="bad-patches"),
    pytest.param("garbage", id="spec-string"),
])
@pytest.mark.parametrize("with_runtime", [True, False], ids=["runtime", "no-runtime"])
def test_hostile_trainjobs_never_raise(spec: Any, with_runtime: bool) -> None:
    tj = {"apiVersion": API, "kind": "TrainJob", "metadata": {"name": "x"}, "spec": spec}
    results = judge(tj, S, context=ctx(TORCH_RT) if with_runtime else {})
    assert results, "a TrainJob is never skipped"
    for r in results:
        assert 0 <= r.profile.pods <= operators.MAX_PODS


@pytest.mark.parametrize("jobs", [
    pytest.param("garbage", id="jobs-string"),
    pytest.param([None, 3, {"name": "node"}], id="jobs-without-templates"),
    pytest.param([{"name": "node", "template": {"metadata": {"labels": "x"}, "spec": {"template": "pod"}}}],
                 id="template-not-an-object"),
    pytest.param([{"name": ["n"], "replicas": "-2", "template": {"spec": {"parallelism": "9" * 40,
                                                                         "template": {"spec": {"containers": "x"}}}}}],
                 id="hostile-counts"),
])
def test_hostile_runtimes_never_raise(jobs: Any) -> None:
    rt = {"apiVersion": API, "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"},
          "spec": {"mlPolicy": "x", "template": {"spec": {"replicatedJobs": jobs}}}}
    for obj, context in ((rt, {}), (trainjob(numNodes=2, resourcesPerNode=GPUS8), ctx(rt))):
        for r in judge(obj, S, context=context):
            assert 0 <= r.profile.pods <= operators.MAX_PODS


def test_trainer_kinds_are_judged_by_the_webhook() -> None:
    assert {"TrainJob", "ClusterTrainingRuntime", "TrainingRuntime"} <= WORKLOAD_KINDS
    assert (API, "TrainJob") in operators.REGISTRY.readers  # read with its runtime from the context
