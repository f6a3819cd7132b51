"""Precision (issue 15, point 4): which precision the weights are in and where that was read, which
GPUs run it (natively or by a fallback the serving framework documents), and what a Fit says."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core import sizing
from webhook.core.domain import WorkloadProfile
from webhook.core.hardware import FP8, MXFP4, NVFP4, compute_capability, default_catalog, native_formats
from webhook.core.sizing import Precision, bytes_per_param, effective_precision, fit, precision_support

CAT = default_catalog()


def opt(product_id: str, scheme: str = "gfd"):  # noqa: ANN201 - a LabelOption
    return next(o for o in CAT.options([product_id], scheme) if product_id in o.products)


def serving(model: str | None = None, **kw: object) -> WorkloadProfile:
    base: dict[str, object] = {"model": model, "role": "inference", "kind": "llm", "tensor_parallel": 1,
                               "pipeline_parallel": 1, "gpus_per_pod": 1}
    base.update(kw)
    return WorkloadProfile(**base)  # type: ignore[arg-type]


DSV3 = "deepseek-ai/DeepSeek-V3"


# --------------------------------------------------------------------------- compute capability (hardware)


@pytest.mark.parametrize(
    ("cc", "parsed"),
    [
        pytest.param("8.0", (8, 0), id="ampere"),
        pytest.param("8.9", (8, 9), id="ada"),
        pytest.param("10.0", (10, 0), id="blackwell"),
        pytest.param("12.0", (12, 0), id="rtx-blackwell"),
        pytest.param(" 9.0 ", (9, 0), id="spaces"),
        pytest.param("9.0a", (9, 0), id="arch-suffix"),
        pytest.param("gfx942", None, id="amd"),
        pytest.param("", None, id="empty"),
        pytest.param("nine", None, id="garbage"),
    ],
)
def test_compute_capability(cc: str, parsed: tuple[int, int] | None) -> None:
    assert compute_capability(cc) == parsed


@pytest.mark.parametrize(
    ("product", "formats"),
    [
        pytest.param("A100-SXM4-80GB", set(), id="a100-none"),
        pytest.param("A10G", set(), id="a10g-none"),
        pytest.param("T4", set(), id="t4-none"),
        pytest.param("V100-SXM2-32GB", set(), id="v100-none"),
        pytest.param("L40S", {FP8}, id="l40s-fp8"),
        pytest.param("L4", {FP8}, id="l4-fp8"),
        pytest.param("RTX-4090", {FP8}, id="rtx4090-fp8"),
        pytest.param("H100-SXM5-80GB", {FP8}, id="h100-fp8"),
        pytest.param("H200", {FP8}, id="h200-fp8"),
        pytest.param("H20", {FP8}, id="h20-fp8"),
        pytest.param("B200", {FP8, MXFP4, NVFP4}, id="b200-all"),
        pytest.param("GB200", {FP8, MXFP4, NVFP4}, id="gb200-all"),
        pytest.param("MI300X", {FP8}, id="mi300x-fp8"),
    ],
)
def test_native_formats_of_catalog_products(product: str, formats: set[str]) -> None:
    assert native_formats(CAT.product(product).compute_capability) == formats


def test_every_catalog_product_has_a_readable_compute_capability() -> None:
    for pid, product in CAT.products.items():
        cc = product.compute_capability
        assert compute_capability(cc) is not None or cc == "gfx942", pid


def test_unknown_targets_run_no_low_precision_natively() -> None:
    assert native_formats("gfx1100") == frozenset()
    assert native_formats("sm_90") == frozenset()


# --------------------------------------------------------------------------- the precision and its source


@pytest.mark.parametrize(
    ("profile", "name", "bpp", "source", "note"),
    [
        pytest.param(serving(DSV3), "fp8", 1.0, "native dtype of the checkpoint", "", id="deepseek-v3-nothing-said"),
        pytest.param(serving("deepseek-ai/DeepSeek-R1-0528"), "fp8", 1.0, "native dtype of the checkpoint", "",
                     id="deepseek-r1-0528"),
        pytest.param(serving(DSV3, dtype="bfloat16"), "fp8", 1.0, "native dtype of the checkpoint",
                     "--dtype bfloat16 applies to activations", id="deepseek-v3-dtype-bf16-keeps-fp8"),
        pytest.param(serving("unsloth/DeepSeek-V3-bf16"), "bf16", 2.0, "default", "", id="deepseek-v3-bf16-upcast"),
        pytest.param(serving("openai/gpt-oss-120b"), "mxfp4", 0.53, "native dtype of the checkpoint", "",
                     id="gpt-oss-mxfp4"),
        pytest.param(serving("meta-llama/Llama-3.1-70B-Instruct"), "bf16", 2.0, "default", "", id="llama-default"),
        pytest.param(serving("meta-llama/Llama-3.1-70B-Instruct", dtype="float32"), "float32", 4.0, "--dtype", "",
                     id="llama-fp32"),
        pytest.param(serving("meta-llama/Llama-3.1-70B-Instruct", quantization="fp8"), "fp8", 1.0,
                     "set by the launcher", "", id="launcher-fp8"),
        pytest.param(serving("TheBloke/Llama-2-70B-AWQ", quantization="awq"), "awq", 0.53, "read off the model name",
                     "", id="awq-from-name"),
        pytest.param(serving("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", quantization="fp8"), "fp8", 1.0,
                     "read off the model name", "", id="fp8-from-name"),
        pytest.param(serving(DSV3, quantization="awq"), "awq", 0.53, "set by the launcher", "",
                     id="launcher-quant-beats-native"),
        pytest.param(serving("meta-llama/Llama-3.1-8B", quantization="squeezellm"), "bf16", 2.0, "default",
                     "quantization 'squeezellm' is unknown here and sized as unquantized", id="unknown-quant"),
        pytest.param(serving(None), "bf16", 2.0, "default", "", id="no-model"),
        pytest.param(serving(DSV3, role="training"), "bf16", 16.0, "training", "", id="training"),
    ],
)
def test_effective_precision(profile: WorkloadProfile, name: str, bpp: float, source: str, note: str) -> None:
    p = effective_precision(profile)
    assert (p.name, p.bytes_per_param, p.note) == (name, bpp, note)
    assert p.source.startswith(source)


def test_deepseek_v3_label_is_fp8_not_bf16_default() -> None:
    """The explain bug of issue 15: ``bf16 (default) (1 bytes/param)`` for an FP8 checkpoint."""
    label = effective_precision(serving(DSV3, bytes_per_param=1.0)).label()
    assert label == "fp8 (native dtype of the checkpoint, from the model catalog), 1 B/param"
    assert "default" not in label and "bf16" not in label


def test_label_reports_the_profile_bytes_sizing_uses() -> None:
    p = effective_precision(serving("meta-llama/Llama-3.1-8B", bytes_per_param=1.06))
    assert p.bytes_per_param == 1.06 and p.label().endswith("1.06 B/param")


def test_profile_native_dtype_field_wins_over_the_catalog() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithNative(WorkloadProfile):
        native_dtype: str | None = None

    profile = WithNative(model="my-org/private-model", native_dtype="nvfp4", role="inference")
    assert sizing.native_dtype(profile) == "nvfp4"
    assert effective_precision(profile).name == "nvfp4"


@given(st.sampled_from([None, "auto", "bfloat16", "float16", "float32", "fp8", "half"]),
       st.sampled_from([None, "none", "awq", "gptq", "fp8", "mxfp4", "nvfp4", "gguf-q4_k_m", "gguf-odd", "squeezellm"]),
       st.sampled_from([None, DSV3, "openai/gpt-oss-20b", "meta-llama/Llama-3.1-8B", "TheBloke/Llama-2-7B-AWQ"]),
       st.sampled_from([None, "inference", "training"]))
def test_effective_precision_sizes_as_bytes_per_param(dtype: str | None, quant: str | None, model: str | None,
                                                      role: str | None) -> None:
    """The label never disagrees with the bytes inference computes for the same profile."""
    profile = WorkloadProfile(model=model, dtype=dtype, quantization=quant, role=role)
    native = sizing.native_dtype(profile)
    expected = bytes_per_param(dtype=dtype, quantization=quant, native_dtype=native, role=role)
    assert effective_precision(profile).bytes_per_param == expected


# --------------------------------------------------------------------------- where a precision runs


@pytest.mark.parametrize(
    ("precision", "cc", "framework", "offered", "says"),
    [
        pytest.param("fp8", "9.0", "sglang", True, "", id="fp8-hopper-native"),
        pytest.param("fp8", "8.9", None, True, "", id="fp8-ada-native"),
        pytest.param("fp8", "10.0", None, True, "", id="fp8-blackwell-native"),
        pytest.param("fp8", "8.0", "vllm", True, "FP8 runs as weight-only W8A16 through vLLM's FP8 Marlin",
                     id="fp8-a100-vllm-w8a16"),
        pytest.param("fp8", "8.6", "vllm", True, "W8A16", id="fp8-a10g-vllm-w8a16"),
        pytest.param("fp8", "7.5", "vllm", False, "need compute capability 8.9+", id="fp8-t4-vllm-below-floor"),
        pytest.param("fp8", "8.0", "sglang", False, "sglang documents no fallback", id="fp8-a100-sglang-no"),
        pytest.param("fp8", "8.0", "tgi", False, "tgi documents no fallback", id="fp8-a100-tgi-no"),
        pytest.param("fp8", "8.0", None, False, "no serving framework was recognised", id="fp8-a100-unknown-no"),
        pytest.param("FP8_E4M3", "8.0", "sglang", False, "FP8 weights", id="fp8-spelling"),
        pytest.param("modelopt", "8.0", "sglang", False, "FP8 weights", id="modelopt-is-fp8"),
        pytest.param("mxfp4", "9.0", "vllm", True, "MXFP4 runs as weight-only MXFP4", id="mxfp4-hopper-vllm"),
        pytest.param("mxfp4", "8.0", "vllm", True, "Marlin", id="mxfp4-a100-vllm-recipe"),
        pytest.param("mxfp4", "9.0", "tensorrt-llm", True, "TensorRT-LLM", id="mxfp4-hopper-trtllm"),
        pytest.param("mxfp4", "8.0", "tensorrt-llm", False, "10.0+ (Blackwell)", id="mxfp4-a100-trtllm-no"),
        pytest.param("mxfp4", "9.0", "sglang", False, "sglang documents no fallback", id="mxfp4-hopper-sglang-no"),
        pytest.param("mxfp4", "10.0", None, True, "", id="mxfp4-blackwell-native"),
        pytest.param("mxfp4", "gfx942", "vllm", True, "MXFP4 runs", id="mxfp4-mi300x-vllm-recipe"),
        pytest.param("nvfp4", "9.0", "vllm", True, "W4A16 through vLLM's Marlin FP4", id="nvfp4-hopper-vllm"),
        pytest.param("nvfp4", "9.0", "sglang", False, "NVFP4 weights need compute capability 10.0+",
                     id="nvfp4-hopper-sglang-no"),
        pytest.param("modelopt_fp4", "10.0", "sglang", True, "", id="modelopt-fp4-blackwell"),
        pytest.param("nvfp4", "gfx942", "vllm", False, "this GPU is gfx942", id="nvfp4-mi300x-no"),
        pytest.param("fp8", "gfx942", None, True, "", id="fp8-mi300x-native"),
        pytest.param("fp8", "sm_90", "vllm", False, "this GPU is sm_90", id="fp8-unreadable-cc"),
        pytest.param("bitsandbytes-fp4", "7.0", None, True, "", id="bnb-fp4-software"),
        pytest.param("awq", "7.5", None, True, "", id="awq-unconstrained"),
        pytest.param("bf16", "7.0", None, True, "", id="bf16-unconstrained"),
        pytest.param(None, "7.0", None, True, "", id="nothing"),
    ],
)
def test_precision_support(precision: str | None, cc: str, framework: str | None, offered: bool, says: str) -> None:
    support = precision_support(precision, cc, framework)
    assert support.offered is offered
    assert says in support.how
    if not says:
        assert support.how == ""


def test_precision_support_takes_a_precision_object() -> None:
    assert not precision_support(Precision("fp8", 1.0, "x"), "8.0", "sglang").offered


# --------------------------------------------------------------------------- fits carry it


@pytest.mark.parametrize(
    ("framework", "product", "fits", "starts", "contains"),
    [
        pytest.param("sglang", "A100-SXM4-80GB", False, "not offered: FP8 weights need compute capability 8.9+",
                     "this GPU is 8.0", id="sglang-a100-not-offered"),
        pytest.param(None, "A100-SXM4-80GB", False, "not offered: FP8", "no serving framework", id="unknown-a100"),
        pytest.param("vllm", "A100-SXM4-80GB", False, "needs ", "W8A16", id="vllm-a100-offered-too-small"),
        pytest.param("sglang", "H200", True, "needs ", "", id="sglang-h200"),
        pytest.param("sglang", "B200", True, "needs ", "", id="sglang-b200"),
        pytest.param("sglang", "H100-SXM5-80GB", False, "needs ", "", id="sglang-h100-memory"),
    ],
)
def test_deepseek_v3_tp8_fits_by_precision_then_memory(framework: str | None, product: str, fits: bool,
                                                       starts: str, contains: str) -> None:
    profile = serving(DSV3, framework=framework, params_b=671.0, active_params_b=37.0, layers=61,
                      tensor_parallel=8, gpus_per_pod=8, bytes_per_param=1.0)
    result = fit(profile, opt(product))
    assert result.fits is fits, result.reason
    assert result.reason.startswith(starts) and contains in result.reason
    assert result.need_gib is not None
    if not contains:
        assert "not offered" not in result.reason and "W8A16" not in result.reason


def test_memory_fit_with_a_documented_fallback_names_it() -> None:
    # Llama-3.1-70B FP8 at TP2 on A100 80GB under vLLM: W8A16 Marlin, and it fits
    profile = serving("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", framework="vllm", params_b=70.6,
                      quantization="fp8", tensor_parallel=2, gpus_per_pod=2)
    result = fit(profile, opt("A100-SXM4-80GB"))
    assert result.fits, result.reason
    assert result.reason.endswith("FP8 runs as weight-only W8A16 through vLLM's FP8 Marlin kernels "
                                  "(compute capability 8.0 has no FP8 tensor cores)")


def test_gpt_oss_on_hopper_depends_on_the_framework() -> None:
    base = serving("openai/gpt-oss-120b", params_b=117.0, active_params_b=5.1, layers=36)
    assert fit(dataclasses.replace(base, framework="vllm"), opt("H100-SXM5-80GB")).fits
    assert fit(dataclasses.replace(base, framework="tensorrt-llm"), opt("H200")).fits
    refused = fit(dataclasses.replace(base, framework="sglang"), opt("H100-SXM5-80GB"))
    assert not refused.fits and refused.reason.startswith("not offered: MXFP4 weights need compute capability 10.0+")
    assert fit(dataclasses.replace(base, framework="sglang"), opt("B200")).fits


def test_coarse_option_is_judged_on_its_lowest_compute_capability() -> None:
    (a100,) = CAT.options(["A100-SXM4-80GB"], "karpenter")
    result = fit(serving(DSV3, framework="sglang", params_b=671.0, active_params_b=37.0, tensor_parallel=8),
                 a100)
    assert not result.fits and "this GPU is 8.0" in result.reason


def test_unknown_size_is_still_refused_a_precision_it_cannot_run() -> None:
    profile = serving("my-org/private-model", framework="sglang", quantization="fp8")
    refused = fit(profile, opt("A100-SXM4-80GB"))
    assert (refused.fits, refused.need_gib) == (False, None)
    assert refused.reason.startswith("not offered: FP8 weights")
    assert fit(profile, opt("H100-SXM5-80GB")).reason == "model size unknown"
    assert fit(dataclasses.replace(profile, framework="vllm"), opt("A100-SXM4-80GB")).reason.startswith(
        "model size unknown; FP8 runs as weight-only W8A16")


def test_training_is_not_judged_on_inference_kernels() -> None:
    profile = WorkloadProfile(model=DSV3, params_b=8.0, role="training", gpus_per_pod=8, quantization="fp8")
    assert "not offered" not in fit(profile, opt("A100-SXM4-80GB")).reason


def test_fit_options_keys_on_framework_and_compute_capability() -> None:
    opts = (opt("A100-SXM4-80GB"),)
    params = {"overhead_gib": 2.0, "kv_reserve_gib": 2.0, "kv_fraction": 0.1, "utilization": 0.9}
    profile = serving("meta-llama/Llama-3.1-8B", params_b=8.0, quantization="fp8")
    assert not sizing.fit_options(dataclasses.replace(profile, framework="sglang"), opts, CAT, **params)[0].fits
    assert sizing.fit_options(dataclasses.replace(profile, framework="vllm"), opts, CAT, **params)[0].fits
    ada = tuple(dataclasses.replace(o, spec=dataclasses.replace(o.spec, compute_capability="8.9")) for o in opts)
    assert sizing.fit_options(dataclasses.replace(profile, framework="sglang"), ada, CAT, **params)[0].fits


def test_policy_offers_deepseek_v3_under_sglang_only_fp8_capable_products() -> None:
    """Through the policy's tier evaluation (what explain shows): no A100 for an SGLang FP8 checkpoint."""
    from webhook.core.engine import tier_fits
    from webhook.core.settings import default as default_settings

    settings = default_settings()
    profile = serving(DSV3, framework="sglang", params_b=671.0, active_params_b=37.0, layers=61,
                      tensor_parallel=8, gpus_per_pod=8, bytes_per_param=1.0)
    tier = settings.tier(settings.large_model_tier)
    assert tier is not None
    fits = {CAT.parse_label(f.value, settings.label_scheme).product: f for f in tier_fits(profile, tier, settings)}
    for product, f in fits.items():
        if CAT.product(product).compute_capability == "8.0":
            assert not f.fits and f.reason.startswith("not offered"), product
    assert any(f.fits for f in fits.values())
