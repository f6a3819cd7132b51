"""A memo of verdicts for the pods one controller makes from one template.

A Deployment of 50 replicas, a Job of 200 completions or a JobSet of 16 sends kube-apiserver the same
pod again and again, differing only in what the controller and the apiserver stamp on each copy: the
name (``generateName`` plus a random suffix), uid, ``pod-template-hash``, the completion index, the
projected service-account volume ``kube-api-access-<5 chars>``, timestamps, the owner's uid. None of
those change what the pod runs or where it may land, so the engine's verdict on the first copy is the
verdict on every copy, and judging each again is most of the webhook's CPU on real traffic.

:func:`key` is the pod's content with exactly those per-copy fields replaced by a placeholder (kept, not
dropped: the engine reads the *presence* of the completion-index annotation, never its value), so
two pods share a key only when they differ in nothing else. The server keeps its verdicts by this
key (``webhook.server.verdict_cache``).
``tests/core/test_verdicts.py`` holds the property the memo rests on: for generated controller
pods, varying every field :func:`key` replaces never changes a fresh verdict, and a cached verdict
equals a fresh one. A field the engine starts to read for its value must leave the lists below, or
that test fails.

Pure: no I/O, no clock, no state; the memo itself, with its lock, belongs to the server.
"""

from __future__ import annotations

import marshal
import re
from collections.abc import Mapping
from typing import Any

from webhook.core import operators
from webhook.core.memo import MARSHAL_VERSION, MISSING, Memo

PER_COPY_METADATA = frozenset({
    "name", "generateName", "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
    "selfLink",
})
"""Metadata the apiserver or the controller writes differently on every pod of one template."""
PER_COPY_LABELS = frozenset({
    "pod-template-hash",  # ReplicaSet: differs between revisions, equal within one, never read
    "controller-revision-hash",  # StatefulSet / DaemonSet revision
    "statefulset.kubernetes.io/pod-name",
    "batch.kubernetes.io/job-completion-index",  # Indexed Job
})
"""Labels whose *value* differs per pod of one of Kubernetes' own controllers (the engine reads only
their presence, if anything); an operator's are on its descriptor
(:attr:`webhook.core.operators.OperatorKind.per_copy_labels`) and skipped too.
``apps.kubernetes.io/pod-index`` is NOT here: an LWS group is found by it."""
PER_COPY_ANNOTATIONS = frozenset({
    "batch.kubernetes.io/job-completion-index",  # its presence marks an Indexed Job pod (groups.membership)
    "kubernetes.io/config.seen",
})
PER_COPY_SPEC = frozenset({"hostname"})
"""An Indexed Job's or JobSet's pod gets ``hostname: <job>-<index>``."""
OWNER_PER_COPY = frozenset({"uid"})
"""The owner's uid: a new ReplicaSet per rollout, the same owner kind and name."""
TOKEN_VOLUME = re.compile(r"kube-api-access-[a-z0-9]{5}")
"""The projected service-account token volume the ServiceAccount admission plugin adds, named with
a random suffix, in ``spec.volumes`` and in every container's ``volumeMounts``."""
PLACEHOLDER = "<per-copy>"


def _without(mapping: Any, fields: frozenset[str]) -> Any:
    """``mapping`` with the values of ``fields`` replaced by :data:`PLACEHOLDER`."""
    if not isinstance(mapping, Mapping) or fields.isdisjoint(mapping):
        return mapping
    return {k: (PLACEHOLDER if k in fields else v) for k, v in mapping.items()}


_SKIPPED: Memo[tuple[frozenset[str], frozenset[str]]] = Memo(8)
"""The per-copy labels and annotations under each operator registry: Kubernetes' own joined with
the operators' (:attr:`webhook.core.operators.Registry.per_copy_labels`), made once per registry
rather than on every key (the registry is read at call time, so a test may swap it)."""


def _skipped(registry: operators.Registry) -> tuple[frozenset[str], frozenset[str]]:
    found = _SKIPPED.get(registry)
    if found is MISSING:
        found = (PER_COPY_LABELS | registry.per_copy_labels, PER_COPY_ANNOTATIONS | registry.per_copy_annotations)
        _SKIPPED.put(registry, found)
    return found  # type: ignore[return-value]


def _volume_names(items: Any) -> Any:
    """``items`` with each token volume's name replaced; ``items`` itself when none is one."""
    if not isinstance(items, list):
        return items
    out = None
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name.startswith("kube-api-access-") and TOKEN_VOLUME.fullmatch(name):
            out = list(items) if out is None else out
            out[i] = {**item, "name": PLACEHOLDER}
    return items if out is None else out


def _containers(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out = []
    for c in items:
        mounts = c.get("volumeMounts") if isinstance(c, Mapping) else None
        if mounts:
            renamed = _volume_names(mounts)
            if renamed is not mounts:
                c = {**c, "volumeMounts": renamed}
        out.append(c)
    return out


def controller_made(obj: Any) -> bool:
    """True for a pod a controller made: it names a controller owner, or asks for a generated name
    (a ReplicaSet's, Job's or JobSet's pods before the apiserver names them). Only these come in
    copies; a pod written by hand is one of a kind, and keying it would cost a miss every time."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return False
    if isinstance(meta.get("generateName"), str) and meta["generateName"]:
        return True
    owners = meta.get("ownerReferences")
    return isinstance(owners, list) and any(isinstance(o, Mapping) and o.get("controller") is True for o in owners)


def key(obj: Any) -> bytes | None:
    """The object with the per-copy fields replaced by :data:`PLACEHOLDER` (shallow copies: the
    object is never changed), serialized; ``None`` when it is not a mapping or cannot be serialized.

    Serialized with :mod:`marshal`, not JSON: on the benchmark's controller pods (4.8 KB reviews)
    marshal (version 2) takes 12 us, pickle 20 and ``json.dumps`` 40. It is sound as a key: marshal writes a type
    tag with every value (``True`` is not ``1``, ``"1"`` is not ``1``) and dicts in their order, so
    equal bytes load back to equal values. Two equal objects whose strings are shared differently
    could serialize differently; that costs a miss, never a wrong answer. Nothing is ever loaded
    back, and the bytes never leave the process (marshal's format may change between Pythons)."""
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        meta = _without(meta, PER_COPY_METADATA)
        labels, annotations = _skipped(operators.REGISTRY)
        for field, per_copy in (("labels", labels), ("annotations", annotations)):
            if isinstance(meta.get(field), Mapping):
                meta = {**meta, field: _without(meta[field], per_copy)}
        owners = meta.get("ownerReferences")
        if isinstance(owners, list):
            meta = {**meta, "ownerReferences": [_without(o, OWNER_PER_COPY) for o in owners]}
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        spec = _without(spec, PER_COPY_SPEC)
        if "volumes" in spec:
            spec = {**spec, "volumes": _volume_names(spec["volumes"])}
        for field in ("containers", "initContainers"):
            if field in spec:
                spec = {**spec, field: _containers(spec[field])}
    try:
        return marshal.dumps({**obj, "metadata": meta, "spec": spec}, MARSHAL_VERSION)
    except (ValueError, TypeError, RecursionError):  # a value marshal cannot write (not JSON data)
        return None
