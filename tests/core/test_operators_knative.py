"""Knative Service (issue 28): the revision template judged, never patched (Knative's own webhook refuses
affinity and nodeSelector by default), its pods counted from the autoscaling annotations, independent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.operators import knative

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()


def service(annotations: dict[str, Any] | None = None, gpus: str = "1", **pod: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai",
                            "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct",
                                        f"--tensor-parallel-size={gpus}"],
                            "resources": {"limits": {"nvidia.com/gpu": gpus}}}], **pod}
    return {"apiVersion": knative.API_VERSION, "kind": "Service", "metadata": {"name": "llm", "namespace": "s"},
            "spec": {"template": {"metadata": {"annotations": annotations or {}}, "spec": spec}}}


@pytest.mark.parametrize(("annotations", "pods"), [
    pytest.param({}, 1, id="defaults-initial-1"),
    pytest.param({"autoscaling.knative.dev/min-scale": "3"}, 3, id="min-scale"),
    pytest.param({"autoscaling.knative.dev/minScale": "2"}, 2, id="minScale-old-spelling"),
    pytest.param({"autoscaling.knative.dev/min-scale": "2", "autoscaling.knative.dev/minScale": "5"}, 2,
                 id="hyphenated-first"),
    pytest.param({"autoscaling.knative.dev/initial-scale": "4", "autoscaling.knative.dev/min-scale": "1"}, 4,
                 id="initial-above-min"),
    pytest.param({"autoscaling.knative.dev/initial-scale": "0"}, 0, id="initial-zero"),
    pytest.param({"autoscaling.knative.dev/min-scale": "many"}, 1, id="not-a-count"),
])
def test_revision_pods(annotations: dict[str, Any], pods: int) -> None:
    found = list(operators.templates(service(annotations)))
    assert [(f.path, f.role, f.pods, f.group, f.synthesized) for f in found] == [
        (("spec", "template"), "revision", pods, 1, True)]


def test_judged_but_never_patched_and_said_why() -> None:
    results = judge(service({"autoscaling.knative.dev/min-scale": "2"}, gpus="4"), S)
    assert [(r.profile.gpus_per_pod, r.profile.pods, r.template.pointer) for r in results] == [(4, 1, "/spec/template")]
    assert results[0].patch == ()
    assert any("kubernetes.podspec-affinity" in w for w in results[0].decision.warnings)


def test_example_is_read() -> None:
    obj = yaml.safe_load((ROOT / "examples" / "knative-service-vllm-qwen2.5-7b.yaml").read_text())
    results = judge(obj, S)
    assert [(r.template.role, r.profile.gpus_per_pod, r.profile.model) for r in results] == [
        ("revision", 1, "Qwen/Qwen2.5-7B-Instruct")]
    assert operators.templates(obj)[0].pods == 2


def test_a_core_service_is_not_read() -> None:
    assert operators.templates({"apiVersion": "v1", "kind": "Service", "spec": {"template": {}}}) == []


@pytest.mark.parametrize("spec", [None, "x", {"template": "x"}, {"template": {"metadata": "x", "spec": None}}])
def test_hostile_shapes_never_raise(spec: Any) -> None:
    judge({"apiVersion": knative.API_VERSION, "kind": "Service", "spec": spec}, S)


@pytest.mark.parametrize(("labels", "source"), [
    pytest.param({"serving.knative.dev/service": "llm"}, "Knative Service", id="knative"),
    # a serverless KServe predictor's pods carry both: the InferenceService names the group
    pytest.param({"serving.knative.dev/service": "llm-predictor", "serving.kserve.io/inferenceservice": "llm"},
                 "KServe InferenceService", id="kserve-serverless"),
])
def test_pod_membership(labels: dict[str, str], source: str) -> None:
    member = operators.REGISTRY.membership(labels, {})
    assert member is not None and member.source == source and not member.always
