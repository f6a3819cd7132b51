"""The scheduler's homogeneity score (the seed design's third part): which nodes a GPU pod may use,
and which it should prefer, for workloads that carry no product selector at all.

The admission webhook pins what it can recognise. A pod it does not pin (a namespace that opts out,
an unknown launcher, a policy with ``mutate: false``) still requests ``nvidia.com/gpu``, and the
default scheduler sees every GPU as the same. Run as a kube-scheduler extender (:mod:`webhook.server.extender`),
these rules close that gap:

* **Filter.** A pod that needs more than one GPU, or is a member of a multi-pod group
  (:func:`webhook.core.groups.group_label`), never lands on a node that is not trusted to hold one GPU
  model: a mixed or mislabeled node (``nvidia.com/gpu.count`` below the GPU capacity, labels that
  disagree, shared or MIG-partitioned GPUs) or a node with GPUs but no product label. The node facts
  come from :func:`webhook.core.inventory.node_gpus`, the same reading the admission policy uses, so the
  webhook and the scheduler can never disagree about which node is mixed. Single-GPU pods are not
  filtered: one GPU is always one model.
* **Score (0-10)**, after the seed's ``EvaluateHeterogeneousRisk`` (one card type: 100, mixed: 0),
  scaled to the extender's 0-10 range. Single-GPU pods get a neutral 5 everywhere. For the others a
  mixed, mislabeled or unlabelled node scores 0; a homogeneous node scores 6-10, the rest of the
  range breaking ties between product pools: a pool (candidate nodes of one product) with enough
  allocatable GPUs for the whole model instance (GPUs per pod x group size) scores
  ``7 + round(3 * pool GPUs / largest such pool)``, so the largest pool scores 10; a pool too small
  for the instance scores 6. The extender never sees what is already running, so "enough" counts
  allocatable GPUs, not free ones (the scheduler's own fit check still counts what is in use).

What the extender cannot do: keep the members of a group on the product their first member chose.
It gets the pod and the candidate nodes, never the other pods. That is the job of the required
podAffinity (topology key = the product label) the webhook writes for group members: the scheduler's
InterPodAffinity filter drops the other products' nodes before the extender is called. What is left
for the extender is the part no affinity expresses: never put a group member on a node that mixes
products, and prefer the product pool that can hold the whole group.

Pure: plain dicts in, plain values out.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.core.groups import declared_size, group_label
from webhook.core.inventory import NodeGpus, node_gpus
from webhook.core.resources import pod_gpus
from webhook.core.settings import Settings

NEUTRAL = 5
"""Score of every node for a pod homogeneity does not concern (one GPU, no group)."""
MIN_SCORE, MAX_SCORE = 0, 10
"""kube-scheduler's extender score range (MinExtenderPriority, MaxExtenderPriority)."""
SHORT_POOL = 6
"""A homogeneous node whose product pool is too small for the whole model instance."""


def heterogeneous_risk(card_types: Sequence[str]) -> int:
    """The seed's ``EvaluateHeterogeneousRisk``: 100 when every card is the same type, 0 otherwise."""
    return 100 if len(set(card_types)) <= 1 else 0


@dataclass(frozen=True)
class PodNeed:
    """What homogeneity asks of the pod being scheduled."""

    gpus: int
    group: tuple[str, str] | None
    """(label key, value) of the pod's multi-pod group, if any."""
    group_size: int
    """Pods of the model instance (1 without a group, or when the group does not say)."""

    @property
    def strict(self) -> bool:
        """More than one GPU, or part of a group: must stay on one product."""
        return self.gpus > 1 or self.group is not None

    @property
    def instance_gpus(self) -> int:
        """GPUs the whole model instance needs on one product."""
        return max(self.gpus, 1) * self.group_size


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in _mapping(value).items() if isinstance(k, str) and isinstance(v, str)}


def pod_need(pod: Mapping[str, Any], settings: Settings) -> PodNeed:
    """GPUs counted as Kubernetes does (:func:`webhook.core.resources.pod_gpus`) and the pod's group."""
    meta = _mapping(pod.get("metadata"))
    labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
    gpus = pod_gpus(_mapping(pod.get("spec")), "/spec", settings.gpu_resources).gpus
    group = group_label(labels)
    size = (declared_size(labels, annotations) or 1) if group is not None else 1
    return PodNeed(gpus, group, size)


def node_name(node: Mapping[str, Any]) -> str | None:
    name = _mapping(node.get("metadata")).get("name")
    return name if isinstance(name, str) and name else None


def facts(node: Mapping[str, Any], settings: Settings) -> NodeGpus | None:
    """The node's GPU facts under the policy's label key and scheme (None: no GPUs, no label)."""
    return node_gpus(node, label_key=settings.label_key, scheme=settings.label_scheme,
                     catalog=settings.catalog, gpu_resources=settings.gpu_resources)


def refusal(need: PodNeed, gpus: NodeGpus | None, label_key: str) -> str | None:
    """Why a node must not take the pod, or None when it may."""
    if not need.strict:
        return None
    who = f"a {need.gpus}-GPU pod" if need.group is None else f"a member of group {need.group[1]}"
    if gpus is None:
        return f"gpu-admission: node has no GPUs and no {label_key} label, {who} needs one GPU product"
    if not gpus.trusted:
        reasons = "; ".join(gpus.anomalies) or f"no {label_key} label"
        return f"gpu-admission: {who} must stay on one GPU product, this node may mix them: {reasons}"
    return None


def _pool(gpus: NodeGpus) -> str:
    """Nodes of one product form a pool, whatever spelling of the label they carry."""
    return gpus.product or gpus.value or ""


def card_types(gpus: NodeGpus | None) -> list[str]:
    """The GPU models a node may hand out: one for a trusted node; at least two (the labelled one and
    an unknown other) for a mixed, mislabeled or unlabelled one."""
    if gpus is not None and gpus.trusted:
        return [_pool(gpus)] * max(gpus.allocatable, 1)
    return [gpus.value if gpus is not None and gpus.value else "unlabelled", "another model"]


def scores(need: PodNeed, nodes: Sequence[tuple[str, NodeGpus | None]]) -> list[tuple[str, int]]:
    """(node name, 0-10) for each candidate node, in the order given."""
    if not need.strict:
        return [(name, NEUTRAL) for name, _ in nodes]
    pools: dict[str, int] = {}
    for _, gpus in nodes:
        if gpus is not None and gpus.trusted:
            pools[_pool(gpus)] = pools.get(_pool(gpus), 0) + gpus.allocatable
    largest = max((total for total in pools.values() if total >= need.instance_gpus), default=0)
    out = []
    for name, gpus in nodes:
        base = heterogeneous_risk(card_types(gpus)) * MAX_SCORE // 100  # 10 homogeneous, 0 mixed
        if base == MIN_SCORE or gpus is None:
            out.append((name, MIN_SCORE))
            continue
        total = pools[_pool(gpus)]
        roomy = largest > 0 and total >= need.instance_gpus
        out.append((name, min(base, 7 + round(3 * total / largest)) if roomy else SHORT_POOL))
    return out
