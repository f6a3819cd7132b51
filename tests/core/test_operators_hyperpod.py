"""SageMaker HyperPod HyperPodPyTorchJob (issue 28): every replica spec's pods are one job; a
``nprocPerNode`` other than the pod's GPUs is said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.operators import hyperpod

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()


def job(nproc: Any = None, *specs: tuple[str, Any, str]) -> dict[str, Any]:
    body: dict[str, Any] = {"replicaSpecs": [
        {"name": name, **({"replicas": replicas} if replicas is not None else {}),
         "template": {"spec": {"containers": [{"name": "c", "image": "img",
                                                "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}
        for name, replicas, gpus in specs]}
    if nproc is not None:
        body["nprocPerNode"] = nproc
    return {"apiVersion": hyperpod.API_VERSION, "kind": "HyperPodPyTorchJob", "metadata": {"name": "j"}, "spec": body}


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(job(None, ("pods", 4, "8")), [("pods", "/spec/replicaSpecs/0/template", 8, 4)], id="one-spec"),
    pytest.param(job(None, ("pods", None, "8")), [("pods", "/spec/replicaSpecs/0/template", 8, 1)], id="default-1"),
    # two replica specs are one job: 2 + 1 GPU pods, one group of 3
    pytest.param(job(None, ("a", 2, "8"), ("b", 1, "8")), [("a", "/spec/replicaSpecs/0/template", 8, 3),
                                                           ("b", "/spec/replicaSpecs/1/template", 8, 3)], id="two-specs"),
])
def test_one_job(obj: dict[str, Any], expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S)
    assert [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results] == expected


@pytest.mark.parametrize(("nproc", "note"), [
    pytest.param(None, None, id="absent"),
    pytest.param("auto", None, id="auto"),
    pytest.param("gpu", None, id="gpu"),
    pytest.param("8", None, id="equal-to-gpus"),
    pytest.param(8, None, id="equal-int"),
    pytest.param("4", "starts 4 training processes in each pod of 8 GPUs", id="fewer-than-gpus"),
    pytest.param("eight", "none of auto, cpu, gpu", id="unreadable"),
])
def test_nproc_per_node(nproc: Any, note: str | None) -> None:
    notes = operators.templates(job(nproc, ("pods", 2, "8")))[0].notes
    if note is None:
        assert notes == ()
    else:
        assert len(notes) == 1 and note in notes[0]


@pytest.mark.parametrize("command", [
    pytest.param(["hyperpodrun", "--nnodes=2", "--nproc-per-node=8", "train.py", "--model_name_or_path=m/Llama-3.1-70B",
                  "--fsdp=full_shard"], id="torchrun-flags"),
    # the pre/post-train scripts are not the training script
    pytest.param(["hyperpodrun", "--nnodes", "2", "--nproc-per-node", "8", "--pre-train-script", "pre.sh",
                  "--pre-train-args", "a b", "--post-train-script=post.sh", "--server-host=0.0.0.0", "train.py",
                  "--model_name_or_path=m/Llama-3.1-70B", "--fsdp=full_shard"], id="hyperpod-flags"),
])
def test_hyperpodrun_is_read_as_torchrun(command: list[str]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "img", "command": command, "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    (r,) = judge(pod, S)
    assert (r.profile.framework, r.profile.model, r.profile.pods) == ("torchrun", "m/Llama-3.1-70B", 2)


def test_example_is_one_group_of_two() -> None:
    obj = yaml.safe_load((ROOT / "examples" / "hyperpod-pytorchjob-llama-3.1-70b.yaml").read_text())
    assert [(r.profile.gpus_per_pod, r.profile.pods) for r in judge(obj, S)] == [(8, 2)]


@pytest.mark.parametrize("spec", [None, {"replicaSpecs": "x"}, {"replicaSpecs": [1, {"template": None}]},
                                  {"replicaSpecs": [{"replicas": "-3", "template": {"spec": {}}}]}])
def test_hostile_shapes_never_raise(spec: Any) -> None:
    judge({"apiVersion": hyperpod.API_VERSION, "kind": "HyperPodPyTorchJob", "spec": spec}, S)
