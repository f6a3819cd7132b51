"""Which parts of a node selection can pin a GPU product, and which never do.

A pod that selects its nodes has chosen them, and the webhook must not add a product affinity
beside that choice. But most selections say nothing about the GPU:
``kubernetes.io/os: linux`` is in half the Helm charts there are, and a zone or a spot pool does not
choose a card. Counting those as pins would strip the tier affinity from nearly every pod. So a
requirement counts as a possible product pin only when it

- selects positively: a nodeSelector entry, ``In``, ``Exists``, ``Gt``, ``Lt``, or a ``matchFields``
  ``metadata.name In`` (``NotIn`` and ``DoesNotExist`` only keep a pod off nodes: whatever is left
  still takes the tier affinity, which is ANDed with them);
- is on a key outside :data:`NEUTRAL_KEYS` / :data:`NEUTRAL_PREFIXES` (each with why it never chooses
  a product: it chooses the OS, CPU, place, price or a GPU-stack setting, and every product comes in
  every one of them);
- is not an ``Exists`` on a key that names GPU products (:data:`PRODUCT_KEYS`, plus the catalog's and
  the policy's) or that every node carries (:data:`EVERY_NODE_KEYS`): ``nvidia.com/gpu.product
  Exists`` says "a node with some GPU", which the tier affinity narrows as it always did.

Everything else (``kubernetes.io/hostname``, ``NodeGroupType``, ``eks.amazonaws.com/nodegroup``,
``cloud.google.com/gke-nodepool``, ``agentpool``, ``karpenter.sh/nodepool``, ``nvidia.com/gpu.memory``,
``nvidia.com/gpu.family``, an instance type) may choose a product, and is resolved through the
inventory or reported as unreadable by :mod:`webhook.core.pins`. Pure: keys in, booleans out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from webhook.core.instance_types import INSTANCE_TYPE
from webhook.core.node_match import NODE_NAME_FIELD, NodeSelection, Requirement

NEUTRAL_KEYS: Mapping[str, str] = {
    # well-known Kubernetes labels (kubernetes.io/docs/reference/labels-annotations-taints)
    "kubernetes.io/os": "the operating system: GPU nodes of every product run linux",
    "kubernetes.io/arch": "the CPU architecture (amd64, arm64): not the GPU; arm64 hosts carry several products",
    "beta.kubernetes.io/os": "the deprecated kubernetes.io/os",
    "beta.kubernetes.io/arch": "the deprecated kubernetes.io/arch",
    "topology.kubernetes.io/zone": "where the node is: a zone holds GPUs of many products",
    "topology.kubernetes.io/region": "where the node is: a region holds GPUs of many products",
    "failure-domain.beta.kubernetes.io/zone": "the deprecated topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "the deprecated topology.kubernetes.io/region",
    "topology.gke.io/zone": "GKE's zone label (persistent disk topology): a place, not a card",
    # price and lifecycle: every product is sold on demand and as spot
    "karpenter.sh/capacity-type": "Karpenter's spot / on-demand / reserved",
    "eks.amazonaws.com/capacityType": "EKS managed node groups' ON_DEMAND / SPOT",
    "cloud.google.com/gke-spot": "GKE Spot VMs",
    "cloud.google.com/gke-preemptible": "GKE preemptible VMs",
    "cloud.google.com/gke-provisioning": "GKE's standard / spot / flex-start / queued provisioning",
    "kubernetes.azure.com/scalesetpriority": "AKS spot node pools",
    "node.kubernetes.io/lifecycle": "spot / normal (kops, eksctl)",
    # GPU-stack settings that every product takes, or vendor-only labels
    "nvidia.com/gpu.present": "the GPU Operator's 'has an NVIDIA GPU': every GPU node",
    "nvidia.com/gpu.count": "how many GPUs the node has: its size, not its card (the tier affinity ANDs with it)",
    "nvidia.com/gpu.sharing-strategy": "time-slicing / MPS / none: how a card is shared, not which",
    "nvidia.com/gpu.replicas": "time-slicing replicas: how a card is shared, not which",
    "nvidia.com/gpu.mode": "compute / display mode of the card",
    "karpenter.k8s.aws/instance-gpu-count": "GPUs per instance: the node's size, not its card",
    "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia / amd: a vendor, not a product",
    "eks.amazonaws.com/instance-gpu-count": "EKS Auto Mode's GPUs per instance: the node's size",
    "eks.amazonaws.com/instance-gpu-manufacturer": "EKS Auto Mode's vendor",
    "karpenter.azure.com/sku-gpu-count": "AKS node auto-provisioning's GPUs per VM: the node's size",
    "karpenter.azure.com/sku-gpu-manufacturer": "AKS node auto-provisioning's vendor",
    "kubernetes.azure.com/accelerator": "AKS writes the vendor only (nvidia)",
    "cloud.google.com/gke-gpu-driver-version": "the driver GKE installs (default / latest / disabled)",
    "cloud.google.com/gke-gpu-sharing-strategy": "GKE time-sharing / MPS: how a card is shared, not which",
    "cloud.google.com/gke-max-shared-clients-per-gpu": "GKE GPU sharing: how a card is shared, not which",
}
"""Keys that select nodes but never a GPU product, each with the reason."""

NEUTRAL_PREFIXES: Mapping[str, str] = {
    "nvidia.com/gpu.deploy.": "GPU Operator component switches (driver, toolkit, device-plugin, dcgm, ...)",
    "nvidia.com/mig.": "MIG settings (mig.config, mig.strategy, mig.capable): a MIG slice is read from the "
                       "product label's -MIG- suffix, and the tier affinity ANDs with these",
    "nvidia.com/cuda.": "driver and CUDA runtime versions (cuda.driver.major, cuda.runtime.major, ...)",
    "nvidia.com/gfd.": "GPU Feature Discovery's own bookkeeping (gfd.timestamp)",
    "feature.node.kubernetes.io/cpu-": "Node Feature Discovery CPU flags",
    "feature.node.kubernetes.io/kernel-": "Node Feature Discovery kernel facts",
    "feature.node.kubernetes.io/system-": "Node Feature Discovery OS facts",
}
"""Key prefixes that never choose a GPU product."""

_VENDOR_PRESENT = re.compile(r"feature\.node\.kubernetes\.io/pci-(?:[0-9a-f]{4}_)?(?:10de|1002)\.present")
"""Node Feature Discovery's "has a PCI device of vendor 10de (NVIDIA) / 1002 (AMD)", alone or with
its device class (``pci-0302_10de.present``): every GPU node of the vendor. A label with a device id
(``pci-10de_2330.present``, NFD configured with ``deviceLabelFields: [vendor, device]``) does name a
product and is not neutral."""

PRODUCT_KEYS: frozenset[str] = frozenset({
    "nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name",
    "eks.amazonaws.com/instance-gpu-name", "karpenter.azure.com/sku-gpu-name", "amd.com/gpu.product-name",
    INSTANCE_TYPE,
})
"""Keys whose values name GPU products (or machines): an ``Exists`` on them only says "a node with a
GPU" (or, for the instance type, "any node"), never which product."""
EVERY_NODE_KEYS: frozenset[str] = frozenset({"kubernetes.io/hostname", INSTANCE_TYPE, "beta.kubernetes.io/instance-type"})
"""Keys every node carries (the kubelet writes them): an ``Exists`` on them selects every node."""

POSITIVE = frozenset({"In", "Exists", "Gt", "Lt"})


def neutral(key: str) -> bool:
    """True for a label that never chooses a GPU product (:data:`NEUTRAL_KEYS`, :data:`NEUTRAL_PREFIXES`,
    NFD's vendor-present labels)."""
    return key in NEUTRAL_KEYS or key.startswith(tuple(NEUTRAL_PREFIXES)) or bool(_VENDOR_PRESENT.fullmatch(key))


def can_pin(requirement: Requirement, product_keys: Collection[str] = PRODUCT_KEYS) -> bool:
    """Whether one requirement of a node selection may choose a GPU product (see the module docstring)."""
    if requirement.field:
        return requirement.key == NODE_NAME_FIELD and requirement.operator == "In"
    if requirement.operator not in POSITIVE or neutral(requirement.key):
        return False
    if requirement.operator == "Exists":
        key = requirement.key
        return not (key in product_keys or key in PRODUCT_KEYS or key in EVERY_NODE_KEYS)
    return True


def selecting(selection: NodeSelection, product_keys: Collection[str] = PRODUCT_KEYS) -> tuple[Requirement, ...]:
    """The requirements of a selection that may choose a GPU product, in spec order (empty: the
    selection says nothing about the GPU, and the usual tier affinity applies)."""
    return tuple(r for r in selection.requirements() if can_pin(r, product_keys))


def selecting_keys(requirements: tuple[Requirement, ...]) -> tuple[str, ...]:
    """The distinct keys of ``requirements``, in order (``metadata.name`` for a matchFields pin)."""
    return tuple(dict.fromkeys(r.key for r in requirements))
