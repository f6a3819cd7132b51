"""The pieces every placement rule shares: the tier a workload was given, a finding, and the
messages for a placement that cannot be (the model does not fit, the cluster has no such node).

Split from :mod:`webhook.core.policy` when judging a user's own product pin grew into a job of its
own (:mod:`webhook.core.pinned`): both build their verdicts from these, so a message reads the same
whichever rule wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from webhook.core import sizing
from webhook.core.domain import Fit, LabelOption, Violation, WorkloadProfile, counted
from webhook.core.fixes import FIX_BUDGET, fix_line
from webhook.core.inference import TIER
from webhook.core.inventory import Inventory
from webhook.core.nodepools import scalable_values
from webhook.core.settings import Settings, Tier

MISSING_SELECTOR = "missing-homogeneous-selector"
TIER_MISMATCH = "tier-mismatch"
TP_EXCEEDS = "tp-exceeds-gpus"
DOES_NOT_FIT = "model-does-not-fit"
INVALID_ANNOTATION = "invalid-annotation"
NOT_IN_CLUSTER = "tier-not-in-cluster"
GROUP_DOES_NOT_FIT = "group-does-not-fit"
NUMA_UNALIGNED = "numa-unaligned"


@dataclass(frozen=True)
class Finding:
    violation: Violation
    fixable: bool = False
    """True when the mutating patch resolves it (so it only counts when mutation is off)."""


@dataclass(frozen=True)
class TierChoice:
    tier: Tier | None
    options: tuple[LabelOption, ...] = ()
    fits: tuple[Fit, ...] = ()
    escalated_from: str | None = None
    present: frozenset[str] | None = None
    """Label values the cluster has room on (from the inventory); ``None`` when no inventory is known."""

    def usable(self) -> list[str]:
        """Values that fit the model and, when the inventory is known, exist in the cluster."""
        return [f.value for f in self.fits if f.fits and (self.present is None or f.value in self.present)]


def describe(profile: WorkloadProfile) -> str:
    """A short human name of the workload for messages, e.g. 'Llama-3.1-70B (70.6B, bf16) at TP4'."""
    name = profile.model.rsplit("/", 1)[-1] if profile.model else "this workload"
    facts = []
    if profile.params_b is not None:
        facts.append(f"{profile.params_b:g}B")
    precision = profile.quantization or profile.dtype
    if precision:
        facts.append(precision)
    text = f"{name} ({', '.join(facts)})" if facts else name
    if profile.tensor_parallel:
        text += f" at TP{profile.tensor_parallel}"
        if profile.pipeline_parallel and profile.pipeline_parallel > 1:
            text += f" x PP{profile.pipeline_parallel}"
    return text


def fits_on(profile: WorkloadProfile, options: Sequence[LabelOption], settings: Settings) -> tuple[Fit, ...]:
    """The policy's sizing: weights + overhead + KV room within memory x ``memoryUtilization``. What
    placement prefers; short of it is "tight", not "cannot work" (:func:`holds_on`)."""
    return sizing.fit_options(profile, options, settings.catalog, overhead_gib=settings.overhead_gib,
                              kv_reserve_gib=settings.kv_reserve_gib, kv_fraction=settings.kv_fraction,
                              utilization=settings.memory_utilization)


HARD_OVERHEAD_GIB = 1.0
"""What a GPU process holds before any weight (CUDA context and NCCL buffers: ~0.5-1 GiB)."""


def holds_on(profile: WorkloadProfile, options: Sequence[LabelOption], settings: Settings) -> tuple[Fit, ...]:
    """Can the pinned GPUs hold the weights at all? Weights + :data:`HARD_OVERHEAD_GIB` within the
    whole memory (or the fraction the launcher itself is told to use), no KV room. Only a product
    this rules out "cannot work": the policy's own margins (2 GiB overhead, KV room, 0.9 of memory)
    are estimates, and public tutorials run a 70B 4-bit model at TP2 on 2x L4 inside them (TGI
    takes the whole card by default, ``--cuda-memory-fraction 1.0``)."""
    return sizing.fit_options(profile, options, settings.catalog, overhead_gib=HARD_OVERHEAD_GIB,
                              kv_reserve_gib=0.0, kv_fraction=0.0, utilization=1.0)


def tight_warning(profile: WorkloadProfile, fit: Fit) -> str:
    """A pin that holds the weights but not the policy's margins: admitted, with the numbers."""
    need = f"needs {fit.need_gib:.1f} GiB per GPU" if fit.need_gib is not None else "is tight"
    return (f"tight fit on {fit.value}: {describe(profile)} {need} with the policy's margins, "
            f"{fit.usable_gib:.1f} usable: little room for the KV cache (raise TP or use a bigger GPU)")


def evaluate(tier: Tier, profile: WorkloadProfile, settings: Settings,
              inventory: Inventory | None = None) -> TierChoice:
    options = settings.catalog.options(tier.products, settings.label_scheme)
    present = None
    if inventory is not None:
        present = inventory.values_with_room(profile.gpus_per_pod) | policy_scalable(settings)
    return TierChoice(tier, options, fits_on(profile, options, settings), present=present)


def policy_scalable(settings: Settings) -> frozenset[str]:
    """Label values of ``inventory.scalableProducts``: present for an autoscaler the API does not show."""
    if not settings.scalable_products:
        return frozenset()
    return frozenset(scalable_values(nodepools=(), products=settings.scalable_products, catalog=settings.catalog,
                                     scheme=settings.label_scheme))


def min_tp_hint(profile: WorkloadProfile, options: Sequence[LabelOption], settings: Settings) -> str:
    """Suggest the smallest TP (power of two up to 16) at which some product of the tier fits."""
    if profile.params_b is None or profile.role == "training":
        return ""
    if profile.data_parallel and profile.data_parallel > 1:
        return ""  # more TP per DP rank multiplies the GPUs: the fit numbers say enough
    # a checkpoint that is already 8-bit or smaller gains nothing from "use a quantized checkpoint"
    already = sizing.effective_precision(profile).bytes_per_param <= 1.0
    quantize = "" if already else ", or use a quantized checkpoint (FP8/AWQ)"
    start = profile.tensor_parallel or 1
    tp = start * 2
    while tp <= 16:
        trial = replace(profile, tensor_parallel=tp)
        fitting = [f.value for f in fits_on(trial, options, settings) if f.fits]
        if fitting:
            return f"; at TP{tp} it fits {fitting[0]}{quantize}"
        tp *= 2
    return "; use pipeline parallelism across more pods" + (quantize.replace(", or", " or") if quantize else "")


def does_not_fit(profile: WorkloadProfile, choice: TierChoice, settings: Settings, path: str,
                  only: Sequence[Fit] | None = None) -> Violation:
    fits = list(only if only is not None else choice.fits)
    assert choice.tier is not None
    best = max(fits, key=lambda f: f.usable_gib) if fits else None
    detail = f"; largest is {best.value}: {best.reason}" if best else ""
    hint = min_tp_hint(profile, choice.options, settings)
    tp = re.search(r"at TP([0-9]+) it fits (\S+)", hint)
    if tp:
        fix = f"raise TP to {tp.group(1)} (with {tp.group(1)} GPUs per pod): it fits {tp.group(2)}"
    elif best is not None and best.need_gib is not None:
        fix = f"needs {best.need_gib:.0f} GiB per GPU, {best.value} has {best.usable_gib:.0f}: spread it over more GPUs"
    else:
        fix = f"no GPU of tier {choice.tier.name} holds it: spread it over more GPUs or pods"
    return Violation(
        DOES_NOT_FIT,
        f"{describe(profile)} does not fit any GPU of tier {choice.tier.name}{detail}{hint}",
        path,
        fix=fix[:FIX_BUDGET - len(DOES_NOT_FIT) - 2],
    )


def unavailable(profile: WorkloadProfile, choice: TierChoice, path: str, inventory: Inventory | None,
                 pinned: Sequence[str] = ()) -> Violation | None:
    """The tier (or the pinned products) would hold the model, but no node of the cluster offers
    it: say what exists instead of admitting a pod that stays Pending forever."""
    if inventory is None or choice.tier is None or not any(f.fits for f in choice.fits):
        return None
    wanted = list(pinned) or [f.value for f in choice.fits if f.fits]
    return Violation(
        NOT_IN_CLUSTER,
        f"{describe(profile)} needs {counted(profile.gpus_per_pod, 'GPU')} per pod on [{shown(choice, wanted)}] "
        f"(tier {choice.tier.name}), but no node of the cluster offers that; the cluster has: "
        f"{inventory.describe()}. Request fewer GPUs per pod, add such nodes, or choose another tier with "
        f"annotation {TIER}",
        path, fix=fix_line(NOT_IN_CLUSTER, "add nodes of ", shown_list(choice, wanted), " or request fewer GPUs per pod"))


def shown_list(choice: TierChoice, values: Sequence[str]) -> list[str]:
    """:func:`shown` as a list."""
    text = shown(choice, values)
    return text.split(", ") if text else []


def shown(choice: TierChoice, values: Sequence[str]) -> str:
    """Values for a message: one spelling per product (legacy label spellings are still pinned by
    the patch, but listing them in a message only hides the point)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    wanted = set(values)
    for option in choice.options:
        if option.value in wanted and option.products not in seen:
            seen.add(option.products)
            out.append(option.value)
    return ", ".join(out)


def product_of(settings: Settings, value: str) -> str | None:
    return settings.catalog.parse_label(value, settings.label_scheme).product
