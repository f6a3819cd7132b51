"""Manifests that are still templates: found before judging, so ``check`` reports them, not denies them.

Why: public tutorials ship ``nvidia.com/gpu: $GPU_PER_NODE`` (for envsubst), Helm charts hold
``"{{ .Values.gpus }}"``, and a chart rendered without a value leaves ``nvidia.com/gpu:`` empty.
kube-apiserver refuses every one of these quantities before any webhook sees the object, so the live
webhook never judges them (its ``invalid-gpu-request`` stays for what does reach it). Offline, a
file like that is not a wrong object but an unrendered one: denying it sends people hunting for a
GPU mistake that is not there. ``check`` asks :func:`find` first and reports such an object as
templated (render it first), unjudged, failing CI only under ``--strict``.

Where a marker counts, exactly (``prefix`` + these paths, at any depth, so every kind is covered):

- GPU quantities: an entry whose name is a GPU resource (one of the policy's ``gpuResources``, or
  any name with ``gpu`` in it or a MIG slice ``nvidia.com/mig-*``, as
  :mod:`webhook.core.unknown_kinds` counts GPU requests) in a mapping under ``limits``,
  ``requests``, ``resources`` or ``resourcesPerNode``, whose value is empty (null, ``""``) or holds
  a marker. These make any object templated.
- In an object that asks for GPUs (such a GPU quantity, or a GPU-sharing annotation): any other
  quantity under ``limits``/``requests`` that is empty or holds a marker (CPU and memory feed the
  NUMA check); any key or value at or under ``nodeSelector`` or ``affinity`` that holds a marker
  (the product pin and the GPU group are judged from them); a count that holds a marker at
  ``replicas``, ``minReplicas``, ``maxReplicas``, ``parallelism``, ``completions``, ``size``,
  ``numNodes``, ``tensorParallelSize`` or ``pipelineParallelSize`` (pods and group sizes).

A marker is ``{{ ... }}`` (Helm, Go templates), ``${VAR}`` and ``$VAR`` (envsubst) or ``$(VAR)``
(Kustomize vars). None of these fields lets kube-apiserver or the kubelet expand anything: a
quantity, a label and a count never hold ``$`` or ``{``. Nothing else is looked at, on purpose:
``command``, ``args`` and ``env`` values are where the kubelet expands ``$(VAR)`` itself (the engine
reads them expanded), where a shell expands ``$VAR`` and ``${VAR}`` at run time, and where a chat
template legitimately holds ``{{ }}``; annotations and ConfigMap data are text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.unknown_kinds import MAX_DEPTH, MAX_NODES, gpu_requests, is_gpu_name
from webhook.core.workloads import NOT_WORKLOADS, escape

FOUND = "templated"
"""The ``found`` of a templated object's result (``check --output json``), beside ``kind``,
``generic`` and ``unjudged``."""
MESSAGE = "templated: render it first (helm template / envsubst / kustomize)"
"""What ``check`` says of a templated object: the whole advice, one line."""

MARKER = re.compile(r"\{\{[^{}]{0,256}\}\}|\$\{[A-Za-z_][A-Za-z0-9_]*[^{}]{0,64}\}"
                    r"|\$\([A-Za-z_][A-Za-z0-9_]*\)|\$[A-Za-z_][A-Za-z0-9_]*")
"""``{{ ... }}``, ``${VAR}`` (with a shell-style default: ``${VAR:-4}``), ``$(VAR)``, ``$VAR``.
Each alternative is a literal start and one bounded class: linear in the text."""

QUANTITY_HOLDERS = frozenset({"limits", "requests", "resources", "resourcesPerNode"})
"""Mappings whose GPU-named entries are GPU quantities (as :func:`unknown_kinds.gpu_requests` reads them)."""
RESOURCE_LISTS = frozenset({"limits", "requests"})
"""Mappings whose every entry is a quantity (a ResourceRequirements' two lists)."""
NODE_SELECTION = frozenset({"nodeSelector", "affinity"})
"""Subtrees whose every key and string is node selection."""
COUNTS = frozenset({"replicas", "minReplicas", "maxReplicas", "parallelism", "completions", "size", "numNodes",
                    "tensorParallelSize", "pipelineParallelSize"})
"""Pod, group and parallelism counts the readers take from the object."""
MAX_MARKERS = 8
SHOWN = 3
"""Markers named in a result's reason; the rest are counted."""
_TEXT = 60


@dataclass(frozen=True)
class Marker:
    """One place that is still a template."""

    pointer: str
    """JSON pointer of the value (of the key itself, for a templated key)."""
    field: str
    """What the place is: ``GPU quantity``, ``quantity``, ``nodeSelector``, ``affinity`` or the count's name."""
    text: str
    """The value as written, cut to 60 characters; ``""`` when it is empty (null or blank)."""

    def describe(self) -> str:
        """``GPU quantity "$GPU_PER_NODE" at /spec/...``, or ``empty GPU quantity at /spec/...``."""
        if not self.text:
            return f"empty {self.field} at {self.pointer or '/'}"
        return f'{self.field} "{self.text}" at {self.pointer or "/"}'


def is_marked(value: Any) -> bool:
    """True for a string holding a template marker (:data:`MARKER`)."""
    return isinstance(value, str) and ("$" in value or "{{" in value) and MARKER.search(value) is not None


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_gpu(name: Any, gpu_resources: frozenset[str]) -> bool:
    return isinstance(name, str) and (name in gpu_resources or is_gpu_name(name))


def _container(value: Any) -> bool:
    """A mapping or a list; parsed YAML's dicts and lists are answered without the ABC check."""
    kind = type(value)
    return kind is dict or kind is list or (kind not in _SCALARS and isinstance(value, (Mapping, list)))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _shown(value: Any) -> str:
    return "" if _is_empty(value) else str(value).strip()[:_TEXT]


def find(obj: Any, gpu_resources: Iterable[str], prefix: str = "") -> tuple[Marker, ...]:
    """Where ``obj`` is still a template (the rules are in the module docstring), at most
    :data:`MAX_MARKERS` places, in document order; ``()`` for an object ready to judge. ``prefix`` is
    the JSON pointer of ``obj`` in its document (a List item).

    One recursive pass over the object's containers, building a path only to descend (``check`` runs
    this on every object before judging it, so it must cost a small part of judging). Bounded like
    :mod:`webhook.core.unknown_kinds`'s walk (nodes, depth)."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if not isinstance(obj, Mapping) or (isinstance(kind, str) and kind in NOT_WORKLOADS):
        return ()
    scan = _Scan(frozenset(gpu_resources), prefix)
    scan.visit(obj, (), "")
    if not scan.found:
        return ()
    if not scan.gpu and not gpu_requests(obj, limit=1):
        return ()  # no GPUs asked for: nothing gpu-admission judges depends on these places
    return tuple(scan.found[:MAX_MARKERS])


class _Scan:
    """The state of one :func:`find`: the markers met so far and the nodes left to visit."""

    __slots__ = ("names", "prefix", "found", "gpu", "budget")

    def __init__(self, names: frozenset[str], prefix: str) -> None:
        self.names = names
        self.prefix = prefix
        self.found: list[Marker] = []
        self.gpu = False
        """A GPU quantity is among the markers (the object asks for GPUs whatever else it says)."""
        self.budget = MAX_NODES

    def add(self, path: tuple[str, ...], field: str, text: str, *, gpu: bool = False) -> None:
        self.found.append(Marker(self.prefix + "".join("/" + escape(p) for p in path), field, text))
        self.gpu = self.gpu or gpu

    def visit(self, node: Any, path: tuple[str, ...], key: str) -> None:
        """``node`` (a mapping or a list) at ``path``, held under ``key`` ("" for a list item)."""
        self.budget -= 1 + len(node)
        if self.budget < 0 or len(path) >= MAX_DEPTH or len(self.found) >= MAX_MARKERS:
            return
        if isinstance(node, list):
            for i, value in enumerate(node):
                if _container(value):
                    self.visit(value, (*path, str(i)), "")
            return
        holder, quantities = key in QUANTITY_HOLDERS, key in RESOURCE_LISTS
        for k, value in node.items():
            name = k if isinstance(k, str) else str(k)
            if name in NODE_SELECTION:
                self.selection(value, (*path, name), name)
            elif _container(value):
                self.visit(value, (*path, name), name)
            elif holder and _is_gpu(k, self.names):
                if _is_empty(value) or is_marked(value):
                    self.add((*path, name), "GPU quantity", _shown(value), gpu=True)
            elif quantities and (_is_empty(value) or is_marked(value)):
                self.add((*path, name), "quantity", _shown(value))
            elif name in COUNTS and is_marked(value):
                self.add((*path, name), name, _shown(value))

    def selection(self, node: Any, path: tuple[str, ...], where: str) -> None:
        """Every marked key and string at or under a ``nodeSelector`` or ``affinity``."""
        self.budget -= 1
        if self.budget < 0 or len(path) >= MAX_DEPTH or len(self.found) >= MAX_MARKERS:
            return
        if isinstance(node, Mapping):
            for k, value in node.items():
                if is_marked(k):  # a label name from a value
                    self.add((*path, str(k)), where, str(k)[:_TEXT])
                self.selection(value, (*path, str(k)), where)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                self.selection(value, (*path, str(i)), where)
        elif is_marked(node):
            self.add(path, where, _shown(node))


def reason(markers: Iterable[Marker]) -> str:
    """The first :data:`SHOWN` places, ``; ``-joined, and how many more there are."""
    found = list(markers)
    text = "; ".join(m.describe() for m in found[:SHOWN])
    return text + (f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else "")
