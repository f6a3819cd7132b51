"""Will the model fit, and how fast will it decode: per-GPU arithmetic for one label option.

Policy must not pin a workload to a product it cannot run on, and must be able to say why in
numbers. Everything here is arithmetic on a :class:`WorkloadProfile` and a :class:`LabelOption`
(whose spec is already the weakest product the label may select), so the same inputs always give
the same verdict and the same message. Units: memory in GiB (2**30 bytes, what the driver reports),
parameters in billions, bandwidth in GB/s (10**9 bytes/s, what datasheets quote).

The rules follow shared/reference/frameworks.md "Sizing rules":

* per GPU: weights / (TP x PP) + runtime overhead + KV room <= GPU memory x utilization;
* decode per token ~ (weight bytes / TP) / bandwidth + 2 x layers x all-reduce latency.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from webhook.core.domain import Fit, LabelOption, WorkloadProfile
from webhook.core.hardware import DEFAULT_ALLREDUCE_US, Catalog, default_catalog

GIB = 2 ** 30

TRAINING_BYTES_PER_PARAM = 16.0
"""Adam in mixed precision: bf16 weights and grads (4) + fp32 master weights, momentum, variance (12).
Activations come on top and are not counted."""


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


_DTYPE_BYTES: Mapping[str, float] = {_norm(k): v for k, v in {
    "fp32": 4.0, "float32": 4.0, "float": 4.0,
    "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "float16": 2.0, "half": 2.0,
    "fp8": 1.0, "float8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "int8": 1.0,
}.items()}
"""``--dtype`` spellings -> bytes per parameter (``auto`` is absent: it means "as the checkpoint")."""

_QUANT_BYTES: Mapping[str, float] = {_norm(k): v for k, v in {
    # 8-bit weights
    "fp8": 1.0, "int8": 1.0, "w8a8": 1.0, "w8a16": 1.0, "fbgemm_fp8": 1.0, "ptpc_fp8": 1.0,
    "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "modelopt": 1.0, "experts_int8": 1.0, "eetq": 1.0,
    "bnb-8bit": 1.0, "bitsandbytes-8bit": 1.0, "gptq-int8": 1.0, "int8_sq": 1.0, "int8_wo": 1.0,
    # 4-bit integer weights with group scales (~4.25 bits)
    "awq": 0.53, "awq_marlin": 0.53, "awq-int4": 0.53, "int4_awq": 0.53, "w4a8_awq": 0.53,
    "gptq": 0.53, "gptq_marlin": 0.53, "gptq-int4": 0.53, "marlin": 0.53, "int4": 0.53,
    "int4_wo": 0.53, "w4a16": 0.53, "bnb-4bit": 0.53, "bitsandbytes": 0.53, "bitsandbytes-nf4": 0.53,
    "bitsandbytes-fp4": 0.53, "nf4": 0.53,
    # 4-bit floating point with block scales
    "mxfp4": 0.53, "nvfp4": 0.56, "modelopt_fp4": 0.56, "fp4": 0.56,
    # GGUF (llama.cpp bits per weight / 8)
    "gguf": 0.6, "gguf-q4_k_m": 0.6, "gguf-q4_k_s": 0.57, "gguf-q4_0": 0.5625, "gguf-q5_k_m": 0.71,
    "gguf-q6_k": 0.82, "gguf-q8_0": 1.06, "gguf-q3_k_m": 0.49, "gguf-q2_k": 0.42, "gguf-f16": 2.0,
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
                    role: str | None = None) -> float:
    """Bytes one parameter occupies on the GPU, from what the launcher and the model say.

    Precedence, most specific first:

    1. ``role == "training"``: 16 (weights, grads and Adam state), whatever the dtype.
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
        return TRAINING_BYTES_PER_PARAM
    if quantization is not None and _norm(quantization) not in _NO_QUANT:
        q = _norm(quantization)
        if q in _QUANT_BYTES:
            return _QUANT_BYTES[q]
        if q.startswith("gguf"):
            return _QUANT_BYTES["gguf"]
    if native_dtype is not None:
        native = _norm(native_dtype)
        if native in _QUANT_BYTES:  # bf16/fp16/fp32 are not in it: those defer to --dtype
            return _QUANT_BYTES[native]
    if dtype is not None and _norm(dtype) in _DTYPE_BYTES:
        return _DTYPE_BYTES[_norm(dtype)]
    return 2.0


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

    * Inference: weights are split over TP x PP GPUs. KV room = max(``kv_reserve_gib``,
      ``kv_fraction`` x weight share). A fixed 2 GiB would let Llama-70B bf16 "fit" two 80 GB GPUs
      with almost no cache left (frameworks.md counts that as not fitting); a share proportional to
      the weights buys the same number of cached tokens whatever the TP size (both the weights and
      the KV cache are split by TP x PP), and the floor keeps small models honest.
    * Training (``role == "training"``): 16 bytes/param spread over every GPU of the job
      (``gpus_per_pod x pods``), i.e. it assumes ZeRO-3/FSDP-style sharding of weights, grads and
      optimizer state and ignores activations: an optimistic bound, so a "does not fit" is certain
      while a "fits" is only plausible. No KV room, no decode estimate.

    Unknown model size: ``fits=True`` with ``need_gib=None`` (nothing to hold against the pod).
    ``allreduce_us=None`` takes the latency from the bundled catalog (slowest product the option may
    land on), falling back to the link-class default for products it does not know.
    """
    spec = option.spec
    util = utilization
    if profile.gpu_memory_utilization is not None and 0 < profile.gpu_memory_utilization <= 1:
        util = profile.gpu_memory_utilization
    usable = spec.memory_gib * util
    params = profile.params_b
    if params is None or not params > 0:
        return Fit(value=option.value, fits=True, need_gib=None, usable_gib=usable, decode_ms=None,
                   reason="model size unknown")

    training = profile.role == "training"
    bpp = profile.bytes_per_param
    if bpp is None:
        bpp = bytes_per_param(dtype=profile.dtype, quantization=profile.quantization, role=profile.role)
    if training:
        bpp = max(bpp, TRAINING_BYTES_PER_PARAM)
    tp = max(1, profile.tensor_parallel or 1)
    pp = max(1, profile.pipeline_parallel or 1)
    if training:
        shards = max(1, profile.gpus_per_pod) * max(1, profile.pods)
    else:
        shards = tp * pp

    weights = params * 1e9 * bpp / shards / GIB
    kv = 0.0 if training else max(kv_reserve_gib, kv_fraction * weights)
    need = weights + overhead_gib + kv
    fits = need <= usable

    head = f"needs {_n(need)} GiB per GPU"
    capacity = f"of {_n(usable)} usable ({_n(spec.memory_gib)} x {util:g})"
    if training:
        reason = (f"{head} ({_n(weights)} weights+grads+optimizer + {_n(overhead_gib)} overhead) {capacity}; "
                  f"{_n(params)}B x {bpp:g} B/param over {shards} GPUs, activations not counted")
    else:
        reason = (f"{head} ({_n(weights)} weights + {_n(overhead_gib)} overhead + {_n(kv)} KV) {capacity}; "
                  f"{_n(params)}B x {bpp:g} B/param over TP{tp} x PP{pp}")

    decode = None
    if not training and profile.kind not in _NO_DECODE_KINDS:
        active = profile.active_params_b if profile.active_params_b else params
        layers = profile.layers or estimate_layers(active)
        latency = allreduce_us if allreduce_us is not None else _default_allreduce_us(option)
        decode = decode_time_ms(params_b=active, bytes_per_param=bpp, tensor_parallel=tp,
                                bandwidth_gbs=spec.bandwidth_gbs, layers=layers, allreduce_us=latency)
    return Fit(value=option.value, fits=fits, need_gib=need, usable_gib=usable, decode_ms=decode, reason=reason)


def _sizing_key(profile: WorkloadProfile) -> tuple[object, ...]:
    """Every profile field :func:`fit` reads, and nothing else (not the model name, container or notes)."""
    return (profile.params_b, profile.active_params_b, profile.dtype, profile.quantization, profile.bytes_per_param,
            profile.tensor_parallel, profile.pipeline_parallel, profile.gpus_per_pod, profile.pods, profile.role,
            profile.kind, profile.layers, profile.gpu_memory_utilization)


_FITS: dict[tuple[object, ...], tuple[Fit, ...]] = {}
_FITS_MAX = 4096


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
                                        o.spec.interconnect) for o in opts),
           catalog, overhead_gib, kv_reserve_gib, kv_fraction, utilization)
    try:
        cached = _FITS.get(key)
    except TypeError:  # an unhashable value reached the profile: compute, do not cache
        cached, key = None, None
    if cached is not None:
        return cached
    result = tuple(fit(profile, option, overhead_gib=overhead_gib, kv_reserve_gib=kv_reserve_gib,
                       kv_fraction=kv_fraction, utilization=utilization,
                       allreduce_us=catalog.allreduce_latency_us(option)) for option in opts)
    if key is not None:
        if len(_FITS) >= _FITS_MAX:
            _FITS.clear()
        _FITS[key] = result
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
