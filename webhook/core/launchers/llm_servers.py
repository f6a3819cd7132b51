"""LLM inference-server parsers: vLLM, TGI, SGLang, TensorRT-LLM, KServe, LMDeploy, Ollama.

Each parser reads one server's argv (and, where the server does, its env) into a ``Spec``: model,
parallelism, precision, and whether it grabs every visible GPU. Elsewhere: NIM (recognised by its
image) in ``nim``; vLLM/SGLang data and expert parallelism in ``parallel``; embedding servers in
``embedding``; llama.cpp in ``llamacpp``; Triton and TorchServe in ``repository``; image servers in
``diffusion``.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.launchers.flags import (
    KSERVE_FLAGS,
    LMDEPLOY_FLAGS,
    SGLANG_FLAGS,
    TGI_FLAGS,
    TRTLLM_FLAGS,
    VLLM_FLAGS,
)
from webhook.core.launchers.parallel import read_sglang_parallel, read_vllm_parallel
from webhook.core.launchers import server_config
from webhook.core.launchers.scan import is_flag, scan, truthy
from webhook.core.launchers.spec import Spec
from webhook.core.models import quantization_from_name

TGI_DEFAULT_MODEL = "bigscience/bloom-560m"
"""What ``text-generation-launcher`` loads when no model is given (clap ``default_value``)."""


def _leading_positional(args: Sequence[str]) -> tuple[str | None, Sequence[str]]:
    """``MODEL --flags`` -> (MODEL, flags); (None, args) when the first token is a flag."""
    if args and not is_flag(args[0]):
        return args[0], args[1:]
    return None, args


def _set_positional_model(b: Spec, model: str | None, source: str) -> None:
    """A positional model overrides ``--model`` (``vllm serve`` copies model_tag over it)."""
    if model is not None:
        b.fields.pop("model", None)
        b.set("model", model, source)


def parse_vllm_serve(args: Sequence[str], b: Spec) -> None:
    """``vllm serve [MODEL] [flags]`` (and the vllm/vllm-openai image's entrypoint)."""
    model, rest = _leading_positional(args)
    found = scan(server_config.merged(rest, b, server="vLLM"), VLLM_FLAGS)
    b.apply(found, label="vLLM")
    if model is None and found.positionals:
        model = found.positionals[0]
    _set_positional_model(b, model, "the vllm serve argument")
    read_vllm_parallel(found, b)


def parse_vllm_module(args: Sequence[str], b: Spec) -> None:
    """``python -m vllm.entrypoints.openai.api_server --model X``: no positional model."""
    found = scan(server_config.merged(args, b, server="vLLM"), VLLM_FLAGS)
    b.apply(found, label="vLLM")
    read_vllm_parallel(found, b)


def parse_tgi(args: Sequence[str], b: Spec) -> None:
    """TGI: flags first, then env (``MODEL_ID``, ``NUM_SHARD``...) as clap does.

    Every flag has its env twin (``#[clap(long, env)]`` in huggingface/text-generation-inference
    launcher/src/main.rs): ``MODEL_ID`` (default ``bigscience/bloom-560m``), ``NUM_SHARD``,
    ``SHARDED``, ``QUANTIZE``, ``DTYPE``, ``KV_CACHE_DTYPE``, ``CUDA_MEMORY_FRACTION``; SageMaker's
    entrypoint maps ``HF_MODEL_ID``/``SM_NUM_GPUS``/``HF_MODEL_QUANTIZE`` onto them. Without
    ``--num-shard`` TGI shards over every visible GPU unless ``--sharded false``.
    """
    found = scan(args, TGI_FLAGS)
    b.apply(found, label="TGI")
    b.model_from_env(("MODEL_ID", "HF_MODEL_ID"))
    if not b.mentioned("model"):
        b.fields["model"] = TGI_DEFAULT_MODEL
        b.note(f"TGI runs its default model {TGI_DEFAULT_MODEL}: neither --model-id nor MODEL_ID is set")
    if not b.mentioned("tensor_parallel"):
        b.from_env(("NUM_SHARD", "SM_NUM_GPUS"), "tensor_parallel")
    if not b.mentioned("quantization"):
        b.from_env(("QUANTIZE", "HF_MODEL_QUANTIZE"), "quantization")
    if not b.mentioned("dtype"):
        b.from_env(("DTYPE",), "dtype")
    if not b.mentioned("kv_cache_dtype"):
        b.from_env(("KV_CACHE_DTYPE",), "kv_cache_dtype")
    if not b.mentioned("gpu_memory_utilization"):
        b.from_env(("CUDA_MEMORY_FRACTION",), "gpu_memory_utilization")
    if b.mentioned("tensor_parallel"):
        return
    sharded = found.values["sharded"][0] if "sharded" in found.values else b.env_raw(("SHARDED",), "sharded")
    if sharded is not None and not truthy(sharded):
        b.fields["tensor_parallel"] = 1
    elif "sharded" not in b.unresolved:
        b.fields["uses_all_gpus"] = True


def parse_sglang(args: Sequence[str], b: Spec) -> None:
    """SGLang: ``--tp`` counts GPUs across all nodes of the group; DP and EP in ``parallel``."""
    found = scan(server_config.merged(args, b, server="SGLang"), SGLANG_FLAGS)
    b.apply(found, label="SGLang")
    read_sglang_parallel(found, b)


def parse_trtllm(args: Sequence[str], b: Spec) -> None:
    """``trtllm-serve [serve|grpc] MODEL --tp_size N`` (also ``python3 -m tensorrt_llm.commands.serve``).

    NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py: ``main`` is a click group whose default
    command is ``serve``; ``MODEL`` is "model name | HF checkpoint path | TensorRT engine path";
    ``--tensor_parallel_size/--tp_size``, ``--pipeline_parallel_size/--pp_size`` (both default 1),
    ``--moe_expert_parallel_size/--ep_size``; ``--config/--extra_llm_api_options`` is a YAML file that
    may override all of them. ``disaggregated -c FILE`` keeps every server's settings in the file.
    """
    if args and args[0] == "disaggregated":
        b.hide("settings in the trtllm-serve disaggregated config file")
        return
    if args and args[0] in ("serve", "grpc"):
        args = args[1:]
    model, rest = _leading_positional(args)
    found = scan(rest, TRTLLM_FLAGS)
    b.apply(found, label="trtllm-serve")
    _set_positional_model(b, model, "the trtllm-serve argument")


def parse_kserve(args: Sequence[str], b: Spec) -> None:
    """KServe HF runtime: ``--model_id`` else ``--model_dir``; ``--model_name`` is only an alias."""
    found = scan(args, KSERVE_FLAGS)
    b.apply(found, label="KServe")
    if b.mentioned("model") or "model_dir" not in found.values:
        return
    raw, spelled = found.values["model_dir"]
    if raw.rstrip("/") == "/mnt/models":
        b.note("model is mounted at /mnt/models from the InferenceService storageUri")
    else:
        b.set("model", raw, spelled)


def parse_lmdeploy(args: Sequence[str], b: Spec) -> None:
    """``lmdeploy serve api_server MODEL --tp N``."""
    model, rest = _leading_positional(args)
    b.apply(scan(rest, LMDEPLOY_FLAGS), label="LMDeploy")
    _set_positional_model(b, model, "the lmdeploy argument")


def parse_ollama(args: Sequence[str], b: Spec) -> None:
    """Ollama: the model is the first ``ollama run/pull NAME`` anywhere in the container.

    There is no tensor parallelism (layers are spread over GPUs), and ``OLLAMA_NUM_PARALLEL``
    (concurrent requests) and ``num_gpu`` (offloaded layers) are deliberately not read.
    """
    for argv in ((("ollama",) + tuple(args)),) + b.ctx.argvs:
        model = _ollama_model(argv)
        if model:
            b.set("model", model, "ollama run/pull")
            quant = ollama_quantization(model)
            if quant is not None:
                b.fields["quantization"] = quant
            return


OLLAMA_DEFAULT_QUANT = "gguf-q4_k_m"
"""What a library tag without a quantization pulls: the Ollama library's default tags (``gemma3:27b``,
``llama3.1:70b``, ``latest``) are Q4_K_M builds (each tag's page on ollama.com/library lists its
quantization: ``gemma3:27b`` is 17 GB Q4_K_M, not the 54 GB of bf16 weights). Sized as bf16, a 27B
model that runs on one L4 would be refused."""
_OLLAMA_FULL = re.compile(r"(?<![a-z0-9])(?:fp16|f16|bf16|fp32|f32)(?![a-z0-9])")


def ollama_quantization(model: str) -> str | None:
    """The quantization an Ollama model reference pulls: the one its tag names (``-q8_0``, ``-fp16``
    gives ``None``: 16-bit), else the library default Q4_K_M. A model pulled from elsewhere
    (``hf.co/...``: the file's own quantization) is left to the name rules."""
    if model.startswith(("hf.co/", "huggingface.co/")) or "/" in model.split(":", 1)[0].strip("/"):
        return None
    tag = model.split(":", 1)[1].lower() if ":" in model else "latest"
    named = quantization_from_name(tag)
    if named is not None:
        return named
    return None if _OLLAMA_FULL.search(tag) else OLLAMA_DEFAULT_QUANT


def _ollama_model(argv: Sequence[str]) -> str | None:
    """``ollama run NAME`` / ``ollama pull NAME`` -> NAME (first positional after the verb)."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] != "ollama" or argv[1] not in ("run", "pull"):
        return None
    model, _rest = _leading_positional(argv[2:])
    return model
