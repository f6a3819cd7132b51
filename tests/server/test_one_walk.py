"""One walk per request: the templates the engine found, and the secret env values in them, travel
with its result (``engine.Judgement``), so completing the reply never walks the object again.

Counted, not timed: ``workloads.pod_templates`` as the engine calls it and ``redaction.secret_values``
are wrapped with counters, and each admission path is driven once. The redaction itself must still
hold: a secret value the user quoted as the model comes back as ``[redacted]``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any, Callable

import pytest

from webhook.core import engine, redaction, settings as settings_mod, workloads
from webhook.core.redaction import REDACTED
from webhook.server import admission, review
from tests import judging

TOKEN_VALUE = "Planted-Secret-Value-0123456789"
"""Not credential-shaped: only the Judgement's secrets can redact it."""


def pod(gpus: int, *, model: str = "meta-llama/Llama-3.1-70B-Instruct", product: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.8.5",
        "args": ["--model", model, "--tensor-parallel-size", str(gpus)],
        "env": [{"name": "HF_TOKEN", "value": TOKEN_VALUE}],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}


def deployment(template_pod: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": template_pod["spec"]}}}


def request(obj: dict[str, Any]) -> review.Request:
    body = {"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {
        "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": obj["kind"]}, "operation": "CREATE",
        "name": obj["metadata"]["name"], "namespace": "ml", "object": obj}}
    return review.parse(json.dumps(body).encode(), "application/json")


@pytest.fixture()
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    seen: Counter[str] = Counter()

    def counting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    # every module that bound the function (``from ... import pod_templates``), wherever it lives,
    # so a response path that walks the object through any import is counted too
    for name, original in (("pod_templates", workloads.pod_templates), ("secret_values", redaction.secret_values)):
        wrapped = counting(name, original)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("webhook") and getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, wrapped)
    return seen


SETTINGS = settings_mod.default()

PATHS = [
    pytest.param(lambda: admission.mutate(request(pod(4)), SETTINGS), id="mutate-pins-a-pod"),
    pytest.param(lambda: admission.validate(request(pod(4, product="NVIDIA-L40S")), SETTINGS, mode="enforce"),
                 id="validate-denies-a-pod"),
    pytest.param(lambda: admission.validate(request(pod(4, product="NVIDIA-L40S")), SETTINGS, mode="audit"),
                 id="audit-warns-a-pod"),
    pytest.param(lambda: admission.validate(request(deployment(pod(4, product="NVIDIA-L40S"))), SETTINGS,
                                            mode="enforce"), id="validate-denies-a-deployment"),
    pytest.param(lambda: admission.validate(request(pod(1, model="BAAI/bge-large-en-v1.5")), SETTINGS, mode="enforce"),
                 id="validate-admits-a-small-pod"),
]


@pytest.mark.parametrize("call", PATHS)
def test_the_object_is_walked_once(call: Callable[[], admission.Outcome], counts: Counter[str]) -> None:
    outcome = call()
    assert outcome.judged
    assert counts["pod_templates"] == 1, counts
    assert counts["secret_values"] <= 1, counts


@pytest.mark.parametrize("mode", ["enforce", "audit"])
def test_a_quoted_secret_is_redacted_with_the_engines_secrets(mode: str) -> None:
    # the secret value pasted into an annotation: the engine's message quotes what does not parse
    # (on purpose, it names the user's input), so only the reply's redaction keeps it out
    obj = pod(4, product="NVIDIA-L40S")
    obj["metadata"]["annotations"] = {"gpu-admission.io/tier": TOKEN_VALUE}
    results = judging.judge(obj, SETTINGS, mode=mode)
    quoted = [m for r in results for m in (*[v.message for v in r.decision.violations], *r.decision.warnings)]
    assert any(TOKEN_VALUE in m for m in quoted), "the engine no longer quotes the annotation: pick another path"
    outcome = admission.validate(request(obj), SETTINGS, mode=mode)
    text = json.dumps(outcome.review)
    assert TOKEN_VALUE not in text
    assert REDACTED in text


def test_judgement_secrets_come_from_the_judged_templates() -> None:
    judged = judging.judge_review(deployment(pod(4)), SETTINGS)
    assert judged.secrets == (TOKEN_VALUE,)
    assert [r.template.pointer for r in judged.results] == ["/spec/template"]
    assert judging.judge_review({"kind": "ConfigMap"}, SETTINGS).secrets == ()
