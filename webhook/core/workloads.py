"""Where pod templates live in Kubernetes objects.

The engine judges pods. Controllers (Deployment, Job, LeaderWorkerSet, ...) carry pod templates at
kind-specific places; this module is the only one that knows those places, and it reports each
template with the JSON pointer of the object holding ``metadata`` + ``spec`` so patches and
violation paths stay relative to the document the user wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core import operators, unknown_kinds
from webhook.core.counts import parse_count
from webhook.core.domain import JSON

MAX_REPLICAS = 2**31 - 1
"""A replica count written as a string is read up to int32, the type of every ``replicas`` field."""

# kind -> path (list of keys) from the object root to the pod template (the object with metadata+spec)
_TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}

NOT_WORKLOADS = frozenset({"PodTemplate", "AdmissionReview", "List"})
"""Kinds that hold pod specs but run nothing: a PodTemplate object is only referenced, an
AdmissionReview (a saved request) wraps the object the webhook judged, a List's items are objects
of their own (:func:`documents` expands them for ``check``; kube-apiserver never sends one)."""

WORKLOAD_KINDS: frozenset[str] = frozenset(
    {"Pod", *_TEMPLATE_PATHS.keys(), *operators.REGISTRY.names} - {"ReplicationController", "PodTemplate"}
)
"""Kinds whose templates are judged (the webhook registers for these)."""


@dataclass(frozen=True)
class PodTemplate:
    """One pod (or pod template) found in a document."""

    pointer: str
    """JSON pointer of the object that holds ``metadata`` and ``spec`` ("" for a bare Pod)."""
    metadata: Mapping[str, JSON]
    spec: Mapping[str, JSON]
    role: str | None = None
    """The template's role inside a multi-template object (``leader``/``worker``, a replica type, a
    group name), else ``None``."""
    group_size: int = 1
    """Pods forming one model instance as the workload kind says it (LeaderWorkerSet size)."""
    replicas: int | None = None
    """Replica/parallelism count of the controller, when it has one."""
    kind: str = "Pod"
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    gang: bool = False
    """True for the templates of an operator's job (:mod:`webhook.core.operators`): the pods of all
    its GPU templates form one group, which the engine counts into ``group_size``."""
    spec_at: str | None = None
    """JSON pointer of the PodSpec when it is not ``<pointer>/spec`` (a PodSpec written in place, as
    KServe's predictor is)."""
    patchable: bool = True
    """False when the spec was built from the object's fields (no pod spec in the object to patch)."""
    notes: tuple[str, ...] = ()
    """What the reader of the kind could not see, reported as warnings."""
    found: str = "kind"
    """How the template was found: ``kind`` (a kind this module knows) or ``generic`` (an unknown
    kind holding ``containers`` with images, see :func:`generic_templates`); the engine's stand-ins
    for objects it did not judge say ``unjudged`` (``engine.unjudged``) or ``templated``
    (``engine.templated``)."""

    @property
    def spec_pointer(self) -> str:
        """JSON pointer of the PodSpec."""
        return self.spec_at if self.spec_at is not None else join(self.pointer, "spec")


def escape(token: str) -> str:
    """RFC 6901: ``~`` -> ``~0`` then ``/`` -> ``~1`` (order matters)."""
    return token.replace("~", "~0").replace("/", "~1")


def join(pointer: str, *tokens: str | int) -> str:
    """Append escaped reference tokens to a JSON pointer."""
    return pointer + "".join("/" + escape(str(t)) for t in tokens)


def _mapping(value: Any) -> Mapping[str, JSON]:
    return value if isinstance(value, Mapping) else {}


def resolve(obj: Any, pointer: str) -> Any:
    """The value at JSON ``pointer`` in ``obj`` (``None`` where a step is missing): the inverse of
    :func:`join`."""
    tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]) if pointer else ()
    return _dig(obj, tokens) if isinstance(obj, Mapping) else None


def _dig(obj: Mapping[str, JSON], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for key in path:
        index = parse_count(key, cap=len(cur) - 1) if isinstance(cur, list) and cur else None
        if index is not None:
            cur = cur[index]
        elif isinstance(cur, Mapping):
            cur = cur.get(key)
        else:
            return None
    return cur


def _int(value: Any, default: int | None) -> int | None:
    """A replica or size count: a YAML integer as written, a string read by :func:`parse_count`
    (a Helm chart's quoted ``"2"``), anything else the default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    count = parse_count(value, cap=MAX_REPLICAS, padded=True)
    return default if count is None else count


def _annotations(metadata: Mapping[str, JSON], field_name: str = "annotations") -> dict[str, str]:
    raw = metadata.get(field_name)
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


def _template(
    pointer: str, holder: Any, *, kind: str, role: str | None = None, group_size: int = 1,
    replicas: int | None = None, gang: bool = False,
) -> PodTemplate | None:
    if not isinstance(holder, Mapping):
        return None
    metadata = _mapping(holder.get("metadata"))
    return PodTemplate(
        pointer=pointer,
        metadata=metadata,
        spec=_mapping(holder.get("spec")),
        role=role,
        group_size=max(group_size, 1),
        replicas=replicas,
        kind=kind,
        annotations=_annotations(metadata),
        labels=_annotations(metadata, "labels"),
        gang=gang,
    )


def _operator_template(obj: Mapping[str, JSON], prefix: str, kind: str, found: operators.Found) -> PodTemplate | None:
    """A template an operator reader found: in place (``metadata`` + ``spec``), or a PodSpec written
    in place or built from the object's fields, which takes the object's own metadata."""
    if not isinstance(found.holder, Mapping):
        return None
    gang = found.group is None
    if not found.inline:
        tpl = _template(join(prefix, *found.path), found.holder, kind=kind, role=found.role,
                        replicas=found.pods, gang=gang, group_size=found.group or 1)
        return replace(tpl, patchable=not found.synthesized, notes=found.notes) if tpl else None
    metadata = _mapping(obj.get("metadata"))
    return PodTemplate(
        pointer=prefix, metadata=metadata, spec=found.holder, role=found.role,
        group_size=max(found.group or 1, 1), replicas=found.pods, kind=kind,
        annotations=_annotations(metadata), labels=_annotations(metadata, "labels"), gang=gang,
        spec_at=join(prefix, *found.path), patchable=not found.synthesized, notes=found.notes,
    )


def pod_templates(obj: Any, prefix: str = "",
                  context: Mapping[tuple[str, str, str], Any] | None = None) -> tuple[PodTemplate, ...]:
    """Every pod template of ``obj`` (a Kubernetes object as decoded JSON/YAML).

    Kinds that carry no pods, and malformed objects, yield nothing: they pass unjudged.
    A ``List`` is not expanded here (see :func:`documents`), because each item is reported as an
    object of its own.
    """
    if not isinstance(obj, Mapping):
        return ()
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if not isinstance(kind, str):
        return ()
    if kind == "Pod":
        tpl = _template(prefix, obj, kind="Pod")
        return (tpl,) if tpl else ()
    if isinstance(api_version, str) and (api_version, kind) in operators.REGISTRY.readers:  # before _TEMPLATE_PATHS: a Volcano Job is no batch/v1 Job
        made = (_operator_template(obj, prefix, kind, found) for found in operators.templates(obj, context))
        return tuple(tpl for tpl in made if tpl is not None)
    path = _TEMPLATE_PATHS.get(kind)
    if kind in NOT_WORKLOADS:
        return ()
    if path is None:
        return _generic_templates(obj, prefix, kind)
    replicas = _controller_replicas(obj, kind)
    tpl = _template(join(prefix, *path), _dig(obj, path), kind=kind, replicas=replicas)
    return (tpl,) if tpl else ()


def _generic_templates(obj: Mapping[str, JSON], prefix: str, kind: str) -> tuple[PodTemplate, ...]:
    """An unknown kind's PodSpecs found by shape (:mod:`webhook.core.unknown_kinds`), each judged as one
    pod on its own (nothing says how many pods the kind makes, or which belong together)."""
    found: list[PodTemplate] = []
    for spec in unknown_kinds.templates(obj):
        named = _mapping(_dig(obj, spec.path)).get("name")
        role = named if isinstance(named, str) and named else "/".join(spec.path)
        if spec.inline:
            metadata = _mapping(obj.get("metadata"))
            found.append(PodTemplate(
                pointer=prefix, metadata=metadata, spec=spec.holder, role=role, kind=kind,
                annotations=_annotations(metadata), labels=_annotations(metadata, "labels"),
                spec_at=join(prefix, *spec.path), patchable=not spec.synthesized, found="generic"))
        else:
            tpl = _template(join(prefix, *spec.path), spec.holder, kind=kind, role=role)
            if tpl is not None:
                found.append(replace(tpl, found="generic"))
    return tuple(found)


def _controller_replicas(obj: Mapping[str, JSON], kind: str) -> int | None:
    spec = _mapping(obj.get("spec"))
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        return _int(spec.get("replicas"), 1)
    if kind == "Job":
        return _int(spec.get("parallelism"), 1)
    if kind == "CronJob":
        return _int(_dig(obj, ("spec", "jobTemplate", "spec", "parallelism")), 1)
    return None


def documents(obj: Any) -> tuple[tuple[str, Any], ...]:
    """Split a document into the objects it holds: a ``v1`` ``List`` yields ``("/items/i", item)``
    for each item (nested Lists are not expanded, like kubectl); anything else yields itself."""
    if (
        isinstance(obj, Mapping)
        and obj.get("kind") == "List"
        and obj.get("apiVersion") == "v1"
        and isinstance(obj.get("items"), list)
    ):
        return tuple((join("", "items", i), item) for i, item in enumerate(obj["items"]))
    return (("", obj),)
