"""`check` on the shipped examples, one per supported kind (issue 14, "done when"): every GPU template
is reported with the GPUs per pod and the pods of its group as the kind's controller makes them, and
no GPU workload is ever `0 checked` or left unjudged. The expected numbers are read off each
example's own fields (replicas, parallelism, numNodes, TP x PP, profile counts), with the rule that
gives them in the comment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CASES = [
    # file, kind, [(template, GPUs per pod, pods in the group)] for the GPU templates, in order
    pytest.param("kubeflow-pytorchjob-llama-70b.yaml", "PyTorchJob", [("Master", 8, 4), ("Worker", 8, 4)],
                 id="pytorchjob-1-master-3-workers"),
    pytest.param("mpijob-deepspeed-llama-70b.yaml", "MPIJob", [("Worker", 8, 4)], id="mpijob-cpu-launcher"),
    pytest.param("trainjob-torch-llama.yaml", "TrainJob", [("node", 8, 4)], id="trainjob-numNodes-4"),
    pytest.param("jobset-torchrun.yaml", "JobSet", [("workers", 8, 4)], id="jobset-2-jobs-x-parallelism-2"),
    pytest.param("ray-cluster-gpu-workers.yaml", "RayCluster", [("gpu-workers", 4, 2)], id="raycluster-cpu-head"),
    # ray.io/v1alpha1: no numOfHosts, one pod per replica
    pytest.param("ray-cluster-v1alpha1-llama-2-70b.yaml", "RayCluster", [("tp-workers", 4, 2)],
                 id="raycluster-v1alpha1"),
    pytest.param("rayjob-finetune.yaml", "RayJob", [("gpu", 8, 2)], id="rayjob-minReplicas-2"),
    pytest.param("rayservice-llm-qwen2.5-32b-tp2.yaml", "RayService", [("gpu-group", 2, 1)], id="rayservice-tp2"),
    pytest.param("volcano-job-mpi.yaml", "Job", [("mpiworker", 8, 2)], id="volcano-cpu-master"),
    # KServe multi-node: TP 8 x PP 2 = 16 GPUs over nodes of 8: a head and one worker (computeRayNodeAndGPUs)
    pytest.param("kserve-isvc-llama-70b-multinode.yaml", "InferenceService", [("leader", 8, 2), ("worker", 8, 2)],
                 id="isvc-multinode"),
    # LWS size = pipeline 2: a leader and a worker of 4 GPUs (GetSize)
    pytest.param("kserve-llmisvc-llama-70b-pipeline.yaml", "LLMInferenceService", [("leader", 4, 2), ("worker", 4, 2)],
                 id="llmisvc-pipeline-2"),
    # one trial (a PyTorchJob of 1 master + 1 worker) is one group; parallelTrialCount trials are separate groups
    pytest.param("katib-experiment-llama-3.1-8b-lr.yaml", "Experiment", [("Master", 4, 2), ("Worker", 4, 2)],
                 id="katib-pytorchjob-trial"),
    # min-scale 2 independent replicas
    pytest.param("knative-service-vllm-qwen2.5-7b.yaml", "Service", [("revision", 1, 1)], id="knative-min-scale-2"),
    pytest.param("kfserving-isvc-llama-3.1-8b.yaml", "InferenceService", [("predictor", 1, 1)],
                 id="kfserving-isvc-containers"),
    # replicas 2 of one replica spec: one job
    pytest.param("hyperpod-pytorchjob-llama-3.1-70b.yaml", "HyperPodPyTorchJob", [("pods", 8, 2)],
                 id="hyperpod-2-pods"),
    # the disabled service makes no NIMService
    pytest.param("nimpipeline-rag-llama-3.1-8b.yaml", "NIMPipeline",
                 [("llama-31-8b-instruct", 1, 1), ("embedqa-1b", 1, 1)], id="nimpipeline-2-enabled"),
    # deploymentConfig.resources.gpu 2 per pod, replicas independent
    pytest.param("vllmruntime-llama-3.1-8b-tp2.yaml", "VLLMRuntime", [("vllm", 2, 1)], id="vllmruntime-tp2"),
    pytest.param("kubeai-model-qwen2.5-7b-l4.yaml", "Model", [("server", 1, 1)], id="kubeai-profile-l4-1"),
    pytest.param("nimservice-llama-3.1-8b-instruct.yaml", "NIMService", [("service", 1, 1)], id="nimservice"),
    pytest.param("kaito-workspace-llama-3.3-70b-h100.yaml", "Workspace", [("inference", 8, 1)],
                 id="kaito-preset-nd96-h100"),
    pytest.param("llmd-modelservice-llama-3.1-8b.yaml", "ModelService", [("decode", 1, 1), ("prefill", 1, 1)],
                 id="llmd-decode-prefill"),
    pytest.param("dynamo-graph-llama-3.3-70b-disagg.yaml", "DynamoGraphDeployment",
                 [("VllmDecodeWorker", 4, 1), ("VllmPrefillWorker", 4, 1)], id="dynamo-disagg"),
    # each fleet replica is its own RayCluster: a GPU head + 1 worker = 2 pods per group, whatever the replicas
    pytest.param("aibrix-rayclusterfleet-qwen2.5-72b.yaml", "RayClusterFleet", [("head", 4, 2), ("gpu-workers", 4, 2)],
                 id="aibrix-fleet-per-cluster"),
    # prefill: independent pods; decode: podGroupSize 2 (a PodSet of 2 pods)
    pytest.param("aibrix-stormservice-llama-405b-pd.yaml", "StormService", [("prefill", 8, 1), ("decode", 8, 2)],
                 id="aibrix-stormservice-podgroupsize-2"),
    pytest.param("aibrix-podset-deepseek-v3.yaml", "PodSet", [("podset", 8, 2)], id="aibrix-podset-2"),
    # the runtime's leader + worker (size 1) in the same file: a LeaderWorkerSet group of 2 pods
    pytest.param("ome-isvc-deepseek-v3-multinode.yaml", "InferenceService",
                 [("engine-leader", 8, 2), ("engine-worker", 8, 2)], id="ome-isvc-multinode"),
    pytest.param("lws-vllm-405b.yaml", "LeaderWorkerSet", [("leader", 8, 2), ("worker", 8, 2)], id="lws"),
    pytest.param("argo-workflow-eval.yaml", "Workflow", [("eval", 1, 1)], id="argo-generic"),
]


def check_json(*paths: str) -> dict:
    code, out, err = run("check", *paths, "--output", "json", "--strict")
    assert code == 0, out + err
    return json.loads(out)


@pytest.mark.parametrize(("name", "kind", "expected"), CASES)
def test_every_gpu_template_of_each_kind_is_reported(name: str, kind: str,
                                                     expected: list[tuple[str, int, int]]) -> None:
    doc = check_json(str(EXAMPLES / name))
    rows = [r for r in doc["results"] if r["kind"] == kind and r["profile"]["gpus_per_pod"] > 0]
    got = [(r["template"], r["profile"]["gpus_per_pod"], r["profile"]["pods"]) for r in rows]
    assert got == expected
    assert doc["summary"]["unjudged"] == 0 and doc["summary"]["checked"] >= len(expected)
    assert all(r["tier"] for r in rows)  # every GPU template was placed on a tier


def test_the_examples_cover_every_operator_kind() -> None:
    """A kind the engine reads without an example here would be a kind nobody saw `check` report."""
    from webhook.core import operators

    covered = {kind for _, kind, _ in (c.values for c in CASES)}
    readers = operators.REGISTRY.names - operators.REGISTRY.context_only
    missing = readers - covered - {"TFJob", "XGBoostJob", "PaddleJob", "JAXJob"}  # PyTorchJob's reader and shape
    assert not missing, missing


def test_the_whole_directory_is_judged_and_nothing_is_skipped() -> None:
    doc = check_json(str(EXAMPLES))
    assert doc["summary"]["unjudged"] == 0 and doc["summary"]["denied"] == 0
    kinds = {r["kind"] for r in doc["results"] if r["profile"]["gpus_per_pod"] > 0}
    assert {kind for _, kind, _ in (c.values for c in CASES)} <= kinds
