"""Single-NUMA binding: can the kubelet give a multi-GPU pod CPUs on its GPUs' NUMA node?

The kubelet aligns a container's CPUs with its devices only when two of its managers can both
take part (Kubernetes docs, "Control CPU Management Policies on the Node" and "Control Topology
Management Policies on a node"):

* The CPU Manager's ``static`` policy "allows containers in ``Guaranteed`` pods with integer CPU
  ``requests`` access to exclusive CPUs on the node"; "Containers in ``Guaranteed`` pods with
  fractional CPU ``requests`` also run on CPUs in the shared pool", as do all containers of
  ``BestEffort`` and ``Burstable`` pods.
* The Topology Manager aligns what its hint providers (CPU Manager, Device Manager) hint. For a
  ``Guaranteed`` pod "with sharing CPU request, the ``static`` CPU Manager policy would return
  default topology hint as there is no exclusive CPU request": the GPUs are placed, the CPUs are
  not, and the process may run on the other socket.
* ``Guaranteed`` QoS ("Pod Quality of Service Classes"): every container has a memory limit and a
  CPU limit and requests equal to them; Kubernetes counts init containers too
  (``qos.ComputePodQOS`` walks ``containers`` and ``initContainers``), reads the pod-level
  ``spec.resources`` instead when it is set, ignores other resources (GPUs, storage) and zero
  quantities, and a request left out defaults to the limit ("requests are set equal to limits when
  not explicitly specified").

Only what the pod controls is checked; whether a node runs these kubelet policies is not visible
at admission. Pure: a pod spec in, words out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from webhook.core.resources import QuantityError, parse_quantity

DEFAULT_GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu", "amd.com/gpu")

FIX = "for NUMA-aligned CPUs set cpu and memory limits = requests in every container, whole CPUs (Guaranteed QoS)"
"""The change that fixes every finding, leading each warning (106 characters: it fits a 120-character
kubectl warning with a short prefix; the findings that follow in parentheses say where)."""

MAX_FINDINGS = 3
"""Findings named in one warning (the rest are counted): a pod of many sidecars stays readable."""

_QOS = ("cpu", "memory")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""The quantity spellings :func:`parse_quantity` leaves out (``1e3``, ``4.``, ``.5``), ASCII only:
``Decimal()`` alone would also take ``"１２"``, ``"1_000"`` and ``"NaN"``, which Kubernetes refuses."""


def numa_warning(spec: Mapping[str, Any], gpus_per_pod: int,
                 gpu_resources: Iterable[str] = DEFAULT_GPU_RESOURCES) -> str | None:
    """A warning naming the fix when a pod of ``gpus_per_pod`` > 1 GPUs cannot get exclusive CPUs
    aligned with its GPUs from the kubelet's CPU and Topology Managers; None when it can (or has
    fewer than two GPUs). ``gpu_resources``: the resource names that count as GPUs.

    e.g. ``for NUMA-aligned CPUs set cpu and memory limits = requests in every container, whole CPUs
    (Guaranteed QoS) (container "vllm" sets no memory limit; container "vllm" requests 7.5 CPUs, not a
    whole number)``.
    """
    if not isinstance(gpus_per_pod, int) or gpus_per_pod < 2:
        return None
    found = numa_findings(spec, gpu_resources)
    if not found:
        return None
    shown = "; ".join(found[:MAX_FINDINGS])
    more = f"; {len(found) - MAX_FINDINGS} more" if len(found) > MAX_FINDINGS else ""
    return f"{FIX} ({shown}{more})"


def numa_findings(spec: Mapping[str, Any], gpu_resources: Iterable[str] = DEFAULT_GPU_RESOURCES) -> tuple[str, ...]:
    """Every reason the pod's GPU containers would not get exclusive CPUs, one short clause each:
    first what keeps the pod from ``Guaranteed`` QoS, then GPU containers without a whole-CPU request."""
    if not isinstance(spec, Mapping):
        return ()
    gpus = frozenset(r for r in gpu_resources if isinstance(r, str))
    containers = _containers(spec)
    findings: list[str] = []
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and _has_any(pod_level):
        findings.extend(_qos_problems("the pod's spec.resources", pod_level))
    else:
        for label, container in containers:
            findings.extend(_qos_problems(label, container.get("resources")))
    for label, container in containers:
        if not label.startswith("container") or not _uses_gpus(container, gpus):
            continue
        raw = _effective_cpu(container.get("resources"))
        cpu = _quantity(raw)
        if raw is None:
            findings.append(f"{label} requests no CPU of its own")
        elif cpu is None or cpu <= 0 or cpu != cpu.to_integral_value():
            findings.append(f"{label} requests {_show(cpu) if cpu is not None else _text(raw)} CPUs, "
                            f"not a whole number")
    return tuple(dict.fromkeys(findings))


# --------------------------------------------------------------------------- helpers


def _containers(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for key, word in (("containers", "container"), ("initContainers", "init container")):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            if isinstance(c, Mapping):
                name = c.get("name")
                shown = name[:63] if isinstance(name, str) and name else f"#{i}"
                out.append((f'{word} "{shown}"' if not shown.startswith("#") else f"{word} {shown}", c))
    return out


def _has_any(resources: Mapping[str, Any]) -> bool:
    return any(isinstance(resources.get(k), Mapping) and resources.get(k) for k in ("limits", "requests"))


def _qos_problems(label: str, resources: Any) -> list[str]:
    """Why ``resources`` keeps the pod from Guaranteed, as Kubernetes computes it."""
    resources = resources if isinstance(resources, Mapping) else {}
    limits = resources.get("limits") if isinstance(resources.get("limits"), Mapping) else {}
    requests = resources.get("requests") if isinstance(resources.get("requests"), Mapping) else {}
    problems = []
    for name in _QOS:
        limit = _quantity(limits.get(name))
        if limit is None or limit <= 0:
            problems.append(f"{label} sets no {name} limit")
            continue
        raw = requests.get(name)
        if raw is None:
            continue  # a request left out defaults to the limit
        request = _quantity(raw)
        if request is None or request != limit:
            problems.append(f"{label} requests {name} {_text(raw)} but limits it to {_text(limits.get(name))}")
    return problems


def _uses_gpus(container: Mapping[str, Any], gpus: frozenset[str]) -> bool:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return False
    for key in ("limits", "requests"):
        values = resources.get(key)
        if isinstance(values, Mapping):
            for name in gpus:
                amount = _quantity(values.get(name))
                if amount is not None and amount > 0:
                    return True
    return False


def _effective_cpu(resources: Any) -> Any:
    """The container's CPU request as written (the limit when the request is left out), or None."""
    if not isinstance(resources, Mapping):
        return None
    for key in ("requests", "limits"):
        values = resources.get(key)
        if isinstance(values, Mapping) and values.get("cpu") is not None:
            return values.get("cpu")
    return None


def _quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity, also in the decimal-exponent form (``1e3``) that resources.py leaves out."""
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except QuantityError:
        pass
    if isinstance(value, str) and len(value) <= 40 and _DECIMAL.fullmatch(value.strip()):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:  # pragma: no cover - the pattern keeps this unreachable
            return None
        return number if number.is_finite() else None
    return None


def _show(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if len(text) <= 24 else f"{float(value):g}"


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text[:24]
