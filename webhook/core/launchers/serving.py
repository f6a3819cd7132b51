"""Inference-server parsers: vLLM, TGI, SGLang, TensorRT-LLM, Triton, KServe, LMDeploy, Ollama.

Each parser reads one server's argv (and, where the server does, its env) into a ``Spec``: model,
parallelism, precision, and whether it grabs every visible GPU. NIM, which is recognised by its
image rather than a command line, lives in ``nim``.
"""

from __future__ import annotations

from typing import Sequence

from webhook.core.launchers.flags import (
    KSERVE_FLAGS,
    LMDEPLOY_FLAGS,
    SGLANG_FLAGS,
    TGI_FLAGS,
    TRITON_FLAGS,
    TRTLLM_FLAGS,
    VLLM_FLAGS,
)
from webhook.core.launchers.scan import Scan, is_flag, scan, truthy
from webhook.core.launchers.spec import Spec


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


def _expert_parallel_from_flag(b: Spec, found: Scan, *, factors: Sequence[str]) -> None:
    """``--enable-expert-parallel``: EP size is the product of ``factors`` (vLLM: TP x DP)."""
    if "ep_enabled" not in found.values or not truthy(found.values["ep_enabled"][0]):
        return
    if b.mentioned("expert_parallel"):
        return
    if any(f in b.unresolved for f in factors):
        b.note("expert parallel is enabled; its size depends on values not visible at admission")
        return
    size = 1
    for f in factors:
        size *= b.fields.get(f) or 1
    b.fields["expert_parallel"] = size


def parse_vllm_serve(args: Sequence[str], b: Spec) -> None:
    """``vllm serve [MODEL] [flags]`` (and the vllm/vllm-openai image's entrypoint)."""
    model, rest = _leading_positional(args)
    found = scan(rest, VLLM_FLAGS)
    b.apply(found, label="vLLM")
    if model is None and found.positionals:
        model = found.positionals[0]
    _set_positional_model(b, model, "the vllm serve argument")
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel", "data_parallel"))


def parse_vllm_module(args: Sequence[str], b: Spec) -> None:
    """``python -m vllm.entrypoints.openai.api_server --model X``: no positional model."""
    found = scan(args, VLLM_FLAGS)
    b.apply(found, label="vLLM")
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel", "data_parallel"))


def parse_tgi(args: Sequence[str], b: Spec) -> None:
    """TGI: flags first, then env (``MODEL_ID``, ``NUM_SHARD``...) as clap does.

    Without ``--num-shard`` TGI shards over every visible GPU unless ``--sharded false``.
    """
    found = scan(args, TGI_FLAGS)
    b.apply(found, label="TGI")
    if not b.mentioned("model"):
        b.from_env(("MODEL_ID", "HF_MODEL_ID"), "model")
    if not b.mentioned("tensor_parallel"):
        b.from_env(("NUM_SHARD", "SM_NUM_GPUS"), "tensor_parallel")
    if not b.mentioned("quantization"):
        b.from_env(("QUANTIZE", "HF_MODEL_QUANTIZE"), "quantization")
    if not b.mentioned("dtype"):
        b.from_env(("DTYPE",), "dtype")
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
    """SGLang: ``--tp`` counts GPUs across all nodes of the group."""
    found = scan(args, SGLANG_FLAGS)
    b.apply(found, label="SGLang")
    b.fields["tp_is_total"] = True
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel",))


def parse_trtllm(args: Sequence[str], b: Spec) -> None:
    """``trtllm-serve [serve] MODEL --tp_size N``."""
    if args and args[0] == "serve":
        args = args[1:]
    model, rest = _leading_positional(args)
    found = scan(rest, TRTLLM_FLAGS)
    b.apply(found, label="trtllm-serve")
    _set_positional_model(b, model, "the trtllm-serve argument")


def parse_triton(args: Sequence[str], b: Spec) -> None:
    """``launch_triton_server.py --world_size=N``: N MPI ranks, one per GPU; model not visible.

    The engine was built for TP x PP = N. N is also reported as ``tensor_parallel`` because the
    weights are split N ways either way, which is what fit and placement need.
    """
    b.apply(scan(args, TRITON_FLAGS), label="Triton")
    if "procs_per_node" in b.fields:
        b.fields["tensor_parallel"] = b.fields["procs_per_node"]
    elif "procs_per_node" in b.unresolved:
        b.unresolved.add("tensor_parallel")


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
            return


def _ollama_model(argv: Sequence[str]) -> str | None:
    """``ollama run NAME`` / ``ollama pull NAME`` -> NAME (first positional after the verb)."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] != "ollama" or argv[1] not in ("run", "pull"):
        return None
    model, _rest = _leading_positional(argv[2:])
    return model
