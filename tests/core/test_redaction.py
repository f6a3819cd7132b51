"""The shapes ``redaction.redact`` replaces beyond the known prefixes (issue 25 point 6), both ways.

Redacted: the userinfo of a URL, a credential in its query, a key-shaped string with no known prefix
(``gsk_...``, ``xai-...``, random base62, hex, base64 tokens). Kept, because a false positive garbles
the message that quotes it: model ids, image references and digests, Kubernetes names and uids,
product and node names, Hugging Face cache paths. ``quotable`` is the stricter rule of the audit
annotations: a value of the pod is quoted there only when it is one plain word once redacted.

The planted-secrets test of the whole server (``tests/server/test_secrets.py``) plants these shapes
in pods; this file holds the rules themselves, one row per case.
"""

from __future__ import annotations

import random
import re
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core.redaction import REDACTED, could_quote, is_key, quotable, redact, scrub

R = REDACTED


# ----------------------------------------------------------------------------- URL userinfo and queries


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("model https://alice:s3cret@models.example.com/llama-3-8b",
                 f"model https://{R}@models.example.com/llama-3-8b", id="user-and-password"),
    pytest.param("https://alice:p@ss:w0rd@host/m", f"https://{R}@host/m", id="password-with-at-signs"),
    pytest.param("git+https://PlantedCloneUser@github.com/org/model", f"git+https://{R}@github.com/org/model",
                 id="user-alone-clone-token"),
    pytest.param("s3://AKIDEXAMPLE:wJalrXUtnFEMI@bucket/models", f"s3://{R}@bucket/models", id="s3-keys"),
    pytest.param("'https://u:p@host:8443'", f"'https://{R}@host:8443'", id="quoted-with-port"),
    pytest.param("ssh://git@github.com/org/repo", f"ssh://{R}@github.com/org/repo", id="any-user-after-a-scheme"),
    pytest.param('{"model":"https://u:p@h/m","x":"y"}', f'{{"model":"https://{R}@h/m","x":"y"}}',
                 id="inside-a-json-log-line"),
    pytest.param("https://host/m?token=PlantedValue.1", f"https://host/m?token={R}", id="query-token"),
    pytest.param("https://host/m?revision=main&api_key=abc123", f"https://host/m?revision=main&api_key={R}",
                 id="query-api-key-after-another"),
    pytest.param("s3://b/k?X-Amz-Credential=AKID%2F2024&X-Amz-Date=20240101&X-Amz-Signature=f00d",
                 f"s3://b/k?X-Amz-Credential={R}&X-Amz-Date=20240101&X-Amz-Signature={R}", id="presigned-s3"),
    pytest.param("https://acct.blob.core.windows.net/c/m?sv=2022-11-02&sig=abc%2Bdef",
                 f"https://acct.blob.core.windows.net/c/m?sv=2022-11-02&sig={R}", id="azure-sas"),
    pytest.param("m?a=1&amp;access_token=xyz", f"m?a=1&amp;access_token={R}", id="junit-escaped-ampersand"),
    pytest.param("https://u:p@host/m?password=x", f"https://{R}@host/m?password={R}", id="userinfo-and-query"),
])
def test_url_credentials_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", [
    pytest.param("git@github.com:org/repo.git", id="scp-style-git-no-scheme"),
    pytest.param("https://huggingface.co/meta-llama/Llama-3.1-8B@main", id="at-in-the-path"),
    pytest.param("docker://vllm/vllm-openai@sha256:0123abcd", id="at-in-the-path-of-an-image"),
    pytest.param("docker://vllm@sha256:4f2a9c1e", id="digest-after-the-at"),
    pytest.param("https://host/m?revision=main&trust=1", id="query-without-credentials"),
    pytest.param("mailto:alice@example.com and alice@example.com", id="addresses"),
    pytest.param("hf://meta-llama/Llama-3.1-70B-Instruct", id="hf-uri"),
    pytest.param("set cpu and memory limits = requests; a=1 & b=2", id="prose-with-equals"),
])
def test_urls_without_credentials_are_kept(text: str) -> None:
    assert redact(text) == text


# ----------------------------------------------------------------------------- key-shaped strings

KEYS = {
    "groq": "gsk_Q7vN2mXk9LpR4tYw8ZbC1dFgHjK3sA6eUiOo0qWr5TyX",
    "xai": "xai-Pl4ntedR9tYw8ZbC1dFgHjK3sA6eUiOo0qWr5TyXq7vN2mXk9LpR4tYw8ZbC1dFgHjK3sA6eUiOo0qWr5",
    "perplexity": "pplx-4f9c2e7a1b8d3f6c0e5a9b2d7f1c4e8a3b6d9f0c2e5a7b",
    "replicate": "r8_Pl4nt3dQ7vN2mXk9LpR4tYw8ZbC1dFgHjK3sA6",
    "stripe": "sk_live_51Hq7vN2mXk9LpR4tYw8ZbC1dF",
    "random-base62-40": "a8Kd93jfLq02mZx7Vb4NcT1yWp6sRe5uHg0oIiQk",
    "random-base62-20": "Zx7Vb4NcT1yWp6sRe5uH",
    "lower-case-base36": "a8kd93jflq02mzx7vb4nct1ywp6sre5uhg0oiiqk",
    "upper-case-base36": "K7Q2M9XZ4B8N1P3R6T5WJ0HD",
    "hex-40": "7f3c9a1e5b2d8f4a6c0e9b7d3f1a5c8e2b4d6f0a",
    "hex-32": "9b2d7f1c4e8a3b6d9f0c2e5a7b1d3f5c",
    "hex-64": "4f9c2e7a1b8d3f6c0e5a9b2d7f1c4e8a3b6d9f0c2e5a7b1d3f5c8e0a2b4d6f8a",
    "base64url-one-long-segment": "Qm9x3xKzT7pLw2Vn8RcY4jH-s6DkPq0Zr5W_e1tYb7u",
    "base64url-short-segments": "Qm9x3xKzT7pLw2Vn8Rc-Y4jHs6DkPq0Zr5W_e1tYb7uA",
    "base64-with-slash-and-plus": "u7Jk2Lm9Qx4+Vb8NcT1y/Wp6sRe5uHg0oIiQkZa3",
    "databricks": "dapi4f9c2e7a1b8d3f6c0e5a9b2d7f1c4e8a",
}


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_key_shaped_strings_are_redacted(key: str) -> None:
    assert redact(f"model {key} at TP4") == f"model {R} at TP4"
    assert is_key(key)


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(f"--api-key={KEYS['groq']}", f"--api-key={R}", id="after-equals-the-flag-stays"),
    pytest.param(f"/models/{KEYS['hex-40']}/config.json", f"/models/{R}/config.json", id="one-part-of-a-path"),
    pytest.param(f"{KEYS['random-base62-40']}@host", f"{R}@host", id="token-user-without-scheme"),
    pytest.param(f"MY_MODEL_{KEYS['random-base62-40']}", R, id="glued-to-a-name-by-underscore"),
    pytest.param(f"'{KEYS['lower-case-base36']}'", f"'{R}'", id="lower-cased-as-dtype-is"),
])
def test_key_shaped_strings_in_context(text: str, expected: str) -> None:
    assert redact(text) == expected


REAL_NAMES = [
    # model ids as the catalog, examples and public manifests write them
    "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct-FP8",
    "meta-llama/Llama-3.2-11B-Vision-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct",
    "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen2-VL-72B-Instruct-AWQ",
    "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "mistralai/Mistral-Large-Instruct-2411", "openai/gpt-oss-120b", "nvidia/Llama-3_1-Nemotron-Ultra-253B-v1",
    "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
    "unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit", "TheBloke/Llama-2-70B-Chat-AWQ",
    "CohereForAI/c4ai-command-r-plus-08-2024", "microsoft/Phi-3-mini-128k-instruct",
    "sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-reranker-v2-m3", "intfloat/multilingual-e5-large-instruct",
    "Alibaba-NLP/gte-Qwen2-7B-instruct", "Snowflake/snowflake-arctic-embed-l-v2.0",
    "stabilityai/stable-diffusion-xl-base-1.0", "black-forest-labs/FLUX.1-dev", "moonshotai/Kimi-K2-Instruct",
    "zai-org/GLM-4.5-Air-FP8", "OpenGVLab/InternVL2_5-78B-MPO", "bartowski/Meta-Llama-3.1-70B-Instruct-GGUF",
    "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama3.1:70b-instruct-q4_K_M", "model-00001-of-00030.safetensors",
    "pytorch_model-00001-of-00002.bin",
    # architectures and configuration class names a launcher may quote
    "Qwen2_5_VLForConditionalGeneration", "Float8DynamicActivationFloat8WeightConfig", "Llama31Nemotron70BInstructHF",
    "DeepseekV3ForCausalLM", "Gemma3ForConditionalGeneration",
    # images, digests and caches
    "vllm/vllm-openai:v0.10.1", "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.0", "lmsysorg/sglang:v0.4.10.post2-cu126",
    "ghcr.io/huggingface/text-generation-inference:2.4",
    "vllm/vllm-openai@sha256:751382df4272eafc83f541f364d61b35aed9cce8c7b0c869269cea5a366cd08c",
    "/root/.ollama/models/blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa",
    "/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/"
    "snapshots/5206a32e0bd3067aef1ce90f5528ade7d866253f",
    # Kubernetes and cloud names
    "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "llama-70b-deployment-7d9f8b6c5d-x2k4p", "kube-api-access-x7k2p",
    "gke-gpu-cluster-a100-pool-9f8e7d6c-x1y2", "aks-gpunodepool-12345678-vmss000000", "i-0123456789abcdef0",
    "subnet-0123456789abcdef0", "ip-10-0-12-34.ec2.internal", "missing-homogeneous-selector",
    "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-GH200-120GB", "NVIDIA-RTX-6000-Ada-Generation",
    "Planted-Secret-Value-0123456789",  # tests/server/test_one_walk.py: only the Judgement's secrets redact it
    # words, numbers, timestamps
    "internationalization_configuration", "2026-12-03T12:46:23.371Z", "12345678901234567890123",
    "v0.0.0-20240101120000-abcdef123456", "checkpoint20240101T120000Z",
]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_names_are_kept(name: str) -> None:
    """A false positive would garble every message that quotes the name."""
    assert redact(f"model '{name}' at TP4") == f"model '{name}' at TP4"
    assert quotable(name)


ROOT = Path(__file__).resolve().parents[2]
CORPUS = [*sorted(ROOT.glob("webhook/core/data/*.yaml")), *sorted(ROOT.glob("examples/*.yaml")),
          *sorted(ROOT.glob("tests/data/operators/*.yaml")), *sorted(ROOT.glob("tests/data/public/**/*.yaml"))]
_GIT_COMMIT_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_string_of_the_catalogs_and_public_manifests_is_kept(path: Path) -> None:
    """Every model id, image, name, label and command line the bundled catalogs and the public
    manifests the project tests against hold, as quoted: nothing is redacted but a 40-hex git
    commit (a ray ``working_dir`` archive URL), which no rule can tell from a hex key."""
    changed = [text for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) for text in _strings(doc)
               if redact(text) != text]
    assert [t for t in changed if redact(t) != _GIT_COMMIT_RE.sub(REDACTED, t)] == []


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) > 50


# ----------------------------------------------------------------------------- how often a random key is caught

ALPHABETS = {
    "base62": string.ascii_letters + string.digits,
    "hex": "0123456789abcdef",
    "base36-lower": string.ascii_lowercase + string.digits,
    "base36-upper": string.ascii_uppercase + string.digits,
    "base64url": string.ascii_letters + string.digits + "-_",
}


@pytest.mark.parametrize(("alphabet", "length", "at_least"), [
    pytest.param("base62", 32, 0.98, id="base62-32"),
    pytest.param("base62", 40, 0.99, id="base62-40"),
    pytest.param("hex", 32, 0.99, id="hex-32"),
    pytest.param("hex", 40, 0.99, id="hex-40"),
    pytest.param("base36-lower", 40, 0.99, id="base36-lower-40"),
    pytest.param("base36-upper", 40, 0.98, id="base36-upper-40"),
    pytest.param("base64url", 40, 0.95, id="base64url-40"),
    pytest.param("base64url", 64, 0.98, id="base64url-64"),
])
def test_random_keys_are_caught(alphabet: str, length: int, at_least: float) -> None:
    """A heuristic, measured: the share of random strings of key length that are redacted (seeded).
    Shorter or separator-heavy keys are missed more often; they are caught by name (secret-named
    variables) or prefix (``TOKEN_RE``) instead."""
    rng = random.Random(f"{alphabet}-{length}")
    keys = ["".join(rng.choice(ALPHABETS[alphabet]) for _ in range(length)) for _ in range(400)]
    caught = sum(1 for key in keys if REDACTED in redact(f" {key} "))
    assert caught / len(keys) >= at_least


# ----------------------------------------------------------------------------- the audit annotations' rule


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param("meta-llama/Llama-3.1-70B-Instruct", True, id="hf-id"),
    pytest.param("/models/Llama-3.1-70B-Instruct", True, id="path"),
    pytest.param("hf://meta-llama/Llama-3.1-8B-Instruct", True, id="hf-uri"),
    pytest.param("s3://bucket/models/llama-3-8b", True, id="s3-uri"),
    pytest.param("https://u:p@host/models/llama", True, id="url-shown-with-its-userinfo-redacted"),
    pytest.param("llama3.1:70b", True, id="ollama-tag"),
    pytest.param("bfloat16", True, id="dtype"),
    pytest.param("4", True, id="number"),
    pytest.param("alice:s3cret@host/models/llama", False, id="userinfo-without-scheme"),
    pytest.param("Planted free text model name", False, id="free-text"),
    pytest.param("s3://bucket/m?X-Amz-Signature=abc", False, id="url-with-a-query"),
    pytest.param("--model m --api-key x", False, id="a-command-line"),
    pytest.param("m'quoted\"", False, id="quotes"),
    pytest.param("-rf", False, id="flag-like"),
    pytest.param("a" * 300, False, id="longer-than-a-name"),
    pytest.param(KEYS["groq"], True, id="a-key-is-shown-as-redacted"),
])
def test_quotable(value: str, expected: bool) -> None:
    assert quotable(value) is expected


# ----------------------------------------------------------------------------- cost


@pytest.mark.parametrize("hostile", [
    pytest.param("://" * 200_000 + "@", id="schemes"),
    pytest.param("https://" + "a" * 500 + "@" * 1000 + "/", id="at-signs"),
    pytest.param("?token=" * 100_000, id="queries"),
    pytest.param("a" * 600_000, id="one-long-run"),
    pytest.param("a1-" * 200_000, id="short-segments"),
    pytest.param(("Zx7Vb4NcT1yWp6sRe5uH" + "/") * 30_000, id="many-key-parts"),
    pytest.param("sha256:" * 100_000, id="digest-prefixes"),
])
def test_the_new_passes_are_linear(hostile: str) -> None:
    started = time.process_time()
    scrub(hostile, shortcut=False)
    could_quote([hostile])
    assert time.process_time() - started < 2.0
