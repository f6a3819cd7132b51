"""The AI workload operators' pod templates (issue 14, part 1, first slice): where each kind keeps
them, the pod counts it declares, and one job = one group of its GPU pods (a CPU launcher or Ray head
is not a member). Rows are the shipped examples (one per kind family) and inline objects for the
kinds and counts the examples do not cover; then hostile counts and malformed templates."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core import operators, settings as settings_mod
from tests.judging import judge
from webhook.core.workloads import WORKLOAD_KINDS, pod_templates

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def container(gpus: int | None, command: list[str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "nvcr.io/nvidia/pytorch:25.08-py3",
                         "command": command or ["torchrun", "--nproc-per-node=8", "train.py",
                                                "--model_name_or_path=meta-llama/Llama-3.1-8B"]}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def tpl(gpus: int | None) -> dict[str, Any]:
    return {"spec": {"containers": [container(gpus)]}}


MPIJOB = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "m"},
          "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {
              "Launcher": {"replicas": 1, "template": tpl(None)},
              "Worker": {"replicas": 4, "template": tpl(8)}}}}
TFJOB = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "t"},
         "spec": {"tfReplicaSpecs": {"Chief": {"template": tpl(4)}, "Worker": {"replicas": "3", "template": tpl(4)}}}}
RAYJOB = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"},
          "spec": {"entrypoint": "python train.py", "rayClusterSpec": {
              "headGroupSpec": {"template": tpl(None)},
              "workerGroupSpecs": [{"groupName": "g", "minReplicas": 2, "numOfHosts": 2, "template": tpl(4)}]}}}
RAYSERVICE = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "rs"},
              "spec": {"serveConfigV2": "applications: []", "rayClusterConfig": {
                  "headGroupSpec": {"template": tpl(None)},
                  "workerGroupSpecs": [{"groupName": "a", "replicas": 1, "template": tpl(8)},
                                       {"groupName": "b", "replicas": 1, "template": tpl(8)}]}}}

CASES = [
    # object, [(role, pointer, GPUs per pod, pods in the group)]
    pytest.param(example("kubeflow-pytorchjob-llama-70b.yaml"), [
        ("Master", "/spec/pytorchReplicaSpecs/Master/template", 8, 4),
        ("Worker", "/spec/pytorchReplicaSpecs/Worker/template", 8, 4)], id="pytorchjob"),
    pytest.param(TFJOB, [("Chief", "/spec/tfReplicaSpecs/Chief/template", 4, 4),
                         ("Worker", "/spec/tfReplicaSpecs/Worker/template", 4, 4)], id="tfjob-string-replicas"),
    pytest.param(MPIJOB, [("Launcher", "/spec/mpiReplicaSpecs/Launcher/template", 0, 1),
                          ("Worker", "/spec/mpiReplicaSpecs/Worker/template", 8, 4)], id="mpijob-cpu-launcher"),
    pytest.param(example("jobset-torchrun.yaml"), [
        ("workers", "/spec/replicatedJobs/0/template/spec/template", 8, 4)], id="jobset-replicas-x-parallelism"),
    pytest.param(example("ray-cluster-gpu-workers.yaml"), [
        ("head", "/spec/headGroupSpec/template", 0, 1),
        ("gpu-workers", "/spec/workerGroupSpecs/0/template", 4, 2)], id="raycluster-cpu-head"),
    pytest.param(RAYJOB, [("head", "/spec/rayClusterSpec/headGroupSpec/template", 0, 1),
                          ("g", "/spec/rayClusterSpec/workerGroupSpecs/0/template", 4, 4)],
                 id="rayjob-minreplicas-x-hosts"),
    pytest.param(RAYSERVICE, [("head", "/spec/rayClusterConfig/headGroupSpec/template", 0, 1),
                              ("a", "/spec/rayClusterConfig/workerGroupSpecs/0/template", 8, 2),
                              ("b", "/spec/rayClusterConfig/workerGroupSpecs/1/template", 8, 2)],
                 id="rayservice-two-groups-one-job"),
    pytest.param(example("volcano-job-mpi.yaml"), [("mpimaster", "/spec/tasks/0/template", 0, 1),
                                                    ("mpiworker", "/spec/tasks/1/template", 8, 2)],
                 id="volcano-job"),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_operator_templates_and_groups(obj: dict[str, Any], expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S)
    got = [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results]
    assert got == expected
    for r in results:
        if r.profile.gpus_per_pod > 0 and r.profile.pods > 1:
            assert r.decision.tier == "hbm-nvlink", r.template.role  # a multi-pod GPU job needs NVLink


def test_a_volcano_job_is_not_a_batch_job() -> None:
    volcano = example("volcano-job-mpi.yaml")
    assert [t.pointer for t in pod_templates(volcano)] == ["/spec/tasks/0/template", "/spec/tasks/1/template"]
    batch = copy.deepcopy(volcano)
    batch["apiVersion"] = "batch/v1"
    assert pod_templates(batch) == ()  # a batch/v1 Job keeps its template at /spec/template


def test_a_pytorchjob_pinned_to_l40s_is_misplaced_and_denied_only_under_misplaced_deny() -> None:
    """70B training over PCIe runs, slowly (its strategy is not stated, so memory is not held
    against it): admitted with the misplacement by default, refused with the fix under deny."""
    job = example("kubeflow-pytorchjob-llama-70b.yaml")
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    assert all(r.decision.allowed and [v.code for v in r.decision.misplaced] == ["tier-mismatch"]
               for r in judge(job, S))
    results = judge(job, settings_mod.from_mapping({"misplaced": "deny"}))
    assert [v.code for r in results for v in r.decision.violations] == ["tier-mismatch", "tier-mismatch"]
    assert "/spec/pytorchReplicaSpecs/Worker/template/spec/nodeSelector" in [
        v.path for r in results for v in r.decision.violations]
    assert all(v.kind == "misplaced" and "over PCIe" in v.message and "NVIDIA-A100-SXM4-80GB" in v.message
               for r in results for v in r.decision.violations)


def test_operator_kinds_are_judged_by_the_webhook() -> None:
    assert operators.REGISTRY.names <= WORKLOAD_KINDS


@pytest.mark.parametrize(("group", "pods"), [
    pytest.param({"replicas": 3}, 3, id="replicas"),
    pytest.param({"minReplicas": 2}, 2, id="min-only"),
    pytest.param({"replicas": 1, "minReplicas": 2}, 2, id="raised-to-min"),
    pytest.param({}, 0, id="crd-defaults-zero"),
    pytest.param({"replicas": 2, "numOfHosts": 4}, 8, id="multi-host"),
])
def test_ray_worker_group_pods(group: dict[str, Any], pods: int) -> None:
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
               "spec": {"workerGroupSpecs": [{**group, "groupName": "g", "template": tpl(1)}]}}
    assert [f.pods for f in operators.templates(cluster)] == [pods]


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param(3, 3, id="int"), pytest.param("3", 3, id="digit-string"), pytest.param(" 3 ", 3, id="padded"),
    pytest.param(None, 1, id="absent-default"), pytest.param(True, 1, id="bool-is-no-count"),
    pytest.param(-2, 0, id="negative"), pytest.param("-2", 0, id="negative-string"),
    pytest.param(10**30, operators.MAX_PODS, id="huge"), pytest.param("9" * 400, 1, id="huge-string"),
    pytest.param("--2", 1, id="double-minus"), pytest.param("\u0664", 1, id="arabic-indic-digit"),
    pytest.param("1_000", 1, id="underscore"), pytest.param(2.5, 1, id="float"), pytest.param("three", 1, id="word"), pytest.param({"a": 1}, 1, id="mapping"),
])
def test_counts(value: Any, expected: int) -> None:
    assert operators.count(value) == expected


@pytest.mark.parametrize("spec", [
    pytest.param({"pytorchReplicaSpecs": "garbage"}, id="specs-not-a-mapping"),
    pytest.param({"pytorchReplicaSpecs": {"Worker": "garbage"}}, id="replica-spec-not-a-mapping"),
    pytest.param({"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": "garbage"}}}, id="template-string"),
    pytest.param({"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": [1, 2]}}}, id="template-list"),
    pytest.param({"pytorchReplicaSpecs": {"Worker": {"replicas": 10**9, "template": tpl(8)}}}, id="huge-replicas"),
])
def test_malformed_operator_objects_are_judged_without_a_crash(spec: dict[str, Any]) -> None:
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}, "spec": spec}
    for r in judge(obj, S):
        assert r.profile.pods <= operators.MAX_PODS


@pytest.mark.parametrize("api_version", [[], {"a": 1}, None, 3], ids=["list", "mapping", "none", "int"])
def test_an_unhashable_api_version_is_no_operator(api_version: Any) -> None:
    """Found by the mutation fuzzer: a list as apiVersion made the (apiVersion, kind) lookup raise."""
    job = example("volcano-job-mpi.yaml")
    job["apiVersion"] = api_version
    assert pod_templates(job) == ()
