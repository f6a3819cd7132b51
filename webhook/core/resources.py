"""GPU counts of a pod, computed the way Kubernetes computes effective resources.

Kubernetes sums app containers (plus restartable "sidecar" init containers), and takes the max with
each classic init container (an init container runs alone before the app starts). A GPU hidden in
an init container therefore still counts. Quantities arrive as strings (``"4"``) or YAML integers
(``4``); extended resources must be whole numbers, so anything else is malformed and reported.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from webhook.core.domain import Violation
from webhook.core.workloads import join

_QUANTITY = re.compile(r"^([+-]?[0-9]{1,18}(?:\.[0-9]{1,18})?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|n|u)?$")
_SUFFIX: Mapping[str, Decimal] = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """A resource quantity that Kubernetes would reject for an extended resource."""


def parse_quantity(value: Any) -> Decimal:
    """Kubernetes quantity -> Decimal. Accepts ints and strings (``"2"``, ``"1000m"``, ``"1e0"`` is
    not accepted: exponents are never used for GPU counts and rejecting them keeps the grammar small)."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{type(value).__name__} is not a quantity")
    return _parse_text(value)


@functools.lru_cache(maxsize=1024)
def _parse_text(value: str) -> Decimal:
    """A quantity written as text. Remembered: a pod's few spellings ("1", "16Gi", "500m") come back
    in every container and every object of a ``check`` (parse_quantity ran six times an object, 4%
    of the engine), and a Decimal is immutable. An invalid one raises each time (not cached)."""
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{value[:40]!r} is not a quantity")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
    except InvalidOperation as exc:  # pragma: no cover - regex keeps this unreachable
        raise QuantityError(f"{value[:40]!r} is not a quantity") from exc


MAX_GPUS = 1 << 20
"""More GPUs than this in one container is no request any node can meet (and, at 1e308, more than
the sizing arithmetic can hold): reported as malformed instead of judged."""


def gpu_count(value: Any) -> int:
    """A GPU quantity as a whole, non-negative number of devices."""
    quantity = parse_quantity(value)
    if quantity < 0:
        raise QuantityError(f"{value!r} is negative")
    if quantity > MAX_GPUS:
        raise QuantityError(f"{str(value)[:40]!r} is more than {MAX_GPUS} devices")
    if quantity != quantity.to_integral_value():
        raise QuantityError(f"{value!r} is not a whole number of devices")
    return int(quantity)


@dataclass(frozen=True)
class GpuRequest:
    """Effective GPUs of a pod and where they were found."""

    gpus: int
    problems: tuple[Violation, ...] = ()
    by_container: Mapping[str, int] | None = None


def _container_gpus(
    container: Any, pointer: str, resources: Iterable[str], problems: list[Violation]
) -> int:
    if not isinstance(container, Mapping):
        return 0
    res = container.get("resources")
    if not isinstance(res, Mapping):
        return 0
    total = 0
    for section in ("limits", "requests"):
        values = res.get(section)
        if not isinstance(values, Mapping):
            continue
        found = False
        for name in resources:
            if name not in values:
                continue
            found = True
            try:
                total += gpu_count(values[name])
            except QuantityError as exc:
                problems.append(Violation(
                    "invalid-gpu-request",
                    f"{name} {section} {exc}: request a whole number of GPUs, e.g. \"4\"",
                    join(pointer, "resources", section, name),
                    fix=f"request a whole number of {name[:40]}, e.g. \"4\"",
                ))
        if found:
            # limits win for extended resources (requests must equal them); only read requests
            # when no limit names a GPU resource.
            return total
    return total


def pod_gpus(spec: Mapping[str, Any], spec_pointer: str, resources: Iterable[str]) -> GpuRequest:
    """Effective GPU count of a pod spec: max(sum(app) + sum(sidecars), max(init_i + sidecars before i))."""
    names = tuple(resources)
    problems: list[Violation] = []
    by_container: dict[str, int] = {}
    app_total = 0
    containers = spec.get("containers")
    for i, container in enumerate(containers if isinstance(containers, list) else []):
        n = _container_gpus(container, join(spec_pointer, "containers", i), names, problems)
        app_total += n
        by_container[_name(container, f"containers[{i}]")] = n
    sidecars = 0
    init_peak = 0
    inits = spec.get("initContainers")
    for i, container in enumerate(inits if isinstance(inits, list) else []):
        n = _container_gpus(container, join(spec_pointer, "initContainers", i), names, problems)
        by_container[_name(container, f"initContainers[{i}]")] = n
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            sidecars += n
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + n)
    return GpuRequest(max(app_total + sidecars, init_peak), tuple(problems), by_container)


DONE_PHASES = frozenset({"Succeeded", "Failed"})
"""Phases of a pod that holds no GPU any more (``kubectl`` still lists it)."""


def bound_gpus(pod: Mapping[str, Any], gpu_resources: Iterable[str]) -> tuple[str, int] | None:
    """(node, GPUs) of a pod bound to a node and not finished, ``None`` for any other pod: what a
    running pod holds of its node's GPUs."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node or status.get("phase") in DONE_PHASES:
        return None
    return node, pod_gpus(spec, "/spec", gpu_resources).gpus


def used_gpus(pods: Iterable[Mapping[str, Any]], gpu_resources: Iterable[str]) -> dict[str, int]:
    """GPUs requested by the pods bound to each node (finished pods hold none)."""
    names = tuple(gpu_resources)
    used: dict[str, int] = {}
    for pod in pods:
        bound = bound_gpus(pod, names)
        if bound is not None:
            used[bound[0]] = used.get(bound[0], 0) + bound[1]
    return used


def requested_names(spec: Mapping[str, Any]) -> Iterator[str]:
    """Every resource name a container or init container of ``spec`` puts in its limits or requests
    (repeats included, no quantity read): what says which kinds of device a pod asks for."""
    for section in ("containers", "initContainers"):
        containers = spec.get(section)
        for container in containers if isinstance(containers, list) else ():
            res = container.get("resources") if isinstance(container, Mapping) else None
            for values in (res.get("limits"), res.get("requests")) if isinstance(res, Mapping) else ():
                for name in values if isinstance(values, Mapping) else ():
                    if isinstance(name, str):
                        yield name


def _name(container: Any, fallback: str) -> str:
    if isinstance(container, Mapping) and isinstance(container.get("name"), str):
        return container["name"]
    return fallback
