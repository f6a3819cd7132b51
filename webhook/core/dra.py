"""Dynamic Resource Allocation: a multi-GPU ResourceClaim must ask for one GPU product.

With DRA, GPUs are not counted through ``nvidia.com/gpu`` and node labels: a ResourceClaim asks the
NVIDIA DRA driver for devices, and the scheduler picks any devices of the class that satisfy the
claim. A claim for four GPUs can therefore get two A100s and two L40S on a mixed node, the failure
this project exists to prevent. The DRA API has the fix built in: a ``DeviceConstraint`` with
``matchAttribute: gpu.nvidia.com/productName`` over the GPU requests makes every allocated device
the same model. This module checks that the constraint is there and builds the patch that adds it.

API version: only ``resource.k8s.io/v1`` (GA in Kubernetes 1.34) is judged, see
:data:`SUPPORTED_API_VERSIONS`. ``v1beta1`` and ``v1beta2`` (and ``v1alpha3``) have other shapes
(``v1beta1`` puts ``deviceClassName`` on the request itself) and are passed through with no
judgement: :func:`judge_claim` returns ``None`` for them. A webhook registered for
``resource.k8s.io/v1`` with ``matchPolicy: Equivalent`` still sees claims created through the beta
versions, because kube-apiserver converts them to v1 before calling it.

Field names were checked against ``k8s.io/api/resource/v1/types.go`` (v0.36.3): ``spec.devices``
(``DeviceClaim``) holds ``requests`` (``DeviceRequest``: ``name`` and either ``exactly``
(``ExactDeviceRequest``: ``deviceClassName``, ``allocationMode``, ``count``, ``adminAccess``, ...) or
``firstAvailable`` (``DeviceSubRequest``: ``name``, ``deviceClassName``, ``allocationMode``,
``count``)) and ``constraints`` (``DeviceConstraint``: ``requests``, ``matchAttribute``,
``distinctAttribute``). A ResourceClaimTemplate holds the same spec at ``spec.spec``.

Pure: plain data in, a frozen :class:`DraResult` out (no Flask, no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core import patches
from webhook.core.domain import JSON, Violation
from webhook.core.workloads import join

SUPPORTED_API_VERSIONS: tuple[str, ...] = ("resource.k8s.io/v1",)
"""The DRA API versions judged. v1 is GA since Kubernetes 1.34; older beta shapes pass through."""
UNSUPPORTED_API_VERSIONS: tuple[str, ...] = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2",
                                             "resource.k8s.io/v1alpha3")
"""Known DRA versions that are deliberately not judged (documented pass-through)."""

KINDS: frozenset[str] = frozenset({"ResourceClaim", "ResourceClaimTemplate"})
_SPEC_PATH: Mapping[str, tuple[str, ...]] = {
    "ResourceClaim": ("spec",),
    "ResourceClaimTemplate": ("spec", "spec"),
}

GPU_DEVICE_CLASSES: frozenset[str] = frozenset({"gpu.nvidia.com"})
"""DeviceClass names whose devices are GPUs (the NVIDIA DRA driver's default class)."""
PRODUCT_ATTRIBUTE = "gpu.nvidia.com/productName"
"""The device attribute the NVIDIA DRA driver publishes for the GPU model."""

MISSING_CONSTRAINT = "dra-missing-product-constraint"
"""Violation code: a claim for more than one GPU without a productName matchAttribute constraint."""

ALL = "All"


@dataclass(frozen=True)
class DraResult:
    """The verdict on one ResourceClaim or ResourceClaimTemplate."""

    kind: str
    pointer: str
    """JSON pointer of the ResourceClaimSpec (the object holding ``devices``) in the judged document."""
    gpu_requests: tuple[str, ...]
    """Names of the requests whose device class is a GPU class, in claim order."""
    gpu_devices: int | None
    """GPUs the claim asks for at most; ``None`` when a request takes ``All`` matching devices."""
    multi_gpu: bool
    homogeneous: bool
    """As written: one productName matchAttribute constraint covers every GPU request, or the claim
    asks for at most one GPU (nothing to keep homogeneous)."""
    allowed: bool
    mode: str
    violations: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()
    patch: tuple[dict[str, JSON], ...] = ()
    """RFC 6902 ops relative to the judged document; empty unless ``mutate`` and something changes."""

    def public(self) -> dict[str, JSON]:
        """A JSON shape for ``check --output json`` (mirrors the pod results' keys)."""
        return {"kind": self.kind, "allowed": self.allowed, "mode": self.mode,
                "gpu_requests": list(self.gpu_requests), "gpu_devices": self.gpu_devices,
                "homogeneous": self.homogeneous, "patch": [dict(op) for op in self.patch],
                "warnings": list(self.warnings), "violations": [v.public() for v in self.violations]}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(request: Mapping[str, Any]) -> int | None:
    """Devices one (sub)request asks for: ``None`` for ``All``; ExactCount defaults to one.

    Counts the API would reject (not a positive integer) are read as one: kube-apiserver refuses the
    object anyway, and the webhook must not invent a denial the user cannot make sense of."""
    if request.get("allocationMode") == ALL:
        return None
    count = request.get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def _gpu_need(request: Mapping[str, Any], gpu_classes: frozenset[str]) -> tuple[bool, int | None]:
    """(is a GPU request, most GPUs it may get). ``firstAvailable`` takes the largest GPU alternative,
    since any of them may be the one allocated. Admin-access requests (monitoring agents that see
    every device) are not workloads and are not GPU requests here."""
    exactly = request.get("exactly")
    alternatives = [exactly] if isinstance(exactly, Mapping) else \
        [s for s in _list(request.get("firstAvailable")) if isinstance(s, Mapping)]
    gpu = [a for a in alternatives if isinstance(a.get("deviceClassName"), str)  # a list is not hashable
           and a.get("deviceClassName") in gpu_classes and a.get("adminAccess") is not True]
    if not gpu:
        return False, 0
    counts = [_count(a) for a in gpu]
    return True, None if None in counts else max(c for c in counts if c is not None)


def _covers(constraint: Mapping[str, Any], names: Iterable[str]) -> bool:
    """One productName constraint whose ``requests`` (absent or empty = every request) names every
    GPU request. Naming the main request covers all of its ``firstAvailable`` subrequests."""
    if constraint.get("matchAttribute") != PRODUCT_ATTRIBUTE:
        return False
    listed = [r for r in _list(constraint.get("requests")) if isinstance(r, str)]
    return not listed or set(names) <= set(listed)


def _claim_spec(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    cur: Any = obj
    for key in _SPEC_PATH[kind]:
        cur = _mapping(cur).get(key)
    return _mapping(cur)


def judge_claim(obj: Any, *, mode: str, mutate: bool, prefix: str = "",
                gpu_classes: Iterable[str] = GPU_DEVICE_CLASSES) -> DraResult | None:
    """Judge a ``resource.k8s.io/v1`` ResourceClaim or ResourceClaimTemplate.

    Returns ``None`` for any other object, including DRA objects of an unsupported API version.
    ``mode``: ``enforce`` (violations deny) or ``audit`` (they become warnings). ``mutate``: judge
    the claim as it will be after the mutating patch (the missing constraint is then added, so it is
    no violation) and return that patch; audit mutates nothing (as for pods, :func:`policy.decide`).
    ``prefix``: JSON pointer of ``obj`` in the judged document.
    """
    if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str) or obj.get("kind") not in KINDS \
            or obj.get("apiVersion") not in SUPPORTED_API_VERSIONS:  # a kind that is a dict is not hashable
        return None
    kind: str = obj["kind"]
    classes = frozenset(gpu_classes)
    pointer = join(prefix, *_SPEC_PATH[kind])
    devices = _mapping(_claim_spec(obj, kind).get("devices"))
    names: list[str] = []
    total: int | None = 0
    for request in _list(devices.get("requests")):
        request = _mapping(request)
        is_gpu, need = _gpu_need(request, classes)
        if not is_gpu or not isinstance(request.get("name"), str):
            continue
        names.append(request["name"])
        total = None if total is None or need is None else total + need
    multi = total is None or total > 1
    constraints = devices.get("constraints")
    homogeneous = not multi or any(_covers(_mapping(c), names) for c in _list(constraints))
    if homogeneous:
        return DraResult(kind, pointer, tuple(names), total, multi, True, True, mode)

    asked = "all matching GPUs" if total is None else f"{total} GPUs"
    constraint: dict[str, JSON] = {"requests": list(names), "matchAttribute": PRODUCT_ATTRIBUTE}
    violation = Violation(
        MISSING_CONSTRAINT,
        f"{kind} asks for {asked} ({', '.join(names)}) that may be different GPU models: add "
        f"constraints: [{{requests: [{', '.join(names)}], matchAttribute: {PRODUCT_ATTRIBUTE}}}]",
        join(pointer, "devices", "constraints"))
    ops: tuple[dict[str, JSON], ...] = ()
    if mutate and mode != "audit" and (constraints is None or isinstance(constraints, list)):
        ops = tuple(patches.diff(join(pointer, "devices", "constraints"), constraints or (),
                                 [*(constraints or ()), constraint]))
    # like pods: a fixable finding vanishes under mutation (only when the patch can be built)
    violations = () if ops else (violation,)
    audit = mode == "audit"
    warnings = tuple(f"{v.code}: {v.message}" for v in violations) if audit else ()
    return DraResult(kind, pointer, tuple(names), total, multi, False, audit or not violations, mode,
                     violations, warnings, ops)
