"""What an UPDATE is judged against: the change, not the object (policy ``updates``).

The deployment controller scales an old ReplicaSet down with a full UPDATE of the object, a user
annotates or restarts a rollout with another, and both carry the pod template exactly as it was
stored. Judging them as if the object were new denies them for a violation the update did not
make, and a rollout that would fix a bad Deployment then jams with the wrong-GPU pods still
running. So with ``updates: judgeChange`` (the default; the anchor is Kyverno's
``allowExistingViolations``, on by default there too) a violation that the stored object
(``oldObject``) already had in the same template is admitted with a warning that names it as
pre-existing, and only a violation the update introduces denies. ``judgeObject`` keeps judging
every UPDATE as a new object.

A violation is "the same" when the template at the same place (JSON pointer and role) broke the
same rule (violation code) before the update: a Deployment pinned to L40S that is re-pinned to
another wrong product still breaks ``tier-mismatch`` and is admitted with the warning, as Kyverno
admits an update that keeps failing the same rule. A template whose pod-relevant content did not
change (spec, labels, annotations, group size: the replica count is not part of it) keeps every
violation as pre-existing without being judged again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from webhook.core.domain import Violation
from webhook.core.workloads import PodTemplate

if TYPE_CHECKING:
    from webhook.core.engine import TemplateResult

JUDGE_CHANGE, JUDGE_OBJECT = "judgeChange", "judgeObject"
UPDATE_MODES = (JUDGE_CHANGE, JUDGE_OBJECT)

Key = tuple[str, str | None]


def key(template: PodTemplate) -> Key:
    """Where a template sits in its object: the same place before and after an update."""
    return template.pointer, template.role


def unchanged(old: PodTemplate, new: PodTemplate) -> bool:
    """True when nothing a pod gets from the template changed (the replica count is not in it)."""
    return (old.spec == new.spec and old.labels == new.labels and old.annotations == new.annotations
            and old.group_size == new.group_size)


def pre_existing_warnings(violation: Violation, *, scaled_up: bool = False) -> tuple[str, ...]:
    """The warnings of a violation admitted because the stored object already had it, each led by
    what a reader of kubectl's 120-character lines needs first (the rest, and the whole message, are
    in the audit annotation ``message``).

    An ordinary update: one line, ``pre-existing <code>: <fix>``, then why it was admitted. An update
    that adds replicas: first what it will not get (the pods it asks for are new objects, judged on
    create and denied for the same violation, while ``kubectl scale`` prints "scaled" and the
    ReplicaSet sits at FailedCreate), then the violation's own ``code: fix`` line, which fits."""
    if scaled_up:
        return (f"scale-up: the new pods will be denied, pre-existing {violation.code} (fix the template to "
                f"add pods): {violation.message}", violation.short())
    why = "admitted, stored before; updates that add a violation are denied, pods it creates are judged on create"
    if violation.fix:
        return (f"pre-existing {violation.code}: {violation.fix} ({why}): {violation.message}",)
    return (f"pre-existing {violation.code}: {violation.message} ({why})",)


_REPLICA_FIELDS = ("replicas", "parallelism")
"""The counts whose increase creates pods: Deployment, StatefulSet, ReplicaSet, LeaderWorkerSet and
most operator kinds (``spec.replicas``), Job (``spec.parallelism``)."""


def scaled_up(old_obj: object, new_obj: object) -> bool:
    """True when the update raises a replica count of the object's spec (a missing ``replicas`` is 1,
    the API's default for the workload kinds; a count that is not a plain integer is not compared)."""
    def spec(obj: object) -> Mapping[str, object]:
        found = obj.get("spec") if isinstance(obj, Mapping) else None
        return found if isinstance(found, Mapping) else {}

    old, new = spec(old_obj), spec(new_obj)
    for name in _REPLICA_FIELDS:
        if name not in old and name not in new:
            continue
        before, after = old.get(name, 1), new.get(name, 1)
        if (isinstance(before, int) and isinstance(after, int) and not isinstance(before, bool)
                and not isinstance(after, bool) and after > before):
            return True
    return False


def against_old(new: Sequence["TemplateResult"], old_templates: Sequence[PodTemplate],
                judge_old: Callable[[], Sequence["TemplateResult"]], *,
                scaled: bool = False) -> tuple["TemplateResult", ...]:
    """``new`` with every violation the stored object already had turned into a pre-existing
    warning; a decision left without violations is allowed. ``old_templates`` are the stored
    object's templates as the engine reads them (group sizes included), ``judge_old`` judges that
    object with the same settings and is called at most once, only when a changed template has a
    violation. ``scaled``: the update raises a replica count (:func:`scaled_up`)."""
    if not any(r.decision.violations for r in new):
        return tuple(new)
    before_by_key = {key(t): t for t in old_templates}
    old_codes: Mapping[Key, frozenset[str]] | None = None
    out = []
    for result in new:
        decision = result.decision
        before = before_by_key.get(key(result.template))
        if not decision.violations or before is None:
            out.append(result)  # nothing to excuse, or a template the stored object did not have
            continue
        if unchanged(before, result.template):
            existing = frozenset(v.code for v in decision.violations)
        else:
            if old_codes is None:
                old_codes = {key(r.template): frozenset(v.code for v in r.decision.violations) for r in judge_old()}
            existing = old_codes.get(key(result.template), frozenset())
        kept = tuple(v for v in decision.violations if v.code not in existing)
        excused = [v for v in decision.violations if v.code in existing]
        if not excused:
            out.append(result)
            continue
        audit_lines = {f"{v.code}: {v.message}" for v in excused}
        warnings = ([w for v in excused for w in pre_existing_warnings(v, scaled_up=scaled)]
                    + [w for w in decision.warnings if w not in audit_lines])
        out.append(replace(result, decision=replace(
            decision, violations=kept, allowed=decision.allowed or not kept, warnings=tuple(dict.fromkeys(warnings)))))
    return tuple(out)


KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
_KUEUE_SPEC_FIELDS = frozenset({"nodeSelector", "tolerations", "affinity"})


def _kueue_admission(old: PodTemplate, new: PodTemplate) -> bool:
    """True when the only change is what Kueue writes when it admits a workload: the ResourceFlavor's
    node labels and tolerations in the pod template (pkg/podset/podset.go, Merge) and its own
    ``kueue.x-k8s.io/`` labels and annotations (``kueue.x-k8s.io/podset``)."""
    def rest(spec: Mapping[str, object]) -> dict[str, object]:
        return {k: v for k, v in spec.items() if k not in _KUEUE_SPEC_FIELDS}

    def own(meta: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in meta.items() if not k.startswith("kueue.x-k8s.io/")}

    return (rest(old.spec) == rest(new.spec) and own(old.labels) == own(new.labels)
            and own(old.annotations) == own(new.annotations) and old.group_size == new.group_size)


def kueue_warning(violation: Violation) -> str:
    return (f"kueue-admission {violation.code} (admitted: Kueue wrote its ResourceFlavor's node selection into "
            f"the template, and a denial would stop it admitting the workload; its pods are judged when they "
            f"are created): {violation.message}")


def kueue_admissions(new: Sequence["TemplateResult"], old_templates: Sequence[PodTemplate],
                     queued: bool) -> tuple["TemplateResult", ...]:
    """For a workload Kueue manages (``queued``: it carries ``kueue.x-k8s.io/queue-name``), an UPDATE
    that only adds Kueue's flavor node selection is never denied: the violations it brings become
    warnings. Kueue admits a suspended workload by writing the flavor's ``nodeLabels`` (maybe a GPU
    product pin of another tier) into its templates; denying that update would leave the workload
    suspended forever with no pod ever judged. The pods it then creates go through the pod webhooks,
    which enforce the same rules with the final node selection."""
    if not queued or not any(r.decision.violations for r in new):
        return tuple(new)
    before_by_key = {key(t): t for t in old_templates}
    out = []
    for result in new:
        before = before_by_key.get(key(result.template))
        decision = result.decision
        if not decision.violations or before is None or not _kueue_admission(before, result.template):
            out.append(result)
            continue
        warnings = [kueue_warning(v) for v in decision.violations] + [
            w for w in decision.warnings if not any(v.echoed_by(w) for v in decision.violations)]
        out.append(replace(result, decision=replace(decision, violations=(), allowed=True,
                                                   warnings=tuple(dict.fromkeys(warnings)))))
    return tuple(out)
