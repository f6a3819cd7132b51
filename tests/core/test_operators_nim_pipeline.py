"""NIM NIMPipeline (issue 28): each enabled service read as the NIMService the operator creates from it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.judging import judge
from webhook.core import operators, settings as settings_mod

S = settings_mod.default()


def nim(repo: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return {"image": {"repository": repo, "tag": "1.0"}, "resources": {"limits": {"nvidia.com/gpu": gpus}}, **spec}


def pipeline(*services: Any) -> dict[str, Any]:
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMPipeline", "metadata": {"name": "p", "namespace": "n"},
            "spec": {"services": list(services)}}


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(pipeline({"name": "llm", "enabled": True, "spec": nim("nvcr.io/nim/meta/llama-3.1-8b-instruct", replicas=2)},
                          {"name": "off", "enabled": False, "spec": nim("nvcr.io/nim/meta/llama-3.1-70b-instruct", 4)},
                          {"name": "unset", "spec": nim("nvcr.io/nim/meta/llama-3.1-70b-instruct", 4)}),
                 [("llm", "/spec/services/0", 1, 1, "meta/llama-3.1-8b-instruct")], id="only-enabled"),
    # a multi-node service keeps its NIMService group (pipeline 2 pods per LeaderWorkerSet group)
    pytest.param(pipeline({"name": "big", "enabled": True, "spec": nim(
        "nvcr.io/nim/meta/llama-3.1-405b-instruct", 8, multiNode={"parallelism": {"tensor": 8, "pipeline": 2}})}),
                 [("big", "/spec/services/0", 8, 2, "meta/llama-3.1-405b-instruct")], id="multi-node"),
])
def test_enabled_services(obj: dict[str, Any], expected: list[tuple[str, str, int, int, str]]) -> None:
    results = judge(obj, S)
    got = [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods, r.profile.model)
           for r in results if r.profile.gpus_per_pod > 0]
    assert [g[:4] for g in got] == [e[:4] for e in expected]
    assert all(g[4] is not None and g[4].endswith(e[4].split("/")[-1]) for g, e in zip(got, expected))


def test_dependencies_env_is_merged() -> None:
    obj = pipeline({"name": "llm", "enabled": True, "dependencies": [{"name": "emb", "port": 8000,
                                                                       "envName": "EMBED_URL", "envValue": "http://emb"}],
                    "spec": nim("nvcr.io/nim/meta/llama-3.1-8b-instruct", env=[{"name": "EMBED_URL", "value": "old"}])})
    env = operators.templates(obj)[0].holder["spec"]["containers"][0]["env"]
    assert [e for e in env if e["name"] == "EMBED_URL"] == [{"name": "EMBED_URL", "value": "http://emb"}]


@pytest.mark.parametrize("spec", [None, {"services": "x"}, {"services": [1, None, {"enabled": True}]},
                                  {"services": [{"enabled": True, "name": 7, "spec": "x", "dependencies": "y"}]}])
def test_hostile_shapes_never_raise(spec: Any) -> None:
    judge({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMPipeline", "spec": spec}, S)
