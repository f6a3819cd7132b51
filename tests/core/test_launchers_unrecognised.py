"""Recognise what runs, or say that nothing was recognised (issue 15, point 1), through the engine.

Every GPU pod either gets a tier or a warning that says why not and which annotation declares the
model; embeddings, rerankers and diffusion models on one GPU reach the small-model (cost) tier with
the kind the launcher or the catalog gives them.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import settings as settings_mod
from webhook.core.engine import TemplateResult
from tests.judging import judge

S = settings_mod.default()
SDXL = "stabilityai/stable-diffusion-xl-base-1.0"


def container(command: list[str] | None = None, gpus: int | None = 1, *, env: dict[str, str] | None = None,
              image: str = "registry.example.com/app:1", name: str = "server", args: list[str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return c


def deployment(*containers: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": {"app": "x"}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
            "spec": {"selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": meta, "spec": {"containers": list(containers)}}}}


def one(obj: Any) -> TemplateResult:
    (r,) = judge(obj, S)
    return r


TEI = "ghcr.io/huggingface/text-embeddings-inference:1.5"
TEI_DLC = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-embeddings-inference-cu122.1-4.ubuntu2204"

# (id, object, framework, model, kind, tier)
SMALL: list[tuple[str, dict[str, Any], str | None, str, str, str]] = [
    ("custom-sdxl-server-model-id-env", deployment(container(["python", "serve.py"], env={"MODEL_ID": SDXL})),
     None, SDXL, "diffusion", "cost"),
    ("custom-flux-script-flag", deployment(container(["python", "app.py", "--model", "black-forest-labs/FLUX.1-schnell"])),
     None, "black-forest-labs/FLUX.1-schnell", "diffusion", "cost"),
    ("tei-router", deployment(container(["text-embeddings-router", "--model-id", "BAAI/bge-large-en-v1.5"], image=TEI)),
     "tei", "BAAI/bge-large-en-v1.5", "embedding", "cost"),
    ("tei-image-env-only", deployment(container(env={"MODEL_ID": "intfloat/multilingual-e5-large-instruct"}, image=TEI)),
     "tei", "intfloat/multilingual-e5-large-instruct", "embedding", "cost"),
    ("tei-dlc-snowflake", deployment(container(env={"MODEL_ID": "Snowflake/snowflake-arctic-embed-m"}, image=TEI_DLC)),
     "tei", "Snowflake/snowflake-arctic-embed-m", "embedding", "cost"),
    ("tei-reranker", deployment(container(args=["--model-id", "BAAI/bge-reranker-v2-m3"], image=TEI)),
     "tei", "BAAI/bge-reranker-v2-m3", "embedding", "cost"),
    ("infinity-model-name-says-400m", deployment(container(["infinity_emb", "v2", "--model-id", "dunzhang/stella_en_400M_v5"]),),
     "infinity", "dunzhang/stella_en_400M_v5", "embedding", "cost"),
    ("vllm-embed-task", deployment(container(["vllm", "serve", "BAAI/bge-m3", "--task", "embed"])),
     "vllm", "BAAI/bge-m3", "embedding", "cost"),
    ("a1111-ckpt", deployment(container(["python", "launch.py", "--xformers", "--ckpt", "/models/sd_xl_base_1.0.safetensors"])),
     "a1111", "/models/sd_xl_base_1.0.safetensors", "diffusion", "cost"),
    ("llama-server-gguf", deployment(container(["llama-server", "-m", "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"])),
     "llama.cpp", "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llm", "cost"),
]


@pytest.mark.parametrize(("obj", "framework", "model", "kind", "tier"), [x[1:] for x in SMALL], ids=[x[0] for x in SMALL])
def test_small_models_reach_the_cost_tier(obj: dict[str, Any], framework: str | None, model: str, kind: str, tier: str) -> None:
    r = one(obj)
    p = r.profile
    assert (p.framework, p.model, p.kind, r.decision.tier) == (framework, model, kind, tier)
    assert p.params_b is not None and p.params_b <= S.large_model_params_b


# (id, object, words the warning must contain)
UNKNOWN: list[tuple[str, dict[str, Any], str]] = [
    ("plain-app", deployment(container(["python", "/app/server.py", "--port", "7860"])), "no known launcher or model id"),
    ("comfyui", deployment(container(["python", "/ComfyUI/main.py", "--listen"])), "ComfyUI loads its checkpoints"),
    ("tritonserver", deployment(container(["tritonserver", "--model-repository=/models"])), "Triton serves the models"),
    ("torchserve-all", deployment(container(["torchserve", "--start", "--models", "all"])), "TorchServe loads its models"),
    ("ollama-serve-only", deployment(container(["ollama", "serve"])), "ollama runs, but its model is not visible"),
    ("unknown-size-model", deployment(container(["vllm", "serve", "acme/secret-sauce"])), "gpu-admission.io/params"),
    ("generic-unknown-size", deployment(container(["python", "s.py"], env={"MODEL_ID": "acme/house-model"})),
     "gpu-admission.io/params"),
    ("torchrun-no-model", deployment(container(["torchrun", "--nproc-per-node", "1", "train.py"])),
     "torchrun runs, but its model is not visible"),
    ("multi-gpu-app", deployment(container(["python", "serve.py"], gpus=4)), "no known launcher or model id"),
]


@pytest.mark.parametrize(("obj", "words"), [x[1:] for x in UNKNOWN], ids=[x[0] for x in UNKNOWN])
def test_unknown_size_always_says_why_and_how(obj: dict[str, Any], words: str) -> None:
    r = one(obj)
    assert r.profile.params_b is None
    said = [w for w in r.decision.warnings if words in w]
    assert said, r.decision.warnings
    assert any("gpu-admission.io/" in w for w in said)


@pytest.mark.parametrize("obj", [x[1] for x in SMALL + UNKNOWN], ids=[x[0] for x in SMALL + UNKNOWN])  # type: ignore[operator]
def test_no_gpu_workload_ends_without_tier_and_without_reason(obj: dict[str, Any]) -> None:
    r = one(obj)
    assert r.decision.tier is not None or any("gpu-admission.io/" in w for w in r.decision.warnings)


def test_annotations_silence_the_note() -> None:
    r = one(deployment(container(["python", "serve.py"]), annotations={"gpu-admission.io/model": SDXL}))
    assert r.decision.tier == "cost" and not any("no known launcher" in w for w in r.decision.warnings)
    r = one(deployment(container(["python", "serve.py"]), annotations={"gpu-admission.io/params": "3B"}))
    assert r.decision.tier == "cost" and not any("gpu-admission.io/model" in w for w in r.decision.warnings)


def test_cpu_sidecar_env_is_not_the_gpu_model() -> None:
    """The generic env names are read from GPU containers only."""
    sidecar = container(["python", "proxy.py"], gpus=None, env={"MODEL_ID": "meta-llama/Llama-3.1-70B-Instruct"}, name="proxy")
    r = one(deployment(sidecar, container(["python", "serve.py"])))
    assert r.profile.model is None and r.decision.tier is None
    assert any("no known launcher or model id" in w for w in r.decision.warnings)


def test_gpu_container_env_beats_a_cpu_sidecar_launcher() -> None:
    """A known launcher in a CPU sidecar does not hide the GPU container's own model setting."""
    sidecar = container(["ollama", "serve"], gpus=None, name="side")
    r = one(deployment(sidecar, container(["python", "serve.py"], env={"MODEL_ID": SDXL})))
    assert (r.profile.model, r.profile.kind, r.decision.tier) == (SDXL, "diffusion", "cost")


def test_no_note_for_pods_without_gpus() -> None:
    r = one(deployment(container(["python", "serve.py"], gpus=None)))
    assert r.decision.warnings == ()
