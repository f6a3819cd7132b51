"""Placement -> RFC 6902 JSON patch that narrows a pod's node selection to the chosen products.

The patch is a diff: the affinity and metadata the pod should have are built on copies, and
``jsonpatch.make_patch`` turns the difference into ops, as Kyverno and controller-runtime
(``PatchResponseFromRaw``) do. What the desired state obeys (each rule learned from webhooks that got
it wrong):

- ``affinity``/``nodeAffinity``/``required...`` are created only when absent, a user's never replaced;
- the requirement is ANDed into EVERY existing ``nodeSelectorTerm``: terms are ORed, so adding a new
  term would widen the selection instead of narrowing it;
- a term that already pins the product label to a subset of the placement is left alone, so the
  patch is idempotent under ``reinvocationPolicy: IfNeeded`` (the desired state equals the current
  one: no ops);
- the same input always gives the same ops (copies in key order, a deterministic diff).

The copies share every part they do not change with the pod (shallow copies along the changed
path), and those shared parts are set aside before the diff (:func:`_bare`), so the diff's work is
that of the change: a hostile pod nested 900 levels deep elsewhere in its affinity costs nothing.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

import jsonpatch

from webhook.core.domain import JSON, GroupAffinity, Placement
from webhook.core.groups import GROUP_SIZE
from webhook.core.memo import MARSHAL_VERSION, MISSING, Memo
from webhook.core.selection import HOSTNAME, term_excludes, term_values
from webhook.core.workloads import join

PINNED = "gpu-admission.io/pinned"
"""Annotation the mutating patch writes on a pod it pins: tier, model, size and GPUs, so that
`kubectl get pod -o yaml` says what pinned the pod and why."""

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

Op = dict[str, JSON]


def requirement(placement: Placement) -> dict[str, JSON]:
    return {"key": placement.label_key, "operator": "In", "values": list(placement.values)}


def exclusion(placement: Placement) -> dict[str, JSON]:
    return {"key": HOSTNAME, "operator": "NotIn", "values": list(placement.exclude_nodes)}


def _requirements(placement: Placement) -> list[dict[str, JSON]]:
    return [requirement(placement)] + ([exclusion(placement)] if placement.exclude_nodes else [])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def build(template_pointer: str, spec: Mapping[str, Any], placement: Placement | None,
          group: GroupAffinity | None = None, *, spec_pointer: str | None = None,
          metadata: Mapping[str, Any] | None = None) -> list[Op]:
    """Ops that make the pod template at ``template_pointer`` (whose ``spec`` is given) land only on
    ``placement.values`` of ``placement.label_key`` and, for a group member, on the same product as
    the rest of its group. Returns ``[]`` when nothing needs to change. ``spec_pointer``: where the
    PodSpec is when it is not ``<template_pointer>/spec``; ``metadata``: the template's metadata as
    written (``None`` when absent), where the pinned note and a group member's label go."""
    spec_at = join(template_pointer, "spec") if spec_pointer is None else spec_pointer
    affinity = spec.get("affinity", _ABSENT)
    wanted_affinity, wanted_metadata = affinity, metadata
    if placement is not None:
        wanted_affinity = narrowed(wanted_affinity, placement)
        if wanted_affinity is not affinity and placement.reason:
            wanted_metadata = with_entry(wanted_metadata, "annotations", PINNED, placement.reason)
    if group is not None:
        wanted_affinity = with_group_term(wanted_affinity, group)
        wanted_metadata = with_entry(wanted_metadata, "labels", group.label_key, group.label_value)
        if group.size is not None and isinstance(metadata, Mapping):
            wanted_metadata = with_entry(wanted_metadata, "annotations", GROUP_SIZE, str(group.size))
    ops = diff(join(spec_at, "affinity"), affinity, wanted_affinity)
    if wanted_metadata is not metadata:
        ops += diff(join(template_pointer, "metadata"), _ABSENT if metadata is None else metadata, wanted_metadata)
    return ops


def narrowed(affinity: Any, placement: Placement) -> Any:
    """``affinity`` with the placement's requirement ANDed into every required node selector term
    (created when there is none); ``affinity`` itself when every term pins a subset already."""
    aff = _mapping(affinity)
    node = _mapping(aff.get("nodeAffinity"))
    required = _mapping(node.get(REQUIRED))
    terms = required.get("nodeSelectorTerms")
    if isinstance(terms, list) and terms:
        wanted = [_narrowed_term(term, placement) for term in terms]
        if all(new is old for new, old in zip(wanted, terms)):
            return affinity
    else:
        wanted = [{"matchExpressions": _requirements(placement)}]
    return {**aff, "nodeAffinity": {**node, REQUIRED: {**required, "nodeSelectorTerms": wanted}}}


def _narrowed_term(term: Any, placement: Placement) -> Any:
    if not isinstance(term, Mapping):
        return {"matchExpressions": _requirements(placement)}
    missing = []
    current = term_values(term, placement.label_key)
    if current is None or not current <= frozenset(placement.values):
        missing.append(requirement(placement))
    if not term_excludes(term, frozenset(placement.exclude_nodes)):
        missing.append(exclusion(placement))
    if not missing:
        return term
    expressions = term.get("matchExpressions")
    return {**term, "matchExpressions": [*(expressions if isinstance(expressions, list) else ()), *missing]}


def group_term(group: GroupAffinity) -> dict[str, JSON]:
    return {"labelSelector": {"matchLabels": {group.label_key: group.label_value}},
            "topologyKey": group.topology_key}


def has_group_term(spec: Mapping[str, Any], group: GroupAffinity) -> bool:
    """True when a required pod affinity already keeps the pod with its group on one product."""
    return _has_group_term(spec.get("affinity"), group)


def _has_group_term(affinity: Any, group: GroupAffinity) -> bool:
    terms = _mapping(_mapping(affinity).get("podAffinity")).get(REQUIRED)
    for term in terms if isinstance(terms, list) else []:
        if not isinstance(term, Mapping) or term.get("topologyKey") != group.topology_key:
            continue
        labels = _mapping(term.get("labelSelector")).get("matchLabels")
        if isinstance(labels, Mapping) and labels.get(group.label_key) == group.label_value:
            return True
    return False


def with_group_term(affinity: Any, group: GroupAffinity) -> Any:
    """``affinity`` with the group's required pod affinity term appended (itself when it has it)."""
    if _has_group_term(affinity, group):
        return affinity
    aff = _mapping(affinity)
    pod = _mapping(aff.get("podAffinity"))
    terms = pod.get(REQUIRED)
    return {**aff, "podAffinity": {**pod, REQUIRED: [*(terms if isinstance(terms, list) else ()), group_term(group)]}}


def with_entry(metadata: Any, field: str, key: str, value: str) -> Any:
    """``metadata`` with label (or annotation, ``field``) ``key`` = ``value`` (itself when set)."""
    meta = _mapping(metadata)
    entries = _mapping(meta.get(field))
    if entries.get(key) == value:
        return metadata
    return {**meta, field: {**entries, key: value}}


# ----------------------------------------------------------------------------- the diff

class _Absent:
    """A member that is not there (``diff`` adds the whole wanted value)."""

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT: Any = _Absent()
_SHARED = "\0shared"
"""Stands, on both sides of the diff, for a part the wanted copy shares with the pod."""
_REPLACED = "\0replaced"
"""Stands for the pod's value where the wanted copy has a value of another kind: only its presence
matters (the op replaces it)."""


def diff(pointer: str, before: Any, after: Any) -> list[Op]:
    """The ops that turn ``before`` (at ``pointer``) into ``after``, by ``jsonpatch.make_patch``.
    A ``before`` that is absent, or not of ``after``'s kind (object or list), is replaced whole by an
    ``add`` (RFC 6902: an add to an existing member replaces it)."""
    if after is before:
        return []
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)
            or isinstance(before, list) and isinstance(after, list)):
        return [{"op": "add", "path": pointer, "value": after}]
    bare_before, bare_after = _bare(before, after)
    return [{**op, "path": pointer + op["path"]} for op in _diff_bare(bare_before, bare_after)]


DIFFS: Memo[bytes] = Memo(1024)
"""The ops of one bare pair (:func:`_bare`), by its content: most pods of one tier want the same
affinity over the same (often absent) one, and ``jsonpatch.make_patch`` serializes every leaf it
compares. Kept as :mod:`marshal` bytes, so every caller gets ops of its own to extend or change."""
DIFF_KEY_MAX_BYTES = 4096
"""A pair whose content is larger (an affinity of many terms) is diffed without the memo: a pod's
usual pair is a few hundred bytes, and the bound keeps a worker's memo under about 8 MiB (1,024
keys and their ops) whatever variety hostile pods bring."""


def _diff_bare(bare_before: Any, bare_after: Any) -> list[Op]:
    """``jsonpatch.make_patch(bare_before, bare_after)``'s ops (paths relative to the pair)."""
    try:
        key: bytes | None = marshal.dumps((bare_before, bare_after), MARSHAL_VERSION)
    except ValueError:  # a value marshal cannot write (never from JSON): no memo
        key = None
    if key is not None and len(key) <= DIFF_KEY_MAX_BYTES:
        kept = DIFFS.get(key)
        if kept is not MISSING:
            return marshal.loads(kept)  # type: ignore[arg-type,no-any-return]
        ops: list[Op] = jsonpatch.make_patch(bare_before, bare_after).patch
        DIFFS.put(key, marshal.dumps(ops, MARSHAL_VERSION))
        return ops
    return jsonpatch.make_patch(bare_before, bare_after).patch  # type: ignore[no-any-return]


def _bare(before: Any, after: Any) -> tuple[Any, Any]:
    """``before`` and ``after`` with every part they share (the same object) replaced by
    :data:`_SHARED`: the wanted copies are shallow, so what remains is the change and its path."""
    if after is before:
        return _SHARED, _SHARED
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        bare_before: dict[str, Any] = {}
        bare_after: dict[str, Any] = {}
        for key, old in before.items():
            if key in after:
                bare_before[key], bare_after[key] = _bare(old, after[key])
            else:
                bare_before[key] = _REPLACED
        for key, new in after.items():
            if key not in before:
                bare_after[key] = new
        return bare_before, bare_after
    if isinstance(before, list) and isinstance(after, list):
        pairs = [_bare(old, new) for old, new in zip(before, after)]
        return ([b for b, _ in pairs] + [_REPLACED] * (len(before) - len(after)),
                [a for _, a in pairs] + after[len(before):])
    return _REPLACED, after
