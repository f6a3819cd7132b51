"""Tests for webhook.core.models: catalog lookups, name rules and their traps, hostile input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.properties import examples

from webhook.core import models
from webhook.core.domain import ModelInfo

# --------------------------------------------------------------------------- describe: sizes
# (model, total params_b, active params_b, source)

CATALOG_CASES = [
    # Llama 3.x: HF ids, NIM names, ollama tags, version-neutral 3 / 3.1 / 3.3
    ("meta-llama/Llama-3.2-1B-Instruct", 1.23, None, "llama-3.2-1b"),
    ("llama3.2:3b", 3.21, None, "ollama-llama3.2-3b"),
    ("meta-llama/Llama-3.1-8B-Instruct", 8.0, None, "llama-3.1-8b-hf"),
    ("meta/llama-3.1-8b-instruct", 8.0, None, "llama-3.1-8b-nim"),
    ("meta-llama/Meta-Llama-3-8B", 8.0, None, "meta-llama-3-8b"),
    ("meta/llama3-8b-instruct", 8.0, None, "llama3-8b-nim"),
    ("meta-llama/Llama-3.1-70B-Instruct", 70.6, None, "llama-3.1-70b-hf"),
    ("meta/llama-3.1-70b-instruct", 70.6, None, "llama-3.1-70b-nim"),
    ("nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.0", 70.6, None, "llama-3.1-70b-nim-image"),
    ("llama3.1:70b", 70.6, None, "llama-3.1-70b-ollama"),
    ("meta-llama/Llama-3.3-70B-Instruct", 70.6, None, "llama-3.3-70b"),
    ("llama3.3", 70.6, None, "ollama-llama3.3-bare"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", 70.6, None, "meta-llama-3-70b"),
    ("meta-llama/Llama-3.1-405B-Instruct", 405.0, None, "llama-3.1-405b"),
    ("meta-llama/Llama-3.2-11B-Vision-Instruct", 10.6, None, "llama-3.2-11b-vision"),
    ("llama3.2-vision:90b", 88.6, None, "llama-3.2-90b-vision-ollama"),
    # Llama 4: the leading number is the ACTIVE count
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 109.0, 17.0, "llama-4-scout-17b-16e"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8", 400.0, 17.0, "llama-4-maverick-fp8"),
    ("llama4:scout", 109.0, 17.0, "llama-4-scout-ollama"),
    # Llama 2 and CodeLlama
    ("meta-llama/Llama-2-7b-chat-hf", 6.74, None, "llama-2-7b-chat-hf"),
    ("llama2:13b", 13.0, None, "llama-2-13b-ollama"),
    ("TheBloke/Llama-2-70B-Chat-AWQ", 69.0, None, "llama-2-70b-awq"),
    ("codellama/CodeLlama-34b-Instruct-hf", 33.7, None, "codellama-34b"),
    ("codellama:7b", 6.74, None, "codellama-7b-ollama"),
    # Mistral family: dates and versions are not sizes
    ("mistralai/Mistral-7B-Instruct-v0.1", 7.3, None, "mistral-7b-v0.1"),
    ("mistral", 7.3, None, "ollama-mistral-bare"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7, 12.9, "mixtral-8x7b-not-56b"),
    ("mixtral:8x7b", 46.7, 12.9, "mixtral-8x7b-ollama"),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", 141.0, 39.0, "mixtral-8x22b-not-176b"),
    ("mistralai/Mistral-Nemo-Instruct-2407", 12.0, None, "mistral-nemo-2407-date"),
    ("mistralai/Mistral-Large-Instruct-2407", 123.0, None, "mistral-large-2407-date"),
    ("mistralai/Mistral-Small-24B-Instruct-2501", 24.0, None, "mistral-small-24b-2501"),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 24.0, None, "mistral-small-3.1-24b"),
    # Qwen 2.5 (incl. Coder), context-length suffixes
    ("Qwen/Qwen2.5-0.5B-Instruct", 0.49, None, "qwen2.5-0.5b"),
    ("qwen2.5:1.5b", 1.54, None, "qwen2.5-1.5b-ollama"),
    ("Qwen/Qwen2.5-3B", 3.09, None, "qwen2.5-3b-base"),
    ("qwen2.5:7b", 7.61, None, "qwen2.5-7b-ollama"),
    ("Qwen/Qwen2.5-7B-Instruct-1M", 7.61, None, "qwen2.5-7b-1m-context"),
    ("Qwen/Qwen2.5-14B-Instruct", 14.7, None, "qwen2.5-14b"),
    ("Qwen/Qwen2.5-Coder-32B-Instruct", 32.5, None, "qwen2.5-coder-32b"),
    ("Qwen/Qwen2.5-72B-Instruct", 72.7, None, "qwen2.5-72b"),
    ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", 72.7, None, "qwen2.5-72b-gptq"),
    ("Qwen/Qwen2-VL-7B-Instruct", 8.29, None, "qwen2-vl-7b"),
    ("Qwen/Qwen2.5-VL-72B-Instruct", 73.4, None, "qwen2.5-vl-72b"),
    ("qwen2.5vl:7b", 8.29, None, "qwen2.5vl-7b-ollama"),
    # Qwen 3: A3B / A22B are active counts, the leading number is the total
    ("Qwen/Qwen3-8B", 8.2, None, "qwen3-8b"),
    ("Qwen/Qwen3-0.6B", 0.6, None, "qwen3-0.6b"),
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3, "qwen3-30b-a3b"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", 30.5, 3.3, "qwen3-30b-a3b-2507"),
    ("qwen3:30b", 30.5, 3.3, "qwen3-30b-ollama"),
    ("Qwen/Qwen3-235B-A22B", 235.0, 22.0, "qwen3-235b-a22b"),
    ("Qwen/Qwen3-Embedding-8B", 8.0, None, "qwen3-embedding-8b"),
    ("Qwen/Qwen3-Embedding-0.6B", 0.6, None, "qwen3-embedding-0.6b"),
    # DeepSeek
    ("deepseek-ai/DeepSeek-V3", 671.0, 37.0, "deepseek-v3"),
    ("deepseek-ai/DeepSeek-V3-0324", 671.0, 37.0, "deepseek-v3-0324-date"),
    ("deepseek-ai/DeepSeek-R1", 671.0, 37.0, "deepseek-r1"),
    ("deepseek-ai/DeepSeek-R1-0528", 671.0, 37.0, "deepseek-r1-0528-date"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1.78, None, "r1-distill-qwen-1.5b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 32.8, None, "r1-distill-qwen-32b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", 70.6, None, "r1-distill-llama-70b"),
    ("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", 15.7, 2.4, "deepseek-coder-v2-lite"),
    # Gemma
    ("google/gemma-2-2b-it", 2.6, None, "gemma-2-2b"),
    ("gemma2:27b", 27.0, None, "gemma-2-27b-ollama"),
    ("google/gemma-3-270m-it", 0.27, None, "gemma-3-270m"),
    ("google/gemma-3-12b-it", 12.2, None, "gemma-3-12b"),
    ("google/gemma-7b", 8.54, None, "gemma-7b"),
    # Phi
    ("microsoft/Phi-3-mini-4k-instruct", 3.8, None, "phi-3-mini-4k-context"),
    ("microsoft/Phi-3-medium-128k-instruct", 14.0, None, "phi-3-medium-128k-context"),
    ("phi3:mini", 3.8, None, "phi3-mini-ollama"),
    ("microsoft/Phi-3.5-MoE-instruct", 41.9, 6.6, "phi-3.5-moe"),
    ("microsoft/phi-4", 14.0, None, "phi-4"),
    ("microsoft/Phi-4-mini-instruct", 3.8, None, "phi-4-mini-longest-match"),
    # gpt-oss, Falcon, Cohere, Yi
    ("openai/gpt-oss-20b", 21.0, 3.6, "gpt-oss-20b"),
    ("gpt-oss:120b", 117.0, 5.1, "gpt-oss-120b-ollama"),
    ("tiiuae/falcon-40b", 40.0, None, "falcon-40b"),
    ("tiiuae/falcon-180B-chat", 180.0, None, "falcon-180b"),
    ("CohereForAI/c4ai-command-r-plus-08-2024", 104.0, None, "command-r-plus-date"),
    ("command-r7b", 8.0, None, "command-r7b-not-command-r"),
    ("command-r", 35.0, None, "command-r-ollama"),
    ("01-ai/Yi-34B-Chat", 34.0, None, "yi-34b"),
    ("01-ai/Yi-1.5-34B-Chat", 34.0, None, "yi-1.5-34b-version"),
    # image generation
    ("runwayml/stable-diffusion-v1-5", 0.98, None, "sd-1.5"),
    ("stabilityai/stable-diffusion-2-1", 1.3, None, "sd-2.1"),
    ("stabilityai/stable-diffusion-xl-base-1.0", 3.5, None, "sdxl-base"),
    ("stabilityai/stable-diffusion-xl-refiner-1.0", 3.1, None, "sdxl-refiner"),
    ("stabilityai/stable-diffusion-3-medium-diffusers", 2.0, None, "sd3-medium"),
    ("black-forest-labs/FLUX.1-dev", 12.0, None, "flux-dev"),
    ("black-forest-labs/FLUX.1-schnell", 12.0, None, "flux-schnell"),
    # embeddings and rerankers
    ("BAAI/bge-small-en-v1.5", 0.033, None, "bge-small"),
    ("BAAI/bge-base-en-v1.5", 0.109, None, "bge-base"),
    ("BAAI/bge-large-en-v1.5", 0.335, None, "bge-large"),
    ("BAAI/bge-m3", 0.568, None, "bge-m3-not-3m"),
    ("bge-m3", 0.568, None, "bge-m3-ollama"),
    ("BAAI/bge-reranker-v2-m3", 0.568, None, "bge-reranker-v2-m3"),
    ("intfloat/e5-large-v2", 0.335, None, "e5-large-v2"),
    ("intfloat/multilingual-e5-large", 0.56, None, "multilingual-e5-large"),
    ("intfloat/multilingual-e5-large-instruct", 0.56, None, "multilingual-e5-large-instruct"),
    ("thenlper/gte-large", 0.335, None, "gte-large"),
    ("sentence-transformers/all-MiniLM-L6-v2", 0.0227, None, "all-minilm-l6"),
    ("nomic-ai/nomic-embed-text-v1.5", 0.137, None, "nomic-embed-text-v1.5"),
    ("nomic-embed-text", 0.137, None, "nomic-embed-text-ollama"),
    ("jinaai/jina-embeddings-v2-base-en", 0.137, None, "jina-v2-base"),
    ("jinaai/jina-embeddings-v3", 0.572, None, "jina-v3"),
    # paths and object stores
    ("/models/Meta-Llama-3.1-70B-Instruct", 70.6, None, "local-path"),
    ("/models/llama-3-70b-awq", 70.6, None, "local-path-awq"),
    ("s3://bucket/llama-3-70b/", 70.6, None, "s3-trailing-slash"),
    ("hf://meta-llama/Llama-3.1-8B-Instruct", 8.0, None, "hf-uri"),
    ("pvc://model-store/models/Qwen2.5-7B-Instruct", 7.61, None, "pvc-uri"),
    ("gs://bucket/models/mixtral-8x7b-instruct/checkpoint-1000", 46.7, 12.9, "parent-dir"),
    ("/data/llama-3-70b/1/2/3/4/5", 70.6, None, "sixth-component-from-the-end"),
    (
        "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/"
        "snapshots/5206a32e0bd3067aef1ce90f5528ade7d866253f",
        8.0,
        None,
        "hf-cache-snapshot",
    ),
    # quantized variants keep the full-precision parameter count
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", 70.6, None, "llama-70b-awq-int4"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", 70.6, None, "llama-70b-fp8"),
    ("unsloth/llama-3-8b-bnb-4bit", 8.0, None, "llama-8b-bnb-4bit"),
    ("llama3:70b-instruct-q4_K_M", 70.6, None, "llama3-70b-ollama-q4km"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", 8.0, None, "gguf-file"),
    ("'meta-llama/Llama-3.1-8B-Instruct'", 8.0, None, "quoted"),
    ("  META-LLAMA/LLAMA-3.1-8B-INSTRUCT  ", 8.0, None, "upper-case-and-blanks"),
    # image generation: ids, renamed repos and the checkpoint files A1111/ComfyUI load
    ("runwayml/stable-diffusion-v1-5", 0.98, None, "sd-1.5-runwayml"),
    ("CompVis/stable-diffusion-v1-4", 0.98, None, "sd-1.4-same-unet"),
    ("/models/Stable-diffusion/v1-5-pruned-emaonly.safetensors", 0.98, None, "sd-1.5-checkpoint-file"),
    ("stabilityai/stable-diffusion-2-base", 1.3, None, "sd-2-base"),
    ("v2-1_768-ema-pruned.safetensors", 1.3, None, "sd-2.1-checkpoint-file"),
    ("stabilityai/sd-turbo", 1.3, None, "sd-turbo"),
    ("/models/checkpoints/sd_xl_base_1.0.safetensors", 3.5, None, "sdxl-checkpoint-file"),
    ("sd_xl_refiner_1.0.safetensors", 3.1, None, "sdxl-refiner-checkpoint-file"),
    ("stabilityai/sdxl-turbo", 3.5, None, "sdxl-turbo"),
    ("black-forest-labs/FLUX.1-Kontext-dev", 12.0, None, "flux-kontext-dev"),
    ("flux1-dev-fp8.safetensors", 12.0, None, "flux-dev-checkpoint-file"),
    ("black-forest-labs/FLUX.2-dev", 32.0, None, "flux-2-dev"),
    ("Qwen/Qwen-Image-Edit", 20.0, None, "qwen-image-edit"),
    ("Wan-AI/Wan2.1-I2V-14B-720P", 14.0, None, "wan-2.1-i2v-14b"),
    # embeddings, rerankers, encoders whose names state no size (or a misleading one)
    ("Snowflake/snowflake-arctic-embed-m-v1.5", 0.109, None, "arctic-embed-m-v1.5"),
    ("Snowflake/snowflake-arctic-embed-l-v2.0", 0.568, None, "arctic-embed-l-v2.0"),
    ("mixedbread-ai/mxbai-rerank-large-v1", 0.435, None, "mxbai-rerank-large"),
    ("cross-encoder/ms-marco-MiniLM-L-6-v2", 0.0227, None, "ms-marco-minilm-l6"),
    ("nvidia/NV-Embed-v2", 7.85, None, "nv-embed-v2"),
    ("NovaSearch/stella_en_400M_v5", 0.435, None, "stella-400m-is-435m"),
    ("SamLowe/roberta-base-go_emotions", 0.125, None, "roberta-base-finetune"),
    ("google-bert/bert-base-multilingual-cased", 0.11, None, "bert-base-multilingual"),
    ("t5-small", 0.0605, None, "t5-small"),
    ("google/flan-t5-xxl", 11.3, None, "flan-t5-xxl"),
    ("openai/whisper-large-v3", 1.55, None, "whisper-large-v3"),
    ("resnet101", 0.0445, None, "tf-benchmarks-resnet101"),
    ("inception3", 0.0238, None, "tf-benchmarks-inception3"),
]


@pytest.mark.parametrize(
    ("model", "total", "active"),
    [case[:3] for case in CATALOG_CASES],
    ids=[case[3] for case in CATALOG_CASES],
)
def test_describe_catalog(model: str, total: float, active: float | None) -> None:
    info = models.describe(model)
    assert info is not None
    assert info.source == "catalog"
    assert info.name == model
    assert info.params_b == pytest.approx(total)
    if active is None:
        assert info.active_params_b is None
    else:
        assert info.active_params_b == pytest.approx(active)


NAME_CASES = [
    ("org/SomeNewModel-13B-Instruct", 13.0, None, "plain-b"),
    ("org/tiny-1.5B", 1.5, None, "decimal-b"),
    ("bigscience/bloom-560m", 0.56, None, "millions"),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", 0.135, None, "millions-upper"),
    ("org/giant-1.2T", 1200.0, None, "trillions"),
    ("upstage/SOLAR-10.7B-Instruct-v1.0", 10.7, None, "version-after-size"),
    ("org/model-7B-v0.1-2407", 7.0, None, "version-and-date-ignored"),
    ("org/model-7B-20240620", 7.0, None, "long-date-ignored"),
    ("org/model-7b-32k", 7.0, None, "context-32k-ignored"),
    ("org/model-7b-200K", 7.0, None, "context-200K-ignored"),
    ("org/model-7B-Instruct-1M", 7.0, None, "context-1M-b-wins"),
    ("org/model-13b-4bit", 13.0, None, "bits-ignored"),
    ("org/model-13b-w4a16", 13.0, None, "w4a16-ignored"),
    ("org/model-13b-q4", 13.0, None, "q4-ignored"),
    ("org/model-13b-epoch-3-step-5000", 13.0, None, "epochs-steps-ignored"),
    ("org/model-350m-7b", 7.0, None, "b-beats-m"),
    ("org/merge-7b-13b", 13.0, None, "largest-b"),
    ("org/NewMoE-8x7B", 8 * 7 * 0.85, 2 * 7 * 0.9, "moe-estimate"),
    ("org/NewMoE-16x3.8B", 16 * 3.8 * 0.85, 2 * 3.8 * 0.9, "moe-estimate-decimal"),
    ("org/NewMoE-2x7B", 2 * 7 * 0.85, 2 * 7 * 0.85, "moe-2-experts-active-capped"),
    ("org/NewModel-80B-A3B", 80.0, 3.0, "active-a3b"),
    ("ibm-granite/granite-3.0-1b-a400m-instruct", 1.0, 0.4, "active-a400m"),
    ("allenai/OLMoE-1B-7B-0924", 7.0, None, "olmoe-largest"),
    ("deepseek-r1:70b", 70.0, None, "ollama-r1-70b-is-a-distill"),
    ("deepseek-r1:8b", 8.0, None, "ollama-r1-8b-is-a-distill"),
    ("nvidia/llama-3.1-nemotron-70b-instruct", 70.0, None, "nim-nemotron"),
    ("/mnt/models/my-finetune-34b/", 34.0, None, "local-path-name-rule"),
]


@pytest.mark.parametrize(
    ("model", "total", "active"),
    [case[:3] for case in NAME_CASES],
    ids=[case[3] for case in NAME_CASES],
)
def test_describe_name_rules(model: str, total: float, active: float | None) -> None:
    info = models.describe(model)
    assert info is not None
    assert info.source == "name"
    assert info.layers is None
    assert info.params_b == pytest.approx(total)
    if active is None:
        assert info.active_params_b is None
    else:
        assert info.active_params_b == pytest.approx(active)


UNKNOWN_CASES = [
    (None, "none"),
    ("", "empty"),
    ("   ", "blank"),
    ("org/mystery-model", "no-size"),
    ("org/model-2407", "date-only"),
    ("anthropic/claude-3-5-sonnet-20240620", "long-date-only"),
    ("org/model-v0.1", "version-only"),
    ("org/model-v1.5", "version-v1.5-only"),
    ("org/model-1.0", "version-1.0-only"),
    ("org/model-128k", "context-only"),
    ("org/model-1M", "context-1M-only"),
    ("org/model-10m", "context-10m-only"),
    ("org/model-4bit", "bits-only"),
    ("org/model-int4", "int4-only"),
    ("org/model-2x", "multiplier-only"),
    ("org/model-A3B", "active-without-total"),
    ("org/NewMoE-17B-16E", "experts-total-unknown"),
    ("org/model-lr-3e-5", "learning-rate"),
    ("intfloat/e5-unknown", "e5-no-size"),
    ("/mnt/models", "kserve-mount-root"),
    ("/data/llama-3-70b/1/2/3/4/5/6", "beyond-component-limit"),
    ("org/llama-3.1-70bx", "size-glued-to-letters"),
    ("pvc://llama-pvc", "pvc-without-size"),
    ("s3://bucket/a7b3f9c2d1", "hash-is-not-a-size"),
    ("org/model-0b", "zero-size"),
    ("org/model-" + "9" * 40 + "b", "huge-number"),
    ("a" * 100_000, "hostile-long"),
    ("7" * 5000 + "B", "hostile-digits"),
    ("/" * 600, "hostile-slashes"),
]


@pytest.mark.parametrize(
    "model", [case[0] for case in UNKNOWN_CASES], ids=[case[1] for case in UNKNOWN_CASES]
)
def test_describe_unknown(model: str | None) -> None:
    assert models.describe(model) is None


@pytest.mark.parametrize(
    "model",
    [
        "a" * 100_000,
        "7" * 5000 + "B",
        "-7b" * 170,
        "llama-" * 85,
        "1." * 255 + "1b",
        "x" * 511 + "b",
        "a/" * 255,
        "deepseek-r1/" * 42,
    ],
    ids=[
        "as",
        "sevens",
        "repeated-sizes",
        "repeated-family",
        "dotted-number",
        "just-under-cap",
        "many-components",
        "many-catalog-components",
    ],
)
def test_hostile_input_is_fast(model: str) -> None:
    start = time.perf_counter()
    models.describe(model)
    models.quantization_from_name(model)
    models.parse_params(model)
    assert time.perf_counter() - start < 0.5


def test_non_string_input_is_none() -> None:
    assert models.describe(70) is None  # type: ignore[arg-type]
    assert models.parse_params(70) is None  # type: ignore[arg-type]
    assert models.quantization_from_name(["awq"]) is None  # type: ignore[arg-type]


# --------------------------------------------------------------------------- describe: other fields

FIELD_CASES = [
    ("meta-llama/Llama-3.1-8B-Instruct", {"kind": "llm", "layers": 32}, "llama-8b-layers"),
    ("meta-llama/Llama-3.1-70B-Instruct", {"layers": 80, "native_dtype": None}, "llama-70b-layers"),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", {"layers": 126, "name_quantization": "fp8"}, "405b-fp8"),
    ("Qwen/Qwen2.5-72B-Instruct", {"layers": 80}, "qwen-72b-layers"),
    ("mistralai/Mixtral-8x7B-v0.1", {"layers": 32}, "mixtral-layers"),
    ("mistralai/Mistral-7B-v0.3", {"layers": 32}, "mistral-layers"),
    ("deepseek-ai/DeepSeek-V3", {"layers": 61, "native_dtype": "fp8"}, "deepseek-v3-fp8"),
    ("deepseek-ai/DeepSeek-R1", {"native_dtype": "fp8"}, "deepseek-r1-fp8"),
    ("unsloth/DeepSeek-R1-BF16", {"native_dtype": None}, "deepseek-r1-bf16-override"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", {"native_dtype": None}, "distill-not-fp8"),
    ("openai/gpt-oss-120b", {"native_dtype": "mxfp4", "layers": 36}, "gpt-oss-mxfp4"),
    ("Qwen/Qwen2-VL-72B-Instruct", {"kind": "vision"}, "qwen-vl-vision"),
    ("BAAI/bge-m3", {"kind": "embedding", "layers": None}, "bge-embedding"),
    ("BAAI/bge-reranker-v2-m3", {"kind": "embedding"}, "reranker-embedding"),
    ("black-forest-labs/FLUX.1-dev", {"kind": "diffusion", "layers": None}, "flux-diffusion"),
    ("TheBloke/Llama-2-70B-AWQ", {"name_quantization": "awq"}, "awq-quant"),
    ("org/custom-embed-1.5b", {"kind": "embedding", "source": "name"}, "name-embedding-kind"),
    ("org/custom-reranker-335m", {"kind": "embedding", "source": "name"}, "name-reranker-kind"),
    ("llava-hf/llava-v1.6-34b-hf", {"kind": "vision", "params_b": 34.0}, "name-vision-kind"),
    ("org/my-diffusion-2b", {"kind": "diffusion"}, "name-diffusion-kind"),
    ("sd_xl_base_1.0.safetensors", {"kind": "diffusion"}, "sdxl-file-diffusion"),
    ("Wan-AI/Wan2.1-T2V-14B", {"kind": "diffusion"}, "wan-t2v-not-an-llm"),
    ("org/new-t2v-3b", {"kind": "diffusion", "source": "name"}, "name-t2v-kind"),
    ("org/studio-t2i-2b", {"kind": "diffusion", "source": "name"}, "name-t2i-kind"),
    ("Snowflake/snowflake-arctic-embed-l", {"kind": "embedding"}, "arctic-embed-kind"),
    ("org/colbert-ft-110m", {"kind": "embedding", "source": "name"}, "name-colbert-kind"),
    ("dunzhang/stella_en_400M_v5", {"kind": "embedding"}, "stella-embedding-not-llm"),
    ("google-t5/t5-base", {"kind": "llm"}, "t5-generator"),
    ("microsoft/resnet-50", {"kind": "other"}, "resnet-other"),
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [case[:2] for case in FIELD_CASES],
    ids=[case[2] for case in FIELD_CASES],
)
def test_describe_fields(model: str, expected: dict[str, object]) -> None:
    info = models.describe(model)
    assert info is not None
    for field, value in expected.items():
        assert getattr(info, field) == value, field


def test_describe_returns_domain_model_info() -> None:
    info = models.describe("Qwen/Qwen3-30B-A3B")
    assert info == ModelInfo(
        name="Qwen/Qwen3-30B-A3B",
        params_b=30.5,
        active_params_b=3.3,
        kind="llm",
        layers=48,
        native_dtype=None,
        name_quantization=None,
        source="catalog",
    )


# --------------------------------------------------------------------------- catalog integrity


def test_catalog_size_and_shape() -> None:
    catalog = models._catalog()
    assert len(catalog) >= 100
    assert len({entry.id for entry in catalog}) == len(catalog), "duplicate ids"
    for entry in catalog:
        assert entry.params_b > 0
        assert entry.kind in models.KINDS
        if entry.active_params_b is not None:
            assert 0 < entry.active_params_b < entry.params_b


@pytest.mark.parametrize("entry", models._catalog(), ids=lambda entry: entry.id)
def test_every_catalog_id_resolves_to_its_own_row(entry: models._Entry) -> None:
    info = models.describe(entry.id)
    assert info is not None and info.source == "catalog"
    assert (info.params_b, info.active_params_b, info.kind, info.layers, info.native_dtype) == (
        entry.params_b,
        entry.active_params_b,
        entry.kind,
        entry.layers,
        entry.native_dtype,
    )


def test_catalog_is_read_once() -> None:
    assert models._catalog() is models._catalog()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "x", "params_b": 0, "match": ["x"]}, "params_b"),
        ({"id": "x", "params_b": 7, "active_params_b": 9, "match": ["x"]}, "active_params_b"),
        ({"id": "x", "params_b": 7, "kind": "robot", "match": ["x"]}, "kind"),
        ({"id": "x", "params_b": 7, "layers": -1, "match": ["x"]}, "layers"),
        ({"id": "x", "params_b": 7}, "match"),
        ({"id": "x", "params_b": 7, "match": ["("]}, "pattern"),
        ({"params_b": 7, "match": ["x"]}, "id"),
    ],
    ids=["zero-params", "active-above-total", "bad-kind", "bad-layers", "no-match", "bad-regex", "no-id"],
)
def test_malformed_catalog_row_is_rejected(row: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        models._load_entry(row)


# --------------------------------------------------------------------------- parse_params

PARAMS_CASES = [
    ("70B", 70.0, "70B"),
    ("70b", 70.0, "70b"),
    ("1.5B", 1.5, "decimal"),
    ("560M", 0.56, "millions"),
    ("560m", 0.56, "millions-lower"),
    ("1.2T", 1200.0, "trillions"),
    ("70", 70.0, "bare-number-is-billions"),
    (" 8 B ", 8.0, "blanks"),
    (".5B", 0.5, "leading-dot"),
    ("8x7B", None, "moe-not-plain"),
    ("70GB", None, "gigabytes"),
    ("seventy", None, "words"),
    ("", None, "empty"),
    (None, None, "none"),
    ("0", None, "zero"),
    ("-7B", None, "negative"),
    ("nan", None, "nan"),
    ("inf", None, "inf"),
    ("1e9", None, "exponent"),
    ("7B 8B", None, "two-sizes"),
    ("9" * 40, None, "too-long"),
    ("999999T", None, "implausible"),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [case[:2] for case in PARAMS_CASES],
    ids=[case[2] for case in PARAMS_CASES],
)
def test_parse_params(text: str | None, expected: float | None) -> None:
    result = models.parse_params(text)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


# --------------------------------------------------------------------------- quantization_from_name

QUANT_CASES = [
    ("TheBloke/Llama-2-70B-AWQ", "awq", "awq"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "awq", "awq-beats-int4"),
    ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "gptq", "gptq-beats-int4"),
    ("TheBloke/Llama-2-7B-GPTQ", "gptq", "gptq"),
    ("unsloth/llama-3-8b-bnb-4bit", "bnb-4bit", "bnb-4bit"),
    ("unsloth/llama-3-8b-bnb_4bit", "bnb-4bit", "bnb-underscore"),
    ("org/model-bnb-8bit", "int8", "bnb-8bit"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "fp8", "fp8"),
    ("RedHatAI/Llama-3.1-8B-Instruct-FP8-dynamic", "fp8", "fp8-dynamic"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "int4", "w4a16"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "int8", "w8a8"),
    ("org/model-int8", "int8", "int8"),
    ("mlx-community/model-4bit", "int4", "4bit"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gguf-q4_k_m", "gguf-q4km-file"),
    ("llama3:70b-instruct-q4_K_M", "gguf-q4_k_m", "ollama-q4km"),
    ("llama3:8b-instruct-q8_0", "gguf-q8_0", "ollama-q8_0"),
    ("org/model-Q5_K_S.gguf", "gguf-q5_k_s", "gguf-other-type"),
    ("org/model-IQ4_XS.gguf", "gguf-iq4_xs", "gguf-iq"),
    ("org/Model-GGUF", "gguf", "gguf-repo"),
    ("openai/gpt-oss-20b-mxfp4", "mxfp4", "mxfp4"),
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "nvfp4", "fp4-is-nvfp4"),
    ("org/model-nvfp4", "nvfp4", "nvfp4"),
    ("meta-llama/Llama-3.1-8B-Instruct", None, "none"),
    ("llama3:8b-instruct-fp16", None, "fp16-not-quant"),
    ("unsloth/DeepSeek-R1-BF16", None, "bf16-not-quant"),
    ("org/hawq-model", None, "awq-inside-word"),
    ("org/report-2024q4", None, "q4-inside-word"),
    ("Qwen/Qwen2.5-7B", None, "qwen-is-not-q"),
    (None, None, "null"),
    ("x" * 1000 + "-awq", None, "over-cap"),
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [case[:2] for case in QUANT_CASES],
    ids=[case[2] for case in QUANT_CASES],
)
def test_quantization_from_name(model: str | None, expected: str | None) -> None:
    assert models.quantization_from_name(model) == expected


# --------------------------------------------------------------------------- properties


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=600))
def test_describe_never_raises_and_sizes_are_positive(text: str) -> None:
    info = models.describe(text)
    if info is not None:
        assert info.params_b > 0
        assert info.active_params_b is None or 0 < info.active_params_b <= info.params_b
        assert info.name == text


_NAMEISH = st.text(alphabet="abcdeklmqtvx0123456789.-_:/ABM", max_size=80)


@settings(max_examples=examples(300), deadline=None)
@given(_NAMEISH, _NAMEISH)
def test_name_like_text_never_raises(prefix: str, suffix: str) -> None:
    for text in (prefix + "-70b-" + suffix, prefix + suffix):
        info = models.describe(text)
        assert info is None or info.params_b > 0
        models.quantization_from_name(text)
        models.parse_params(text)
