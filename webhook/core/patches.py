"""Placement -> RFC 6902 JSON patch that narrows a pod's node selection to the chosen products.

Rules the patch obeys (each one learned from webhooks that got it wrong):
- create ``affinity``/``nodeAffinity``/``required...`` only when absent, never replace a user's;
- AND the requirement into EVERY existing ``nodeSelectorTerm``: terms are ORed, so adding a new term
  would widen the selection instead of narrowing it;
- a term that already pins the product label to a subset of the placement is left alone, which makes
  the patch idempotent under ``reinvocationPolicy: IfNeeded``;
- pointers are escaped (``~`` -> ``~0``, ``/`` -> ``~1``) and ops come out in a fixed order, so the
  same input always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.domain import JSON, GroupAffinity, Placement
from webhook.core.groups import GROUP_SIZE

PINNED = "gpu-admission.io/pinned"
"""Annotation the mutating patch writes on a pod it pins: tier, model, size and GPUs, so that
`kubectl get pod -o yaml` says what pinned the pod and why."""
from webhook.core.selection import HOSTNAME, term_excludes, term_values
from webhook.core.workloads import join

Op = dict[str, JSON]


def requirement(placement: Placement) -> dict[str, JSON]:
    return {"key": placement.label_key, "operator": "In", "values": list(placement.values)}


def exclusion(placement: Placement) -> dict[str, JSON]:
    return {"key": HOSTNAME, "operator": "NotIn", "values": list(placement.exclude_nodes)}


def _requirements(placement: Placement) -> list[dict[str, JSON]]:
    return [requirement(placement)] + ([exclusion(placement)] if placement.exclude_nodes else [])


def _nest(keys: tuple[str, ...], leaf: JSON) -> JSON:
    for key in reversed(keys):
        leaf = {key: leaf}
    return leaf


def build(template_pointer: str, spec: Mapping[str, Any], placement: Placement | None,
          group: GroupAffinity | None = None, *, spec_pointer: str | None = None,
          metadata: Mapping[str, Any] | None = None) -> list[Op]:
    """Ops that make the pod template at ``template_pointer`` (whose ``spec`` is given) land only on
    ``placement.values`` of ``placement.label_key`` and, for a group member, on the same product as
    the rest of its group. Returns ``[]`` when nothing needs to change. ``spec_pointer``: where the
    PodSpec is when it is not ``<template_pointer>/spec``; ``metadata``: the template's metadata, where a
    group member's label goes (the label its pod affinity selects; a member is found by its labels, so
    its metadata and labels exist)."""
    spec_at = join(template_pointer, "spec") if spec_pointer is None else spec_pointer
    ops = node_affinity_ops(spec_at, spec, placement) if placement is not None else []
    if ops and placement is not None and placement.reason:
        ops += label_ops(join(template_pointer, "metadata"), metadata, PINNED, placement.reason, field="annotations")
    if group is not None:
        # the pod affinity goes into the spec as the node affinity ops leave it. Those ops change
        # nothing outside spec.affinity.nodeAffinity except, when spec.affinity is absent or not an
        # object, spec.affinity itself, so that one key is all the pod affinity ops need to see
        # (no deep copy of the whole spec: a hostile, deeply nested spec must not hit the recursion limit)
        current = spec
        whole_affinity = join(spec_at, "affinity")
        for op in ops:
            if op["path"] == whole_affinity:
                current = {**spec, "affinity": op["value"]}
        ops += pod_affinity_ops(spec_at, current, group)
        ops += label_ops(join(template_pointer, "metadata"), metadata, group.label_key, group.label_value)
        if group.size is not None and isinstance(metadata, Mapping):
            ops += label_ops(join(template_pointer, "metadata"), metadata, GROUP_SIZE, str(group.size),
                             field="annotations")
    return ops


def label_ops(metadata_pointer: str, metadata: Mapping[str, Any] | None, key: str, value: str,
              field: str = "labels") -> list[Op]:
    """Ops that set label (or annotation, ``field``) ``key`` = ``value`` in the metadata at
    ``metadata_pointer`` (none when it is set already; the map or ``metadata`` created when absent
    or not an object)."""
    if not isinstance(metadata, Mapping) or not metadata:
        # absent, or empty (the engine cannot tell the two apart, and adding over {} loses nothing)
        return [{"op": "add", "path": metadata_pointer, "value": {field: {key: value}}}]
    labels = metadata.get(field)
    if not isinstance(labels, Mapping):
        return [{"op": "add", "path": join(metadata_pointer, field), "value": {key: value}}]
    if labels.get(key) == value:
        return []
    return [{"op": "add", "path": join(metadata_pointer, field, key), "value": value}]


def group_term(group: GroupAffinity) -> dict[str, JSON]:
    return {"labelSelector": {"matchLabels": {group.label_key: group.label_value}},
            "topologyKey": group.topology_key}


def has_group_term(spec: Mapping[str, Any], group: GroupAffinity) -> bool:
    """True when a required pod affinity already keeps the pod with its group on one product."""
    cur: Any = spec
    for key in ("affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        cur = cur.get(key) if isinstance(cur, Mapping) else None
    for term in cur if isinstance(cur, list) else []:
        if not isinstance(term, Mapping) or term.get("topologyKey") != group.topology_key:
            continue
        selector = term.get("labelSelector")
        labels = selector.get("matchLabels") if isinstance(selector, Mapping) else None
        if isinstance(labels, Mapping) and labels.get(group.label_key) == group.label_value:
            return True
    return False


def pod_affinity_ops(spec_pointer: str, spec: Mapping[str, Any], group: GroupAffinity) -> list[Op]:
    if has_group_term(spec, group):
        return []
    term = group_term(group)
    path = ("affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    pointer = spec_pointer
    cur: Any = spec
    for depth, key in enumerate(path):
        nxt = cur.get(key) if isinstance(cur, Mapping) else None
        ok = isinstance(nxt, list) if depth == len(path) - 1 else isinstance(nxt, Mapping)
        if not ok:
            return [{"op": "add", "path": join(pointer, key), "value": _nest(path[depth + 1:], [term])}]
        pointer = join(pointer, key)
        cur = nxt
    return [{"op": "add", "path": join(pointer, "-"), "value": term}]


def node_affinity_ops(spec_pointer: str, spec: Mapping[str, Any], placement: Placement) -> list[Op]:
    """The node affinity part of :func:`build`."""
    wanted = frozenset(placement.values)
    excluded = frozenset(placement.exclude_nodes)
    path = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    pointer = spec_pointer
    cur: Any = spec
    for depth, key in enumerate(path):
        nxt = cur.get(key) if isinstance(cur, Mapping) else None
        container_ok = isinstance(nxt, list) if key == "nodeSelectorTerms" else isinstance(nxt, Mapping)
        if not container_ok or (key == "nodeSelectorTerms" and not nxt):
            value = _nest(path[depth + 1:], [{"matchExpressions": _requirements(placement)}])
            return [{"op": "add", "path": join(pointer, key), "value": value}]
        pointer = join(pointer, key)
        cur = nxt
    ops: list[Op] = []
    for i, term in enumerate(cur):
        term_ptr = join(pointer, i)
        if not isinstance(term, Mapping):
            ops.append({"op": "replace", "path": term_ptr, "value": {"matchExpressions": _requirements(placement)}})
            continue
        current = term_values(term, placement.label_key)
        missing = []
        if current is None or not current <= wanted:
            missing.append(requirement(placement))
        if not term_excludes(term, excluded):
            missing.append(exclusion(placement))
        if not missing:
            continue
        if isinstance(term.get("matchExpressions"), list):
            ops.extend({"op": "add", "path": join(term_ptr, "matchExpressions", "-"), "value": m} for m in missing)
        else:
            ops.append({"op": "add", "path": join(term_ptr, "matchExpressions"), "value": missing})
    return ops
