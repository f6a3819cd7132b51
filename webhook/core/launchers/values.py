"""Flag value -> LaunchSpec field value: strict converters and the table of fields they feed.

Every value a parser reads (from a flag, an env variable or a NIM profile tag) goes through one of
these converters, so "what counts as a tensor parallel size" is decided in one place. Converters
never raise: they return the value, ``BAD`` (not of the expected form), ``SKIP`` (valid but says
nothing) or ``ALL_GPUS``. ``canonical_dtype``/``canonical_quantization`` are public: they are the
one place dtype and quantization spellings are normalised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from webhook.core.counts import ASCII_SPACE, parse_count

MAX_MODEL_CHARS = 512
MAX_FLAG_COUNT = 999_999
"""A flag's count is read up to six digits (a TP size, a node count); a longer one is unreadable."""

BAD = object()
"""Converter result: the value is not of the expected form."""
SKIP = object()
"""Converter result: a valid value that says nothing (``--mixed_precision no``)."""
ALL_GPUS = object()
"""Converter result: one process per visible GPU (torchrun ``--nproc-per-node gpu``)."""

_FLOAT_RE = re.compile(r"[0-9]{0,3}(?:\.[0-9]{1,8})?")

_DTYPES = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "float32": "fp32", "fp32": "fp32", "float": "fp32", "auto": "auto", "fp8": "fp8",
}
_QUANTIZATIONS = {
    "awq": "awq", "awq-marlin": "awq", "gptq": "gptq", "gptq-marlin": "gptq", "marlin": "gptq",
    "fp8": "fp8", "bitsandbytes": "bnb-4bit", "bitsandbytes-nf4": "bnb-4bit",
    "bitsandbytes-fp4": "bnb-4bit", "bnb-4bit": "bnb-4bit", "eetq": "int8",
    "compressed-tensors": "compressed-tensors", "mxfp4": "mxfp4", "gguf": "gguf", "int4": "int4",
    "int8": "int8",
}
_NO_VALUE = frozenset({"none", "null", "no", ""})


def canonical_dtype(raw: str) -> str | None:
    """``bfloat16`` -> ``bf16``, ``half`` -> ``fp16``, ``float`` -> ``fp32``; unknown lower-cased."""
    key = raw.strip().lower()
    if key in _NO_VALUE:
        return None
    return _DTYPES.get(key, key)


def canonical_quantization(raw: str) -> str | None:
    """``awq_marlin`` -> ``awq``, ``bitsandbytes-nf4`` -> ``bnb-4bit``, ``eetq`` -> ``int8``, ...

    Dashes and underscores are interchangeable in the lookup; unknown values come back lower-cased
    as given, ``none`` as ``None``.
    """
    key = raw.strip().lower()
    if key in _NO_VALUE:
        return None
    return _QUANTIZATIONS.get(key.replace("_", "-"), key)


def flag_count(raw: str, *, padded: bool = True) -> int | None:
    """A count as a launcher's flag or env variable writes it: ASCII digits, up to six, with the
    ``+`` Python's ``int()`` (argparse) takes (:func:`webhook.core.counts.parse_count`)."""
    return parse_count(raw, cap=MAX_FLAG_COUNT, padded=padded, signs="+")


def _to_count(raw: str) -> Any:
    """Strict positive integer: ``4`` yes; ``4.0``, ``1_0``, ``${TP}``, ``0``, ``４`` no."""
    value = flag_count(raw)
    return value if value is not None and value >= 1 else BAD


def _to_count_or_zero(raw: str) -> Any:
    """A count where 0 means something (vLLM ``--data-parallel-size-local 0``: an API-only head)."""
    value = flag_count(raw)
    return BAD if value is None else value


def _to_nnodes(raw: str) -> Any:
    """torchrun ``--nnodes``: ``N`` or ``MIN:MAX`` (elastic; the group may grow to MAX)."""
    low, colon, high = raw.strip(ASCII_SPACE).partition(":")
    value = flag_count(high if colon else low, padded=False)
    if value is None or flag_count(low, padded=False) is None:
        return BAD
    return value if value >= 1 else BAD


def _to_nproc(raw: str) -> Any:
    """torchrun ``--nproc-per-node``: an integer, or ``auto``/``gpu`` (= every visible GPU)."""
    text = raw.strip().lower()
    if text in ("auto", "gpu", "cuda", "-1"):
        return ALL_GPUS
    if text in ("cpu", "xpu", "npu", "mps"):
        return SKIP
    return _to_count(text)


def _to_fraction(raw: str) -> Any:
    """A memory fraction in (0, 1]."""
    text = raw.strip()
    if not text or not _FLOAT_RE.fullmatch(text) or text == ".":
        return BAD
    value = float(text)
    return value if 0 < value <= 1 else BAD


def _to_model(raw: str) -> Any:
    """A model id or path as given (bounded); empty means not given."""
    text = raw.strip()
    if not text:
        return SKIP
    return text if len(text) <= MAX_MODEL_CHARS else BAD


def _to_dtype(raw: str) -> Any:
    value = canonical_dtype(raw)
    return SKIP if value is None else value


def _to_quantization(raw: str) -> Any:
    value = canonical_quantization(raw)
    return SKIP if value is None else value


def _to_kv_dtype(raw: str) -> Any:
    """``fp8_e4m3``/``fp8_e5m2`` -> ``fp8``; otherwise as a dtype."""
    text = raw.strip().lower()
    return "fp8" if text.startswith("fp8") else _to_dtype(text)


def _to_precision(raw: str) -> Any:
    """Lightning ``trainer.precision``: ``bf16-mixed`` -> bf16, ``16`` -> fp16, ``32`` -> fp32."""
    text = raw.strip().lower().removesuffix("-mixed").removesuffix("-true")
    return {"16": "fp16", "32": "fp32", "64": "fp64"}.get(text) or _to_dtype(text)


def _to_lmdeploy_format(raw: str) -> Any:
    """LMDeploy ``--model-format``: ``awq``/``gptq``/``fp8`` are quantizations, ``hf`` is not."""
    text = raw.strip().lower()
    return text if text in ("awq", "gptq", "fp8") else SKIP


def _to_quant_policy(raw: str) -> Any:
    """LMDeploy ``--quant-policy``: 4 and 8 quantize the KV cache to int4/int8, 0 does not."""
    return {"4": "int4", "8": "int8"}.get(raw.strip(), SKIP)


@dataclass(frozen=True)
class Field:
    """How one flag value becomes a LaunchSpec field."""

    target: str
    what: str
    expected: str
    convert: Callable[[str], Any]


FIELDS: dict[str, Field] = {
    "model": Field("model", "model", "a model name", _to_model),
    "tensor_parallel": Field("tensor_parallel", "tensor parallel size", "a positive integer", _to_count),
    "pipeline_parallel": Field("pipeline_parallel", "pipeline parallel size", "a positive integer", _to_count),
    "data_parallel": Field("data_parallel", "data parallel size", "a positive integer", _to_count),
    "expert_parallel": Field("expert_parallel", "expert parallel size", "a positive integer", _to_count),
    "data_parallel_local": Field("data_parallel_local", "local data parallel size", "an integer", _to_count_or_zero),
    "nnodes": Field("nnodes", "node count", "N or MIN:MAX", _to_nnodes),
    "procs_per_node": Field("procs_per_node", "processes per node", "a positive integer", _to_count),
    "nproc": Field("procs_per_node", "processes per node", "an integer, auto or gpu", _to_nproc),
    "total_procs": Field("total_procs", "total process count", "a positive integer", _to_count),
    "dtype": Field("dtype", "dtype", "a dtype", _to_dtype),
    "precision": Field("dtype", "precision", "a precision", _to_precision),
    "mixed_precision": Field("dtype", "mixed precision", "a precision", _to_dtype),
    "quantization": Field("quantization", "quantization", "a quantization method", _to_quantization),
    "model_format": Field("quantization", "model format", "a model format", _to_lmdeploy_format),
    "kv_cache_dtype": Field("kv_cache_dtype", "KV cache dtype", "a dtype", _to_kv_dtype),
    "quant_policy": Field("kv_cache_dtype", "KV cache quantization", "0, 4 or 8", _to_quant_policy),
    "gpu_memory_utilization": Field(
        "gpu_memory_utilization", "GPU memory utilization", "a fraction between 0 and 1", _to_fraction
    ),
}
