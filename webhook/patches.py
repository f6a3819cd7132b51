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

from typing import Any, Mapping

from webhook.domain import JSON, Placement
from webhook.selection import term_values
from webhook.workloads import join

Op = dict[str, JSON]


def requirement(placement: Placement) -> dict[str, JSON]:
    return {"key": placement.label_key, "operator": "In", "values": list(placement.values)}


def _nest(keys: tuple[str, ...], leaf: JSON) -> JSON:
    for key in reversed(keys):
        leaf = {key: leaf}
    return leaf


def build(template_pointer: str, spec: Mapping[str, Any], placement: Placement) -> list[Op]:
    """Ops that make the pod template at ``template_pointer`` (whose ``spec`` is given) land only on
    ``placement.values`` of ``placement.label_key``. Returns ``[]`` when nothing needs to change."""
    req = requirement(placement)
    wanted = frozenset(placement.values)
    path = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
    pointer = join(template_pointer, "spec")
    cur: Any = spec
    for depth, key in enumerate(path):
        nxt = cur.get(key) if isinstance(cur, Mapping) else None
        container_ok = isinstance(nxt, list) if key == "nodeSelectorTerms" else isinstance(nxt, Mapping)
        if not container_ok or (key == "nodeSelectorTerms" and not nxt):
            value = _nest(path[depth + 1:], [{"matchExpressions": [req]}])
            return [{"op": "add", "path": join(pointer, key), "value": value}]
        pointer = join(pointer, key)
        cur = nxt
    ops: list[Op] = []
    for i, term in enumerate(cur):
        term_ptr = join(pointer, i)
        if not isinstance(term, Mapping):
            ops.append({"op": "replace", "path": term_ptr, "value": {"matchExpressions": [req]}})
            continue
        current = term_values(term, placement.label_key)
        if current is not None and current <= wanted:
            continue
        if isinstance(term.get("matchExpressions"), list):
            ops.append({"op": "add", "path": join(term_ptr, "matchExpressions", "-"), "value": dict(req)})
        else:
            ops.append({"op": "add", "path": join(term_ptr, "matchExpressions"), "value": [dict(req)]})
    return ops
