"""Issue 28: a server's YAML ``--config`` file, written by the container's own script (a
here-document) or mounted from a ConfigMap of the input, read as vLLM and SGLang read it: its keys
become options placed before the command line's, so the command line wins. The configs below are
written for these tests with the option names of vLLM and SGLang."""

from __future__ import annotations

from typing import Any

import pytest

from tests.core.test_launchers import c
from tests.judging import judge
from webhook.core import settings as settings_mod
from webhook.core.engine import runtime_context
from webhook.core.launchers import parse_container

S = settings_mod.default()

VLLM_CONFIG = "model: meta-llama/Llama-3.1-70B-Instruct\ntensor-parallel-size: 4\ngpu_memory_utilization: 0.9\n"
SGLANG_CONFIG = "model-path: Qwen/Qwen2.5-72B-Instruct\ntp-size: 8\nenable-dp-attention: false\n"


def sh(script: str, **kw: Any) -> dict[str, Any]:
    return c(["/bin/sh", "-c", script], **kw)


def heredoc(config: str, launch: str, path: str = "/config.yaml") -> dict[str, Any]:
    return sh(f"cat <<EOF > {path}\n{config}EOF\n{launch}")


# container, expected (model, TP, PP), a note or hidden entry fragment (None: nothing about a config)
CASES = [
    pytest.param(heredoc(VLLM_CONFIG, "vllm serve --config /config.yaml"),
                 ("meta-llama/Llama-3.1-70B-Instruct", 4, None), "read from its --config file", id="vllm-heredoc"),
    pytest.param(heredoc(VLLM_CONFIG, "vllm serve --config /config.yaml -tp 8"),
                 ("meta-llama/Llama-3.1-70B-Instruct", 8, None), None, id="vllm-command-line-wins"),
    pytest.param(heredoc(VLLM_CONFIG, "vllm serve Qwen/Qwen2.5-7B-Instruct --config /config.yaml"),
                 ("Qwen/Qwen2.5-7B-Instruct", 4, None), None, id="vllm-positional-model-wins"),
    pytest.param(heredoc("tensor_parallel_size: 2\npipeline_parallel_size: 2\n",
                         "python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-72B-Instruct "
                         "--config /config.yaml"),
                 ("Qwen/Qwen2.5-72B-Instruct", 2, 2), None, id="vllm-module-underscore-keys"),
    pytest.param(dict(heredoc(VLLM_CONFIG, "vllm serve --config config.yaml", path="/srv/config.yaml"),
                      workingDir="/srv"),
                 ("meta-llama/Llama-3.1-70B-Instruct", 4, None), None, id="vllm-relative-to-workdir"),
    pytest.param(heredoc(VLLM_CONFIG, "vllm serve --config=/config.yaml"),
                 (None, None, None), "--config file", id="vllm-config-equals-is-not-read"),
    pytest.param(heredoc(VLLM_CONFIG, "vllm serve --config /config.json", path="/config.json"),
                 (None, None, None), "ends in .yaml or .yml", id="vllm-refuses-non-yaml-name"),
    pytest.param(heredoc("model: [unclosed\n", "vllm serve --config /config.yaml"),
                 (None, None, None), "does not parse as YAML", id="vllm-malformed-yaml"),
    pytest.param(heredoc("- a\n- b\n", "vllm serve --config /config.yaml"),
                 (None, None, None), "not a mapping", id="vllm-not-a-mapping"),
    pytest.param(sh("vllm serve --config /etc/vllm/config.yaml"),
                 (None, None, None), "--config file", id="vllm-file-not-shown-stays-hidden"),
    pytest.param(heredoc("model: x\nserved-model-name: [a, b]\nhf-overrides: {a: 1}\n", "vllm serve --config /config.yaml"),
                 ("x", None, None), None, id="vllm-lists-and-mappings-skipped"),
    pytest.param(heredoc(SGLANG_CONFIG, "python3 -m sglang.launch_server --config /config.yaml"),
                 ("Qwen/Qwen2.5-72B-Instruct", 8, None), "read from its --config file", id="sglang-heredoc"),
    pytest.param(heredoc(SGLANG_CONFIG, "python3 -m sglang.launch_server --config /config.yaml --tp 4"),
                 ("Qwen/Qwen2.5-72B-Instruct", 4, None), None, id="sglang-command-line-wins"),
]


@pytest.mark.parametrize(("container", "expected", "said"), CASES)
def test_config_file(container: dict[str, Any], expected: tuple[Any, ...], said: str | None) -> None:
    spec = parse_container(container)
    assert spec is not None
    assert (spec.model, spec.tensor_parallel, spec.pipeline_parallel) == expected
    if said is not None:
        assert any(said in text for text in (*spec.notes, *spec.hidden)), (spec.notes, spec.hidden)


def test_configmap_mounted_config_is_read() -> None:
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "server", "namespace": "ai"},
        "spec": {"replicas": 1, "template": {"spec": {
            "volumes": [{"name": "cfg", "configMap": {"name": "vllm-config"}}],
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                            "args": ["--config", "/etc/vllm/config.yaml"],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/vllm"}],
                            "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vllm-config", "namespace": "ai"},
          "data": {"config.yaml": VLLM_CONFIG}}
    (with_cm,) = judge(deployment, S, context=runtime_context([cm]))
    (without,) = judge(deployment, S)
    assert (with_cm.profile.model, with_cm.profile.tensor_parallel) == ("meta-llama/Llama-3.1-70B-Instruct", 4)
    assert without.profile.model is None
    assert any("--config" in h for h in without.profile.hidden)
