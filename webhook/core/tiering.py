"""Where multi-GPU work belongs, decided from the numbers.

The seed puts ">30B low-latency inference and distributed training" on A100/H100 SXM and
"embeddings, Stable Diffusion, single-card small models" on L40S/4090 class cards. It does not say
where a 7B model at TP2 or DDP of a 1.5B model belongs, and sending every multi-GPU pod to the
NVLink tier fills the scarce nodes with work that does not need them (and refuses deliberate,
working cost-tier pins: Google's own vLLM and TGI tutorials run 7-9B models at TP2 on 2x L4).

The line this module draws, from what ``explain`` prints:

* **Weights that need NVLink.** A workload needs NVLink-class hardware when its weights, at the
  precision they run in (training: the whole training state of one replica, 16 bytes/param under
  mixed-precision Adam), are larger than the biggest card of the small-model tier holds
  (memory x ``memoryUtilization`` - ``runtimeOverheadGiB``; 41 GiB for RTX-6000-Ada under the
  default policy: ~20B parameters in bf16, ~40B in FP8, ~75B in 4-bit). Below the line the work
  fits one cost card, so splitting it over GPUs buys throughput, not capacity, and its all-reduces
  are small next to the weight reads. A 7B bf16 model at TP2 moves 2 x 32 layers x 8 KiB per token
  (~1 ms at PCIe's ~15 us an all-reduce) while each GPU reads 7 GiB of weights (~23 ms on L4):
  PCIe costs a few per cent. Above it, every token's all-reduces go across the whole model spread
  over cards, and a 70B bf16 model at TP4 decodes ~110 ms/token on L40S against ~25 on A100 SXM
  (README, measured figures of the seed).
* **The trap.** Weights that need NVLink, spread by tensor parallelism over PCIe cards, is the
  seed's trap. It is denied when the cluster offers a fitting NVLink product instead (inventory
  or NodePools: the fix is real), and only warned when it does not, or when nothing is known (an
  offline ``check`` without ``--inventory``): then the pin is the only way it runs at all.
* **Misplaced.** Work that runs where it is pinned but not where the policy would put it: small
  work on scarce cards (HBM, compute capability 8.0 or later: a 7B model on one H100 fits one L4),
  or big work on cards slower than every card of its tier. Warned with the numbers by default
  (policy ``misplaced``).

Pure arithmetic on the profile, the catalog and the settings.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from webhook.core import sizing
from webhook.core.counts import parse_count
from webhook.core.domain import GpuProduct, WorkloadProfile
from webhook.core.hardware import Catalog
from webhook.core.settings import Settings, Tier

GIB = sizing.GIB

PCIE = "pcie"
NVLINK_BRIDGE = "nvlink-bridge"
BRIDGE_GPUS = 2
"""An NVLink bridge joins cards in pairs (H100 NVL, A100 PCIe): beyond two GPUs a pod's all-reduces
cross PCIe again."""


@dataclass(frozen=True)
class CostCard:
    """The biggest card of the small-model tier: what "fits one cost card" is measured against."""

    product: str
    weights_gib: float
    """Weights it holds: memory x ``memoryUtilization`` - ``runtimeOverheadGiB``."""


def cost_card(settings: Settings) -> CostCard | None:
    """The biggest card (by memory) of ``rules.smallModelTier``; ``None`` when the tier lists none
    the catalog knows."""
    tier = settings.tier(settings.small_model_tier)
    if tier is None:
        return None
    return _cost_card(tier.products, settings.catalog, settings.memory_utilization, settings.overhead_gib)


@functools.lru_cache(maxsize=64)
def _cost_card(products: tuple[str, ...], catalog: Catalog, utilization: float, overhead: float) -> CostCard | None:
    """Memoized by value (the tier's products, the catalog by identity, the two sizing figures):
    every multi-GPU review asks for it, and a policy reload makes a new key, never a stale answer."""
    known = [catalog.products[p] for p in products if p in catalog.products]
    if not known:
        return None
    biggest = max(known, key=lambda p: (p.memory_gib, p.id))
    return CostCard(biggest.id, biggest.memory_gib * utilization - overhead)


def weights_gib(profile: WorkloadProfile) -> float | None:
    """The whole model's weights at the precision they run in (training: one replica's training
    state), in GiB; ``None`` when the model size is unknown."""
    if profile.params_b is None or not profile.params_b > 0:
        return None
    if profile.role == "training":
        bpp = sizing.replica_bytes_per_param(profile)
    else:
        bpp = profile.bytes_per_param
        if bpp is None:
            bpp = sizing.effective_precision(profile).bytes_per_param
    return profile.params_b * 1e9 * bpp / GIB


def is_multi(profile: WorkloadProfile) -> bool:
    """More than one GPU in the pod, or a GPU pod of a multi-pod group."""
    return profile.gpus_per_pod > 1 or (profile.pods > 1 and profile.gpus_per_pod >= 1)


def needs_nvlink(profile: WorkloadProfile, settings: Settings) -> bool | None:
    """Does this multi-GPU work need NVLink-class hardware? ``None`` when the size is unknown (or the
    small-model tier names no card), ``False`` for single-GPU work (one GPU needs no link)."""
    if not is_multi(profile):
        return False
    weights = weights_gib(profile)
    card = cost_card(settings)
    if weights is None or card is None:
        return None
    return weights > card.weights_gib


def tp_spread(profile: WorkloadProfile) -> bool:
    """The weights are split over GPUs by tensor (or expert) parallelism, so every token or layer
    all-reduces across them: what crossing PCIe makes slow. Data parallelism of whole replicas is
    not (each GPU holds its model)."""
    return (profile.tensor_parallel or 1) > 1 or (profile.expert_parallel and profile.gpus_per_pod > 1)


def over_pcie(product: GpuProduct, gpus_per_pod: int) -> bool:
    """Would this pod's GPUs talk over PCIe on ``product``? (Infinity Fabric, MI300X's xGMI, counts
    as a GPU link like NVLink.)"""
    if product.interconnect == PCIE:
        return True
    return product.interconnect == NVLINK_BRIDGE and gpus_per_pod > BRIDGE_GPUS


@functools.lru_cache(maxsize=256)
def has_gpu_links(products: tuple[str, ...], catalog: Catalog, gpus_per_pod: int) -> bool:
    """Does some product of a tier join this many GPUs by NVLink (or Infinity Fabric)? Memoized by
    value: every multi-GPU review asks it of the same few tiers."""
    return any(p in catalog.products and not over_pcie(catalog.products[p], gpus_per_pod) for p in products)


def scarce(product: GpuProduct) -> bool:
    """A datacenter card a small model wastes: HBM memory and compute capability 8.0 or later (A100,
    H100, H200, B200, MI300X; not T4, V100 or the GDDR cards)."""
    if not product.memory_type.upper().startswith("HBM"):
        return False
    major = parse_count(product.compute_capability.split(".", 1)[0], cap=999)
    return major is None or major >= 8


def slowest_bandwidth(tier: Tier, settings: Settings) -> float | None:
    """The least memory bandwidth among the tier's products: a card slower than all of them decodes
    slower than anything the tier would have given."""
    speeds = [settings.catalog.products[p].bandwidth_gbs for p in tier.products if p in settings.catalog.products]
    return min(speeds) if speeds else None


def multi_gpu_tier(profile: WorkloadProfile, settings: Settings) -> tuple[str, str]:
    """The tier of multi-GPU work and why (for explain and the placement reason).

    ``rules.multiGpuTier`` set: that tier (the policy's override). Otherwise: a model above
    ``largeModelParamsB`` or whose weights need NVLink goes to ``largeModelTier``; one whose size is
    unknown too (the conservative side: the seed's rule); smaller work to ``smallModelTier`` when
    that tier takes multi-GPU pods."""
    if settings.multi_gpu_tier is not None:
        return settings.multi_gpu_tier, "rules.multiGpuTier"
    if profile.params_b is not None and profile.params_b > settings.large_model_params_b:
        return settings.large_model_tier, f"over largeModelParamsB {settings.large_model_params_b:g}B"
    nvlink = needs_nvlink(profile, settings)
    small = settings.tier(settings.small_model_tier)
    card = cost_card(settings)
    if nvlink is False and small is not None and small.multi_gpu and card is not None:
        return small.name, f"weights fit one {card.product}"
    if nvlink is None:
        return settings.large_model_tier, "model size unknown"
    return settings.large_model_tier, f"weights need NVLink (over one {card.product if card else 'cost card'})"


TIER_ANNOTATION = "gpu-admission.io/tier"
"""The pod's own tier (``webhook.core.inference.TIER``; named here so this module stays a leaf)."""


def single_gpu_tier(profile: WorkloadProfile, settings: Settings) -> tuple[str | None, str]:
    """The tier of single-GPU work and the rule that sends it there (``rules._policy_tier``'s order):
    the size against ``largeModelParamsB``, else the kind (embeddings and diffusion are small-model
    work), else none: a single-GPU pod of unknown size is not constrained."""
    if profile.params_b is not None:
        if profile.params_b > settings.large_model_params_b:
            return settings.large_model_tier, f"over largeModelParamsB {settings.large_model_params_b:g}B"
        return (settings.small_model_tier,
                f"{profile.params_b:g}B, at most largeModelParamsB {settings.large_model_params_b:g}B")
    if profile.kind in ("embedding", "diffusion"):
        return settings.small_model_tier, f"{profile.kind} model, size unknown: small-model work"
    return None, "a single-GPU pod of unknown size is not pinned"


def placement_rule(profile: WorkloadProfile, settings: Settings, chosen: str | None = None) -> str | None:
    """The line ``explain`` prints: where the rules send the work and which rule did, so the
    boundary is visible, not only applied. Multi-GPU work also shows its numbers (the weights against
    the biggest cost card). ``chosen``: the tier the decision took, when known: a different one is
    said (an escalation: the small-model tier had no product that fits). None without GPUs."""
    if profile.gpus_per_pod <= 0:
        return None
    if profile.tier_override is not None:
        return f"tier {profile.tier_override} (rule: the pod's annotation {TIER_ANNOTATION})"
    if not is_multi(profile):
        tier, why = single_gpu_tier(profile, settings)
        if tier is None:
            return f"single-GPU work -> not constrained (rule: {why})"
        moved = f"; moved up to tier {chosen}: no product of {tier} fits" if chosen and chosen != tier else ""
        return f"single-GPU work -> tier {tier} (rule: {why}){moved}"
    tier, why = multi_gpu_tier(profile, settings)
    weights = weights_gib(profile)
    card = cost_card(settings)
    figures = (f"{weights:.0f} GiB of weights, one {card.product} holds {card.weights_gib:.0f}; "
               if weights is not None and card is not None else "")
    nvlink = needs_nvlink(profile, settings)
    link = "size unknown" if nvlink is None else "needs NVLink" if nvlink else "PCIe is enough"
    return f"multi-GPU work -> tier {tier} ({figures}{link}; rule: {why})"
