"""Training memory per GPU, by strategy: how many bytes of weights, gradients and optimizer state
each GPU holds per model parameter.

Mixed-precision Adam (16-bit weights and gradients, fp32 master weights, momentum and variance) keeps
K = 16 bytes of model state per parameter: 2 + 2 + 12. How much of it one GPU holds depends on what
the job shards over its N data-parallel GPUs (ZeRO paper, Rajbhandari et al. 2019, arXiv:1910.02054,
figure 1: (2 + 2 + K) Psi, then 2 Psi + 2 Psi + K Psi / N_d, 2 Psi + (2 + K) Psi / N_d and
(2 + 2 + K) Psi / N_d; DeepSpeed's docs, "ZeRO", and ``DeepSpeedZeroConfig.stage``, default 0):

* ``ddp``: 16 on every GPU (nothing sharded; DeepSpeed stage 0, FSDP NO_SHARD);
* ``zero-1``: 4 + 12/N (optimizer state sharded, P_os);
* ``zero-2`` and ``fsdp-shard-grad-op``: 2 + 14/N (gradients too, P_os+g; SHARD_GRAD_OP keeps the
  gathered weights from forward to backward, so it holds what ZeRO-2 holds);
* ``zero-3`` and ``fsdp`` (FULL_SHARD): 16/N (weights too, P_os+g+p);
* ``fsdp-hybrid`` / ``fsdp-hybrid-shard-grad-op``: as ``fsdp`` / ``fsdp-shard-grad-op`` with N = the
  G GPUs of one node (one pod), replicated across nodes;
* ``megatron``: B/(TP x PP) with B = 16 (fp32), 18 (bf16: fp32 main gradients) or 20 (fp16); with the
  distributed optimizer (8 + 8/DP), (6 + 12/DP) or (4 + 16/DP), over TP x PP (Megatron-LM docs
  "Distributed Optimizer", its bytes-per-parameter table), DP = N / (TP x PP).

Megatron's own table is used for Megatron because it keeps fp32 main gradients (18 B/param in bf16,
not 16). CPU/NVMe offload (``training_offload``): ``optimizer`` leaves only the
16-bit weights' share on the GPU (ZeRO-Offload keeps fp16 parameters on the GPU and moves gradients
and optimizer state to the CPU, arXiv:2101.06840), ``all`` leaves no model state (ZeRO-Infinity
``offload_param``, FSDP ``offload_params``; working buffers are left to the overhead).

PEFT (``peft``): the frozen base is held at its own precision, ``lora`` 2 B/param (4 when the launch
says fp32), ``lora-8bit`` 1, ``qlora`` 0.53 (NF4 with its scales); it is sharded only where weights are
(``zero-3``/``fsdp``, or Megatron's TP x PP) and replicated otherwise. The adapters are trained by the
same strategy: :data:`LORA_TRAINABLE_SHARE` of the parameters at that strategy's bytes.

Activations are not counted (they depend on batch, sequence length and checkpointing). An unknown
strategy is sized fully sharded, the smallest figure of the table for what the launch shows (full
training, or the PEFT it names), so a "fits" is only plausible and a "does not fit" holds unless the
script itself trains adapters only or offloads to the CPU, which no command line shows: the policy
therefore warns on a does-not-fit that rests on an unknown strategy instead of denying it.
:attr:`TrainingMemory.assumed` says what was assumed and :attr:`TrainingMemory.otherwise` gives the
plain-DDP figure for the reason. Pure arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.core.domain import WorkloadProfile, counted

ADAM_BYTES = 16.0
"""Mixed-precision Adam: 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 weights, momentum, variance)."""
WEIGHT_BYTES = 2.0
GRAD_BYTES = 2.0
OPTIMIZER_BYTES = 12.0

DDP, FSDP, FSDP_GRAD_OP = "ddp", "fsdp", "fsdp-shard-grad-op"
FSDP_HYBRID, FSDP_HYBRID_GRAD_OP = "fsdp-hybrid", "fsdp-hybrid-shard-grad-op"
ZERO1, ZERO2, ZERO3, MEGATRON = "zero-1", "zero-2", "zero-3", "megatron"

STRATEGIES: Mapping[str, str] = {
    DDP: "DDP (weights, grads and Adam state on every GPU)",
    ZERO1: "ZeRO-1 (optimizer state sharded)",
    ZERO2: "ZeRO-2 (optimizer state and grads sharded)",
    ZERO3: "ZeRO-3 (weights, grads and optimizer state sharded)",
    FSDP: "FSDP FULL_SHARD (weights, grads and optimizer state sharded)",
    FSDP_GRAD_OP: "FSDP SHARD_GRAD_OP (optimizer state and grads sharded)",
    FSDP_HYBRID: "FSDP HYBRID_SHARD (fully sharded within each node)",
    FSDP_HYBRID_GRAD_OP: "FSDP HYBRID_SHARD_ZERO2 (grads and optimizer state sharded within each node)",
    MEGATRON: "Megatron (weights split over TP x PP, replicated over DP)",
}
"""Every strategy name a launch, config or annotation may give, with how people call it."""

_WEIGHTS_SHARDED = frozenset({ZERO3, FSDP, FSDP_HYBRID})
_HYBRID = frozenset({FSDP_HYBRID, FSDP_HYBRID_GRAD_OP})

PEFT_BASE_BYTES: Mapping[str, float] = {"lora": 2.0, "lora-8bit": 1.0, "qlora": 0.53}
"""Bytes per parameter of a frozen PEFT base: bf16/fp16; bitsandbytes int8; NF4 4-bit with its
block scales (the serving table's ``bnb-4bit``)."""
LORA_TRAINABLE_SHARE = 0.003
"""Trainable adapter parameters as a share of the model: LoRA r=16 on every linear layer is 0.29% of
Llama-3-70B and 0.53% of Llama-3-8B; attention-only or lower ranks train less, higher ranks more.
The low end of that range, so the adapters never make a "does not fit" that is not one."""

_MEGATRON_BYTES: Mapping[str, tuple[float, float, float]] = {
    # param dtype -> (non-distributed, distributed fixed part, distributed part sharded over DP);
    # Megatron-LM docs/source/api-guide/dist_optimizer.md ("theoretical number of bytes per parameter")
    "fp16": (20.0, 4.0, 16.0),
    "bf16": (18.0, 6.0, 12.0),
    "fp32": (16.0, 8.0, 8.0),
}


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU model-state bytes of one training profile, and how they were arrived at."""

    bytes_per_param: float
    """Bytes of weights, gradients and optimizer state per model parameter on each GPU."""
    layout: str
    """For the reason: ``4 + 12/32 = 4.38 B/param per GPU, ZeRO-1 over 32 GPUs`` (without the source)."""
    source: str = ""
    """Where the strategy was read (``accelerate --use_fsdp``), ``""`` when it was not."""
    assumed: str = ""
    """What was assumed because it was not visible (``strategy unknown: assumed fully sharded
    (FSDP/ZeRO-3)``); ``""`` when everything was read."""
    otherwise: float | None = None
    """Bytes per parameter per GPU if the assumption is wrong the costly way (plain DDP for an
    unknown strategy; no distributed optimizer for Megatron), to say what the pod would need then."""
    otherwise_label: str = ""
    """How to say that case: ``under plain DDP``, ``without it``."""


def shards(profile: WorkloadProfile) -> int:
    """GPUs of the job: what a data-parallel strategy shards over (``gpus_per_pod x pods``)."""
    return max(1, profile.gpus_per_pod) * max(1, profile.pods)


def per_gpu(profile: WorkloadProfile) -> TrainingMemory:
    """Model-state bytes per parameter on each GPU of a training ``profile`` (see the module table)."""
    strategy = profile.training_strategy if profile.training_strategy in STRATEGIES else None
    n = shards(profile)
    group = max(1, profile.gpus_per_pod) if strategy in _HYBRID else n
    source = profile.strategy_source or ""
    if strategy is None:
        full = _states(ZERO3, n, n, profile)
        ddp = _states(DDP, n, n, profile)
        why = f" ({source})" if source else ""
        if n == 1:
            return TrainingMemory(full, f"{_g(full)} B/param on 1 GPU (any strategy: one GPU holds every model "
                                        f"state){_extras(profile)}")
        shown = f"16/{n} = {_g(full)}" if profile.peft is None else _g(full)
        return TrainingMemory(full, f"{shown} B/param per GPU, fully sharded over {counted(n, 'GPU')}{_extras(profile)}",
                              assumed=f"strategy unknown{why}: assumed fully sharded (FSDP/ZeRO-3)",
                              otherwise=ddp, otherwise_label="under plain DDP")
    if strategy == MEGATRON:
        return _megatron(profile, n, source)
    value = _states(strategy, n, group, profile)
    over = (f"over {counted(group, 'GPU')} of a node" if strategy in _HYBRID
            else f"on each of {counted(n, 'GPU')}" if strategy == DDP else f"over {counted(n, 'GPU')}")
    label = STRATEGIES[strategy].split(" (")[0]
    formula = _formula(strategy, group if strategy in _HYBRID else n)
    shown = f"{formula} = {_g(value)}" if formula and profile.peft is None and profile.training_offload is None \
        and formula != _g(value) else _g(value)
    layout = f"{shown} B/param per GPU, {label} {over}{_extras(profile)}"
    return TrainingMemory(value, layout, source)


def _formula(strategy: str, k: int) -> str:
    """The table's expression for ``strategy`` over ``k`` shards: ``4 + 12/32``."""
    if strategy == ZERO1:
        return f"4 + 12/{k}"
    if strategy in (ZERO2, FSDP_GRAD_OP, FSDP_HYBRID_GRAD_OP):
        return f"2 + 14/{k}"
    if strategy in _WEIGHTS_SHARDED:
        return f"16/{k}"
    return "16"


def _states(strategy: str, n: int, group: int, profile: WorkloadProfile) -> float:
    """Bytes per parameter per GPU for a data-parallel strategy (not Megatron), PEFT and offload."""
    k = group if strategy in _HYBRID else n
    offload = profile.training_offload
    if strategy in (DDP,):
        full = ADAM_BYTES
    elif strategy == ZERO1:
        full = WEIGHT_BYTES + GRAD_BYTES + OPTIMIZER_BYTES / k
    elif strategy in (ZERO2, FSDP_GRAD_OP, FSDP_HYBRID_GRAD_OP):
        full = WEIGHT_BYTES + (GRAD_BYTES + OPTIMIZER_BYTES) / k
    else:  # zero-3, fsdp, fsdp-hybrid
        full = ADAM_BYTES / k
    if offload == "all":
        full = 0.0
    elif offload == "optimizer":
        full = WEIGHT_BYTES / (k if strategy in _WEIGHTS_SHARDED else 1)
    if profile.peft not in PEFT_BASE_BYTES:
        return full
    base = _peft_base(profile) / (k if strategy in _WEIGHTS_SHARDED else 1)
    return base + LORA_TRAINABLE_SHARE * full


def _peft_base(profile: WorkloadProfile) -> float:
    bpp = PEFT_BASE_BYTES[profile.peft or "lora"]
    return 4.0 if profile.peft == "lora" and profile.dtype == "fp32" else bpp


def _megatron(profile: WorkloadProfile, n: int, source: str) -> TrainingMemory:
    """Megatron: weights over TP x PP, the rest replicated over DP = N / (TP x PP) unless the
    distributed optimizer shards it (Megatron-LM's bytes-per-parameter table)."""
    tp = max(1, profile.tensor_parallel or 1)
    pp = max(1, profile.pipeline_parallel or 1)
    split = tp * pp
    dp = max(1, n // split)
    dtype = profile.dtype if profile.dtype in _MEGATRON_BYTES else "fp32"
    whole, fixed, sharded = _MEGATRON_BYTES[dtype]
    distributed = profile.distributed_optimizer
    assumed = ""
    if distributed is None:
        distributed = True
        assumed = "distributed optimizer not visible: assumed on"
    per_param = fixed + sharded / dp if distributed else whole
    if profile.peft in PEFT_BASE_BYTES:
        per_param = _peft_base(profile) + LORA_TRAINABLE_SHARE * per_param
    value = per_param / split
    formula = f"({_g(fixed)} + {_g(sharded)}/DP{dp})" if distributed and profile.peft is None else _g(per_param)
    optim = "distributed optimizer" if distributed else "no distributed optimizer"
    layout = (f"{_g(value)} B/param per GPU, Megatron {dtype}: {formula}/(TP{tp} x PP{pp}), {optim}"
              f"{_extras(profile)}")
    otherwise = None
    if assumed:
        otherwise = (_peft_base(profile) + LORA_TRAINABLE_SHARE * whole if profile.peft in PEFT_BASE_BYTES
                     else whole) / split
    return TrainingMemory(value, layout, source, assumed=assumed, otherwise=otherwise, otherwise_label="without it")


def _extras(profile: WorkloadProfile) -> str:
    """``; QLoRA: 4-bit frozen base + 0.3% trainable`` and the offload, for the layout text."""
    parts = []
    if profile.peft in PEFT_BASE_BYTES:
        name = {"lora": "LoRA", "lora-8bit": "LoRA on an 8-bit base", "qlora": "QLoRA"}[profile.peft or "lora"]
        parts.append(f"{name}: frozen base at {_g(_peft_base(profile))} B/param + "
                     f"{LORA_TRAINABLE_SHARE:.1%} trainable")
    if profile.training_offload == "optimizer":
        parts.append("optimizer state and grads offloaded to CPU")
    elif profile.training_offload == "all":
        parts.append("weights, grads and optimizer state offloaded to CPU")
    return "".join(f"; {p}" for p in parts)


def replica_bytes(profile: WorkloadProfile) -> float:
    """Bytes per parameter one unsharded replica holds (plain DDP): 16, or a PEFT job's frozen base
    plus its adapters; CPU offload as the profile says."""
    return _states(DDP, 1, 1, profile)


def assumption_note(profile: WorkloadProfile) -> str | None:
    """The profile note for a training job whose strategy is not visible and matters: more than one
    GPU (on one GPU every strategy holds the same) and a known model size. It says the per-GPU model
    state the sizing assumed and what plain DDP would hold, so a reader can hold either against the
    GPU. Inference does not know which GPU the policy will pick: each product's fit reason says the
    same against its memory. None when no note is due."""
    if profile.role != "training" or profile.training_strategy is not None or not profile.params_b \
            or profile.params_b <= 0 or shards(profile) <= 1:
        return None
    memory = per_gpu(profile)
    if memory.otherwise is None:
        return None
    gib = profile.params_b * 1e9 / 2 ** 30
    return (f"training strategy unknown: sized fully sharded over {counted(shards(profile), 'GPU')} "
            f"({gib * memory.bytes_per_param:.0f} GiB each); plain DDP holds {gib * memory.otherwise:.0f} GiB per GPU")


def _g(x: float) -> str:
    """Two significant decimals at most: ``0.5``, ``4.38``, ``16``."""
    return f"{x:.2f}".rstrip("0").rstrip(".")
