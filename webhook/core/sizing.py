"""Will the model fit, and how fast will it decode: per-GPU arithmetic for one label option.

Policy must not pin a workload to a product it cannot run on, and must be able to say why in
numbers. Everything here is arithmetic on a :class:`WorkloadProfile` and a :class:`LabelOption`
(whose spec is already the weakest product the label may select), so the same inputs always give
the same verdict and the same message. Units: memory in GiB (2**30 bytes, what the driver reports),
parameters in billions, bandwidth in GB/s (10**9 bytes/s, what datasheets quote).

The rules are the engines' own memory budget and the memory-bound decode argument: vLLM gives a
replica ``--gpu-memory-utilization`` of each GPU (vllm/config/cache.py
``CacheConfig.gpu_memory_utilization``: 0.92 now, 0.9 in older releases), SGLang
``--mem-fraction-static`` (python/sglang/srt/server_args.py), TensorRT-LLM
``kv_cache_free_gpu_mem_fraction`` (0.9); at small batch a decode step reads every weight once, so its
time is bytes / bandwidth, plus the tensor-parallel all-reduces of each layer:

* per GPU: weights / (TP x PP) + runtime overhead + KV room <= GPU memory x utilization;
* decode per token ~ (weight bytes / TP) / bandwidth + 2 x layers x all-reduce latency.

Two refinements these rules do not cover:

* Mixture-of-experts models served with data or expert parallelism are sized the way the engine
  splits them (:func:`weight_layout`): vLLM shards the expert layers over DP x TP ranks and keeps
  attention/dense weights per DP rank (sharded by TP); SGLang's ``--enable-dp-attention`` shards
  attention over TP / DP and everything else over TP.
* A low-precision checkpoint is offered only GPUs whose compute capability runs it, natively or
  through a fallback its serving framework documents (:func:`precision_support`); the precision
  itself is named with where it came from (:func:`effective_precision`).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from webhook.core import models, training_memory
from webhook.core.domain import Fit, LabelOption, WorkloadProfile
from webhook.core.launchers import traits as launcher_traits
from webhook.core.memo import MISSING, Memo
from webhook.core.hardware import (
    DEFAULT_ALLREDUCE_US,
    FP8,
    MXFP4,
    NVFP4,
    Catalog,
    compute_capability,
    default_catalog,
    native_formats,
)

GIB = 2 ** 30

TRAINING_BYTES_PER_PARAM = 16.0
"""Adam in mixed precision: bf16 weights and grads (4) + fp32 master weights, momentum, variance (12).
Activations come on top and are not counted."""


def replica_bytes_per_param(profile: WorkloadProfile) -> float:
    """Bytes per parameter one unsharded training replica holds (what "fits one card" means for
    training, :mod:`webhook.core.tiering`): the full training state under mixed-precision Adam.
    A strategy that trains less than every weight (LoRA) holds less (:mod:`webhook.core.training_memory`)."""
    return training_memory.replica_bytes(profile)  # 16, or a PEFT job's frozen base + adapters


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


GGUF_BITS: Mapping[str, float] = {
    # bits per weight of the whole file, ggml-org/llama.cpp tools/quantize/README.md
    # (f4a71e707e2c0e041fb43be5a32659f364fc712d) "Quantization" table, measured on Llama-3.1-8B: the
    # k-quant mixes keep some tensors at a wider type, so their figure is above the block type's
    "iq1_s": 2.0042, "iq1_m": 2.1460, "iq2_xxs": 2.3824, "iq2_xs": 2.5882, "iq2_s": 2.7403,
    "iq2_m": 2.9294, "iq3_xxs": 3.2548, "iq3_xs": 3.4977, "iq3_s": 3.6606, "iq3_m": 3.7628,
    "iq4_xs": 4.4597, "iq4_nl": 4.6818, "q2_k_s": 2.9697, "q2_k": 3.1593, "q3_k_s": 3.6429,
    "q3_k_l": 4.2979, "q4_k_s": 4.6672, "q4_k_m": 4.8944, "q5_k_s": 5.5704, "q5_k_m": 5.7036,
    "q6_k": 6.5633, "q8_0": 8.5008,
    # not in that table: Q3_K_M as Q3_K_L (the wider of its neighbours: never under-counted); the
    # legacy block types from their block layout, ggml-org/llama.cpp ggml/src/ggml-common.h
    # (aca2e6ce7909064dbfbf3bd168e9ad3db1826e6c): 32 weights per block with an fp16 scale (q4_0: 18
    # bytes, q5_0: 22), or a scale and a min (q4_1: 20, q5_1: 24); f16, bf16 and f32 are plain floats
    # (the table's 16.0005 for F16 is the file's metadata)
    "q3_k_m": 4.2979, "q4_0": 4.5, "q4_1": 5.0, "q5_0": 5.5, "q5_1": 6.0,
    "f16": 16.0, "bf16": 16.0, "f32": 32.0,
}
"""GGUF tensor types (``models.quantization_from_name`` gives ``gguf-<type>``) -> bits per weight."""
GGUF_BYTES: Mapping[str, float] = {f"gguf-{k}": round(v / 8, 4) for k, v in GGUF_BITS.items()}
_GGUF_WIDTH_RE = re.compile(r"gguf-i?q([1-8])")


def _gguf_fallback(q: str) -> float:
    """A ``gguf-...`` name the table does not list: the widest listed type of its bit width
    (``gguf-q5_k_l`` as the widest 5-bit type), else Q4_K_M as for an unnamed type."""
    m = _GGUF_WIDTH_RE.match(q)
    if m is not None:
        same = [v for k, v in GGUF_BITS.items() if k.lstrip("i").startswith(f"q{m.group(1)}")]
        if same:
            return round(max(same) / 8, 4)
    return _QUANT_BYTES["gguf"]


_DTYPE_BYTES: Mapping[str, float] = {_norm(k): v for k, v in {
    "fp32": 4.0, "float32": 4.0, "float": 4.0,
    "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "half": 2.0,
    "fp8": 1.0, "float8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
}.items()}
"""``--dtype`` spellings -> bytes per parameter (``auto`` is absent: it means "as the checkpoint")."""

_QUANT_BYTES: Mapping[str, float] = {_norm(k): v for k, v in {
    # 8-bit weights
    "fp8": 1.0, "int8": 1.0, "w8a8": 1.0, "w8a16": 1.0, "fbgemm_fp8": 1.0, "ptpc_fp8": 1.0,
    "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "modelopt": 1.0, "modelopt_fp8": 1.0, "w8a8_fp8": 1.0,
    "experts_int8": 1.0, "eetq": 1.0,
    "bnb-8bit": 1.0, "bitsandbytes-8bit": 1.0, "gptq-int8": 1.0, "int8_sq": 1.0, "int8_wo": 1.0,
    # 4-bit integer weights with group scales (~4.25 bits)
    "awq": 0.53, "awq_marlin": 0.53, "awq-int4": 0.53, "int4_awq": 0.53, "w4a8_awq": 0.53,
    "gptq": 0.53, "gptq_marlin": 0.53, "gptq-int4": 0.53, "marlin": 0.53, "int4": 0.53,
    "int4_wo": 0.53, "w4a16": 0.53, "bnb-4bit": 0.53, "bitsandbytes": 0.53, "bitsandbytes-nf4": 0.53,
    "bitsandbytes-fp4": 0.53, "nf4": 0.53,
    # 4-bit floating point with block scales
    "mxfp4": 0.53, "nvfp4": 0.56, "modelopt_fp4": 0.56, "fp4": 0.56,
    # GGUF: a GGUF of unknown type as Q4_K_M, the type llama.cpp and Ollama pull by default
    "gguf": GGUF_BYTES["gguf-q4_k_m"],
    **GGUF_BYTES,
}.items()}
"""Quantization names (launcher flags and name suffixes) -> bytes per parameter, scales included."""

_NO_QUANT = frozenset({"", "none", "null", "no", "false", "auto"})

_LAYER_ANCHORS: tuple[tuple[float, float], ...] = (
    (1.23, 16.0),   # Llama 3.2 1B
    (3.21, 28.0),   # Llama 3.2 3B
    (8.0, 32.0),    # Llama 3.1 8B
    (70.6, 80.0),   # Llama 3.1 70B
    (405.0, 126.0),  # Llama 3.1 405B
)
"""Llama-family depth by size, the basis of :func:`estimate_layers`."""

_NO_DECODE_KINDS = frozenset({"embedding", "diffusion", "vision"})
"""Model kinds that do not generate tokens one by one: no decode estimate."""


# --------------------------------------------------------------------------- bytes per parameter


def bytes_per_param(*, dtype: str | None, quantization: str | None, native_dtype: str | None = None,
                    role: str | None = None, peft: str | None = None) -> float:
    """Bytes one parameter occupies on the GPU, from what the launcher and the model say.

    Precedence, most specific first:

    1. ``role == "training"``: 16 (weights, grads and Adam state), whatever the dtype; with ``peft``
       (``lora``, ``lora-8bit``, ``qlora``) the frozen base's bytes plus the trainable adapters'
       share (:mod:`training_memory`). Either is the whole model's, before any sharding.
    2. A recognised ``quantization`` (``awq``, ``fp8``, ``gguf-q4_k_m``, ...): its table value.
    3. A quantized ``native_dtype`` (``fp8`` DeepSeek-V3, ``mxfp4`` gpt-oss, ``nvfp4``): the
       checkpoint's format. ``--dtype`` does not undo it: serving engines keep quantized checkpoint
       weights as they ship and apply ``--dtype`` to activations and unquantized layers.
    4. An explicit ``dtype`` (``fp32`` 4, ``bf16``/``fp16`` 2, ``fp8``/``int8`` 1).
    5. Otherwise (``auto``, unknown, nothing said) 2: engines load fp32 checkpoints as 16-bit.

    An unrecognised quantization name is ignored (falls through to the rules below it) rather than
    guessed small, so memory is never under-counted for a scheme this table does not know.
    """
    if role == "training":
        return _peft_bytes(peft, dtype) if peft in training_memory.PEFT_BASE_BYTES else TRAINING_BYTES_PER_PARAM
    if quantization is not None and _norm(quantization) not in _NO_QUANT:
        q = _norm(quantization)
        if q in _QUANT_BYTES:
            return _QUANT_BYTES[q]
        if q.startswith("gguf"):
            return _gguf_fallback(q)
    if native_dtype is not None:
        native = _norm(native_dtype)
        if native in _QUANT_BYTES:  # bf16/fp16/fp32 are not in it: those defer to --dtype
            return _QUANT_BYTES[native]
    if dtype is not None and _norm(dtype) in _DTYPE_BYTES:
        return _DTYPE_BYTES[_norm(dtype)]
    return 2.0


# --------------------------------------------------------------------------- precision: which, whence, where it runs

_FORMAT_OF: Mapping[str, str] = {_norm(k): v for k, v in {
    "fp8": FP8, "float8": FP8, "fp8_e4m3": FP8, "fp8_e5m2": FP8, "fbgemm_fp8": FP8, "ptpc_fp8": FP8,
    "modelopt": FP8, "modelopt_fp8": FP8, "w8a8_fp8": FP8,
    "mxfp4": MXFP4,
    "nvfp4": NVFP4, "modelopt_fp4": NVFP4, "fp4": NVFP4,
}.items()}
"""Precision names whose kernels depend on the GPU generation -> the weight format they need
(``bitsandbytes-fp4`` is absent on purpose: bitsandbytes dequantizes in software on any GPU)."""

_FORMAT_TEXT = {FP8: "FP8", MXFP4: "MXFP4", NVFP4: "NVFP4"}
_NATIVE_TEXT = {FP8: "8.9+ (Ada, Hopper, Blackwell)", MXFP4: "10.0+ (Blackwell)", NVFP4: "10.0+ (Blackwell)"}


@dataclass(frozen=True)
class Precision:
    """The precision the weights are held in on the GPU, and what said so."""

    name: str
    """As stated (``fp8``, ``awq``, ``bfloat16``, ``mxfp4``) or ``bf16`` when nothing states one."""
    bytes_per_param: float
    source: str
    """``set by the launcher``, ``read off the model name``, ``native dtype of the checkpoint, from the
    model catalog``, ``--dtype``, ``training: ...`` or ``default: ...``."""
    note: str = ""

    @property
    def weight_format(self) -> str | None:
        """``fp8``, ``mxfp4``, ``nvfp4`` when the kernels depend on the GPU generation, else None."""
        return _FORMAT_OF.get(_norm(self.name))

    def label(self) -> str:
        """One line for people: ``fp8 (native dtype of the checkpoint, from the model catalog), 1 B/param``."""
        text = f"{self.name} ({self.source}), {self.bytes_per_param:g} B/param"
        return f"{text}; {self.note}" if self.note else text


def native_dtype(profile: WorkloadProfile) -> str | None:
    """The dtype the model's weights ship in when it is not 16-bit (``fp8`` for DeepSeek-V3,
    ``mxfp4`` for gpt-oss): the profile's own ``native_dtype`` when it has one, else the model
    catalog's entry for ``profile.model``; None for unknown models and 16-bit checkpoints."""
    stated = getattr(profile, "native_dtype", None)
    if isinstance(stated, str) and stated:
        return stated
    info = models.describe(profile.model) if isinstance(profile.model, str) else None
    return info.native_dtype if info is not None else None


def effective_precision(profile: WorkloadProfile) -> Precision:
    """The precision sizing uses for ``profile`` and its source, by :func:`bytes_per_param`'s rules.

    For ``explain``: a DeepSeek-V3 pod that names no dtype is ``fp8`` from the checkpoint (1
    byte/param), not ``bf16 (default)``. ``bytes_per_param`` is the profile's own figure when it has
    one (what :func:`fit` sizes with), else the rules' figure.
    """
    rule = _precision_by_rules(profile)
    if profile.bytes_per_param is not None and profile.bytes_per_param != rule.bytes_per_param:
        return Precision(rule.name, profile.bytes_per_param, rule.source, rule.note)
    return rule


def _peft_bytes(peft: str | None, dtype: str | None) -> float:
    """A PEFT job's whole-model bytes per parameter: frozen base + adapters at 16 B (unsharded)."""
    base = training_memory.PEFT_BASE_BYTES[peft or "lora"]
    if peft == "lora" and dtype == "fp32":
        base = 4.0
    return base + training_memory.LORA_TRAINABLE_SHARE * TRAINING_BYTES_PER_PARAM


_PEFT_PRECISION = {"lora": "", "lora-8bit": "int8", "qlora": "nf4"}


def _precision_by_rules(profile: WorkloadProfile) -> Precision:
    if profile.role == "training":
        peft = getattr(profile, "peft", None)
        if peft in training_memory.PEFT_BASE_BYTES:
            name = _PEFT_PRECISION[peft] or profile.dtype or "bf16"
            return Precision(name, _peft_bytes(peft, profile.dtype),
                             f"training {peft}: frozen base + {training_memory.LORA_TRAINABLE_SHARE:.1%} trainable "
                             f"adapters with their Adam state")
        return Precision(profile.dtype or "bf16", TRAINING_BYTES_PER_PARAM,
                         "training: 16-bit weights and grads, fp32 Adam state")
    ignored = ""
    q = profile.quantization
    if isinstance(q, str) and _norm(q) not in _NO_QUANT:
        nq = _norm(q)
        bpp = _QUANT_BYTES.get(nq) or (_gguf_fallback(nq) if nq.startswith("gguf") else None)
        if bpp is not None:
            named = models.quantization_from_name(profile.model) if isinstance(profile.model, str) else None
            source = "read off the model name" if named == q else "set by the launcher"
            return Precision(q, bpp, source)
        ignored = f"quantization {q[:40]!r} is unknown here and sized as unquantized"
    native = native_dtype(profile)
    if native is not None and _norm(native) in _QUANT_BYTES:
        note = f"--dtype {profile.dtype} applies to activations" if profile.dtype else ""
        return Precision(native, _QUANT_BYTES[_norm(native)], "native dtype of the checkpoint, from the model catalog",
                         "; ".join(n for n in (note, ignored) if n))
    if isinstance(profile.dtype, str) and _norm(profile.dtype) in _DTYPE_BYTES:
        return Precision(profile.dtype, _DTYPE_BYTES[_norm(profile.dtype)], "--dtype", ignored)
    return Precision("bf16", 2.0, "default: 16-bit, nothing states a precision", ignored)


@dataclass(frozen=True)
class Support:
    """Whether a precision runs on a GPU, and how (``how`` is empty when it runs natively)."""

    offered: bool
    how: str = ""


def precision_support(precision: Precision | str | None, cc: str, framework: str | None) -> Support:
    """Does a checkpoint in ``precision`` run on compute capability ``cc`` under ``framework``?

    * 16-bit, integer and GGUF formats: yes (their kernels do not decide the product here).
    * FP8 natively from 8.9, MXFP4/NVFP4 from 10.0 (:func:`webhook.core.hardware.native_formats`).
    * Below that only where the framework documents a path (its launcher's
      :attr:`~webhook.core.launchers.traits.Traits.fallbacks`); ``how`` then says
      which, e.g. FP8 on an A100 under vLLM runs as weight-only W8A16 through FP8 Marlin.
    * Otherwise not: ``how`` says why, for the Fit's reason.
    """
    if precision is None:
        return Support(True)
    name = precision.name if isinstance(precision, Precision) else precision
    fmt = _FORMAT_OF.get(_norm(name))
    if fmt is None or fmt in native_formats(cc):
        return Support(True)
    text = _FORMAT_TEXT[fmt]
    fallback = launcher_traits.of(framework).fallbacks.get(fmt)
    if fallback is not None:
        version = compute_capability(cc)
        if (version is not None and version >= fallback.low) or cc.strip().lower() in fallback.amd:
            return Support(True, f"{text} runs as {fallback.how} (compute capability {cc} has no {text} "
                                 f"tensor cores)")
    if framework:
        who = f"{framework} documents no fallback for it"
    else:
        who = "no serving framework was recognised, so no documented fallback applies"
    return Support(False, f"{text} weights need compute capability {_NATIVE_TEXT[fmt]} and {who}; this GPU is {cc}")


# --------------------------------------------------------------------------- mixture-of-experts split

_ROUTED: tuple[tuple[float, float, int, int], ...] = (
    # total B, active B (the model catalog's numbers), experts routed per token, routed experts
    (671.0, 37.0, 8, 256),     # DeepSeek-V3 / R1 (config.json: n_routed_experts 256, num_experts_per_tok 8)
    (1000.0, 32.0, 8, 384),    # Kimi-K2 (DeepSeek-V3 architecture, 384 routed experts)
    (236.0, 21.0, 6, 160),     # DeepSeek-V2 / V2.5
    (15.7, 2.4, 6, 64),        # DeepSeek-V2-Lite
    (235.0, 22.0, 8, 128),     # Qwen3-235B-A22B
    (30.5, 3.3, 8, 128),       # Qwen3-30B-A3B
    (480.0, 35.0, 8, 160),     # Qwen3-Coder-480B-A35B
    (57.4, 14.0, 8, 64),       # Qwen2-57B-A14B
    (46.7, 12.9, 2, 8),        # Mixtral-8x7B
    (141.0, 39.0, 2, 8),       # Mixtral-8x22B
    (109.0, 17.0, 1, 16),      # Llama-4-Scout-17B-16E
    (400.0, 17.0, 1, 128),     # Llama-4-Maverick-17B-128E
    (117.0, 5.1, 4, 128),      # gpt-oss-120b
    (21.0, 3.6, 4, 32),        # gpt-oss-20b
    (355.0, 32.0, 8, 160),     # GLM-4.5
    (106.0, 12.0, 8, 128),     # GLM-4.5-Air
    (41.9, 6.6, 2, 16),        # Phi-3.5-MoE
)
"""Router shapes of the catalog's mixture-of-experts models, keyed by their (total, active) counts
(matched within 0.5%: DeepSeek-V2 at 236/21 must not claim Qwen3-235B at 235/22)."""

_DENSE_MARGIN = 1.1
"""The dense share derived from rounded (total, active) counts is raised 10% so it is not under-counted
(DeepSeek-V3: 16.5B derived, 18.2B used, 17.1B from its config: 671 - 58 layers x 256 x 44.04M)."""


@dataclass(frozen=True)
class WeightSplit:
    """Parameters (billions) the engine replicates per data-parallel rank (attention, embeddings,
    dense and shared-expert layers) and the routed experts it can shard over every rank."""

    dense_b: float
    experts_b: float
    derived: str
    """How the split was obtained, for the reason text."""


def weight_split(params_b: float, active_params_b: float | None) -> WeightSplit | None:
    """The dense / routed-expert split of a mixture-of-experts model; None for a dense model.

    The model catalog gives only total T and active A. With k of E routed experts active per token,
    A = D + (T - D) x k / E, so the dense share is D = (A - T k/E) / (1 - k/E). For the models of
    :data:`_ROUTED` k/E is known (their config.json) and D is raised by :data:`_DENSE_MARGIN`; for any
    other model D = A, an upper bound (every active parameter counted as replicated), so a fit is
    never promised on a guess. D never exceeds A.
    """
    if active_params_b is None or not 0 < active_params_b < params_b:
        return None
    for total, active, k, experts in _ROUTED:
        if math.isclose(total, params_b, rel_tol=0.005) and math.isclose(active, active_params_b, rel_tol=0.005):
            f = k / experts
            dense = min(active_params_b, max(0.0, (active_params_b - params_b * f) / (1 - f)) * _DENSE_MARGIN)
            return WeightSplit(dense, params_b - dense, f"{k} of {experts} experts active")
    return WeightSplit(active_params_b, params_b - active_params_b, "router unknown: active counted as dense")


@dataclass(frozen=True)
class Layout:
    """How many GPUs share the dense weights and how many share the routed experts."""

    dense_shards: int
    expert_shards: int
    experts_over: str = ""
    """For the reason: ``DP16 x TP1 (EP)``."""
    dense_over: str = ""
    """For the reason: ``TP1 per DP rank``."""


def weight_layout(profile: WorkloadProfile) -> Layout:
    """The per-GPU split of an inference launch, as the serving engines document it.

    * vLLM with ``--data-parallel-size`` DP > 1 (docs "Data Parallel Deployment" and "Expert
      Parallel Deployment"): expert layers form a group of DP x TP ranks, expert-parallel with
      ``--enable-expert-parallel`` and tensor-parallel without it, so the experts are split DP x TP
      ways either way; attention and dense weights are sharded by TP and replicated per DP rank.
    * SGLang with ``--enable-dp-attention`` and DP > 1 (docs "Understanding TP, DP, and DP-Attention"):
      one TP group of ``--tp`` GPUs; attention is sharded over TP / DP GPUs and replicated across the
      DP groups, FFN/MoE weights stay sharded over all TP GPUs. Every dense weight is counted with the
      attention here (SGLang shards its dense FFN over all TP GPUs: an over-count, on the safe side).
      SGLang's ``--ep-size`` changes only the communication ("Total memory per GPU =
      total_expert_params / 8 - identical to pure TP8 or pure EP8"), so it does not enter here.
    * Everything else: TP x PP for both (normal DP replicates the whole model per replica).

    Pipeline parallelism divides both. Dense models use ``dense_shards`` only.
    """
    tp = max(1, profile.tensor_parallel or 1)
    pp = max(1, profile.pipeline_parallel or 1)
    dp = max(1, profile.data_parallel or 1)
    pp_text = f" x PP{pp}" if pp > 1 else ""
    traits = launcher_traits.of(profile.framework) if dp > 1 else launcher_traits.NONE
    if traits.experts_over_dp:
        kind = "EP" if profile.expert_parallel else "expert TP"
        return Layout(tp * pp, tp * pp * dp, f"DP{dp} x TP{tp}{pp_text} ({kind})", f"TP{tp}{pp_text} per DP rank")
    if traits.dp_attention and profile.dp_attention:
        attn = max(1, tp // dp)
        return Layout(attn * pp, tp * pp, f"TP{tp}{pp_text}", f"TP{tp}/DP{dp} = {attn}{pp_text} per DP group "
                                                                 f"(DP attention)")
    return Layout(tp * pp, tp * pp)


# --------------------------------------------------------------------------- layers and decode time


def estimate_layers(params_b: float) -> int:
    """Transformer depth of a dense Llama-like model of this size, for the all-reduce count.

    Piecewise log-linear between Llama anchors (16 @ 1.2B, 28 @ 3.2B, 32 @ 8B, 80 @ 70.6B,
    126 @ 405B), clamped outside them. Used only when the model catalog does not give ``layers``;
    for mixture-of-experts models it is fed the active parameter count, which lands nearer the real
    depth than the total (DeepSeek-V3: 37B active -> ~63, real 61).
    """
    if params_b <= _LAYER_ANCHORS[0][0]:
        return int(_LAYER_ANCHORS[0][1])
    if params_b >= _LAYER_ANCHORS[-1][0]:
        return int(_LAYER_ANCHORS[-1][1])
    for (p0, l0), (p1, l1) in zip(_LAYER_ANCHORS, _LAYER_ANCHORS[1:]):
        if p0 <= params_b <= p1:
            t = math.log(params_b / p0) / math.log(p1 / p0)
            return round(l0 + t * (l1 - l0))
    raise AssertionError("unreachable: anchors cover the clamped range")  # pragma: no cover


def decode_time_ms(*, params_b: float, bytes_per_param: float, tensor_parallel: int,
                   bandwidth_gbs: float, layers: int, allreduce_us: float) -> float:
    """Batch-1 decode time per token: read this GPU's weight share once, plus the all-reduces.

    Decode is memory-bandwidth bound, so each token costs (weight bytes / TP) / bandwidth; with
    TP > 1 every layer adds two all-reduces (after attention and after the MLP). Pipeline stages run
    one after another for a token, so PP does not shorten it and is not a parameter.
    """
    tp = max(1, tensor_parallel)
    read_ms = params_b * 1e9 * bytes_per_param / tp / (bandwidth_gbs * 1e9) * 1e3
    comm_ms = 2 * layers * allreduce_us / 1e3 if tp > 1 else 0.0
    return read_ms + comm_ms


# --------------------------------------------------------------------------- fit


def fit(profile: WorkloadProfile, option: LabelOption, *, overhead_gib: float = 2.0,
        kv_reserve_gib: float = 2.0, utilization: float = 0.9, allreduce_us: float | None = None,
        kv_fraction: float = 0.1) -> Fit:
    """Does ``profile`` fit one GPU of ``option``, and how fast would it decode there?

    Per-GPU need = weight share + ``overhead_gib`` + KV room, against
    ``option.spec.memory_gib x utilization`` (the launcher's own ``gpu_memory_utilization`` wins
    when it is a sensible fraction).

    * Inference: weights are split over TP x PP GPUs; a mixture-of-experts model launched with data
      or expert parallelism is split as :func:`weight_layout` says (routed experts over more GPUs
      than the dense weights). KV room = max(``kv_reserve_gib``, ``kv_fraction`` x weight share). A
      fixed 2 GiB would let Llama-70B bf16 "fit" two 80 GB GPUs with almost no cache left (too
      little to serve, so counted here as not fitting); a share proportional to the weights buys the
      same number of cached tokens whatever the TP size (both the weights and the KV cache are split
      by TP x PP), and the floor keeps small models honest.
    * Training (``role == "training"``): the model states per GPU of the job's strategy
      (:func:`training_memory.per_gpu`: DDP 16 B/param on every GPU, ZeRO-1 4 + 12/N, ZeRO-2 2 + 14/N,
      ZeRO-3/FSDP 16/N, Megatron over TP x PP, LoRA/QLoRA a frozen base plus adapters), activations
      not counted. A strategy that is not visible is sized fully sharded over every GPU of the job
      (``gpus_per_pod x pods``), the smallest figure, and the reason says so with what plain DDP
      would need: a "fits" is then only plausible, and the policy does not deny a "does not fit"
      that rests on the assumption (the script may train adapters only). No KV room, no decode
      estimate.
    * Precision (inference): a product whose compute capability runs the checkpoint's precision
      neither natively nor by a path the framework documents does not fit, whatever its memory; the
      reason says why (:func:`precision_support`). A documented fallback is named in the reason.

    Unknown model size: ``fits=True`` with ``need_gib=None`` (nothing to hold against the pod) unless
    the precision rules the product out. ``allreduce_us=None`` takes the latency from the bundled
    catalog (slowest product the option may land on), falling back to the link-class default for
    products it does not know.
    """
    spec = option.spec
    util = utilization
    if profile.gpu_memory_utilization is not None and 0 < profile.gpu_memory_utilization <= 1:
        util = profile.gpu_memory_utilization
    usable = spec.memory_gib * util
    training = profile.role == "training"
    support = Support(True) if training else precision_support(
        _precision_name(profile), spec.compute_capability, profile.framework)
    params = profile.params_b
    if params is None or not params > 0:
        if not support.offered:
            return Fit(value=option.value, fits=False, need_gib=None, usable_gib=usable, decode_ms=None,
                       reason=f"not offered: {support.how}", precision=support.how)
        return Fit(value=option.value, fits=True, need_gib=None, usable_gib=usable, decode_ms=None,
                   reason="model size unknown" + (f"; {support.how}" if support.how else ""), precision=support.how)

    bpp = profile.bytes_per_param
    if bpp is None:
        bpp = effective_precision(profile).bytes_per_param
    tp = max(1, profile.tensor_parallel or 1)
    pp = max(1, profile.pipeline_parallel or 1)
    split = None if training else weight_split(params, profile.active_params_b)
    layout = None
    memory = training_memory.per_gpu(profile) if training else None
    if memory is not None:
        weights = params * 1e9 * memory.bytes_per_param / GIB
    else:
        layout = weight_layout(profile)
        if split is not None and layout.expert_shards != layout.dense_shards:
            share_b = split.dense_b / layout.dense_shards + split.experts_b / layout.expert_shards
        else:
            layout = None
            share_b = params / (tp * pp)
        weights = share_b * 1e9 * bpp / GIB
    kv = 0.0 if training else max(kv_reserve_gib, kv_fraction * weights)
    need = weights + overhead_gib + kv
    fits = need <= usable and support.offered

    head = f"needs {_n(need)} GiB per GPU"
    capacity = f"of {_n(usable)} usable ({_n(spec.memory_gib)} x {util:g})"
    if memory is not None:
        reason = (f"{head} ({_n(weights)} weights+grads+optimizer + {_n(overhead_gib)} overhead) {capacity}; "
                  f"{_n(params)}B x {memory.layout}{_training_said(memory, params, overhead_gib)}, "
                  f"activations not counted")
    elif layout is not None and split is not None:
        reason = (f"{head} ({_n(weights)} weights + {_n(overhead_gib)} overhead + {_n(kv)} KV) {capacity}; "
                  f"{_n(params)}B x {bpp:g} B/param: {_n(split.experts_b)}B experts over {layout.experts_over}, "
                  f"{_n(split.dense_b)}B dense over {layout.dense_over} ({split.derived})")
    else:
        reason = (f"{head} ({_n(weights)} weights + {_n(overhead_gib)} overhead + {_n(kv)} KV) {capacity}; "
                  f"{_n(params)}B x {bpp:g} B/param over TP{tp} x PP{pp}")
    if not support.offered:
        reason = f"not offered: {support.how}; {reason}"
    elif support.how:
        reason = f"{reason}; {support.how}"

    decode = None
    if not training and profile.kind not in _NO_DECODE_KINDS:
        active = profile.active_params_b if profile.active_params_b else params
        layers = profile.layers or estimate_layers(active)
        latency = allreduce_us if allreduce_us is not None else _default_allreduce_us(option)
        decode = decode_time_ms(params_b=active, bytes_per_param=bpp, tensor_parallel=tp,
                                bandwidth_gbs=spec.bandwidth_gbs, layers=layers, allreduce_us=latency)
    return Fit(value=option.value, fits=fits, need_gib=need, usable_gib=usable, decode_ms=decode, reason=reason,
               precision=support.how)


def _training_said(memory: training_memory.TrainingMemory, params: float, overhead_gib: float) -> str:
    """`` (read from accelerate --use_fsdp)`` or ``; strategy unknown: assumed ...; under plain DDP it
    needs 121 GiB per GPU``: where the strategy came from, or what was assumed and what it would cost."""
    text = f" (read from {memory.source})" if memory.source and not memory.assumed else ""
    if memory.assumed:
        text += f"; {memory.assumed}"
        if memory.otherwise is not None:
            text += (f"; {memory.otherwise_label} it needs {_n(params * 1e9 * memory.otherwise / GIB + overhead_gib)}"
                     f" GiB per GPU")
    return text


def _precision_name(profile: WorkloadProfile) -> str:
    return _precision_by_rules(profile).name


SIZING_FIELDS: tuple[str, ...] = (
    "params_b", "active_params_b", "dtype", "quantization", "bytes_per_param", "tensor_parallel", "pipeline_parallel",
    "gpus_per_pod", "pods", "role", "kind", "layers", "gpu_memory_utilization", "framework", "data_parallel",
    "expert_parallel", "dp_attention", "training_strategy", "strategy_source", "training_offload",
    "distributed_optimizer", "peft")
"""Every profile field :func:`fit` reads but the model name, which enters only through its catalog
dtype (:func:`native_dtype`). ``tests/core/test_sizing.py`` records the fields ``fit`` reads and
fails when one is missing here (the memo would then answer for a profile it was not computed for)."""
_SIZING_VALUES = operator.attrgetter(*SIZING_FIELDS)


def _sizing_key(profile: WorkloadProfile) -> tuple[object, ...]:
    """Every input of :func:`fit` from the profile, and nothing else (not the container or notes)."""
    return (*_SIZING_VALUES(profile), native_dtype(profile))


FITS: Memo[tuple[Fit, ...]] = Memo(4096)
""":func:`fit_options`' results by every input :func:`fit` reads (:mod:`webhook.core.memo`)."""


def fit_options(profile: WorkloadProfile, options: Sequence[LabelOption], catalog: Catalog, *,
                overhead_gib: float, kv_reserve_gib: float, kv_fraction: float, utilization: float) -> tuple[Fit, ...]:
    """:func:`fit` on each option, the all-reduce latency taken from ``catalog``; memoized.

    Why: one review sizes its profile against the same tier's options several times (tier choice,
    escalation, parallelism checks), and sizing is pure arithmetic plus seven number formats per
    option, about two thirds of the policy's time before it was memoized. The key holds every input
    ``fit`` reads; catalogs are immutable and hash by identity. Bounded: the
    table is cleared when full, so hostile variety costs a recomputation, never memory.
    """
    opts = tuple(options)
    # an option by what fit reads of it (a spec carries an unhashable label map)
    key = (_sizing_key(profile), tuple((o.value, o.products, o.spec.memory_gib, o.spec.bandwidth_gbs,
                                        o.spec.interconnect, o.spec.compute_capability) for o in opts),
           catalog, overhead_gib, kv_reserve_gib, kv_fraction, utilization)
    try:
        cached = FITS.get(key)
    except TypeError:  # an unhashable value reached the profile: compute, do not cache
        cached, key = MISSING, None
    if cached is not MISSING:
        return cached  # type: ignore[return-value]
    result = tuple(fit(profile, option, overhead_gib=overhead_gib, kv_reserve_gib=kv_reserve_gib,
                       kv_fraction=kv_fraction, utilization=utilization,
                       allreduce_us=catalog.allreduce_latency_us(option)) for option in opts)
    if key is not None:
        FITS.put(key, result)
    return result


def _default_allreduce_us(option: LabelOption) -> float:
    catalog = default_catalog()
    try:
        return catalog.allreduce_latency_us(option)
    except (KeyError, ValueError):
        return DEFAULT_ALLREDUCE_US.get(option.spec.interconnect, max(DEFAULT_ALLREDUCE_US.values()))


def _n(x: float) -> str:
    """One decimal, without a trailing ``.0`` (``2`` overhead, ``32.9`` weights)."""
    return f"{x:.1f}".removesuffix(".0")
