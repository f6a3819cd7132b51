"""The cluster's GPU pools, read from Node objects (pure: nodes in, index out).

A tier pin is only half the story: a tier whose products no node carries leaves a pod Pending
forever, and a node with two GPU models (GPU Feature Discovery then writes flipping labels) breaks
the homogeneity the pin promises. This index answers "which product label values exist, on which
nodes, with how many GPUs" and "which nodes cannot be trusted", so the policy can offer only what
exists and keep multi-GPU pods off mixed nodes. The live watch that keeps it current is in
:mod:`webhook.server.node_watch`; ``check --inventory`` builds it from a saved ``kubectl get nodes -o yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from webhook.core import node_labels, node_match
from webhook.core.counts import parse_count
from webhook.core.hardware import Catalog
from webhook.core.nodepools import scalable_values
from webhook.core.resources import QuantityError, gpu_count

COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"
MAX_LABEL_COUNT = 10**12 - 1
"""The largest count read from a node label (a GPU count, MiB of memory)."""
FAMILY_LABEL = "nvidia.com/gpu.family"
MEMORY_TOLERANCE = 0.08
"""GFD reports usable MiB (A100 80GB: 81920; H100: 81559): a gap beyond this means another card."""


@dataclass(frozen=True)
class NodeGpus:
    """GPU facts of one node."""

    name: str
    value: str | None
    """The product label value (``None`` when the node has GPUs but no product label)."""
    product: str | None
    """Catalog id of the value, ``None`` when unknown."""
    capacity: int
    allocatable: int
    anomalies: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False, repr=False)
    """All the node's labels (read-only), so a pod's own node selection can be matched against the
    node (:meth:`Inventory.products_for`): a pin by hostname or node group is resolved to the
    products it lands on. One dict a GPU node, built once when it is indexed, holding the Node's
    own strings: a few KiB a node, a few MiB for thousands."""

    @property
    def trusted(self) -> bool:
        """A node a multi-GPU pod may use: one known product, labels consistent with capacity."""
        return not self.anomalies and self.value is not None


@dataclass(frozen=True)
class Landing:
    """The GPU nodes of one product label value that a pod's node selection admits."""

    value: str | None
    """The product label value (``None``: nodes with GPUs but no product label)."""
    product: str | None
    """Catalog id of the value, ``None`` when unknown."""
    nodes: tuple[str, ...]
    untrusted: tuple[str, ...] = ()
    """Those of ``nodes`` a multi-GPU pod must not trust (:attr:`NodeGpus.trusted`)."""


@dataclass(frozen=True)
class Resolution:
    """What a pod spec's own node selection lands on among the GPU nodes (:meth:`Inventory.products_for`)."""

    keys: tuple[str, ...] = ()
    """The labels that did the selecting (``metadata.name`` for a matchFields pin); empty when the
    spec selects nothing on GPU-relevant labels (:data:`NOT_SELECTED`)."""
    landings: tuple[Landing, ...] = ()
    """The GPU nodes admitted, by product label value (catalog order of values is not known here:
    sorted by value, unlabelled last). Empty when no GPU node is admitted."""

    @property
    def selects(self) -> bool:
        """False when the spec's selection says nothing about the GPU (no constraint beyond the usual)."""
        return bool(self.keys)

    @property
    def products(self) -> tuple[str, ...]:
        """Catalog ids of the products found, in landing order."""
        return tuple(dict.fromkeys(land.product for land in self.landings if land.product is not None))

    @property
    def values(self) -> tuple[str, ...]:
        """Product label values found (nodes without one are in :attr:`unknown`)."""
        return tuple(land.value for land in self.landings if land.value is not None)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for land in self.landings for n in land.nodes)

    @property
    def untrusted(self) -> tuple[str, ...]:
        return tuple(n for land in self.landings for n in land.untrusted)

    @property
    def unknown(self) -> tuple[str, ...]:
        """Admitted nodes whose product the catalog does not know (no product label, or a value it
        cannot read)."""
        return tuple(n for land in self.landings if land.product is None for n in land.nodes)


NOT_SELECTED = Resolution()
"""The spec selects nothing on GPU-relevant labels: no constraint beyond the usual tier affinity."""


@dataclass(frozen=True)
class Pool:
    """Nodes carrying one product label value."""

    value: str
    product: str | None
    nodes: tuple[str, ...]
    max_allocatable: int
    """Most GPUs one trusted node of the pool offers: the biggest pod the pool can ever take."""
    allocatable: int
    """GPUs of the pool's trusted nodes, in total."""


@dataclass(frozen=True)
class Inventory:
    """Index of GPU nodes by product label value."""

    label_key: str
    nodes: Mapping[str, NodeGpus] = field(default_factory=dict)
    resource_version: str | None = None
    scalable: Mapping[str, str] = field(default_factory=dict)
    """Label values no node carries yet that an autoscaler can add (:mod:`webhook.core.nodepools`),
    each with its source (``NodePool gpu-h100``)."""

    def pools(self) -> dict[str, Pool]:
        grouped: dict[str, list[NodeGpus]] = {}
        for node in self.nodes.values():
            if node.value is not None:
                grouped.setdefault(node.value, []).append(node)
        out = {}
        for value, members in sorted(grouped.items()):
            trusted = [n for n in members if n.trusted]
            out[value] = Pool(value, members[0].product, tuple(sorted(n.name for n in members)),
                              max((n.allocatable for n in trusted), default=0),
                              sum(n.allocatable for n in trusted))
        return out

    def values_with_room(self, gpus_per_pod: int) -> frozenset[str]:
        """Label values with at least one trusted node that can hold ``gpus_per_pod`` GPUs, and the
        values an autoscaler can add (their node size is not known: assumed to fit)."""
        return frozenset(v for v, pool in self.pools().items()
                         if pool.max_allocatable >= max(gpus_per_pod, 1)) | frozenset(self.scalable)

    def member_slots(self, value: str, gpus_per_pod: int) -> int | None:
        """Pods of ``gpus_per_pod`` GPUs the trusted nodes of ``value`` can hold side by side (by
        allocatable GPUs: what is running is not known here); ``None`` (no limit) for a value an
        autoscaler can add."""
        if value in self.scalable:
            return None
        per = max(gpus_per_pod, 1)
        return sum(n.allocatable // per for n in self.nodes.values() if n.value == value and n.trusted)

    def untrusted(self, values: Iterable[str] | None = None) -> tuple[NodeGpus, ...]:
        """Mixed or mislabeled nodes (optionally only those carrying one of ``values``)."""
        wanted = set(values) if values is not None else None
        return tuple(sorted((n for n in self.nodes.values() if n.anomalies
                             and (wanted is None or n.value in wanted)), key=lambda n: n.name))

    def products_for(self, spec: Any, *, product_keys: Collection[str] = ()) -> Resolution:
        """The GPU nodes a pod spec's own node selection (nodeSelector and required node affinity,
        Kubernetes semantics: :mod:`webhook.core.node_match`) can land on, whatever labels it uses,
        or :data:`NOT_SELECTED` when it selects nothing on GPU-relevant labels
        (:mod:`webhook.core.node_labels`). ``product_keys``: further label keys that name products
        (the catalog's schemes), on which an ``Exists`` only says "a GPU node". Nodes an autoscaler
        may add (:attr:`scalable`) cannot be matched: their labels are not known."""
        selection = node_match.parse(spec)
        keys = node_labels.selecting_keys(node_labels.selecting(selection, {self.label_key, *product_keys}))
        if not keys:
            return NOT_SELECTED
        grouped: dict[str | None, list[NodeGpus]] = {}
        for node in self.nodes.values():
            if selection.admits(node.labels, node.name):
                grouped.setdefault(node.value, []).append(node)
        order = sorted(grouped, key=lambda v: (v is None, v or ""))
        return Resolution(keys, tuple(
            Landing(value, grouped[value][0].product, tuple(sorted(n.name for n in grouped[value])),
                    tuple(sorted(n.name for n in grouped[value] if not n.trusted)))
            for value in order))

    def describe(self) -> str:
        """What exists, for messages: 'NVIDIA-L40S (4 nodes, 8 GPUs max), ...'."""
        pools = self.pools()
        text = ", ".join(f"{p.value} ({len(p.nodes)} node{'s' if len(p.nodes) != 1 else ''}, "
                         f"{p.max_allocatable} GPUs max)" for p in pools.values()) or "no GPU nodes"
        scalable = [f"{v} ({source})" for v, source in sorted(self.scalable.items()) if v not in pools]
        return text + (f"; can scale up: {', '.join(scalable)}" if scalable else "")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _gpus(resources: Mapping[str, Any], names: Iterable[str]) -> int:
    total = 0
    for name in names:
        if name in resources:
            try:
                total += gpu_count(resources[name])
            except QuantityError:
                continue
    return total


def _int_label(labels: Mapping[str, Any], key: str) -> int | None:
    """A node label's count (GPUs, MiB of memory): label values are ASCII, and an inventory file is
    read as the cluster would store it (a "²" is no count, and never a crash)."""
    return parse_count(labels.get(key), cap=MAX_LABEL_COUNT)


def node_gpus(node: Mapping[str, Any], *, label_key: str, scheme: str, catalog: Catalog,
              gpu_resources: Iterable[str]) -> NodeGpus | None:
    """The GPU facts of one Node object, or None for a node without GPUs."""
    meta = _mapping(node.get("metadata"))
    status = _mapping(node.get("status"))
    labels = {k: v for k, v in _mapping(meta.get("labels")).items() if isinstance(v, str)}
    names = tuple(gpu_resources)
    capacity = _gpus(_mapping(status.get("capacity")), names)
    allocatable = _gpus(_mapping(status.get("allocatable")), names)
    value = labels.get(label_key)
    if capacity == 0 and value is None:
        return None
    name = meta.get("name") if isinstance(meta.get("name"), str) else "(unnamed)"
    parsed = catalog.parse_label(value, scheme) if value is not None else None
    product = parsed.product if parsed else None
    anomalies: list[str] = []
    if value is None:
        anomalies.append(f"has {capacity} GPUs but no {label_key} label")
    count = _int_label(labels, COUNT_LABEL)
    if count is not None and count < capacity:
        anomalies.append(f"{COUNT_LABEL}={count} is less than its {capacity} GPUs: a mixed or mislabeled node")
    if product is not None:
        spec = catalog.product(product)
        memory = _int_label(labels, MEMORY_LABEL)
        if memory is not None and abs(memory / 1024 - spec.memory_gib) > MEMORY_TOLERANCE * spec.memory_gib:
            anomalies.append(f"{MEMORY_LABEL}={memory} MiB does not match {value} "
                             f"({spec.memory_gib * 1024:.0f} MiB): the labels disagree")
        family = labels.get(FAMILY_LABEL)
        if family is not None and family != spec.family:
            anomalies.append(f"{FAMILY_LABEL}={family} does not match {value} ({spec.family}): the labels disagree")
    if parsed is not None and (parsed.shared or parsed.mig_profile):
        anomalies.append(f"{label_key}={value} is a shared or MIG-partitioned GPU")
    return NodeGpus(name, value, product, capacity, allocatable, tuple(anomalies), MappingProxyType(labels))


def node_facts(node: Any) -> dict[str, Any] | None:
    """The part of a Node object the inventory reads (:func:`node_gpus`): its name, labels, capacity
    and allocatable; ``None`` for what is not a Node with a name.

    A watch keeps this, not the whole Node: a kubelet's status update every few seconds changes
    heartbeat times, images and conditions, none of which places a GPU pod, and two events whose
    facts are equal need no new inventory (whose identity keys the server's verdict memo)."""
    meta = _mapping(node.get("metadata")) if isinstance(node, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    status = _mapping(node.get("status"))
    labels = {k: v for k, v in _mapping(meta.get("labels")).items() if isinstance(v, str)}
    # every resource, not only the policy's GPU resources of today: a policy reload that names
    # another one is read from what is kept (a handful of entries a node; the kubelet rewrites them
    # only when a device plugin or the node changes)
    return {"metadata": {"name": name, "labels": labels},
            "status": {"capacity": dict(_mapping(status.get("capacity"))),
                       "allocatable": dict(_mapping(status.get("allocatable")))}}


def from_nodes(nodes: Iterable[Any], *, label_key: str, scheme: str, catalog: Catalog,
               gpu_resources: Iterable[str], resource_version: str | None = None,
               nodepools: Iterable[Any] = ()) -> Inventory:
    """Index a list of Node objects (dicts as the API returns them), and the Karpenter NodePools
    whose GPU products count as present (:mod:`webhook.core.nodepools`)."""
    names = tuple(gpu_resources)
    index: dict[str, NodeGpus] = {}
    for node in nodes:
        if not isinstance(node, Mapping):
            continue
        facts = node_gpus(node, label_key=label_key, scheme=scheme, catalog=catalog, gpu_resources=names)
        if facts is not None:
            index[facts.name] = facts
    scalable = scalable_values(nodepools=nodepools, products=(), catalog=catalog, scheme=scheme)
    return Inventory(label_key, index, resource_version, scalable)


def node_objects(document: Any) -> list[Any]:
    """Nodes of a ``kubectl get nodes -o yaml|json`` document (a List or NodeList), or a single Node."""
    if isinstance(document, Mapping):
        if document.get("kind") == "Node":
            return [document]
        items = document.get("items")
        if isinstance(items, list):
            return [i for i in items if isinstance(i, Mapping) and i.get("kind", "Node") == "Node"]
    return []
