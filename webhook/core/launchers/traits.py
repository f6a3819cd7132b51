"""What a launcher does beyond what its flags say: the traits inference and sizing must know.

One table by framework name (``WorkloadProfile.framework``, the name every ``Launcher`` of
:mod:`.detection` and the NIM reader give), so a launcher's behaviour is written in one place and
inference (:mod:`webhook.core.inference`: which GPUs a launch uses) and sizing
(:mod:`webhook.core.sizing`: how the weights are split, which precisions run where) ask it rather
than matching framework names themselves. A framework not in the table has none of these traits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from webhook.core.hardware import FP8, MXFP4, NVFP4


@dataclass(frozen=True)
class Fallback:
    """A documented way to run a weight format on GPUs without native tensor cores for it."""

    low: tuple[int, int]
    """Lowest NVIDIA compute capability the documented path runs on."""
    amd: frozenset[str]
    """AMD gfx targets it is documented for."""
    how: str


@dataclass(frozen=True)
class Traits:
    shards_all_gpus: bool = False
    """With no TP given it shards over every visible GPU (TGI's ``--num-shard`` default, NIM)."""
    tp_assumed: bool = True
    """False for servers whose split is not a TP flag (layers spread by Ollama, engines built for a
    TP in a Triton repository, TorchServe workers): no TP is assumed when none is visible."""
    dp_takes_gpus: bool = False
    """Its data-parallel ranks each take TP x PP GPUs of the same launch (vLLM, LMDeploy, SGLang)."""
    dp_attention: bool = False
    """``--enable-dp-attention`` puts its DP ranks inside the TP group (SGLang docs "Understanding TP,
    DP, and DP-Attention"): then DP adds no GPUs, attention is sharded TP / DP ways and replicated
    per DP group, and the FFN/MoE weights stay sharded over all TP GPUs."""
    experts_over_dp: bool = False
    """Its expert layers form one group of DP x TP ranks (vLLM docs "Data Parallel Deployment",
    "Expert Parallel Deployment"): the experts are split DP x TP ways, the dense weights TP ways per
    DP rank, and an expert-parallel launch with no EP size has DP x TP."""
    layers_over_gpus: bool = False
    """With no split given, consecutive layers sit on the pod's GPUs and run one after another
    (Accelerate's ``device_map="auto"``): a pipeline over every GPU of the pod, no tensor parallelism."""
    fallbacks: Mapping[str, Fallback] = field(default_factory=lambda: MappingProxyType({}))
    """Weight format -> the documented path on GPUs without native tensor cores for it. A framework
    with none is offered native support only."""


NONE = Traits()

TRAITS: Mapping[str, Traits] = MappingProxyType({
    "vllm": Traits(dp_takes_gpus=True, experts_over_dp=True, fallbacks=MappingProxyType({
        # docs.vllm.ai features/quantization/fp8 (every version since v0.5.4): "FP8 models will run on
        # compute capability > 8.0 (Ampere) as weight-only W8A16, utilizing FP8 Marlin" (newer pages say
        # >= 7.5; 8.0 is the floor every version documents). MoE layers got FP8 Marlin in vLLM #16850.
        FP8: Fallback((8, 0), frozenset(), "weight-only W8A16 through vLLM's FP8 Marlin kernels"),
        # vLLM recipes OpenAI/GPT-OSS.md: "GPT-OSS works on Ampere devices by default, using the
        # TRITON_ATTN attention backend and Marlin MXFP4 MoE", H100/H200 in its Hopper section, MI300x in
        # its AMD section; vLLM's quantization hardware table lists "Marlin (GPTQ/AWQ/FP8/FP4)" for
        # Ampere, Ada and Hopper.
        MXFP4: Fallback((8, 0), frozenset({"gfx942"}), "weight-only MXFP4 through vLLM's Marlin/Triton kernels"),
        NVFP4: Fallback((8, 0), frozenset(), "weight-only W4A16 through vLLM's Marlin FP4 kernels"),
    })),
    "lmdeploy": Traits(dp_takes_gpus=True),
    # SGLang documents no fallback this table trusts: it lists ``modelopt_fp4`` as "Blackwell/SM100+",
    # and FP8 MoE on SM80-89 is an open pull request (sgl-project/sglang #30681), so an SGLang FP8
    # checkpoint is offered only 8.9+ GPUs.
    "sglang": Traits(dp_takes_gpus=True, dp_attention=True),
    "tgi": Traits(shards_all_gpus=True),
    "nim": Traits(shards_all_gpus=True),
    # TensorRT-LLM's gpt-oss deployment guide (tech blog 9) lists H200 among the GPUs it runs on.
    "tensorrt-llm": Traits(fallbacks=MappingProxyType({
        MXFP4: Fallback((9, 0), frozenset(), "TensorRT-LLM's Hopper MXFP4 MoE kernels")})),
    # .inference_scripts: every xDiT rank holds the model (its ranks are data-parallel here);
    # DeepSpeed-Inference splits it over every process, all visible GPUs when none are counted
    "xdit": Traits(dp_takes_gpus=True),
    # .fallback: an inline from_pretrained(..., device_map="auto")
    "transformers": Traits(layers_over_gpus=True),
    "deepspeed-inference": Traits(shards_all_gpus=True),
    "ollama": Traits(tp_assumed=False),
    "triton-trtllm": Traits(tp_assumed=False),
    "triton": Traits(tp_assumed=False),
    "torchserve": Traits(tp_assumed=False),
})


def of(framework: str | None) -> Traits:
    """The traits of ``framework`` (:data:`NONE` for one the table does not know, or ``None``)."""
    return TRAITS.get(framework or "", NONE)
