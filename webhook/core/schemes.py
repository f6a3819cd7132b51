"""A GPU product pin written in another label scheme than the policy's.

Clusters are labelled by whoever runs them: GPU Feature Discovery (``nvidia.com/gpu.product``), GKE
(``cloud.google.com/gke-accelerator``), Karpenter on EKS (``karpenter.k8s.aws/instance-gpu-name``),
the AMD device plugin, CoreWeave (``gpu.nvidia.com/class``), Volcano Engine VKE, Alibaba ACK: every
scheme of ``data/gpus.yaml``, so a new one is a data change. A GKE tutorial pins
``cloud.google.com/gke-accelerator: nvidia-l4``; a policy in the GFD scheme that only read its own key
would see no pin and add ``nvidia.com/gpu.product In [...]`` beside it, a pod no GKE node without
GFD labels can take, admitted in silence. So a pin in any scheme the catalog knows is read as the product pin it is and
judged: kept when its products fit the tier, narrowed in the same scheme when some do, refused with
values of the same scheme when none does. The webhook never adds a pin in a second scheme.

Pure: the spec and the catalog in, plain values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.hardware import Catalog
from webhook.core.instance_types import INSTANCE_FAMILIES, INSTANCE_TYPE, instance_product
from webhook.core.selection import pinned_values

INSTANCE_SCHEME = "instance-type"
"""A pin on ``node.kubernetes.io/instance-type``: the GPU instance types of every cloud whose GPU is
one product (:func:`webhook.core.instance_types.instance_product`: EC2 families, SageMaker ``ml.``
types, Azure sizes, OCI shapes, GCE machine types) name it; any other value is unknown here."""


INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_FAMILY_SCHEME = "instance-family"
"""Karpenter's well-known label of an EC2 node's family (``g5``, ``p5``: karpenter.sh docs, "Well-Known
Labels"): the families of :data:`webhook.core.instance_types.INSTANCE_FAMILIES` name one product."""


@dataclass(frozen=True)
class ForeignPin:
    """The values a pod spec pins for the product label of a scheme other than the policy's."""

    scheme: str
    key: str
    values: frozenset[str]
    via_node_selector: bool


def foreign_pin(spec: Mapping[str, Any], catalog: Catalog, policy_scheme: str) -> ForeignPin | None:
    """The first other scheme (in catalog order) whose label key the spec pins, or ``None``."""
    for scheme, key in catalog.schemes.items():
        if scheme == policy_scheme:
            continue
        pinned = pinned_values(spec, key)
        if pinned.values is not None:
            return ForeignPin(scheme, key, pinned.values, pinned.via_node_selector)
    for scheme, key in ((INSTANCE_SCHEME, INSTANCE_TYPE), (INSTANCE_FAMILY_SCHEME, INSTANCE_FAMILY)):
        pinned = pinned_values(spec, key)
        if pinned.values is not None:
            return ForeignPin(scheme, key, pinned.values, pinned.via_node_selector)
    return None


def products_of(pin: ForeignPin, catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """Each pinned value -> the catalog products it names in its scheme (``()`` when unknown)."""
    if pin.scheme == INSTANCE_SCHEME:
        return {value: tuple(p for p in [instance_product(value)] if p and p in catalog.products)
                for value in sorted(pin.values)}
    if pin.scheme == INSTANCE_FAMILY_SCHEME:
        return {value: tuple(p for p in [INSTANCE_FAMILIES.get(value)] if p and p in catalog.products)
                for value in sorted(pin.values)}
    return {value: catalog.named_products(value, pin.scheme) for value in sorted(pin.values)}


def values_for(catalog: Catalog, scheme: str, product_ids: Iterable[str]) -> tuple[str, ...]:
    """One label value per product in ``scheme`` (its first spelling), in the order given; for
    instance types, the EC2 families (``p5.*``): the size part is the user's choice."""
    if scheme in (INSTANCE_SCHEME, INSTANCE_FAMILY_SCHEME):
        wanted = set(product_ids)
        suffix = ".*" if scheme == INSTANCE_SCHEME else ""
        return tuple(f"{family}{suffix}" for family, pid in INSTANCE_FAMILIES.items() if pid in wanted)
    out: list[str] = []
    for pid in dict.fromkeys(product_ids):
        labels = catalog.product(pid).labels.get(scheme, ())
        if labels and labels[0] not in out:
            out.append(labels[0])
    return tuple(out)
