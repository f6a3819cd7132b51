"""GPU capacity that can appear: Karpenter NodePools, and products the policy says an autoscaler adds.

On a cluster whose GPU pools scale from zero, "no node offers this tier" is the normal state before
the first pod of a tier: the Pending pod is what makes Karpenter (or cluster-autoscaler, or GKE
node auto-provisioning) add the node. So the inventory counts as present, besides the Nodes:

- the products a ``karpenter.sh/v1`` NodePool may launch, read from the ``In`` requirements of
  ``spec.template.spec.requirements`` on any label scheme of the GPU catalog (the policy's product
  label, ``karpenter.k8s.aws/instance-gpu-name``, ``cloud.google.com/gke-accelerator``, ...) and on
  ``node.kubernetes.io/instance-type`` (the GPU instance types of :mod:`webhook.core.instance_types`);
- the policy's ``inventory.scalableProducts``, for autoscalers that expose nothing in the API.

A NodePool that names no GPU product (a requirement ``Exists``, or none on these keys) adds nothing:
what it launches cannot be known. Pure: NodePool objects in, label values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core import instance_types
from webhook.core.hardware import Catalog

API_VERSION = "karpenter.sh/v1"
GROUP, VERSION, PLURAL = "karpenter.sh", "v1", "nodepools"
"""Where the doors list and watch NodePools (the CRD's coordinates)."""
INSTANCE_TYPE, INSTANCE_FAMILIES = instance_types.INSTANCE_TYPE, instance_types.INSTANCE_FAMILIES
"""Kept here for the modules that read them from this one: the instance-type tables of every cloud
are :mod:`webhook.core.instance_types`."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _requirements(nodepool: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = _mapping(_mapping(_mapping(nodepool.get("spec")).get("template")).get("spec"))
    items = spec.get("requirements")
    return [r for r in items if isinstance(r, Mapping)] if isinstance(items, list) else []


def nodepool_products(nodepool: Any, catalog: Catalog) -> tuple[str, ...]:
    """Catalog ids of the GPU products a NodePool may launch (empty when it does not say)."""
    if not isinstance(nodepool, Mapping):
        return ()
    schemes = {key: scheme for scheme, key in catalog.schemes.items()}
    found: list[str] = []
    for req in _requirements(nodepool):
        if req.get("operator") != "In" or not isinstance(req.get("values"), list):
            continue
        key = req.get("key")
        values = [v for v in req["values"] if isinstance(v, str)]
        if key == INSTANCE_TYPE:
            found.extend(p for p in map(instance_types.instance_product, values) if p is not None)
        elif key in schemes:
            for value in values:
                found.extend(catalog.named_products(value, schemes[key]))
    return tuple(dict.fromkeys(p for p in found if p in catalog.products))


def scalable_values(*, nodepools: Iterable[Any], products: Iterable[str], catalog: Catalog,
                    scheme: str) -> dict[str, str]:
    """Product label values (in the policy's scheme) that can appear, each with where it comes from
    (``NodePool NAME`` or ``inventory.scalableProducts``), for messages."""
    out: dict[str, str] = {}

    def add(product_ids: Iterable[str], source: str) -> None:
        for option in catalog.options(tuple(product_ids), scheme):
            out.setdefault(option.value, source)

    for pool in nodepools:
        if isinstance(pool, Mapping):
            name = _mapping(pool.get("metadata")).get("name")
            add(nodepool_products(pool, catalog), f"NodePool {name if isinstance(name, str) else '(unnamed)'}")
    add(tuple(products), "inventory.scalableProducts")
    return out


def nodepool_objects(document: Any) -> list[Any]:
    """NodePools of a ``kubectl get nodepools -o yaml`` document (a List), or a single NodePool."""
    if isinstance(document, Mapping):
        if document.get("kind") == "NodePool":
            return [document]
        items = document.get("items")
        if isinstance(items, list):
            return [i for i in items if isinstance(i, Mapping) and i.get("kind") == "NodePool"]
    return []
