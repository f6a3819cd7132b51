"""Older API versions of kinds already read (issue 28): KubeRay ``ray.io/v1alpha1`` and KFServing's
``serving.kubeflow.org/v1beta1`` InferenceService have the shape of the current ones and are read by
the same readers, with their own webhook rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()


def example(name: str, kind: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "examples" / name).read_text())
    return next(d for d in docs if isinstance(d, dict) and d.get("kind") == kind)


def facts(obj: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods, r.profile.model)
            for r in judge(obj, S)]


@pytest.mark.parametrize(("name", "kind", "old"), [
    pytest.param("ray-cluster-gpu-workers.yaml", "RayCluster", "ray.io/v1alpha1", id="raycluster"),
    pytest.param("rayjob-finetune.yaml", "RayJob", "ray.io/v1alpha1", id="rayjob"),
    pytest.param("rayservice-llm-qwen2.5-32b-tp2.yaml", "RayService", "ray.io/v1alpha1", id="rayservice"),
    pytest.param("kfserving-isvc-llama-3.1-8b.yaml", "InferenceService", "serving.kserve.io/v1beta1",
                 id="kfserving-as-kserve"),
])
def test_old_version_reads_as_the_new(name: str, kind: str, old: str) -> None:
    obj = example(name, kind)
    other = copy.deepcopy(obj)
    other["apiVersion"] = old
    assert facts(obj) == facts(other) and facts(obj)
    assert any(r.profile.gpus_per_pod > 0 for r in judge(obj, S))


def test_the_v1alpha1_example_is_the_v1_reading() -> None:
    """examples/ray-cluster-v1alpha1-llama-2-70b.yaml, as written (v1alpha1), and as v1: the same
    groups, GPUs, model and tensor parallelism."""
    obj = example("ray-cluster-v1alpha1-llama-2-70b.yaml", "RayCluster")
    assert obj["apiVersion"] == "ray.io/v1alpha1"
    as_v1 = copy.deepcopy(obj)
    as_v1["apiVersion"] = "ray.io/v1"
    assert facts(obj) == facts(as_v1)
    (workers,) = [r for r in judge(obj, S) if r.profile.gpus_per_pod]
    assert (workers.profile.gpus_per_pod, workers.profile.pods, workers.profile.tensor_parallel) == (4, 2, 8)
    assert workers.profile.model and "70b" in workers.profile.model.lower()


@pytest.mark.parametrize(("group", "version", "plural"), [
    pytest.param("ray.io", "v1alpha1", "rayclusters", id="ray"),
    pytest.param("serving.kubeflow.org", "v1beta1", "inferenceservices", id="kfserving"),
])
def test_sent_to_the_webhook(group: str, version: str, plural: str) -> None:
    assert any(r["apiGroups"] == [group] and r["apiVersions"] == [version] and plural in r["resources"]
               for r in operators.REGISTRY.webhook_rules())


def test_kfserving_pods_group_by_their_own_label() -> None:
    member = operators.REGISTRY.membership({"serving.kubeflow.org/inferenceservice": "llama"}, {})
    assert member is not None and member.name == "llama" and not member.always
