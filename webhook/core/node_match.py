"""Does a pod spec's node selection admit a node with these labels and this name? The scheduler's answer.

A pod pins its nodes in ways the webhook cannot read as a product (``kubernetes.io/hostname``, a
node-group label, an instance type no table lists). With an inventory those pins are resolved by
asking, node by node, what the kube-scheduler's NodeAffinity filter would ask; a different answer
here would make the webhook judge nodes the pod never lands on. So this follows upstream exactly:
kubernetes/kubernetes ``staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go``
(``GetRequiredNodeAffinity``, ``RequiredNodeAffinity.Match``, ``LazyErrorNodeSelector.Match``,
``nodeSelectorRequirementsAsSelector``, ``nodeSelectorRequirementsAsFieldSelector``) and
``staging/src/k8s.io/apimachinery/pkg/labels/selector.go`` (``NewRequirement``, ``Requirement.Matches``):

- ``nodeSelector``: every key present with an equal value (``labels.SelectorFromSet``, not validated);
  an empty map selects every node. ANDed with the required node affinity.
- ``requiredDuringSchedulingIgnoredDuringExecution``: its ``nodeSelectorTerms`` are ORed. A term with
  neither ``matchExpressions`` nor ``matchFields`` matches nothing (``isEmptyNodeSelectorTerm``: it is
  skipped); a required selector whose term list is empty or absent therefore matches no node (the
  apiserver refuses such a pod; a manifest on disk may still hold one).
- Inside a term, ``matchExpressions`` are ANDed, ``matchFields`` are ANDed, and both must hold.
  ``In``: the key is present with a listed value; ``NotIn``: absent, or a value not listed;
  ``Exists`` / ``DoesNotExist``; ``Gt`` / ``Lt``: the key is present and both sides are base-10
  64-bit integers (``strconv.ParseInt``), compared strictly.
- ``matchFields``: ``In`` / ``NotIn`` with exactly one value on a node field; the only node field is
  ``metadata.name`` (``extractNodeFields``; any other field reads as ""), and a node without a name
  ignores ``matchFields`` altogether (``len(nodeFields) > 0``).
- A requirement the scheduler cannot parse (an unknown operator, ``In``/``NotIn`` without values,
  ``Exists``/``DoesNotExist`` with values, ``Gt``/``Lt`` without exactly one integer, an invalid label
  key or value) makes its own term match nothing; the other terms still count (the "lazy error"
  selector reports parse errors only when no term matched).

Shapes the typed API cannot even express (a ``nodeSelector`` that is a list, a value that is not a
string, a term that is not a mapping) never raise: the part they are in admits no node, the
conservative answer for every caller (nothing is resolved from a selection that cannot be read).
``null`` is absent, as in JSON. Pure: the spec and a node's labels in, a boolean out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.counts import parse_count

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
NODE_NAME_FIELD = "metadata.name"
AFFINITY_PATH = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def valid_label_key(key: Any) -> bool:
    """``validation.IsQualifiedName``: an optional DNS-subdomain prefix (253) and ``/``, then a name (63)."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.fullmatch(name))


def valid_label_value(value: Any) -> bool:
    """``validation.IsValidLabelValue``: empty, or up to 63 characters of a name."""
    return isinstance(value, str) and (value == "" or (len(value) <= 63 and bool(_NAME.fullmatch(value))))


def parse_int(value: Any) -> int | None:
    """``strconv.ParseInt(value, 10, 64)``: optional sign, ASCII digits only, within int64 (read by
    :func:`webhook.core.counts.parse_count`: a 5,000-digit value made ``int()`` raise)."""
    number = parse_count(value, cap=-_INT64[0], signs="+-")
    return number if number is not None and _INT64[0] <= number <= _INT64[1] else None


@dataclass(frozen=True)
class Requirement:
    """One parsed requirement: a nodeSelector entry (``In`` with its one value), a matchExpression,
    or (``field=True``) a matchFields entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        if self.field:  # fields.OneTermEqualSelector / OneTermNotEqualSelector
            equal = fields.get(self.key, "") == self.values[0]
            return equal if self.operator == "In" else not equal
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        have, want = parse_int(value), parse_int(self.values[0])
        if have is None or want is None:
            return False
        return have > want if self.operator == "Gt" else have < want


@dataclass(frozen=True)
class Term:
    """One nodeSelectorTerm that parsed: ``None`` for a list the term does not have."""

    expressions: tuple[Requirement, ...] | None
    fields: tuple[Requirement, ...] | None

    def matches(self, labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
        if self.expressions is not None and not all(r.matches(labels, fields) for r in self.expressions):
            return False
        if self.fields is not None and fields and not all(r.matches(labels, fields) for r in self.fields):
            return False
        return True

    def requirements(self) -> tuple[Requirement, ...]:
        return (self.expressions or ()) + (self.fields or ())


@dataclass(frozen=True)
class NodeSelection:
    """A pod spec's required node selection, parsed once and matched against many nodes."""

    selector: tuple[tuple[str, str], ...] = ()
    """The nodeSelector's entries (empty: no nodeSelector)."""
    terms: tuple[Term, ...] | None = None
    """The required affinity's terms that can match (``None``: no required affinity; ``()``: it has
    no term that can match, so no node is admitted)."""
    malformed: bool = False
    """Part of the selection has a shape the API cannot hold: no node is admitted."""

    def admits(self, labels: Mapping[str, str], name: str = "") -> bool:
        """Whether the scheduler's NodeAffinity filter lets the pod onto a node with these labels and name."""
        if self.malformed:
            return False
        if any(labels.get(k) != v for k, v in self.selector):
            return False
        if self.terms is None:
            return True
        fields = {NODE_NAME_FIELD: name} if name else {}
        return any(t.matches(labels, fields) for t in self.terms)

    def requirements(self) -> tuple[Requirement, ...]:
        """Every requirement that can take part in a match: the nodeSelector's entries (as ``In``),
        then each usable term's expressions and fields, in spec order."""
        out = [Requirement(k, "In", (v,)) for k, v in self.selector]
        for term in self.terms or ():
            out.extend(term.requirements())
        return tuple(out)


NOTHING = NodeSelection(malformed=True)
EVERYTHING = NodeSelection()


def _strings(values: Any) -> tuple[str, ...] | None:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return tuple(values)


def _expression(raw: Any) -> Requirement | None:
    """``labels.NewRequirement`` for one matchExpression, or ``None`` when the scheduler refuses it."""
    if not isinstance(raw, Mapping):
        return None
    key, operator, values = raw.get("key"), raw.get("operator"), _strings(raw.get("values"))
    if not valid_label_key(key) or operator not in OPERATORS or values is None:
        return None
    if operator in ("In", "NotIn") and not values:
        return None
    if operator in ("Exists", "DoesNotExist") and values:
        return None
    if operator in ("Gt", "Lt") and (len(values) != 1 or parse_int(values[0]) is None):
        return None
    if not all(valid_label_value(v) for v in values):
        return None
    return Requirement(key, operator, values)


def _field(raw: Any) -> Requirement | None:
    """One matchFields entry (``nodeSelectorRequirementsAsFieldSelector``), or ``None`` when refused."""
    if not isinstance(raw, Mapping):
        return None
    key, operator, values = raw.get("key"), raw.get("operator"), _strings(raw.get("values"))
    if not isinstance(key, str) or operator not in FIELD_OPERATORS or values is None or len(values) != 1:
        return None
    return Requirement(key, operator, values, field=True)


def _list(raw: Any) -> list[Any] | None:
    """A term's list: ``None`` when absent or empty (Go's ``len(...) == 0``); ``[None]`` when not a list,
    so the term is refused."""
    if raw is None or raw == []:
        return None
    return raw if isinstance(raw, list) else [None]


def _term(raw: Any) -> Term | None:
    """A term that can match, or ``None`` for an empty or refused one (both match nothing)."""
    if not isinstance(raw, Mapping):
        return None
    exprs, fields = _list(raw.get("matchExpressions")), _list(raw.get("matchFields"))
    if exprs is None and fields is None:
        return None  # isEmptyNodeSelectorTerm
    parsed_exprs = None if exprs is None else tuple(_expression(e) for e in exprs)
    parsed_fields = None if fields is None else tuple(_field(f) for f in fields)
    if (parsed_exprs and None in parsed_exprs) or (parsed_fields and None in parsed_fields):
        return None  # a parse error: the term matches nothing
    return Term(parsed_exprs, parsed_fields)  # type: ignore[arg-type]


def parse(spec: Any) -> NodeSelection:
    """The required node selection of a pod spec (nodeSelector and required node affinity)."""
    if not isinstance(spec, Mapping):
        return NOTHING
    raw_selector = spec.get("nodeSelector")
    if raw_selector is None:
        selector: tuple[tuple[str, str], ...] = ()
    elif isinstance(raw_selector, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in raw_selector.items()):
        selector = tuple(raw_selector.items())
    else:
        return NOTHING
    cur: Any = spec
    for step in AFFINITY_PATH:
        cur = cur.get(step)
        if cur is None:
            return NodeSelection(selector)
        if not isinstance(cur, Mapping):
            return NOTHING
    raw_terms = cur.get("nodeSelectorTerms")
    if raw_terms is not None and not isinstance(raw_terms, list):
        return NOTHING
    terms = tuple(t for t in (_term(raw) for raw in raw_terms or ()) if t is not None)
    return NodeSelection(selector, terms)


def admits(spec: Any, labels: Mapping[str, str], name: str = "") -> bool:
    """Whether a pod with this spec may be scheduled onto a node with ``labels`` and ``name``
    (parse once with :func:`parse` to match many nodes)."""
    return parse(spec).admits(labels, name)
