"""ConfigMaps in the same input (issue 15, point 1): the env a pod reads from them is resolved as the
kubelet resolves it, so the model and TP they hold are judged; what is not in the input stays unknown."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.core import configmaps, settings as settings_mod
from webhook.core.engine import runtime_context
from tests.judging import judge

S = settings_mod.default()


def deployment(env: list[dict[str, Any]] | None = None, env_from: list[dict[str, Any]] | None = None,
               command: list[str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                         "command": command or ["sh", "-c", "vllm serve $MODEL --tensor-parallel-size $TP"],
                         "resources": {"limits": {"nvidia.com/gpu": 4}}}
    if env is not None:
        c["env"] = env
    if env_from is not None:
        c["envFrom"] = env_from
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ai"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [c]}}}}


def configmap(name: str, data: dict[str, str], namespace: str | None = "ai") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


MODEL = {"MODEL": "meta-llama/Llama-3.1-70B-Instruct", "TP": "4"}
KEY_REFS = [{"name": k, "valueFrom": {"configMapKeyRef": {"name": "llm-config", "key": k}}} for k in ("MODEL", "TP")]

CASES = [
    # object, ConfigMaps in the input, expected (model, TP)
    pytest.param(deployment(env_from=[{"configMapRef": {"name": "llm-config"}}]), [configmap("llm-config", MODEL)],
                 ("meta-llama/Llama-3.1-70B-Instruct", 4), id="envFrom"),
    pytest.param(deployment(env=KEY_REFS), [configmap("llm-config", MODEL)],
                 ("meta-llama/Llama-3.1-70B-Instruct", 4), id="configMapKeyRef"),
    pytest.param(deployment(env_from=[{"configMapRef": {"name": "llm-config"}, "prefix": "X_"}],
                            command=["sh", "-c", "vllm serve $X_MODEL -tp $X_TP"]), [configmap("llm-config", MODEL)],
                 ("meta-llama/Llama-3.1-70B-Instruct", 4), id="envFrom-prefix"),
    pytest.param(deployment(env=[*KEY_REFS, {"name": "TP", "value": "2"}]), [configmap("llm-config", MODEL)],
                 ("meta-llama/Llama-3.1-70B-Instruct", 2), id="later-env-wins"),
    pytest.param(deployment(env_from=[{"configMapRef": {"name": "llm-config"}}]),
                 [configmap("llm-config", MODEL, namespace=None)], ("meta-llama/Llama-3.1-70B-Instruct", 4),
                 id="configmap-without-namespace"),
    pytest.param(deployment(env_from=[{"configMapRef": {"name": "llm-config"}}]),
                 [configmap("llm-config", MODEL, namespace="other")], (None, None), id="other-namespace"),
    pytest.param(deployment(env_from=[{"configMapRef": {"name": "elsewhere"}}]), [configmap("llm-config", MODEL)],
                 (None, None), id="not-in-input"),
    pytest.param(deployment(env=KEY_REFS), [configmap("llm-config", {"MODEL": MODEL["MODEL"]})],
                 ("meta-llama/Llama-3.1-70B-Instruct", None), id="missing-key-stays-unknown"),
]


@pytest.mark.parametrize(("obj", "maps", "expected"), CASES)
def test_configmap_env_in_the_same_input_is_read(obj: dict[str, Any], maps: list[dict[str, Any]],
                                                 expected: tuple[str | None, int | None]) -> None:
    before = copy.deepcopy(obj)
    (r,) = judge(obj, S, context=runtime_context(maps))
    assert (r.profile.model, r.profile.tensor_parallel if r.profile.tp_declared else None) == expected
    assert obj == before  # only a copy is read
    if expected[0] is None:
        assert r.profile.hidden or r.decision.warnings  # unknown, and said so


def test_without_the_configmap_the_values_are_unknown() -> None:
    (r,) = judge(deployment(env=KEY_REFS), S)
    assert r.profile.model is None and any("ConfigMap llm-config" in h for h in r.profile.hidden)


@pytest.mark.parametrize("data", [None, "x", {"a": 1}, {1: "x"}], ids=["none", "string", "non-string-value", "int-key"])
def test_malformed_configmaps_never_raise(data: Any) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "llm-config", "namespace": "ai"}, "data": data}
    judge(deployment(env_from=[{"configMapRef": {"name": "llm-config"}}], env=KEY_REFS), S,
          context=runtime_context([cm]))
    data_read = configmaps.data_of(cm)
    assert data_read is None or all(isinstance(k, str) and isinstance(v, str) for k, v in data_read.items())
