"""The core's one entry: ``engine.judge(Request)`` for every kind and operation, and the one rule
that decides an object's mode (``engine.resolve_mode``)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import engine, settings as settings_mod
from tests.core.test_dra import claim, exactly

ENFORCE = settings_mod.default()
AUDIT = settings_mod.from_mapping({"mode": "audit"})


@pytest.mark.parametrize("asked, settings, expected", [
    pytest.param({}, ENFORCE, "enforce", id="policy-enforce"),
    pytest.param({}, AUDIT, "audit", id="policy-audit"),
    pytest.param({"mode": "enforce"}, AUDIT, "enforce", id="check-asks-enforce-of-an-audit-policy"),
    pytest.param({"mode": "audit"}, ENFORCE, "audit", id="check-asks-audit"),
    pytest.param({"entry_mode": "audit"}, ENFORCE, "audit", id="audit-namespace-entry"),
    pytest.param({"entry_mode": "enforce"}, AUDIT, "audit", id="entry-never-hardens-the-kill-switch"),
    pytest.param({"entry_mode": "enforce"}, ENFORCE, "enforce", id="enforce-entry-enforce-policy"),
])
def test_resolve_mode(asked: dict[str, str], settings: settings_mod.Settings, expected: str) -> None:
    assert engine.resolve_mode(settings, **asked) == expected
    assert engine.judge(engine.Request(four_gpu_claim(), mutate=False, **asked), settings).results[0].decision.mode == expected


def four_gpu_claim() -> dict[str, Any]:
    return claim(exactly("gpus", 4))


@pytest.mark.parametrize("asked, allowed, patched, mode", [
    pytest.param(engine.Request(four_gpu_claim()), True, True, "enforce", id="create-mutated"),
    pytest.param(engine.Request(four_gpu_claim(), mutate=False), False, False, "enforce", id="create-as-written-denied"),
    pytest.param(engine.Request(four_gpu_claim(), "UPDATE", four_gpu_claim(), mutate=False), True, False, "audit",
                 id="update-judged-in-audit"),
    pytest.param(engine.Request(four_gpu_claim(), "UPDATE", four_gpu_claim()), True, False, "audit",
                 id="update-never-patched"),
])
def test_claims_go_through_the_entry(asked: engine.Request, allowed: bool, patched: bool, mode: str) -> None:
    """A claim's spec is immutable: only a CREATE is patched, an UPDATE is judged in audit."""
    (result,) = engine.judge(asked, ENFORCE).results
    assert result.claim is not None and result.claim.gpu_requests == ("gpus",)
    assert (result.decision.allowed, bool(result.patch), result.decision.mode) == (allowed, patched, mode)


def test_a_scale_up_is_admitted_with_what_its_new_pods_meet() -> None:
    pod_spec = {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.8.5",
                                "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
                                "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                           "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod_spec}}}
    created = engine.judge(engine.Request(deployment), ENFORCE).results
    assert not all(r.decision.allowed for r in created), "the fixture must be one enforce denies"
    scaled = engine.judge(engine.Request(deployment, "UPDATE", scale_to=3), ENFORCE).results
    assert all(r.decision.allowed and not r.patch and not r.decision.violations for r in scaled)
    assert any(w.startswith("scale-up") for r in scaled for w in r.decision.warnings)
