"""Sizing: bytes per parameter, memory fit per GPU, decode time (worked checks on well-known deployments)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.domain import GpuProduct, LabelOption, WorkloadProfile
from webhook.core.hardware import default_catalog
from webhook.core.sizing import bytes_per_param, decode_time_ms, estimate_layers, fit

CAT = default_catalog()


def opt(product_id: str, scheme: str = "gfd") -> LabelOption:
    """The canonical option of a product (first value) under a scheme."""
    return next(o for o in CAT.options([product_id], scheme) if product_id in o.products)


def llm(params_b: float, tp: int = 1, pp: int = 1, **kw: object) -> WorkloadProfile:
    return WorkloadProfile(params_b=params_b, tensor_parallel=tp, pipeline_parallel=pp, gpus_per_pod=tp,
                           role="inference", kind="llm", **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bytes per parameter


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, 2.0, id="nothing-said"),
        pytest.param({"dtype": "auto"}, 2.0, id="auto"),
        pytest.param({"dtype": "bfloat16"}, 2.0, id="bf16"),
        pytest.param({"dtype": "half"}, 2.0, id="half"),
        pytest.param({"dtype": "float32"}, 4.0, id="fp32"),
        pytest.param({"dtype": "FP32"}, 4.0, id="fp32-upper"),
        pytest.param({"dtype": "fp8"}, 1.0, id="dtype-fp8"),
        pytest.param({"quantization": "fp8"}, 1.0, id="q-fp8"),
        pytest.param({"quantization": "int8"}, 1.0, id="q-int8"),
        pytest.param({"quantization": "awq"}, 0.53, id="awq"),
        pytest.param({"quantization": "AWQ_Marlin"}, 0.53, id="awq-marlin"),
        pytest.param({"quantization": "gptq"}, 0.53, id="gptq"),
        pytest.param({"quantization": "int4"}, 0.53, id="int4"),
        pytest.param({"quantization": "bnb-4bit"}, 0.53, id="bnb-4bit"),
        pytest.param({"quantization": "bitsandbytes"}, 0.53, id="bitsandbytes"),
        pytest.param({"quantization": "nvfp4"}, 0.56, id="nvfp4"),
        pytest.param({"quantization": "mxfp4"}, 0.53, id="mxfp4"),
        # llama.cpp tools/quantize/README.md bits per weight / 8 (sizing.GGUF_BITS)
        pytest.param({"quantization": "gguf-q4_k_m"}, 0.6118, id="gguf-q4km"),
        pytest.param({"quantization": "gguf-q8_0"}, 1.0626, id="gguf-q8"),
        pytest.param({"quantization": "gguf"}, 0.6118, id="gguf"),
        pytest.param({"quantization": "gguf-q4_xs_new"}, 0.625, id="gguf-unknown-variant-as-widest-4-bit"),
        pytest.param({"quantization": "awq", "dtype": "float16"}, 0.53, id="quant-beats-dtype"),
        pytest.param({"quantization": "none", "dtype": "float32"}, 4.0, id="quant-none"),
        pytest.param({"quantization": "squeezellm"}, 2.0, id="unknown-quant-not-guessed-small"),
        pytest.param({"native_dtype": "fp8"}, 1.0, id="native-fp8"),
        pytest.param({"native_dtype": "mxfp4"}, 0.53, id="native-mxfp4"),
        pytest.param({"native_dtype": "fp8", "dtype": "bfloat16"}, 1.0, id="native-fp8-kept-under-dtype"),
        pytest.param({"native_dtype": "fp8", "quantization": "awq"}, 0.53, id="quant-beats-native"),
        pytest.param({"native_dtype": "bf16", "dtype": "float32"}, 4.0, id="native-bf16-defers-to-dtype"),
        pytest.param({"native_dtype": "fp32"}, 2.0, id="native-fp32-auto-loads-16bit"),
        pytest.param({"role": "training"}, 16.0, id="training"),
        pytest.param({"role": "training", "quantization": "awq", "dtype": "fp8"}, 16.0, id="training-regardless"),
    ],
)
def test_bytes_per_param(kwargs: dict[str, str], expected: float) -> None:
    args = {"dtype": None, "quantization": None, **kwargs}
    assert bytes_per_param(**args) == expected  # type: ignore[arg-type]


# --------------------------------------------------------------------------- worked checks

LLAMA_70B = 70.6
DSV3_BPP = bytes_per_param(dtype=None, quantization=None, native_dtype="fp8")


@pytest.mark.parametrize(
    ("profile", "product", "fits"),
    [
        pytest.param(llm(LLAMA_70B, tp=2), "A100-SXM4-80GB", False, id="70b-bf16-tp2-a100-80-no"),
        pytest.param(llm(LLAMA_70B, tp=2), "H100-SXM5-80GB", False, id="70b-bf16-tp2-h100-no"),
        pytest.param(llm(LLAMA_70B, tp=4), "L40S", True, id="70b-bf16-tp4-l40s-tight"),
        pytest.param(llm(LLAMA_70B, tp=4), "A100-SXM4-80GB", True, id="70b-bf16-tp4-a100-80"),
        pytest.param(llm(LLAMA_70B, tp=2), "H200", True, id="70b-bf16-tp2-h200"),
        pytest.param(llm(405, tp=8, pp=2), "A100-SXM4-80GB", True, id="405b-bf16-tp8-pp2-80gb"),
        pytest.param(llm(405, tp=8, pp=2), "H100-SXM5-80GB", True, id="405b-bf16-tp8-pp2-h100"),
        pytest.param(llm(405, tp=8), "H100-SXM5-80GB", False, id="405b-bf16-tp8-no-pp-no"),
        pytest.param(llm(8.0), "L4", True, id="8b-bf16-single-l4"),
        pytest.param(llm(LLAMA_70B, quantization="awq", bytes_per_param=0.53), "H100-SXM5-80GB", True,
                     id="70b-awq-single-h100"),
        pytest.param(llm(LLAMA_70B, quantization="awq"), "H100-SXM5-80GB", True, id="70b-awq-bpp-from-quant"),
        pytest.param(llm(671, tp=8, active_params_b=37, bytes_per_param=DSV3_BPP, layers=61), "H200", True,
                     id="deepseek-v3-fp8-tp8-h200"),
        pytest.param(llm(671, tp=8, active_params_b=37, bytes_per_param=DSV3_BPP, layers=61), "H100-SXM5-80GB",
                     False, id="deepseek-v3-fp8-tp8-h100-no"),
        pytest.param(llm(LLAMA_70B), "B200", True, id="70b-bf16-single-b200"),
        pytest.param(llm(8.0), "T4", False, id="8b-bf16-t4-no"),
    ],
)
def test_worked_fits(profile: WorkloadProfile, product: str, fits: bool) -> None:
    result = fit(profile, opt(product))
    assert result.fits is fits, result.reason
    assert result.value == opt(product).value
    assert result.need_gib is not None and result.need_gib > 0


def test_70b_tp4_on_l40s_fits_tightly() -> None:
    result = fit(llm(LLAMA_70B, tp=4), opt("L40S"))
    assert result.fits
    assert result.usable_gib - result.need_gib < 3.0  # "fits tightly": 70B bf16 on 4 x L40S


def test_reason_spells_out_the_numbers() -> None:
    result = fit(llm(LLAMA_70B, tp=4), opt("L40S"))
    assert result.reason == ("needs 38.2 GiB per GPU (32.9 weights + 2 overhead + 3.3 KV) of 40.5 usable "
                             "(45 x 0.9); 70.6B x 2 B/param over TP4 x PP1")
    assert result.need_gib == pytest.approx(38.16, abs=0.01)
    assert result.usable_gib == pytest.approx(46068 / 1024 * 0.9)


# --------------------------------------------------------------------------- decode time


@pytest.mark.parametrize(
    ("product", "low", "high"),
    [
        pytest.param("A100-SXM4-80GB", 20.0, 30.0, id="a100-observed-25ms"),
        pytest.param("L40S", 90.0, 130.0, id="l40s-observed-110ms"),
        pytest.param("H100-SXM5-80GB", 10.5, 20.0, id="h100-10.5ms-plus-allreduces"),
    ],
)
def test_decode_70b_tp4(product: str, low: float, high: float) -> None:
    result = fit(llm(LLAMA_70B, tp=4), opt(product))
    assert result.decode_ms is not None
    assert low <= result.decode_ms <= high


def test_decode_h100_bandwidth_term_is_10_5_ms() -> None:
    # 70B bf16 on 4 x H100 ~ 35 GB / 3.35 TB/s ~ 10.5 ms + all-reduces
    bare = fit(llm(LLAMA_70B, tp=4), opt("H100-SXM5-80GB"), allreduce_us=0).decode_ms
    assert bare == pytest.approx(10.5, abs=0.1)
    full = fit(llm(LLAMA_70B, tp=4, layers=80), opt("H100-SXM5-80GB"), allreduce_us=30).decode_ms
    assert full == pytest.approx(bare + 2 * 80 * 30 / 1000)


def test_decode_mixing_costs_the_slow_member_pace() -> None:
    a100 = fit(llm(LLAMA_70B, tp=4), opt("A100-SXM4-80GB")).decode_ms
    l40s = fit(llm(LLAMA_70B, tp=4), opt("L40S")).decode_ms
    assert a100 is not None and l40s is not None
    assert l40s / a100 > 4  # the observed 25 ms -> 110 ms


def test_decode_single_gpu_has_no_allreduce() -> None:
    result = fit(llm(8.0), opt("L4"), allreduce_us=10_000)
    assert result.decode_ms == pytest.approx(8.0 * 2 / 300 * 1000)


def test_decode_pipeline_parallel_does_not_divide_time() -> None:
    tp8 = fit(llm(405, tp=8), opt("H100-SXM5-80GB")).decode_ms
    tp8pp2 = fit(llm(405, tp=8, pp=2), opt("H100-SXM5-80GB")).decode_ms
    assert tp8 == tp8pp2


def test_decode_moe_uses_active_parameters() -> None:
    dense = fit(llm(671, tp=8, bytes_per_param=1.0, layers=61), opt("H200")).decode_ms
    moe = fit(llm(671, tp=8, active_params_b=37, bytes_per_param=1.0, layers=61), opt("H200")).decode_ms
    assert moe is not None and dense is not None
    assert moe == pytest.approx(37 / 8 / 4800 * 1000 + 2 * 61 * 30 / 1000)
    assert moe < dense


def test_decode_uses_profile_layers_over_estimate() -> None:
    estimated = fit(llm(LLAMA_70B, tp=4), opt("A100-SXM4-80GB"), allreduce_us=100).decode_ms
    given_layers = fit(llm(LLAMA_70B, tp=4, layers=40), opt("A100-SXM4-80GB"), allreduce_us=100).decode_ms
    assert estimated - given_layers == pytest.approx(2 * (80 - 40) * 0.1)


def test_decode_allreduce_defaults_to_the_catalog_slowest_member() -> None:
    (a100,) = CAT.options(["A100-SXM4-80GB"], "karpenter")
    default = fit(llm(LLAMA_70B, tp=4), a100).decode_ms
    explicit = fit(llm(LLAMA_70B, tp=4), a100, allreduce_us=CAT.allreduce_latency_us(a100)).decode_ms
    assert default == explicit


def test_decode_allreduce_falls_back_to_link_class_for_unknown_products() -> None:
    card = GpuProduct(id="MY-CARD", memory_gib=48, bandwidth_gbs=1000, interconnect="pcie", interconnect_gbs=64,
                      compute_capability="8.9", family="ada-lovelace", memory_type="GDDR6")
    option = LabelOption(value="MY-CARD", spec=card, products=("MY-CARD",))
    result = fit(llm(LLAMA_70B, tp=4, layers=80), option)
    assert result.decode_ms == pytest.approx(LLAMA_70B * 2 / 4 / 1000 * 1000 + 160 * 0.4)


@pytest.mark.parametrize("kind", ["embedding", "diffusion", "vision"])
def test_no_decode_estimate_for_non_generative_kinds(kind: str) -> None:
    profile = dataclasses.replace(llm(0.335), kind=kind)
    result = fit(profile, opt("L4"))
    assert result.fits and result.decode_ms is None


def test_decode_time_formula() -> None:
    assert decode_time_ms(params_b=70.6, bytes_per_param=2, tensor_parallel=4, bandwidth_gbs=2039, layers=80,
                          allreduce_us=45) == pytest.approx(35.3 / 2039 * 1000 + 7.2)
    assert decode_time_ms(params_b=8, bytes_per_param=2, tensor_parallel=0, bandwidth_gbs=1000, layers=32,
                          allreduce_us=45) == pytest.approx(16.0)


@pytest.mark.parametrize(
    ("params_b", "layers"),
    [
        pytest.param(0.5, 16, id="below-range-clamped"),
        pytest.param(1.23, 16, id="llama-1b"),
        pytest.param(3.21, 28, id="llama-3b"),
        pytest.param(8.0, 32, id="llama-8b"),
        pytest.param(70.6, 80, id="llama-70b"),
        pytest.param(405, 126, id="llama-405b"),
        pytest.param(37, 66, id="deepseek-v3-active"),
        pytest.param(1000, 126, id="above-range-clamped"),
    ],
)
def test_estimate_layers(params_b: float, layers: int) -> None:
    assert estimate_layers(params_b) == layers


@given(st.floats(0.01, 2000), st.floats(0.01, 2000))
def test_estimate_layers_is_monotone(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert estimate_layers(lo) <= estimate_layers(hi)


# --------------------------------------------------------------------------- the rest of fit()


def test_unknown_model_size_fits_with_no_numbers() -> None:
    result = fit(WorkloadProfile(tensor_parallel=4), opt("L40S"))
    assert (result.fits, result.need_gib, result.decode_ms, result.reason) == (True, None, None, "model size unknown")
    assert result.usable_gib == pytest.approx(46068 / 1024 * 0.9)
    assert fit(WorkloadProfile(params_b=0.0), opt("L4")).need_gib is None


def test_launcher_utilization_wins_and_bogus_values_are_ignored() -> None:
    base = llm(8.0)
    assert fit(dataclasses.replace(base, gpu_memory_utilization=0.5), opt("L4")).usable_gib == pytest.approx(
        23034 / 1024 * 0.5)
    assert fit(base, opt("L4"), utilization=0.8).usable_gib == pytest.approx(23034 / 1024 * 0.8)
    assert fit(dataclasses.replace(base, gpu_memory_utilization=1.7), opt("L4")).usable_gib == pytest.approx(
        23034 / 1024 * 0.9)
    assert not fit(dataclasses.replace(base, gpu_memory_utilization=0.5), opt("L4")).fits


def test_profile_bytes_per_param_wins_over_dtype() -> None:
    result = fit(llm(8.0, dtype="float32", bytes_per_param=1.0), opt("L4"))
    assert "8B x 1 B/param" in result.reason
    computed = fit(llm(8.0, dtype="float32"), opt("L4"))
    assert "8B x 4 B/param" in computed.reason and not computed.fits


def test_kv_room_has_a_floor_and_grows_with_the_weight_share() -> None:
    small = fit(llm(1.23), opt("L4"))
    assert small.need_gib == pytest.approx(1.23e9 * 2 / 2**30 + 2 + 2)
    big = fit(llm(LLAMA_70B, tp=2), opt("H200"))
    weights = LLAMA_70B * 1e9 * 2 / 2 / 2**30
    assert big.need_gib == pytest.approx(weights * 1.1 + 2)
    fixed = fit(llm(LLAMA_70B, tp=2), opt("A100-SXM4-80GB"), kv_fraction=0.0)
    assert fixed.fits  # with only a fixed 2 GiB of KV, 2 x 80 GB would be (wrongly) "enough"


def test_overhead_and_kv_reserve_are_configurable() -> None:
    a = fit(llm(8.0), opt("L4"), overhead_gib=1.0, kv_reserve_gib=0.5)
    assert a.need_gib == pytest.approx(8e9 * 2 / 2**30 + 1.0 + 0.1 * 8e9 * 2 / 2**30)


def test_coarse_option_sizes_against_the_weakest_product() -> None:
    # 30B bf16 on one GPU: fits an 80 GB A100, but Karpenter's "a100" may be the 40 GB one.
    profile = llm(30.0)
    assert fit(profile, opt("A100-SXM4-80GB")).fits
    (coarse,) = CAT.options(["A100-SXM4-80GB"], "karpenter")
    result = fit(profile, coarse)
    assert not result.fits
    assert result.value == "a100"
    assert result.usable_gib == pytest.approx(40 * 0.9)


@pytest.mark.parametrize(
    ("profile", "product", "fits"),
    [
        pytest.param(WorkloadProfile(params_b=8.0, role="training", gpus_per_pod=8, pods=1), "A100-SXM4-80GB", True,
                     id="8b-train-8-gpus"),
        pytest.param(WorkloadProfile(params_b=8.0, role="training", gpus_per_pod=1, pods=1), "A100-SXM4-80GB", False,
                     id="8b-train-1-gpu-no"),
        pytest.param(WorkloadProfile(params_b=70.6, role="training", gpus_per_pod=8, pods=1), "H100-SXM5-80GB", False,
                     id="70b-train-8-gpus-no"),
        pytest.param(WorkloadProfile(params_b=70.6, role="training", gpus_per_pod=8, pods=4), "H100-SXM5-80GB", True,
                     id="70b-train-32-gpus"),
    ],
)
def test_training_fit(profile: WorkloadProfile, product: str, fits: bool) -> None:
    result = fit(profile, opt(product))
    assert result.fits is fits, result.reason
    assert result.decode_ms is None
    assert "KV" not in result.reason and "activations not counted" in result.reason


def test_training_shards_over_every_gpu_and_ignores_tp() -> None:
    result = fit(WorkloadProfile(params_b=8.0, role="training", gpus_per_pod=4, pods=2, tensor_parallel=1,
                                 bytes_per_param=2.0), opt("H100-SXM5-80GB"))
    assert result.need_gib == pytest.approx(8e9 * 16 / 8 / 2**30 + 2)
    assert "over 8 GPUs" in result.reason


@given(st.floats(0.1, 1000), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]),
       st.sampled_from(list(CAT.products)))
def test_more_parallelism_never_needs_more_memory_per_gpu(params: float, tp: int, pp: int, product: str) -> None:
    option = CAT.options([product], next(s for s in CAT.schemes if CAT.product(product).labels.get(s)))[0]
    one = fit(llm(params, tp=tp, pp=pp), option)
    more = fit(llm(params, tp=tp * 2, pp=pp), option)
    assert more.need_gib is not None and one.need_gib is not None
    assert more.need_gib <= one.need_gib
    assert not (one.fits and not more.fits)


@given(st.floats(0.1, 1000), st.sampled_from([1, 2, 4, 8]), st.floats(8, 200), st.floats(8, 200))
def test_more_memory_never_breaks_a_fit(params: float, tp: int, mem_a: float, mem_b: float) -> None:
    lo, hi = sorted((mem_a, mem_b))
    base = CAT.product("L40S")
    small = LabelOption("x", dataclasses.replace(base, memory_gib=lo), ("L40S",))
    large = LabelOption("x", dataclasses.replace(base, memory_gib=hi), ("L40S",))
    profile = llm(params, tp=tp)
    assert not (fit(profile, small).fits and not fit(profile, large).fits)


def test_fit_is_deterministic() -> None:
    profile = llm(LLAMA_70B, tp=4)
    assert fit(profile, opt("L40S")) == fit(profile, opt("L40S"))


# --------------------------------------------------------------------------- fit_options (memoized)

from webhook.core import sizing  # noqa: E402

_OPTS = tuple(opt(p) for p in ("A100-SXM4-80GB", "L40S", "H100-SXM5-80GB"))
_PARAMS = {"overhead_gib": 2.0, "kv_reserve_gib": 2.0, "kv_fraction": 0.1, "utilization": 0.9}


def _fresh(profile: WorkloadProfile, **params: float) -> tuple[object, ...]:
    return tuple(fit(profile, o, allreduce_us=CAT.allreduce_latency_us(o), **params) for o in _OPTS)


@pytest.mark.parametrize("profile", [
    llm(70.6, tp=4), llm(70.6, tp=2), llm(8.0), llm(8.0, dtype="float32"), llm(46.7, tp=2, quantization="awq"),
    llm(70.6, tp=4, pp=2), dataclasses.replace(llm(8.0), role="training"), WorkloadProfile(gpus_per_pod=2),
    llm(8.0, gpu_memory_utilization=0.5), dataclasses.replace(llm(8.0), kind="embedding"),
], ids=["70b-tp4", "70b-tp2", "8b", "8b-fp32", "mixtral-awq", "70b-tp4-pp2", "8b-train", "unknown", "util-0.5", "embed"])
def test_fit_options_is_fit_on_each_option(profile: WorkloadProfile) -> None:
    sizing.FITS.clear()
    first = sizing.fit_options(profile, _OPTS, CAT, **_PARAMS)
    again = sizing.fit_options(profile, _OPTS, CAT, **_PARAMS)
    assert first == again == _fresh(profile, **_PARAMS)


def test_fit_options_keys_on_every_input() -> None:
    base = sizing.fit_options(llm(70.6, tp=2), _OPTS, CAT, **_PARAMS)
    for field, value in (("tensor_parallel", 4), ("dtype", "int8"), ("layers", 200), ("pods", 3), ("params_b", 8.0),
                         ("gpu_memory_utilization", 0.5), ("bytes_per_param", 1.0), ("active_params_b", 13.0)):
        other = dataclasses.replace(llm(70.6, tp=2), **{field: value})
        assert sizing.fit_options(other, _OPTS, CAT, **_PARAMS) == _fresh(other, **_PARAMS), field
    assert sizing.fit_options(llm(70.6, tp=2), _OPTS, CAT, **{**_PARAMS, "overhead_gib": 30.0}) != base
    weaker = tuple(dataclasses.replace(o, spec=dataclasses.replace(o.spec, memory_gib=24.0)) for o in _OPTS)
    assert [f.usable_gib for f in sizing.fit_options(llm(70.6, tp=2), weaker, CAT, **_PARAMS)] == [24.0 * 0.9] * 3


def test_fit_options_is_bounded() -> None:
    sizing.FITS.clear()
    for i in range(sizing.FITS.limit + 5):
        sizing.fit_options(llm(1.0 + i / 1000), _OPTS[:1], CAT, **_PARAMS)
    assert len(sizing.FITS) <= sizing.FITS.limit


# --------------------------------------------------------------------------- expert and data parallelism (issue 15)

from webhook.core.sizing import weight_layout, weight_split  # noqa: E402

R1 = {"model": "deepseek-ai/DeepSeek-R1", "params_b": 671.0, "active_params_b": 37.0, "layers": 61,
      "bytes_per_param": 1.0, "role": "inference", "kind": "llm"}


def moe(framework: str, *, tp: int, dp: int = 1, gpus: int = 8, pods: int = 1, ep: bool = False,
        dp_attention: bool = False, pp: int = 1, **kw: object) -> WorkloadProfile:
    fields = {**R1, **kw}
    return WorkloadProfile(framework=framework, tensor_parallel=tp, pipeline_parallel=pp, data_parallel=dp,
                           gpus_per_pod=gpus, pods=pods, expert_parallel=ep, dp_attention=dp_attention,
                           **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("profile", "product", "fits"),
    [
        # vLLM "Expert Parallel Deployment": DeepSeek-V3 at TP1 x DP8 with EP "will work on a H200 (or H20)
        # node with 8 GPUs. For H100 ... refer to the multi-node deployment section" (DP16 over 2 nodes).
        pytest.param(moe("vllm", tp=1, dp=16, pods=2, ep=True), "H100-SXM5-80GB", True, id="vllm-dp16-ep-2x8-h100"),
        pytest.param(moe("vllm", tp=1, dp=16, pods=2, ep=True), "H200", True, id="vllm-dp16-ep-2x8-h200"),
        pytest.param(moe("vllm", tp=1, dp=8, ep=True), "H200", True, id="vllm-dp8-ep-1x8-h200"),
        pytest.param(moe("vllm", tp=1, dp=8, ep=True), "H100-SXM5-80GB", False, id="vllm-dp8-ep-1x8-h100-no"),
        pytest.param(moe("vllm", tp=1, dp=4, ep=True, gpus=4), "H200", False, id="vllm-dp4-ep-oversubscribed-no"),
        pytest.param(moe("vllm", tp=1, dp=4, ep=True, gpus=4), "B200", False, id="vllm-dp4-ep-b200-no"),
        pytest.param(moe("vllm", tp=8, dp=2, pods=2, ep=True), "H100-SXM5-80GB", True, id="vllm-tp8-dp2-ep-2x8-h100"),
        # "By default, expert layers form a tensor parallel group of size DP x TP": DP splits them without EP too
        pytest.param(moe("vllm", tp=1, dp=16, pods=2), "H100-SXM5-80GB", True, id="vllm-dp16-no-ep-flag-h100"),
        # SGLang "Understanding TP, DP, and DP-Attention": one TP group of --tp GPUs, attention over TP/DP
        pytest.param(moe("sglang", tp=16, dp=16, pods=2, ep=True, dp_attention=True), "H100-SXM5-80GB", True,
                     id="sglang-tp16-dp16-dpa-ep-2x8-h100"),
        pytest.param(moe("sglang", tp=8, dp=8, ep=True, dp_attention=True), "H200", True,
                     id="sglang-tp8-dp8-dpa-ep-h200"),
        pytest.param(moe("sglang", tp=8, dp=8, ep=True, dp_attention=True), "H100-SXM5-80GB", False,
                     id="sglang-tp8-dp8-dpa-ep-h100-no"),
        pytest.param(moe("sglang", tp=16, pods=2), "H100-SXM5-80GB", True, id="sglang-tp16-2x8-h100"),
        pytest.param(moe("sglang", tp=8), "H100-SXM5-80GB", False, id="sglang-tp8-h100-no"),
        # data parallelism this module does not know how to split: the whole model per TP x PP group
        pytest.param(moe("tensorrt-llm", tp=1, dp=16, pods=2, ep=True), "B200", False, id="trtllm-dp-unknown-no"),
        pytest.param(moe("sglang", tp=1, dp=16, pods=2, ep=True), "B200", False, id="sglang-dp-without-dpa-replicas"),
    ],
)
def test_expert_and_data_parallel_fits(profile: WorkloadProfile, product: str, fits: bool) -> None:
    result = fit(profile, opt(product))
    assert result.fits is fits, result.reason


def test_wide_ep_reason_shows_the_split() -> None:
    result = fit(moe("vllm", tp=1, dp=16, pods=2, ep=True), opt("H100-SXM5-80GB"))
    assert result.reason == ("needs 62.4 GiB per GPU (55 weights + 2 overhead + 5.5 KV) of 71.7 usable (79.6 x 0.9); "
                             "671B x 1 B/param: 652.8B experts over DP16 x TP1 (EP), 18.2B dense over TP1 per DP "
                             "rank (8 of 256 experts active)")
    sglang = fit(moe("sglang", tp=16, dp=16, pods=2, ep=True, dp_attention=True), opt("H100-SXM5-80GB"))
    assert "652.8B experts over TP16, 18.2B dense over TP16/DP16 = 1 per DP group (DP attention)" in sglang.reason
    assert sglang.need_gib == pytest.approx(result.need_gib)


def test_sglang_ep_size_does_not_change_memory() -> None:
    """SGLang: "Total memory per GPU = total_expert_params / 8 - identical to pure TP8 or pure EP8"."""
    plain = fit(moe("sglang", tp=16, pods=2), opt("H200"))
    with_ep = fit(moe("sglang", tp=16, pods=2, ep=True, expert_parallel_size=16), opt("H200"))
    assert with_ep.need_gib == plain.need_gib
    assert with_ep.reason == plain.reason


def test_dense_model_with_data_parallel_is_a_replica_per_rank() -> None:
    dense = WorkloadProfile(framework="vllm", params_b=70.6, tensor_parallel=2, pipeline_parallel=1, data_parallel=4,
                            gpus_per_pod=8, role="inference", kind="llm")
    assert fit(dense, opt("H200")).need_gib == fit(dataclasses.replace(dense, data_parallel=None), opt("H200")).need_gib
    assert "over TP2 x PP1" in fit(dense, opt("H200")).reason


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16, 32]), st.booleans(),
       st.sampled_from(["vllm", "sglang"]))
def test_more_data_parallel_ranks_never_need_more_memory_per_gpu(tp: int, dp: int, ep: bool, framework: str) -> None:
    dpa = framework == "sglang"
    one = fit(moe(framework, tp=tp * (dp if dpa else 1), dp=dp, ep=ep, dp_attention=dpa), opt("H200"))
    more = fit(moe(framework, tp=tp * (dp * 2 if dpa else 1), dp=dp * 2, ep=ep, dp_attention=dpa), opt("H200"))
    assert one.need_gib is not None and more.need_gib is not None
    assert more.need_gib <= one.need_gib + 1e-9


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 4, 8, 16]))
def test_expert_split_never_needs_less_than_the_config_derived_split(tp: int, dp: int) -> None:
    """DeepSeek-V3's config gives 653.9B routed-expert parameters (58 MoE layers x 256 experts x 3 x 7168 x
    2048) and 17.1B dense: the estimate used here must not be below that per GPU."""
    result = fit(moe("vllm", tp=tp, dp=dp, ep=True), opt("B200"))
    exact = (17.1 / tp + 653.9 / (tp * dp)) * 1e9 / 2**30
    assert result.need_gib is not None
    assert result.need_gib - 2.0 - max(2.0, 0.1 * exact) >= exact * 0.999 - 0.1


@pytest.mark.parametrize(
    ("total", "active", "dense_low", "dense_high"),
    [
        pytest.param(671.0, 37.0, 17.1, 19.0, id="deepseek-v3"),
        pytest.param(1000.0, 32.0, 11.0, 13.0, id="kimi-k2"),
        pytest.param(235.0, 22.0, 7.5, 9.0, id="qwen3-235b"),
        pytest.param(30.5, 3.3, 1.4, 1.7, id="qwen3-30b-a3b"),
        pytest.param(46.7, 12.9, 1.6, 1.9, id="mixtral-8x7b"),
        pytest.param(141.0, 39.0, 5.0, 5.6, id="mixtral-8x22b"),
        pytest.param(400.0, 17.0, 14.0, 15.5, id="llama4-maverick"),
        pytest.param(117.0, 5.1, 1.5, 1.7, id="gpt-oss-120b"),
        pytest.param(300.0, 30.0, 30.0, 30.0, id="unknown-router-counts-active-as-dense"),
    ],
)
def test_weight_split(total: float, active: float, dense_low: float, dense_high: float) -> None:
    split = weight_split(total, active)
    assert split is not None
    assert dense_low <= split.dense_b <= dense_high
    assert split.dense_b <= active
    assert split.dense_b + split.experts_b == pytest.approx(total)


@pytest.mark.parametrize(("total", "active"), [(70.6, None), (70.6, 70.6), (8.0, 9.0), (8.0, 0.0)],
                         ids=["dense", "active-equals-total", "active-above-total", "zero-active"])
def test_weight_split_of_a_dense_model_is_none(total: float, active: float | None) -> None:
    assert weight_split(total, active) is None


@pytest.mark.parametrize(
    ("profile", "dense", "experts"),
    [
        pytest.param(moe("vllm", tp=2, dp=8, ep=True), 2, 16, id="vllm-tp2-dp8"),
        pytest.param(moe("vllm", tp=2, dp=8), 2, 16, id="vllm-tp2-dp8-no-ep"),
        pytest.param(moe("vllm", tp=2, dp=4, pp=2), 4, 16, id="vllm-pp-divides-both"),
        pytest.param(moe("vllm", tp=8), 8, 8, id="vllm-no-dp"),
        pytest.param(moe("sglang", tp=16, dp=4, dp_attention=True), 4, 16, id="sglang-dpa-attn-tp4"),
        pytest.param(moe("sglang", tp=8, dp=16, dp_attention=True), 1, 8, id="sglang-dpa-dp-above-tp"),
        pytest.param(moe("sglang", tp=16, dp=4), 16, 16, id="sglang-no-dpa"),
        pytest.param(moe("lmdeploy", tp=1, dp=8, ep=True), 1, 1, id="other-framework"),
        pytest.param(WorkloadProfile(framework="vllm", data_parallel=4), 1, 4, id="vllm-defaults"),
    ],
)
def test_weight_layout(profile: WorkloadProfile, dense: int, experts: int) -> None:
    layout = weight_layout(profile)
    assert (layout.dense_shards, layout.expert_shards) == (dense, experts)


def test_fit_options_keys_on_the_parallel_fields() -> None:
    base = moe("vllm", tp=1, dp=8, ep=True)
    for field, value in (("framework", "sglang"), ("data_parallel", 16), ("dp_attention", True),
                         ("expert_parallel", False), ("model", "openai/gpt-oss-120b")):
        other = dataclasses.replace(base, **{field: value})
        assert sizing.fit_options(other, _OPTS, CAT, **_PARAMS) == _fresh(other, **_PARAMS), field


def test_every_moe_model_of_the_catalog_has_its_router_shape() -> None:
    """A mixture-of-experts row added to data/models.yaml without a router shape here would be sized
    with every active parameter as dense (safe, but too big): keep the two tables in step."""
    from importlib import resources

    import yaml

    rows = yaml.safe_load(resources.files("webhook.core").joinpath("data/models.yaml").read_text(encoding="utf-8"))
    moe_rows = [r for r in rows["models"] if r.get("active_params_b")]
    assert moe_rows
    for row in moe_rows:
        split = weight_split(row["params_b"], row["active_params_b"])
        assert split is not None and "router unknown" not in split.derived, row["id"]


class _Recording(WorkloadProfile):
    """A profile that writes down every field read of it (into the class's ``read`` set)."""

    read: set[str] = set()

    def __getattribute__(self, name: str) -> object:
        if name in WorkloadProfile.__dataclass_fields__:
            _Recording.read.add(name)
        return super().__getattribute__(name)


@pytest.mark.parametrize("profile", [
    llm(70.6, tp=4), llm(8.0, dtype="float32"), llm(46.7, tp=2, quantization="awq"),
    dataclasses.replace(llm(8.0), role="training", training_strategy="zero-3", peft="lora"),
    dataclasses.replace(llm(671.0, tp=8), active_params_b=37.0, data_parallel=2, expert_parallel=True,
                        framework="vllm"),
    dataclasses.replace(llm(235.0, tp=8), active_params_b=22.0, data_parallel=4, dp_attention=True,
                        framework="sglang"),
    dataclasses.replace(llm(8.0), kind="embedding"), WorkloadProfile(gpus_per_pod=2),
], ids=["70b-tp4", "8b-fp32", "awq", "training", "vllm-dp-ep", "sglang-dp-attention", "embedding", "unknown"])
def test_the_sizing_key_holds_every_field_fit_reads(profile: WorkloadProfile) -> None:
    """The fit memo's key (``sizing.SIZING_FIELDS``) must hold every field ``fit`` reads, or the memo
    answers a profile with another's fits. The model name is read only for its catalog dtype, which
    the key holds as such."""
    _Recording.read = set()
    recorded = _Recording(**{f: getattr(profile, f) for f in WorkloadProfile.__dataclass_fields__})
    _Recording.read = set()
    for option in _OPTS:
        fit(recorded, option, allreduce_us=CAT.allreduce_latency_us(option), **_PARAMS)
    assert _Recording.read, "the recording saw nothing: the test would prove nothing"
    assert _Recording.read - {"model"} <= set(sizing.SIZING_FIELDS), _Recording.read - set(sizing.SIZING_FIELDS)
