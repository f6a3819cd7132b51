"""A product pin the user wrote, judged.

A pin is a decision someone made about hardware, often deliberately (Google's tutorials put a 7B
model at TP2 on 2x L4; Kaito's presets choose an A100 PCIe instance). It is respected unless it
cannot work:

* **cannot work** (denies in enforce): no pinned product holds the model at its parallelism, or runs
  its precision; a multi-GPU pod pinned to MIG or time-sliced replicas; every pinned product absent
  from the cluster under ``inventory.absentTier: deny``. Where some pinned values can work and others
  cannot, the mutating patch narrows the pin to the ones that can (a fixable finding).
* **the seed's trap**: weights that need NVLink (:func:`webhook.core.tiering.needs_nvlink`) spread by
  tensor parallelism over PCIe cards. Denied when the cluster offers a fitting NVLink product (the
  inventory's nodes, NodePools or ``scalableProducts``: the way out is real), warned as a
  misplacement when it does not or when no inventory is known.
* **misplaced** (warns unless ``misplaced: deny``): it runs, but not where the policy would put it:
  small work on scarce cards, big work on cards slower than all of its tier's
  (:mod:`webhook.core.tiering`). A pin that is only outside the tier lists (a T4 for an embedding
  model, an H100 NVL for a 120B model on one GPU) is neither: admitted without a word.
* **unreadable**: values the catalog does not know (an instance type of another cloud, a custom
  node-group label): a warning, and nothing is added beside the pin. The pod chose its nodes.

Pure: the pin, the profile and the settings in; findings, warnings and the values kept out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from webhook.core.evolve import evolve
from webhook.core import schemes, tiering
from webhook.core.domain import MISPLACED, Fit, GpuProduct, LabelOption, Violation, WorkloadProfile, counted
from webhook.core.fixes import FIX_BUDGET, fix_line
from webhook.core.inventory import Inventory
from webhook.core.placing import (
    DOES_NOT_FIT,
    MISSING_SELECTOR,
    NOT_IN_CLUSTER,
    TIER_MISMATCH,
    Finding,
    TierChoice,
    describe,
    evaluate,
    fits_on,
    holds_on,
    tight_warning,
    unavailable,
)
from webhook.core.settings import Settings
from webhook.core.workloads import PodTemplate, join


@dataclass(frozen=True)
class Pin:
    """The values a pod spec pins for one product label, each read as the catalog products it names
    (``()``: a value the catalog does not know)."""

    key: str
    scheme: str
    values: Mapping[str, tuple[str, ...]]
    via_node_selector: bool
    policy_scheme: bool
    """Values of the policy's own ``productLabel``: the inventory is indexed by it, so presence is known."""


@dataclass(frozen=True)
class Judged:
    """What the pin leaves: the values the pod may land on (``None``: not placed) and whether the
    patch must narrow the pin to them."""

    values: tuple[str, ...] | None
    narrow: bool = False
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()


def _fit_of(profile: WorkloadProfile, products: Sequence[str], settings: Settings) -> tuple[Fit, ...]:
    options = [LabelOption(pid, settings.catalog.products[pid], (pid,)) for pid in products]
    return fits_on(profile, options, settings)


def _hold_of(profile: WorkloadProfile, products: Sequence[str], settings: Settings) -> tuple[Fit, ...]:
    options = [LabelOption(pid, settings.catalog.products[pid], (pid,)) for pid in products]
    return holds_on(profile, options, settings)


def assumed_training(profile: WorkloadProfile) -> bool:
    """Training whose strategy the launcher does not say: sized on an assumption, so never denied
    for memory."""
    return profile.role == "training" and profile.training_strategy is None


def _speed_fix(why: str, pinned: tuple[str, Fit] | None, best: Fit | None, offer: Sequence[str], key: str) -> str:
    """``needs NVLink (123 vs 19 ms/token): pin KEY In [...]``: the decode estimates here and on the
    tier's slowest fitting GPU, then the values to pin (the message names both GPUs in full)."""
    code = TIER_MISMATCH + " (misplaced)"
    speed = ""
    if pinned is not None and best is not None and pinned[1].decode_ms is not None and best.decode_ms is not None:
        speed = f" ({pinned[1].decode_ms:.0f} vs {best.decode_ms:.0f} ms/token)"
    line = fix_line(code, f"{why}{speed}: pin {key} In ", offer)
    return line if "in the message" not in line else fix_line(code, f"{why}{speed}: pin one of ", offer)


def assumed_warning(profile: WorkloadProfile, violation: Violation) -> str:
    """A training does-not-fit that rests on an assumed strategy: admitted, with the figure it rests on."""
    return (f"{violation.code} if it trains every weight (strategy unknown, sized as fully sharded: set "
            f"FSDP/ZeRO or LoRA flags to judge it): {violation.fix}")


def _ms(fit: Fit | None) -> str:
    return f"{fit.decode_ms:.0f} ms/token" if fit is not None and fit.decode_ms is not None else ""


def _offer(pin: Pin, settings: Settings, values: Sequence[str], choice: TierChoice) -> list[str]:
    """Values of the tier to offer in the pin's own scheme (one spelling per product)."""
    if pin.policy_scheme:
        seen: set[tuple[str, ...]] = set()
        out = []
        for option in choice.options:
            if option.value in values and option.products not in seen:
                seen.add(option.products)
                out.append(option.value)
        return out
    products = [p for o in choice.options if o.value in values for p in o.products]
    return list(schemes.values_for(settings.catalog, pin.scheme, products))


def judge(profile: WorkloadProfile, template: PodTemplate, settings: Settings, choice: TierChoice, pin: Pin, *,
          inventory: Inventory | None) -> Judged:
    """Judge ``pin`` for a workload whose policy tier is ``choice``: the values it leaves, with what
    it breaks (findings) and what it only risks (warnings)."""
    findings: list[Finding] = []
    warnings: list[str] = []
    judged = _judge(profile, template, settings, choice, pin, findings, warnings, inventory)
    return evolve(judged, findings=tuple(findings), warnings=tuple(warnings))


def _judge(profile: WorkloadProfile, template: PodTemplate, settings: Settings, choice: TierChoice, pin: Pin,
           findings: list[Finding], warnings: list[str], inventory: Inventory | None) -> Judged:
    assert choice.tier is not None
    catalog = settings.catalog
    multi = tiering.is_multi(profile)
    path = join(template.spec_pointer, "nodeSelector" if pin.via_node_selector else "affinity")
    known: dict[str, tuple[str, ...]] = {}
    slices: list[str] = []
    unknown: list[str] = []
    rank = {f.value: i for i, f in enumerate(choice.fits)}  # catalog order, so re-judging the patch is stable
    for value, products in sorted(pin.values.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])):
        parsed = catalog.parse_label(value, pin.scheme) if pin.policy_scheme and products else None
        if not products or (parsed is not None and parsed.mig_profile is not None and not multi):
            unknown.append(value)  # the catalog does not know it (nor a MIG slice's memory): kept, warned
        elif parsed is not None and (parsed.mig_profile is not None or (parsed.shared and multi)):
            slices.append(value)  # slices and time-shared replicas cannot be one tensor-parallel pod
        else:
            known[value] = products
    if unknown:
        warnings.append(unreadable_warning(pin.key, unknown))
    if not known and not slices:
        return Judged(None)

    of_tier = {f.value: f for f in choice.fits}  # a value of the tier was sized already (same option)
    fits = {v: (of_tier[v],) if v in of_tier else _fit_of(profile, ps, settings) for v, ps in known.items()}
    comfortable = {v for v in known if all(f.fits for f in fits[v])}
    holds = {v: _hold_of(profile, known[v], settings) for v in known if v not in comfortable}
    tight = {v for v, hs in holds.items() if all(h.fits for h in hs)}
    fitting = [v for v in known if v in comfortable or v in tight]
    nvlink = tiering.needs_nvlink(profile, settings)
    trap_possible = multi and nvlink is True and tiering.tp_spread(profile)

    def pcie(value: str) -> bool:
        return any(tiering.over_pcie(catalog.products[p], profile.gpus_per_pod) for p in known[value])

    traps = [v for v in fitting if trap_possible and pcie(v)]
    ok = [v for v in fitting if v not in traps]
    present = choice.present if pin.policy_scheme else None
    absent = [v for v in ok if present is not None and v not in present]
    usable = [v for v in ok if v not in absent] if settings.absent_tier == "deny" else ok
    cannot = [v for v in known if v not in fitting] + slices

    if usable and (cannot or traps or len(usable) < len(ok)):
        keep = usable + unknown
        dropped = [v for v in [*known, *slices] if v not in usable]
        code = MISSING_SELECTOR if multi else TIER_MISMATCH
        why = _why_dropped(profile, dropped, cannot, traps, absent)
        findings.append(Finding(Violation(
            code, f"{describe(profile)} pins {pin.key} to [{', '.join(dropped)}], {why}: keep only "
                  f"[{', '.join(usable)}]", path,
            fix=fix_line(code, f"keep only {pin.key} In ", usable)), fixable=True))
        _absent_warning(profile, usable, absent, inventory, warnings)
        return Judged(tuple(keep), narrow=True)
    if not usable:
        if traps:
            findings.append(Finding(_trap(profile, settings, choice, pin, traps, fits, path, inventory)))
            return Judged(tuple(traps + unknown))
        if ok:  # they would hold it, but no node has room for the pod (absentTier: deny)
            findings.append(Finding(unavailable(profile, choice, path, inventory, pinned=ok)
                                    or _pinned_does_not_fit(profile, settings, choice, pin, known, fits, path)))
            return Judged(None)
        if slices and not known:
            findings.append(Finding(Violation(
                TIER_MISMATCH, f"{describe(profile)} uses {counted(profile.gpus_per_pod, 'GPU')} x {counted(profile.pods, 'pod')} but pins "
                f"{pin.key} to MIG or time-sliced replicas [{', '.join(slices)}], which tensor parallelism cannot "
                f"span: pin whole GPUs", path, fix=f"pin whole GPUs, not MIG or shared replicas, for {pin.key}")))
            return Judged(None)
        violation = _pinned_does_not_fit(profile, settings, choice, pin, known, fits, path)
        if assumed_training(profile):
            warnings.append(assumed_warning(profile, violation))
            return Judged(tuple(known) + tuple(unknown))
        findings.append(Finding(violation))
        return Judged(None)
    _absent_warning(profile, usable, absent, inventory, warnings)
    if not any(v in comfortable for v in usable):
        warnings.append(tight_warning(profile, max((f for v in usable for f in fits[v]), key=lambda f: f.usable_gib)))
    misplaced = _misplacement(profile, settings, choice, pin, {v: known[v] for v in usable},
                              {v: fits[v] for v in usable}, path)
    if misplaced is not None:
        findings.append(Finding(misplaced))
    return Judged(tuple(usable + unknown))


def unreadable_warning(key: str, values: Sequence[str]) -> str:
    """The warning for a pin the catalog cannot read: what is unknown and how to make it known."""
    shown = ", ".join(values[:3]) + (f", +{len(values) - 3} more" if len(values) > 3 else "")
    return (f"cannot tell which GPU {key}={shown} is: its fit is unchecked and nothing is added beside the "
            f"pin; give an inventory of the nodes (the server's node watch, check --inventory)")


def _why_dropped(profile: WorkloadProfile, dropped: Sequence[str], cannot: Sequence[str], traps: Sequence[str],
                 absent: Sequence[str]) -> str:
    reasons = []
    if any(v in cannot for v in dropped):
        reasons.append("which cannot hold it")
    if any(v in traps for v in dropped):
        reasons.append(f"whose PCIe links would carry TP{profile.tensor_parallel or 1}'s all-reduces")
    if any(v in absent for v in dropped):
        reasons.append("which no node of the cluster offers")
    return " or ".join(reasons) or "outside what it can use"


def _absent_warning(profile: WorkloadProfile, values: Sequence[str], absent: Sequence[str],
                    inventory: Inventory | None, warnings: list[str]) -> None:
    """``absentTier: warn`` for a pin: a product no node offers yet is kept (an autoscaler adds the
    node the Pending pod asks for), with a warning."""
    if inventory is None or not absent or any(v not in absent for v in values):
        return
    warnings.append(f"{NOT_IN_CLUSTER} (admitted, inventory.absentTier: warn): no node of the cluster offers "
                    f"[{', '.join(absent)}] with {counted(profile.gpus_per_pod, 'GPU')} yet; the pod stays Pending until one "
                    f"joins. The cluster has: {inventory.describe()}")


def _reference(choice: TierChoice, values: Sequence[str]) -> Fit | None:
    """What the tier would give at the least: its slowest fitting option among ``values`` (decode
    estimate, then the smallest memory). Numbers against it understate the gain, never inflate it."""
    fits = [f for f in choice.fits if f.value in values and f.fits]
    return max(fits, key=lambda f: (f.decode_ms if f.decode_ms is not None else 0.0, -f.usable_gib),
               default=None)


def _in_scheme(pin: Pin, settings: Settings, choice: TierChoice, values: Sequence[str]) -> list[str]:
    """The tier ``values`` (policy scheme) whose products the pin's own scheme can name."""
    if pin.policy_scheme:
        return list(values)
    named = {p for p in settings.catalog.products
             if schemes.values_for(settings.catalog, pin.scheme, [p])}
    return [o.value for o in choice.options if o.value in values and set(o.products) & named]


def _pinned_reference(fits: Mapping[str, tuple[Fit, ...]], values: Sequence[str]) -> tuple[str, Fit] | None:
    rows = [(v, f) for v in values for f in fits[v]]
    return min(rows, key=lambda vf: (vf[1].decode_ms if vf[1].decode_ms is not None else float("inf"), vf[0]),
               default=None)


def _product_names(known: Mapping[str, tuple[str, ...]], values: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(p for v in values for p in known[v]))


def _pinned_does_not_fit(profile: WorkloadProfile, settings: Settings, choice: TierChoice, pin: Pin,
                         known: Mapping[str, tuple[str, ...]], fits: Mapping[str, tuple[Fit, ...]],
                         path: str) -> Violation:
    """No pinned product holds it: cannot work. The fix names the tier's fitting values in the pin's scheme."""
    assert choice.tier is not None
    rows = [(v, f) for v, fs in fits.items() for f in fs]
    value, worst = max(rows, key=lambda vf: vf[1].usable_gib)
    offer = _offer(pin, settings, choice.usable() or [f.value for f in choice.fits if f.fits], choice)
    where = f"; it fits [{', '.join(offer)}] (tier {choice.tier.name})" if offer else ""
    if offer:
        fix = fix_line(DOES_NOT_FIT, f"pin {pin.key} In ", offer, f" (tier {choice.tier.name})")
    elif worst.need_gib is not None:
        fix = f"needs {worst.need_gib:.0f} GiB per GPU, {value} has {worst.usable_gib:.0f}: spread it over more GPUs"
    else:
        fix = f"no pinned GPU runs it: {worst.reason}"
    return Violation(DOES_NOT_FIT, f"{describe(profile)} does not fit the pinned {pin.key} [{', '.join(known)}]: "
                     f"{value}: {worst.reason}{where}", path, fix=fix[:FIX_BUDGET - len(DOES_NOT_FIT) - 2])


def _way_out(profile: WorkloadProfile, settings: Settings,
             inventory: Inventory | None) -> tuple[TierChoice, list[str]] | None:
    """The NVLink tier, evaluated against the cluster, and its values that offer this pod fitting
    NVLink GPUs (a node with room, a NodePool, a scalable product); ``None`` when there are none, or
    when no inventory is known. A policy's large-model tier may list PCIe cards too: never offered."""
    tier = settings.tier(settings.large_model_tier)
    if inventory is None or tier is None:
        return None
    choice = evaluate(tier, profile, settings, inventory)
    nvlink = {o.value for o in choice.options
              if not any(tiering.over_pcie(settings.catalog.products[p], profile.gpus_per_pod) for p in o.products)}
    usable = [v for v in choice.usable() if v in nvlink]
    return (choice, usable) if usable else None


def _trap(profile: WorkloadProfile, settings: Settings, choice: TierChoice, pin: Pin, traps: Sequence[str],
          fits: Mapping[str, tuple[Fit, ...]], path: str, inventory: Inventory | None) -> Violation:
    """The seed's trap: denied (``trap``) when the cluster offers the way out, else a misplacement."""
    weights = tiering.weights_gib(profile) or 0.0
    card = tiering.cost_card(settings)
    pinned = _pinned_reference(fits, traps)
    head = (f"{describe(profile)} needs NVLink: its {weights:.0f} GiB of weights are more than one "
            f"{card.product if card else 'cost card'} holds, and TP{profile.tensor_parallel} over "
            f"[{', '.join(traps)}] sends every layer's all-reduces over PCIe")
    found = _way_out(profile, settings, inventory)
    if found is not None:
        out, usable = found
        offer = _offer(pin, settings, usable, out)
        best = _reference(out, _in_scheme(pin, settings, out, usable))
        speed = (f" ({_ms(pinned[1])} on {pinned[0]} against {_ms(best)} on {best.value})"
                 if pinned is not None and best is not None and _ms(pinned[1]) and _ms(best) else "")
        return Violation(TIER_MISMATCH, f"{head}{speed}; the cluster has NVLink GPUs that hold it: pin {pin.key} In "
                         f"[{', '.join(offer)}]", path,
                         fix=fix_line(TIER_MISMATCH, f"needs NVLink: pin {pin.key} In ", offer,
                                      f" (tier {out.tier.name if out.tier else ''})"), kind=MISPLACED,
                         trap=True)
    wanted = choice.usable() or [f.value for f in choice.fits if f.fits]
    best = _reference(choice, _in_scheme(pin, settings, choice, wanted))
    offer = _offer(pin, settings, wanted, choice)
    speed = (f" ({_ms(pinned[1])} on {pinned[0]}, {_ms(best)} on {best.value})"
             if pinned is not None and best is not None and _ms(pinned[1]) and _ms(best) else "")
    known = "no inventory is known" if inventory is None else "the cluster offers no NVLink GPU that holds it"
    return Violation(TIER_MISMATCH, f"{head}{speed}; admitted as pinned: {known}", path,
                     fix=_speed_fix("needs NVLink", pinned, best, offer, pin.key), kind=MISPLACED)


def tier_annotation_trap(profile: WorkloadProfile, settings: Settings, choice: TierChoice, *, annotation: str,
                         path: str, inventory: Inventory | None) -> Violation | None:
    """A tier chosen by annotation is a pin too: a multi-GPU pod whose weights need NVLink sent by it to a
    tier of PCIe cards is the seed's trap, judged as a pin to those cards would be (never placed in silence)."""
    if choice.tier is None or not tiering.is_multi(profile) or not tiering.tp_spread(profile):
        return None
    if tiering.needs_nvlink(profile, settings) is not True:
        return None
    values = choice.usable() or [f.value for f in choice.fits if f.fits]
    catalog = settings.catalog
    options = {o.value: o for o in choice.options}
    if not values or not all(any(tiering.over_pcie(catalog.products[p], profile.gpus_per_pod)
                                 for p in options[v].products) for v in values):
        return None
    pin = Pin(settings.label_key, settings.label_scheme, {v: options[v].products for v in values}, False, True)
    fits = {f.value: (f,) for f in choice.fits if f.value in values}
    big = settings.tier(settings.large_model_tier)
    reference = evaluate(big, profile, settings, None) if big is not None else choice
    found = _trap(profile, settings, reference, pin, values, fits, path, inventory)
    ms = re.search(r"\([0-9]+ vs [0-9]+ ms/token\)", found.fix)
    return replace(found, message=f"annotation {annotation}={choice.tier.name}: {found.message}",
                   fix=f"remove annotation {annotation}: needs NVLink{' ' + ms.group(0) if ms else ''} "
                       f"(tier {settings.large_model_tier})")


def _misplacement(profile: WorkloadProfile, settings: Settings, choice: TierChoice, pin: Pin,
                  known: Mapping[str, tuple[str, ...]], fits: Mapping[str, tuple[Fit, ...]],
                  path: str) -> Violation | None:
    """It runs where it is pinned; is that where the policy would put it? (:mod:`webhook.core.tiering`)"""
    tier = choice.tier
    assert tier is not None
    if any(set(ps) <= set(tier.products) for ps in known.values()):
        return None  # some pinned value is a product of its tier
    catalog = settings.catalog
    products: list[GpuProduct] = [catalog.products[p] for ps in known.values() for p in ps]
    names = _product_names(known, list(known))
    pinned = _pinned_reference(fits, list(known))
    small = tier.name == settings.small_model_tier and tier.name != settings.large_model_tier
    if small:
        if not all(tiering.scarce(p) for p in products):
            return None
        wanted = choice.usable() or [f.value for f in choice.fits if f.fits]
        best = _reference(choice, _in_scheme(pin, settings, choice, wanted))
        if best is None:
            return None
        offer = _offer(pin, settings, wanted, choice)
        speed = (f" ({_ms(best)} there, {_ms(pinned[1])} here)" if pinned and _ms(best) and _ms(pinned[1]) else "")
        gpus = f"{profile.gpus_per_pod}x " if profile.gpus_per_pod > 1 else "one "
        return Violation(
            TIER_MISMATCH, f"{describe(profile)} runs on [{names}], scarce HBM cards, but fits {gpus}{best.value} "
            f"of tier {tier.name}{speed}: pin {pin.key} In [{', '.join(offer)}] to keep [{names}] for work that "
            f"needs them", path,
            fix=fix_line(TIER_MISMATCH + " (misplaced)", f"fits {gpus}{best.value}: pin {pin.key} In ", offer),
            kind=MISPLACED)
    slowest = tiering.slowest_bandwidth(tier, settings)
    over_pcie = tiering.is_multi(profile) and all(tiering.over_pcie(p, profile.gpus_per_pod) for p in products)
    slower = slowest is not None and all(p.bandwidth_gbs < slowest for p in products)
    if not over_pcie and not slower:
        return None
    wanted = choice.usable() or [f.value for f in choice.fits if f.fits]
    best = _reference(choice, _in_scheme(pin, settings, choice, wanted))
    offer = _offer(pin, settings, wanted, choice)
    why = "over PCIe" if over_pcie else "on slower memory"
    speed = (f" ({_ms(pinned[1])} on {pinned[0]}, {_ms(best)} on {best.value})"
             if pinned and best and _ms(best) and _ms(pinned[1]) else "")
    return Violation(
        TIER_MISMATCH, f"{describe(profile)} runs {why} on [{names}]{speed}; tier {tier.name} "
        f"would place it on [{', '.join(offer)}]", path,
        fix=_speed_fix(why, pinned, best, offer, pin.key), kind=MISPLACED)
