"""Domain values shared by the pure core.

Every stage of the pipeline (workloads -> inference -> policy -> patches) hands the next one
frozen dataclasses from this module, so a stage can be tested with plain values and no stage can
mutate what another one saw. Nothing here does I/O or knows about Flask or the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from webhook.core.architecture import Architecture

JSON = Any
"""A JSON-compatible value as decoded by ``json``/``yaml`` (dict, list, str, int, float, bool, None)."""


# --------------------------------------------------------------------------- launchers / inference


@dataclass(frozen=True)
class LaunchSpec:
    """What one container's launcher says about the workload, before model sizes are looked up.

    Produced by ``launchers.parse_container``; every field is ``None`` when the launcher does not
    say it. ``hidden`` lists human descriptions of values that come from a ConfigMap or Secret
    (``valueFrom``/``envFrom``) and therefore cannot be known at admission time.
    """

    framework: str | None = None
    """``vllm``, ``tgi``, ``sglang``, ``tensorrt-llm``, ``triton-trtllm``, ``nim``, ``kserve-hf``,
    ``lmdeploy``, ``ollama``, ``torchrun``, ``accelerate``, ``deepspeed``, ``megatron``, ``nemo``."""
    role: str | None = None
    """``inference`` or ``training``."""
    model: str | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    data_parallel: int | None = None
    expert_parallel: int | None = None
    tp_is_total: bool = False
    """True when the launcher's TP counts GPUs across all nodes of a group (SGLang ``--tp``)."""
    uses_all_gpus: bool = False
    """True when the launcher shards over every visible GPU when TP is not given (TGI)."""
    nnodes: int | None = None
    procs_per_node: int | None = None
    """torchrun ``--nproc-per-node`` and friends, when an integer."""
    total_procs: int | None = None
    """accelerate ``--num_processes`` (total across machines)."""
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = None
    training_strategy: str | None = None
    """How a training launch lays weights, gradients and optimizer state over its GPUs, when the
    launcher, its flags or its config say so (``ddp``, ``fsdp``, ``zero-3``, ``megatron``, ...: the
    keys of ``training_memory.STRATEGIES``); ``None`` when nothing visible says."""
    strategy_source: str | None = None
    """Where ``training_strategy`` was read (``deepspeed config zero_optimization.stage=3``), or why
    it could not be (``--deepspeed /cfg/ds.json is not in the input``)."""
    training_offload: str | None = None
    """``optimizer`` (optimizer state and gradients on CPU/NVMe, ZeRO-Offload) or ``all`` (weights
    too: ZeRO-Infinity ``offload_param``, FSDP ``offload_params``); ``None``: on the GPU."""
    distributed_optimizer: bool | None = None
    """Megatron's distributed optimizer (``--use-distributed-optimizer``, NeMo
    ``distributed_fused_adam``); ``None`` when not visible."""
    peft: str | None = None
    """Adapters trained on a frozen base: ``lora`` (16-bit base), ``lora-8bit`` or ``qlora`` (4-bit
    base), from ``--use_peft``, ``--lora_r``, ``--load_in_4bit`` and friends."""
    hidden: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """Facts worth a warning that are not violations (e.g. ``args cut at 256 items``)."""
    kind: str | None = None
    """What the server runs when the launcher itself says so, whatever the model name: ``embedding``
    (TEI, Infinity, ``vllm --task embed``, ``llama-server --embeddings``) or ``diffusion`` (ComfyUI,
    Automatic1111). ``None`` leaves the kind to the model catalog."""
    data_parallel_local: int | None = None
    """Data-parallel ranks this pod runs (vLLM ``--data-parallel-size-local``; 1 for an external-LB
    ``--data-parallel-rank``); 0 for an API-server-only head."""
    dp_attention: bool = False
    """SGLang ``--enable-dp-attention``: the DP ranks live inside the TP group (no extra GPUs)."""
    expert_parallel_enabled: bool = False
    """The launcher splits MoE experts over ranks (``--enable-expert-parallel``, ``--ep-size`` > 1,
    an all-to-all MoE backend), even when the size itself is not visible."""
    unresolved: tuple[str, ...] = ()
    """Fields the launcher sets to something not visible at admission (``$(TP)`` from a ConfigMap,
    ``$((A * B))``): a default must not be taken for them when counting GPUs."""
    architecture: Architecture | None = None
    """The network's shape when the launch states it (Megatron ``--num-layers``/``--hidden-size``...,
    NeMo ``model.num_layers=``...): sizes a model that no id names (:mod:`webhook.core.architecture`)."""


@dataclass(frozen=True)
class ModelInfo:
    """Size facts about one model, from the bundled catalog or from name rules."""

    name: str
    params_b: float
    """Total parameters in billions."""
    active_params_b: float | None = None
    """Active parameters per token for mixture-of-experts models, else ``None``."""
    kind: str = "llm"
    """``llm``, ``embedding``, ``diffusion``, ``vision`` or ``other``."""
    layers: int | None = None
    native_dtype: str | None = None
    """Dtype the weights ship in when it is not bf16 (``fp8`` for DeepSeek-V3, ``mxfp4`` for gpt-oss)."""
    name_quantization: str | None = None
    """Quantization read off the name (``awq``, ``gptq``, ``fp8``, ``int4``, ``bnb-4bit``, ``gguf-q4_k_m``)."""
    source: str = "catalog"
    """``catalog``, ``name`` (parsed from the id or path), ``architecture`` (estimated from the
    launch's architecture flags) or ``annotation``."""


@dataclass(frozen=True)
class WorkloadProfile:
    """What the engine believes a pod runs. Serialised as the ``profile`` object of ``check``."""

    framework: str | None = None
    model: str | None = None
    params_b: float | None = None
    active_params_b: float | None = None
    dtype: str | None = None
    quantization: str | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    data_parallel: int | None = None
    gpus_per_pod: int = 0
    pods: int = 1
    # ---- not serialised in the public profile, used by policy and explain
    role: str | None = None
    kind: str | None = None
    bytes_per_param: float | None = None
    layers: int | None = None
    gpu_memory_utilization: float | None = None
    tp_declared: bool = False
    gpus_used: int | None = None
    """GPUs the declared parallelism uses across the whole group (TP x PP x in-launch DP, torchrun
    processes, ...), ``None`` when the launcher does not say."""
    hidden: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    tier_override: str | None = None
    container: str | None = None
    """Name of the container the profile was read from (the one running the launcher)."""
    expert_parallel: bool = False
    """The launcher splits the experts of a mixture-of-experts model over the data-parallel (or EP)
    ranks (vLLM ``--enable-expert-parallel``, SGLang ``--ep-size``): sized by :mod:`sizing` per rank."""
    expert_parallel_size: int | None = None
    """Ranks the experts are split over when the launcher states it (SGLang ``--ep-size``)."""
    data_parallel_local: int | None = None
    """Data-parallel ranks in this pod when the launcher states it (vLLM ``--data-parallel-size-local``)."""
    dp_attention: bool = False
    """SGLang ``--enable-dp-attention``: attention runs data-parallel over the TP ranks."""
    training_strategy: str | None = None
    """Training only: the memory layout :mod:`training_memory` sizes (``ddp``, ``fsdp``, ``zero-1``,
    ``zero-2``, ``zero-3``, ``megatron``, ...), from the launch or annotation
    ``gpu-admission.io/training-strategy``; ``None`` = unknown, sized fully sharded (the optimistic
    bound, so a "does not fit" stays certain) with the assumption said in the fit's reason."""
    strategy_source: str | None = None
    """Where ``training_strategy`` was read, or why it could not be (for reasons and notes)."""
    training_offload: str | None = None
    """``optimizer`` or ``all`` when the config moves model states to CPU/NVMe (see ``LaunchSpec``)."""
    distributed_optimizer: bool | None = None
    """Megatron's distributed optimizer; ``None`` = not visible (sized as on, the smaller figure)."""
    peft: str | None = None
    """``lora``, ``lora-8bit`` or ``qlora``: a frozen base at its own precision plus small adapters."""

    def public(self) -> dict[str, JSON]:
        """The stable JSON shape of ``profile`` in ``check --output json``."""
        return {
            "framework": self.framework,
            "model": self.model,
            "params_b": self.params_b,
            "active_params_b": self.active_params_b,
            "dtype": self.dtype,
            "quantization": self.quantization,
            "tensor_parallel": self.tensor_parallel,
            "pipeline_parallel": self.pipeline_parallel,
            "data_parallel": self.data_parallel,
            "gpus_per_pod": self.gpus_per_pod,
            "pods": self.pods,
        }


# --------------------------------------------------------------------------- hardware


@dataclass(frozen=True)
class GpuProduct:
    """One GPU product of the bundled catalog (``data/gpus.yaml``)."""

    id: str
    """Canonical id, e.g. ``A100-SXM4-80GB``."""
    memory_gib: float
    bandwidth_gbs: float
    interconnect: str
    """``nvlink``, ``nvlink-bridge``, ``pcie``, ``infinity-fabric``."""
    interconnect_gbs: float
    compute_capability: str
    family: str
    memory_type: str
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Label scheme (``gfd``, ``gke``, ``karpenter``, ``amd``) -> label values naming this product."""


@dataclass(frozen=True)
class LabelOption:
    """A node label value the engine can pin, with the conservative spec of what it selects.

    Under coarse schemes one value names several products (Karpenter ``a100`` = 40 GB and 80 GB);
    ``spec`` is then the weakest of them (least memory, least bandwidth), so a fit is never promised
    that a node with that label might not keep.
    """

    value: str
    spec: GpuProduct
    products: tuple[str, ...]


@dataclass(frozen=True)
class ParsedLabel:
    """A product label value read back into catalog terms (``-SHARED``, ``-MIG-*`` recognised)."""

    value: str
    product: str | None
    """Catalog id, or ``None`` when the value is unknown."""
    shared: bool = False
    mig_profile: str | None = None


@dataclass(frozen=True)
class Fit:
    """Memory fit and speed estimate of one profile on one label option (``sizing.fit``)."""

    value: str
    fits: bool
    need_gib: float | None
    """Per-GPU memory needed (weights share + overhead + KV room), ``None`` if the model is unknown."""
    usable_gib: float
    """GPU memory x utilization."""
    decode_ms: float | None
    """Estimated decode time per token at batch 1, ``None`` if unknown."""
    reason: str = ""
    precision: str = ""
    """How the checkpoint's precision runs on this product when not natively (a fallback the
    framework documents), or why it cannot run here; empty when it runs natively. The reason says it
    too; this field is what a reader tests for (``explain`` prints the reason then)."""


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Violation:
    """A rule the object breaks. ``path`` is a JSON pointer relative to the judged document."""

    code: str
    message: str
    """What is wrong, measured, and the fix, whole (denials, audit annotations, logs, ``check``)."""
    path: str
    fix: str = ""
    """The one change that fixes it, short enough for a kubectl warning line (``code: fix`` within
    120 characters): what audit users see first. Empty when the message leads with it already."""
    kind: str = "cannot-work"
    """:data:`CANNOT_WORK` (the object fails as written: the model does not fit, the parallelism
    needs GPUs it does not have, the products are mixed or unconstrained) or :data:`MISPLACED` (it
    runs, but not where the policy would put it). Enforce denies the first; the second warns unless
    the policy says ``misplaced: deny``. A misplacement that is the seed's trap (a model
    that needs NVLink pinned to PCIe cards while the cluster offers NVLink ones) has ``trap``."""
    trap: bool = False
    """The seed's trap with the way out in the cluster: denied in enforce even under ``misplaced: warn``."""

    def public(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"code": self.code, "kind": self.kind, "message": self.message,
                                      "path": self.path, "fix": self.fix}
        if self.trap:
            out["trap"] = True
        return out

    def whole(self) -> str:
        """The one whole rendering of this violation: denial messages, the audit annotation
        ``message``, ``check`` and ``explain`` lines, workflow annotations."""
        return f"{self.code}: {self.message} (at {self.path or '/'})"

    def echoed_by(self, warning: str) -> bool:
        """True when ``warning`` is this violation's own line (:meth:`short`, or audit's
        ``code: message``), not news of its own: a reader that lists both shows it once."""
        return warning == self.short() or warning == f"{self.code}: {self.message}"

    def short(self) -> str:
        """The kubectl warning line of this violation: the code and the fix (else the message); a
        misplacement says so, so a reader knows it was admitted as placed."""
        head = f"{self.code} ({MISPLACED})" if self.kind == MISPLACED and not self.trap else self.code
        return f"{head}: {self.fix or self.message}"


CANNOT_WORK = "cannot-work"
MISPLACED = "misplaced"
VIOLATION_KINDS = (CANNOT_WORK, MISPLACED)


@dataclass(frozen=True)
class Placement:
    """Where the pod may land: node label key and the label values of the chosen products."""

    label_key: str
    values: tuple[str, ...]
    exclude_nodes: tuple[str, ...] = ()
    """Nodes to keep the pod off (mixed or mislabeled GPU nodes carrying one of ``values``)."""
    reason: str = ""
    """Why the pod is pinned there (tier, model, size, parallelism): the mutating patch writes it as
    annotation ``gpu-admission.io/pinned`` so the pod itself says what pinned it."""
    products: tuple[str, ...] = ()
    """The catalog's short names of the products ``values`` name, once each (for people: a product
    has several label spellings)."""


@dataclass(frozen=True)
class GroupAffinity:
    """Members of one multi-pod model instance must share a GPU product: a required podAffinity on
    the group's label with ``topologyKey`` = the product label (the first member picks, the rest
    follow, because Kubernetes lets a pod that matches its own affinity start an empty group)."""

    label_key: str
    label_value: str
    topology_key: str
    size: int | None = None
    """Pods in the group when known and not declared on the pod: written as annotation
    ``gpu-admission.io/group-size`` so the scheduler extender can prefer a pool that holds them all."""


@dataclass(frozen=True)
class Decision:
    """The verdict on one pod template."""

    allowed: bool
    mode: str
    tier: str | None
    placement: Placement | None
    """Products the pod may land on after admission; ``None`` when it is not constrained."""
    violations: tuple[Violation, ...] = ()
    """In ``enforce`` mode these deny; in ``audit`` mode they are reported as warnings."""
    misplaced: tuple[Violation, ...] = ()
    """Misplacements admitted under the policy's ``misplaced: warn`` (kind :data:`MISPLACED`): they
    never deny, their :meth:`Violation.short` line is among ``warnings``, and they are listed here
    so the JSON output and the audit annotation can say which kind each finding is."""
    warnings: tuple[str, ...] = ()
    fits: tuple[Fit, ...] = ()
    patch_needed: bool = False
    """True when the pod's node selection must be narrowed to ``placement`` (mutation)."""
    group: GroupAffinity | None = None
    """Pod affinity that keeps the pod's group on one product, when the pod must get it."""


def counted(n: int, noun: str) -> str:
    """``1 GPU``, ``4 GPUs``, ``1 value``: a count and its noun, singular for one (a message that says
    "1 GPUs" reads as a bug, and the single-GPU and single-pod cases are common)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
