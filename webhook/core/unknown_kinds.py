"""Pod specs in kinds nobody told us about, and GPU requests in objects we could not read.

Operators we know are read by :mod:`webhook.core.operators`; everything else that embeds a pod spec
(Argo Workflows, in-house CRDs, a new version of a known operator) would otherwise pass unjudged,
and a GPU workload passed unjudged looks exactly like one that was judged and allowed. Two readings
close that gap:

- :func:`templates`: every object at any depth whose ``containers`` is a list of objects with an
  ``image`` string is a PodSpec (``{"metadata", "spec"}`` around it makes it a pod template, whose
  labels and annotations are then its own); Argo's single ``container`` with an image (template
  steps) is read as a one-container PodSpec with its siblings' node selection;
- :func:`gpu_requests`: where an object asks for GPUs at all (a resource name with ``gpu`` in it
  or a MIG slice ``nvidia.com/mig-*`` under ``limits``/``requests``/``resources``, a Dynamo-style
  ``gpu`` count, or a GPU-sharing annotation), so an object whose GPUs no reader found can be
  reported as not judged.

Both walks are bounded (nodes, depth, results), so a hostile document costs a bounded time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_NODES = 20_000
"""Values visited per object: far more than any real manifest holds (a 4 MiB object is refused
before it gets here by the server's body cap)."""
MAX_DEPTH = 48
MAX_FOUND = 32
_NODE_SELECTION = ("nodeSelector", "affinity", "tolerations", "nodeName", "initContainers")


@dataclass(frozen=True)
class GenericSpec:
    """A PodSpec found by shape."""

    path: tuple[str, ...]
    """To the pod template (``metadata`` + ``spec``) when ``inline`` is False, else to the PodSpec."""
    holder: Mapping[str, Any]
    inline: bool
    synthesized: bool = False


def _walk(obj: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Depth-first (path, value) pairs of JSON values, bounded by MAX_NODES and MAX_DEPTH."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), obj)]
    seen = 0
    while stack and seen < MAX_NODES:
        path, value = stack.pop()
        seen += 1
        yield path, value
        if len(path) >= MAX_DEPTH:
            continue
        if isinstance(value, Mapping):
            items = [((*path, str(k)), v) for k, v in value.items() if isinstance(v, (Mapping, list))]
        elif isinstance(value, list):
            items = [((*path, str(i)), v) for i, v in enumerate(value) if isinstance(v, (Mapping, list))]
        else:
            continue
        stack.extend(reversed(items))


def _has_image(container: Any) -> bool:
    return isinstance(container, Mapping) and isinstance(container.get("image"), str)


def _is_pod_spec(value: Any) -> bool:
    containers = value.get("containers") if isinstance(value, Mapping) else None
    return isinstance(containers, list) and bool(containers) and any(_has_image(c) for c in containers)


def templates(obj: Any) -> list[GenericSpec]:
    """PodSpecs anywhere in ``obj`` (not the object root: a Pod is no unknown kind), outermost
    first, none inside another."""
    found: list[GenericSpec] = []
    inside: list[tuple[str, ...]] = []
    parents: dict[tuple[str, ...], Any] = {}
    for path, value in _walk(obj):
        if len(found) >= MAX_FOUND:
            break
        if any(path[:len(p)] == p for p in inside):
            continue
        parents[path] = value
        if not path or not isinstance(value, Mapping):
            continue
        if _is_pod_spec(value):
            parent = parents.get(path[:-1])
            if path[-1] == "spec" and isinstance(parent, Mapping) and isinstance(parent.get("metadata"), Mapping):
                found.append(GenericSpec(path[:-1], parent, inline=False))
            else:
                found.append(GenericSpec(path, value, inline=True))
            inside.append(path)
        elif _has_image(value.get("container")):
            spec = {"containers": [value["container"]], **{k: value[k] for k in _NODE_SELECTION if k in value}}
            found.append(GenericSpec(path, spec, inline=True, synthesized=True))
            inside.append(path)
    return found


MIG_PREFIX = "nvidia.com/mig-"
"""MIG slices under the device plugin's ``mixed`` strategy (``nvidia.com/mig-3g.40gb``): a GPU
request whose name holds no ``gpu`` (:mod:`webhook.core.gpu_shares`)."""


def is_gpu_name(key: Any) -> bool:
    """A resource (or annotation) name that asks for GPUs: ``gpu`` in it, or a MIG slice."""
    return isinstance(key, str) and ("gpu" in key.lower() or key.startswith(MIG_PREFIX))


def gpu_requests(obj: Any, limit: int = 3) -> tuple[str, ...]:
    """JSON pointers (at most ``limit``) where ``obj`` asks for GPUs, ``()`` when it does not."""
    out: list[str] = []
    for path, value in _walk(obj):
        if len(out) >= limit:
            break
        if not isinstance(value, Mapping) or not path:
            continue
        here = path[-1]
        if here in ("limits", "requests", "resources", "resourcesPerNode"):
            out.extend(_pointer((*path, k)) for k, v in value.items()
                       if is_gpu_name(k) and v not in (0, "0", None, "") and not isinstance(v, (Mapping, list)))
        elif here == "annotations":
            out.extend(_pointer((*path, k)) for k in value
                       if is_gpu_name(k) and not str(k).startswith("gpu-admission.io/"))
    return tuple(out[:limit])


def _pointer(path: tuple[str, ...]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in path)
