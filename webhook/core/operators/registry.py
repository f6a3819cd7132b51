"""The table of operator kinds, and everything derived from it.

Each family module (:mod:`.jobs`, :mod:`.ray`, ...) describes its kinds as
:class:`~webhook.core.operators.base.OperatorKind` values; a :class:`Registry` holds them and
answers what the rest of the core asks of operators (the reader of an object, the group labels of
pods, the per-copy labels the verdict memo skips, the leader roles, the webhook rules), so adding a
kind is one descriptor and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from webhook.core.operators.base import ENTRY_OPERATORS, Membership, OperatorKind, PodGroup, Reader


class Registry:
    """Operator kinds by (apiVersion, kind), with the facts the core reads precomputed once.

    Immutable after construction (its tables are read-only views): :meth:`with_kinds` returns a new one."""

    __slots__ = ("kinds", "readers", "names", "groups", "per_copy_labels", "per_copy_annotations", "_leaders",
                 "own_entry", "context_only")

    def __init__(self, kinds: Iterable[OperatorKind]) -> None:
        self.kinds: tuple[OperatorKind, ...] = tuple(kinds)
        keys = [(k.api_version, k.kind) for k in self.kinds]
        duplicated = {key for key in keys if keys.count(key) > 1}
        if duplicated:
            raise ValueError(f"operator kinds described twice: {sorted(duplicated)}")
        self.readers: Mapping[tuple[str, str], Reader] = MappingProxyType({
            (k.api_version, k.kind): k.reader for k in self.kinds})
        """(apiVersion, kind) -> reader. Keyed by apiVersion too: a Volcano ``Job`` is not a ``batch/v1`` Job."""
        self.names: frozenset[str] = frozenset(k.kind for k in self.kinds)
        unique = tuple(dict.fromkeys(k.group for k in self.kinds if k.group is not None))
        # a gang's label before a label that groups only when the launch spans pods: a pod carrying
        # both is in the gang
        self.groups: tuple[PodGroup, ...] = tuple(g for g in unique if g.always) + tuple(
            g for g in unique if not g.always)
        self.per_copy_labels: frozenset[str] = frozenset().union(*(k.per_copy_labels for k in self.kinds))
        self.per_copy_annotations: frozenset[str] = frozenset().union(*(k.per_copy_annotations for k in self.kinds))
        self._leaders: Mapping[tuple[str, str], frozenset[str]] = MappingProxyType({
            (k.api_version, k.kind): k.leaders for k in self.kinds if k.leaders})
        self.own_entry: frozenset[str] = frozenset(
            k.kind for k in self.kinds if k.entry not in (ENTRY_OPERATORS, None))
        """Kinds the shipped webhook configurations send through an entry of their own."""
        self.context_only: frozenset[str] = frozenset(k.kind for k in self.kinds if k.entry is None)
        """Kinds no webhook entry sends (runtimes other kinds refer to), read by ``check`` as context."""

    def with_kinds(self, *kinds: OperatorKind) -> Registry:
        """This table with ``kinds`` added."""
        return Registry((*self.kinds, *kinds))

    def leaders(self, obj: Any) -> frozenset[str]:
        """The template roles of ``obj``'s kind whose profile later templates inherit (none for a kind
        that is not an operator's)."""
        if not isinstance(obj, Mapping):
            return frozenset()
        return self._leaders.get((str(obj.get("apiVersion")), str(obj.get("kind"))), frozenset())

    def membership(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Membership | None:
        """The operator group a pod's labels put it in, in :attr:`groups` order: a group's own
        :attr:`~PodGroup.read`, else its label's value names the job."""
        for group in self.groups:
            if group.read is not None:
                found = group.read(labels, annotations)
                if found is not None:
                    return found
                continue
            value = labels.get(group.label)
            if value:
                return Membership(group.source, value, f"{group.prefix}/{value}", group.always)
        return None

    def webhook_rules(self) -> list[dict[str, Any]]:
        """The ``rules`` of the operators' webhook entry: one per (API group, version), resources
        sorted, in a stable order, for every kind sent through :data:`ENTRY_OPERATORS`."""
        by_version: dict[tuple[str, str], set[str]] = {}
        for k in self.kinds:
            if k.entry == ENTRY_OPERATORS:
                by_version.setdefault(k.group_version, set()).add(k.plural)
        return [{"apiGroups": [group], "apiVersions": [version], "resources": sorted(plurals),
                 "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}
                for (group, version), plurals in sorted(by_version.items())]
