"""Which multi-pod group a pod belongs to, and how big the group is.

Tensor/pipeline-parallel groups span pods (LeaderWorkerSet groups, or pods a user ties together with
``gpu-admission.io/group``). Each member is admitted on its own, so only a label every member
carries can keep them on one GPU product: the policy turns it into a required podAffinity whose
topology key is the product label.
"""

from __future__ import annotations

from typing import Mapping

GROUP_LABEL = "gpu-admission.io/group"
GROUP_SIZE = "gpu-admission.io/group-size"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"

GROUP_LABELS = (GROUP_LABEL, LWS_GROUP_KEY)
"""Labels naming a group, in order of preference (an explicit user label wins)."""


def group_label(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(label key, value) naming the pod's group, or None for a pod that belongs to no group."""
    for key in GROUP_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return key, value
    return None


def declared_size(labels: Mapping[str, str], annotations: Mapping[str, str]) -> int | None:
    """Group size the pod declares (LeaderWorkerSet sets ``leaderworkerset.sigs.k8s.io/size`` on its
    pods; users may set ``gpu-admission.io/group-size``)."""
    for source in (annotations, labels):
        for key in (GROUP_SIZE, LWS_SIZE):
            value = source.get(key, "").strip()
            if value.isdigit() and 0 < int(value) <= 10_000:
                return int(value)
    return None
