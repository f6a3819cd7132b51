"""Reading a pod's node selection for one label key.

Kubernetes semantics: ``nodeSelector`` AND required node affinity; the affinity's
``nodeSelectorTerms`` are ORed; the ``matchExpressions`` inside one term are ANDed. The question the
policy asks is "which values of the product label can this pod land on?": a finite set when every
path through the selection pins the key with ``In`` (or ``nodeSelector``), otherwise unbounded
(``None``). Preferred affinity, ``NotIn``, ``Exists`` and ``DoesNotExist`` never pin anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

AFFINITY_PATH = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


@dataclass(frozen=True)
class Pinned:
    """The label values a pod can land on, or ``values=None`` when it is not pinned."""

    values: frozenset[str] | None
    via_node_selector: bool = False


def _terms(spec: Mapping[str, Any]) -> list[Any] | None:
    cur: Any = spec
    for key in AFFINITY_PATH:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    if not isinstance(cur, Mapping):
        return None
    terms = cur.get("nodeSelectorTerms")
    return terms if isinstance(terms, list) else None


def term_values(term: Any, key: str) -> frozenset[str] | None:
    """Values one term allows for ``key``: intersection of its ``In`` expressions, None if unbounded."""
    if not isinstance(term, Mapping):
        return None
    exprs = term.get("matchExpressions")
    allowed: frozenset[str] | None = None
    for expr in exprs if isinstance(exprs, list) else []:
        if not isinstance(expr, Mapping) or expr.get("key") != key or expr.get("operator") != "In":
            continue
        values = expr.get("values")
        current = frozenset(v for v in values if isinstance(v, str)) if isinstance(values, list) else frozenset()
        allowed = current if allowed is None else allowed & current
    return allowed


def pinned_values(spec: Mapping[str, Any], key: str) -> Pinned:
    """Which values of node label ``key`` the pod spec restricts itself to."""
    selector = spec.get("nodeSelector")
    from_selector: frozenset[str] | None = None
    if isinstance(selector, Mapping) and isinstance(selector.get(key), str):
        from_selector = frozenset({selector[key]})
    from_affinity: frozenset[str] | None = None
    terms = _terms(spec)
    if terms:
        union: set[str] = set()
        bounded = True
        for term in terms:
            values = term_values(term, key)
            if values is None:
                bounded = False
                break
            union |= values
        if bounded:
            from_affinity = frozenset(union)
    if from_selector is not None and from_affinity is not None:
        return Pinned(from_selector & from_affinity, via_node_selector=True)
    if from_selector is not None:
        return Pinned(from_selector, via_node_selector=True)
    return Pinned(from_affinity)


HOSTNAME = "kubernetes.io/hostname"


def term_excludes(term: Any, nodes: frozenset[str]) -> bool:
    """True when a nodeSelectorTerm keeps the pod off every node in ``nodes`` by hostname."""
    if not nodes:
        return True
    if not isinstance(term, Mapping):
        return False
    exprs = term.get("matchExpressions")
    excluded: set[str] = set()
    for expr in exprs if isinstance(exprs, list) else []:
        if isinstance(expr, Mapping) and expr.get("key") == HOSTNAME and expr.get("operator") == "NotIn" \
                and isinstance(expr.get("values"), list):
            excluded |= {v for v in expr["values"] if isinstance(v, str)}
    return nodes <= excluded


def excludes_everywhere(spec: Mapping[str, Any], nodes: frozenset[str]) -> bool:
    """True when every required nodeSelectorTerm of the spec keeps the pod off ``nodes``."""
    if not nodes:
        return True
    terms = _terms(spec)
    return bool(terms) and all(term_excludes(t, nodes) for t in terms)
