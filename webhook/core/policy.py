"""The policy: the rules of :mod:`webhook.core.rules`, composed in one table, and the mode applied.

:data:`RULES` is the order a pod template is judged in. Each row names a rule, says when it applies
and which choices it makes for the rows after it (the mode, the tier, where the pod may land, its
group affinity); :func:`decide` runs the rows, collects every finding and warning in row order, and
:func:`_finish` applies the mode: what the mutating patch fixes vanishes under mutation, a
misplacement warns unless the policy denies it, audit turns violations into warnings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from webhook.core import rules
from webhook.core.domain import MISPLACED, Decision, Fit, GroupAffinity, Placement, Violation, WorkloadProfile
from webhook.core.groups import membership
from webhook.core.inventory import Inventory
from webhook.core.placing import Finding, evaluate
from webhook.core.rules import Case, Outcome
from webhook.core.settings import Settings, Tier
from webhook.core.tiering import is_multi
from webhook.core.workloads import PodTemplate


def _gpu_pod(case: Case) -> bool:
    return case.profile.gpus_per_pod > 0


def _placed_on_a_tier(case: Case) -> bool:
    return case.choice.tier is not None


def _multi_gpu_on_inventory(case: Case) -> bool:
    return is_multi(case.profile) and rules.pinned_by_policy_label(case)


def _group_on_inventory(case: Case) -> bool:
    return case.profile.pods > 1 and rules.pinned_by_policy_label(case)


@dataclass(frozen=True)
class Rule:
    """One row of the policy: a rule, when it applies, and the :class:`~webhook.core.rules.Case`
    fields it may decide for the rows after it."""

    name: str
    check: Callable[[Case], Outcome]
    when: Callable[[Case], bool] | None = None
    """``None``: every template."""
    decides: frozenset[str] = frozenset()


RULES: tuple[Rule, ...] = (
    Rule("mode", rules.mode, decides=frozenset({"mode"})),
    Rule("tier", rules.tier, _gpu_pod, decides=frozenset({"choice"})),
    Rule("placement", rules.placement, _placed_on_a_tier, decides=frozenset({"placement", "patch_needed", "key"})),
    Rule("node-name", rules.node_name, _placed_on_a_tier),
    Rule("parallelism", rules.parallelism, _gpu_pod),
    Rule("numa", rules.numa, rules.on_gpu_links),
    Rule("notes", rules.notes, _gpu_pod),
    Rule("untrusted-nodes", rules.untrusted_nodes, _multi_gpu_on_inventory,
         decides=frozenset({"placement", "patch_needed"})),
    Rule("group", rules.group, _gpu_pod, decides=frozenset({"group"})),
    Rule("group-fit", rules.group_fit, _group_on_inventory),
)
"""The order a template is judged in; the order of its findings and warnings is this order."""


def tier_fits(profile: WorkloadProfile, tier: Tier, settings: Settings) -> tuple[Fit, ...]:
    """Fit of ``profile`` on every label option of ``tier`` (for explain and what-if tooling)."""
    return evaluate(tier, profile, settings).fits


def decide(profile: WorkloadProfile, template: PodTemplate, settings: Settings, *, mode: str,
           mutate: bool, problems: Sequence[Violation] = (), inventory: Inventory | None = None) -> Decision:
    """Judge one pod template by :data:`RULES`. ``mutate``: judge it as it will be after the mutating
    patch; ``inventory``: the cluster's GPU nodes, when known (offer only what exists, avoid mixed
    nodes); ``problems``: what reading the template already found wrong.

    Audit mutates nothing, whichever way it is reached (the policy's ``mode: audit``, an audit
    namespace's entries, the pod's audit annotation, ``check --mode audit``): audit is the mode that
    changes nothing and only says what enforcement would do, so it is also the kill switch that undoes
    pinning. The template is therefore judged as it is written, and what the patch would have fixed
    is a warning."""
    case = Case(profile, template, settings, inventory, membership(template.labels, template.annotations),
                mode=mode, key=settings.label_key)
    findings: list[Finding] = [Finding(p) for p in problems]
    warnings: list[str] = []
    for rule in RULES:
        if rule.when is not None and not rule.when(case):
            continue
        outcome = rule.check(case)
        if outcome.findings:
            findings.extend(outcome.findings)
        if outcome.warnings:
            warnings.extend(outcome.warnings)
        if outcome.decided:
            assert outcome.decided.keys() <= rule.decides, (rule.name, set(outcome.decided) - rule.decides)
            case = case._replace(**outcome.decided)
    mutate = mutate and case.mode != "audit" and settings.mutate
    return _finish(case, findings, warnings, mutate)


def _finish(case: Case, findings: Sequence[Finding], warnings: list[str], mutate: bool) -> Decision:
    """Apply the mode: fixable findings vanish under mutation; misplacements (kind ``misplaced``, not
    the trap) are admitted with their warning line under ``misplaced: warn``; audit turns violations
    into warnings.

    Without mutation a pod that needed the patch is not pinned, so where it may land is unknown
    (``placement=None``)."""
    misplaced = case.settings.misplaced
    placement: Placement | None = case.placement
    kept: list[Violation] = []
    warned: list[Violation] = []
    for f in findings:
        if mutate and f.fixable:
            continue
        v = f.violation
        (warned if misplaced == "warn" and v.kind == MISPLACED and not v.trap else kept).append(v)
    violations, admitted = tuple(kept), tuple(warned)
    if admitted:
        warnings = [v.short() for v in admitted] + warnings
    audit = case.mode == "audit"
    if audit:
        warnings = [v.short() for v in violations] + warnings
    if case.patch_needed and not mutate:
        placement = None
    group: GroupAffinity | None = case.group
    return Decision(
        allowed=audit or not violations,
        mode=case.mode,
        tier=case.choice.tier.name if case.choice.tier else None,
        placement=placement,
        violations=violations,
        misplaced=admitted,
        warnings=tuple(dict.fromkeys(warnings)),
        fits=case.choice.fits,
        patch_needed=case.patch_needed and placement is not None,
        group=group if mutate else None,
    )
