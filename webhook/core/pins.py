"""What a pod spec pinned, whatever label it pinned with (pins the webhook cannot read are
respected, never overridden).

The policy used to see a product pin only on its own label (:func:`webhook.core.selection.pinned_values`)
or on another scheme's product label with values the catalog knows (:mod:`webhook.core.schemes`).
Anything else was "no pin", so the policy added its tier affinity beside it; and an instance type
no table listed was "outside the tier", so the pod was denied. Both break public tutorials that
work: SageMaker HyperPod's ``node.kubernetes.io/instance-type: ml.g5.8xlarge``, OKE's
``BM.GPU.H100.8``, a pin by ``kubernetes.io/hostname``, a node-group label (``NodeGroupType:
gpu-a10g``, ``eks.amazonaws.com/nodegroup``, ``cloud.google.com/gke-nodepool``, ``agentpool``). A pod
that selected its nodes has chosen them. So :func:`read_pin` answers, in this order:

``policy``
    the spec pins the policy's own product label on every path (today's ``pinned_values``).
``foreign``
    it pins another scheme's product label, or the instance type, with values that all name
    catalog products (today's ``schemes.foreign_pin``; instance types of every cloud:
    :mod:`webhook.core.instance_types`).
``resolved``
    with an inventory: the products of the GPU nodes the spec's own selection admits (Kubernetes
    semantics, :mod:`webhook.core.node_match`), whatever the labels; several products when it
    admits nodes of several.
``unreadable``
    the selection may choose a product (:mod:`webhook.core.node_labels`) but it cannot be read: no
    inventory, or no GPU node of it matches or carries a known product, and the label is not a
    product label, or its value is one the catalog / instance tables do not know. An unknown value
    is not a wrong one: the policy warns (:func:`warning`) and adds **no** product affinity beside it.
``none``
    nothing GPU-relevant is selected (``kubernetes.io/os``, a zone, spot, ``NotIn``, ...): the usual
    tier affinity applies.

Pure: the spec, the catalog and an optional inventory in, a frozen value out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core import node_labels, node_match
from webhook.core.hardware import Catalog
from webhook.core.instance_types import INSTANCE_TYPE, instance_product
from webhook.core.inventory import Inventory, Resolution
from webhook.core.node_match import NODE_NAME_FIELD, Requirement
from webhook.core.schemes import ForeignPin, foreign_pin, products_of
from webhook.core.selection import pinned_values

POLICY, FOREIGN, RESOLVED, UNREADABLE, NONE = "policy", "foreign", "resolved", "unreadable", "none"
KINDS = (POLICY, FOREIGN, RESOLVED, UNREADABLE, NONE)

PRODUCT_ANNOTATION = "gpu-admission.io/gpu-product"
"""Proposed, not read yet: an annotation a pod would set to say which catalog product its own node
selection lands on (``gpu-admission.io/gpu-product: A10G``). :mod:`webhook.core.inference` has no
such annotation today, so :func:`warning` names it only when the caller passes it."""
WARNING_LIMIT = 120
"""kubectl prints each admission warning on one line: keep it within a terminal's width."""


@dataclass(frozen=True)
class Pin:
    """What a pod spec pinned; the fields a kind does not use keep their defaults."""

    kind: str
    """One of :data:`KINDS`."""
    key: str | None = None
    """policy / foreign: the product label pinned; resolved: the first label that selected;
    unreadable: the label that could not be read (``metadata.name`` for a matchFields pin)."""
    values: tuple[str, ...] = ()
    """policy / foreign: the values pinned (sorted); resolved: the policy label values of the GPU
    nodes found; unreadable: the value that could not be read (empty for ``Exists``)."""
    products: tuple[str, ...] = ()
    """Catalog ids: the products the values name (policy: those it knows), or that the nodes found carry."""
    via_node_selector: bool = False
    """The pin (its first key) is a ``nodeSelector`` entry rather than a node affinity."""
    scheme: str | None = None
    """policy / foreign: the label scheme of ``key`` (``instance-type`` for an instance type pin)."""
    operator: str = "In"
    """unreadable: how ``key`` selects (``In``, ``Exists``, ``Gt``, ``Lt``; ``""`` when no single
    requirement is to blame: several readable pins ORed across schemes)."""
    selecting: tuple[str, ...] = ()
    """resolved / unreadable: every label that did the selecting."""
    unknown: tuple[str, ...] = ()
    """policy: pinned values the catalog does not know; resolved: admitted nodes without a known product."""
    foreign: ForeignPin | None = None
    """foreign: the pin as :func:`webhook.core.schemes.foreign_pin` reads it (``products_of`` takes it)."""
    resolution: Resolution | None = None
    """resolved, and unreadable when an inventory was consulted: what the selection landed on."""


def read_pin(spec: Any, *, catalog: Catalog, label_key: str, scheme: str,
             inventory: Inventory | None = None) -> Pin:
    """What ``spec`` (a pod spec) pinned, for a policy whose product label is ``label_key`` in
    ``scheme``; ``inventory`` resolves pins on labels that are not product labels."""
    if not isinstance(spec, Mapping) or not (spec.get("nodeSelector") or spec.get("affinity")):
        return Pin(NONE)  # most pods select no node: the common case costs two lookups
    pinned = pinned_values(spec, label_key)
    if pinned.values is not None:
        values = tuple(sorted(pinned.values))
        parsed = [(v, catalog.parse_label(v, scheme).product) for v in values]
        return Pin(POLICY, label_key, values, tuple(dict.fromkeys(p for _, p in parsed if p)),
                   pinned.via_node_selector, scheme, unknown=tuple(v for v, p in parsed if p is None))
    foreign = foreign_pin(spec, catalog, scheme)
    if foreign is not None:
        named = products_of(foreign, catalog)
        if all(named.values()):
            products = tuple(dict.fromkeys(p for ids in named.values() for p in ids))
            return Pin(FOREIGN, foreign.key, tuple(named), products, foreign.via_node_selector, foreign.scheme,
                       foreign=foreign)
    product_keys = {label_key, *catalog.schemes.values()}
    requirements = node_labels.selecting(node_match.parse(spec), product_keys)
    if not requirements and foreign is None:
        return Pin(NONE)
    resolution = inventory.products_for(spec, product_keys=product_keys) if inventory is not None else None
    if resolution is not None and resolution.products:
        return Pin(RESOLVED, resolution.keys[0], resolution.values, resolution.products,
                   _in_node_selector(spec, resolution.keys[0]), selecting=resolution.keys,
                   unknown=resolution.unknown, resolution=resolution)
    key, operator, values = _blame(requirements, foreign, catalog)
    selecting = node_labels.selecting_keys(requirements)
    if key not in selecting:
        selecting = (key, *selecting)
    return Pin(UNREADABLE, key, values, via_node_selector=_in_node_selector(spec, key), operator=operator,
               selecting=selecting, resolution=resolution)


def _in_node_selector(spec: Mapping[str, Any], key: str) -> bool:
    selector = spec.get("nodeSelector")
    return isinstance(selector, Mapping) and key in selector


def _known(catalog: Catalog, key: str, value: str) -> bool | None:
    """Whether a value of a product label (or the instance type) names a catalog product; ``None``
    when ``key`` is no such label."""
    if key == INSTANCE_TYPE:
        return instance_product(value) in catalog.products
    for scheme, scheme_key in catalog.schemes.items():
        if scheme_key == key:
            return bool(catalog.named_products(value, scheme))
    return None


def _blame(requirements: tuple[Requirement, ...], foreign: ForeignPin | None,
           catalog: Catalog) -> tuple[str, str, tuple[str, ...]]:
    """The one requirement a warning names: an unknown value of a product label first, else the
    first label that is not a product label."""
    if foreign is not None:
        unknown = [v for v, ids in products_of(foreign, catalog).items() if not ids]
        if unknown:
            return foreign.key, "In", (unknown[0],)
    for req in requirements:
        if req.field:
            return NODE_NAME_FIELD, req.operator, req.values[:1]
        known = [_known(catalog, req.key, v) for v in req.values] if req.operator == "In" else [None]
        if None in known:
            return req.key, req.operator, req.values[:1]
        if not all(known):
            return req.key, "In", (req.values[known.index(False)],)
    first = requirements[0]
    return first.key, "", ()


def _what(pin: Pin, value_room: int | None = None) -> str:
    value = pin.values[0] if pin.values else ""
    if value_room is not None and len(value) > value_room:
        head = (value_room - 1) // 2
        value = value[:head] + "…" + value[len(value) - (value_room - 1 - head):]
    if pin.operator == "In":
        return f"{pin.key}={value}"
    if pin.operator in ("Gt", "Lt"):
        return f"{pin.key} {pin.operator} {value}"
    if pin.operator == "Exists":
        return f"label {pin.key}"
    return "selection on " + ", ".join(pin.selecting)


MIN_VALUE_ROOM = 12
"""A value is never shortened below this: the value is what the reader must recognise."""


def warning(pin: Pin, *, annotation: str | None = None, limit: int = WARNING_LIMIT) -> str:
    """The warning for an ``unreadable`` pin, within ``limit`` characters where the label key allows:
    the full sentence, else a compact one, else the compact one with the value shortened in the
    middle. ``annotation``: the annotation that declares the product (:data:`PRODUCT_ANNOTATION`
    once :mod:`webhook.core.inference` reads it), named in the advice.

    ``cannot tell which GPU node.kubernetes.io/instance-type=BM.GPU.B300.8 is: give an inventory``
    """
    if pin.kind != UNREADABLE:
        raise ValueError(f"warning() is for unreadable pins, not {pin.kind!r}")
    declare = f"set {annotation}" if annotation else ""
    resolution = pin.resolution
    if resolution is None:
        advice = f"{declare} or give an inventory" if declare else "give an inventory"
        short = f"{declare} or an inventory" if declare else "give an inventory"
    else:
        found = ("its GPU nodes have no product label the catalog knows" if resolution.nodes
                 else "no GPU node in the inventory matches it")
        advice = found + (f"; {declare}" if declare else "")
        short = ("no known product on its nodes" if resolution.nodes else "no GPU node matches") \
            + (f"; {declare}" if declare else "")
    subject = "is" if pin.operator == "In" else "selects"
    full = f"cannot tell which GPU {_what(pin)} {subject}: {advice}"
    if len(full) <= limit:
        return full
    compact = f"unknown GPU: {_what(pin)}; {short}"
    value = pin.values[0] if pin.values and pin.operator != "Exists" else ""
    if len(compact) <= limit or len(value) <= MIN_VALUE_ROOM:
        return compact
    room = max(len(value) - (len(compact) - limit), MIN_VALUE_ROOM)
    return f"unknown GPU: {_what(pin, room)}; {short}"
