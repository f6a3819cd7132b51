"""llama.cpp and GGUF files (issue 28): every ``llama-server`` flag form, the model and its size from
the GGUF file name, the weight bytes from the llama.cpp type in that name, and two engine judgements
where the size and the split over GPUs decide the tier."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import models, settings as settings_mod, sizing
from webhook.core.domain import LaunchSpec
from webhook.core.launchers import parse_container
from tests.core.test_launchers import c
from tests.judging import judge

S = settings_mod.default()
SERVER_CUDA = "ghcr.io/ggml-org/llama.cpp:server-cuda"
Q4 = "/models/llama-3.1-8b-instruct-q4_k_m.gguf"


@pytest.mark.parametrize(("container", "expected"), [
    pytest.param(c(["llama-server", "-m", Q4]), dict(framework="llama.cpp", model=Q4, quantization="gguf-q4_k_m"),
                 id="short-model"),
    pytest.param(c(["/app/llama-server", "--model", "/m/Qwen2.5-32B-Instruct-Q5_K_M.gguf"]),
                 dict(model="/m/Qwen2.5-32B-Instruct-Q5_K_M.gguf", quantization="gguf-q5_k_m"), id="long-model"),
    pytest.param(c(["llama-server", "--model=/m/Mistral-7B-Instruct-v0.3-f16.gguf"]), dict(quantization="gguf-f16"),
                 id="equals-f16"),
    pytest.param(c(["llama-server", "-hf", "bartowski/Qwen2.5-14B-Instruct-GGUF:Q6_K"]),
                 dict(model="bartowski/Qwen2.5-14B-Instruct-GGUF:Q6_K", quantization="gguf-q6_k"), id="hf-repo-with-quant"),
    pytest.param(c(["llama-server", "--hf-repo", "ggml-org/Qwen3-8B-GGUF", "--hf-file", "Qwen3-8B-BF16.gguf"]),
                 dict(model="ggml-org/Qwen3-8B-GGUF", quantization="gguf-bf16"), id="hf-repo-and-file"),
    pytest.param(c(["llama-server", "-hfr", "ggml-org/Qwen3-8B-GGUF"]), dict(quantization="gguf-q4_k_m"),
                 id="hf-repo-default-q4_k_m"),
    pytest.param(c(image=SERVER_CUDA, env={"LLAMA_ARG_MODEL": "/m/gemma-3-27b-it-IQ4_XS.gguf"}),
                 dict(framework="llama.cpp", model="/m/gemma-3-27b-it-IQ4_XS.gguf", quantization="gguf-iq4_xs"),
                 id="image-env-only"),
    pytest.param(c(image="ghcr.io/ggml-org/llama.cpp:server", args=["-m", Q4, "-ngl", "99"]),
                 dict(framework="llama.cpp", model=Q4, uses_all_gpus=True, tensor_parallel=None), id="image-args-ngl"),
    pytest.param(c(["llama-server", "-m", Q4, "--n-gpu-layers", "999", "--split-mode", "layer"]),
                 dict(uses_all_gpus=True, tensor_parallel=None), id="split-layer-every-gpu"),
    pytest.param(c(["llama-server", "-m", Q4, "-sm", "row"]), dict(uses_all_gpus=True), id="split-row-every-gpu"),
    pytest.param(c(["llama-server", "-m", Q4, "-sm", "none"]), dict(uses_all_gpus=False, tensor_parallel=1),
                 id="split-none-one-gpu"),
    pytest.param(c(["llama-server", "-m", Q4, "--tensor-split", "1,1,0"]), dict(tensor_parallel=2), id="tensor-split-shares"),
    pytest.param(c(["llama-server", "-m", Q4, "-ts", "3,1"]), dict(tensor_parallel=2), id="ts-uneven"),
])
def test_llama_server_forms(container: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = parse_container(container)
    assert isinstance(spec, LaunchSpec)
    assert {k: getattr(spec, k) for k in expected} == expected


@pytest.mark.parametrize(("name", "quant"), [
    pytest.param("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gguf-q4_k_m", id="q4_k_m"),
    pytest.param("qwen2.5-7b-instruct-q8_0.gguf", "gguf-q8_0", id="q8_0-lower"),
    pytest.param("Mistral-7B-Instruct-v0.3.Q5_K_S.gguf", "gguf-q5_k_s", id="q5_k_s-dotted"),
    pytest.param("gemma-2-9b-it-IQ3_XXS.gguf", "gguf-iq3_xxs", id="iq3_xxs"),
    pytest.param("Llama-3.2-3B-Instruct-f16.gguf", "gguf-f16", id="f16-gguf"),
    pytest.param("Qwen3-8B-BF16.gguf", "gguf-bf16", id="bf16-gguf"),
    pytest.param("tinyllama-1.1b-chat-f32.gguf", "gguf-f32", id="f32-gguf"),
    pytest.param("meta-llama/Llama-3.1-8B-Instruct-f16", None, id="f16-without-gguf-is-half-precision"),
    pytest.param("/models/model.gguf", "gguf", id="gguf-of-no-visible-type"),
    pytest.param("llama3.1:8b-instruct-q6_K", "gguf-q6_k", id="ollama-tag"),
])
def test_gguf_type_is_read_off_the_name(name: str, quant: str | None) -> None:
    assert models.quantization_from_name(name) == quant


@pytest.mark.parametrize(("path", "params_b"), [
    pytest.param(Q4, 8.0, id="llama-3.1-8b"),
    pytest.param("/models/Qwen2.5-32B-Instruct-Q4_K_M.gguf", 32.0, id="qwen2.5-32b"),
    pytest.param("/models/Mistral-7B-Instruct-v0.3-f16.gguf", 7.0, id="f16-file"),
])
def test_model_size_comes_from_the_file_name(path: str, params_b: float) -> None:
    info = models.describe(path)
    assert info is not None and info.params_b == pytest.approx(params_b, rel=0.05)


@pytest.mark.parametrize(("quant", "bits"), [
    # ggml-org/llama.cpp tools/quantize/README.md, bits/weight of Llama-3.1-8B
    pytest.param("gguf-q4_k_m", 4.8944, id="q4_k_m"),
    pytest.param("gguf-q5_k_m", 5.7036, id="q5_k_m"),
    pytest.param("gguf-q6_k", 6.5633, id="q6_k"),
    pytest.param("gguf-q8_0", 8.5008, id="q8_0"),
    pytest.param("gguf-iq2_xxs", 2.3824, id="iq2_xxs"),
    pytest.param("gguf-f16", 16.0, id="f16"),
    pytest.param("gguf-bf16", 16.0, id="bf16"),
    pytest.param("gguf-q4_0", 4.5, id="q4_0-block-layout"),
    pytest.param("gguf-q5_k_xl", 6.0, id="unlisted-5-bit-as-widest-5-bit"),
    pytest.param("gguf", 4.8944, id="no-type-as-q4_k_m"),
])
def test_gguf_bytes_per_weight(quant: str, bits: float) -> None:
    got = sizing.bytes_per_param(dtype=None, quantization=quant)
    assert got == pytest.approx(bits / 8, abs=1e-4)


def test_a_q6_k_file_is_not_sized_as_4_bit() -> None:
    """Each type has its own width: sized as Q4_K_M, a Q6_K file would be a third too small."""
    q6 = sizing.bytes_per_param(dtype=None, quantization=models.quantization_from_name("x-Q6_K.gguf"))
    q4 = sizing.bytes_per_param(dtype=None, quantization=models.quantization_from_name("x-Q4_K_M.gguf"))
    assert q6 / q4 > 1.3


# --------------------------------------------------------------------------- through the engine


def server_pod(model: str, gpus: int, *flags: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama", "namespace": "ai"},
            "spec": {"containers": [{"name": "server", "image": SERVER_CUDA, "args": ["-m", model, "-ngl", "99", *flags],
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


@pytest.mark.parametrize(("model", "params_b", "quant", "tier"), [
    pytest.param(Q4, 8.0, "gguf-q4_k_m", "cost", id="8b-q4-two-gpus-cost-tier"),
    pytest.param("/models/Llama-3.3-70B-Instruct-Q4_K_M.gguf", 70.6, "gguf-q4_k_m", "hbm-nvlink", id="70b-q4-large-model-tier"),
])
def test_gguf_size_and_split_choose_the_tier(model: str, params_b: float, quant: str, tier: str) -> None:
    (r,) = judge(server_pod(model, 2), S)
    p = r.profile
    assert (p.framework, p.quantization, p.tensor_parallel) == ("llama.cpp", quant, 2)
    assert p.params_b == pytest.approx(params_b, rel=0.02)
    assert p.bytes_per_param == pytest.approx(4.8944 / 8, abs=1e-4)
    assert r.decision.tier == tier, r.decision


def test_split_mode_none_is_one_gpu_of_a_two_gpu_pod() -> None:
    (r,) = judge(server_pod(Q4, 2, "-sm", "none"), S)
    assert r.profile.tensor_parallel == 1 and r.profile.gpus_per_pod == 2
