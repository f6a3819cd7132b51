"""Which multi-pod group a pod belongs to, and how big the group is.

Tensor/pipeline-parallel groups span pods (LeaderWorkerSet groups, or pods a user ties together with
``gpu-admission.io/group``). Each member is admitted on its own, so only a label every member
carries can keep them on one GPU product: the policy turns it into a required podAffinity whose
topology key is the product label.
"""

from __future__ import annotations

import re
from typing import Mapping

from webhook.core import operators
from webhook.core.counts import parse_count
from webhook.core.operators import Membership
from webhook.core.operators.lws import GROUP_KEY as LWS_GROUP_KEY, SIZE as LWS_SIZE

GROUP_LABEL = "gpu-admission.io/group"
GROUP_SIZE = "gpu-admission.io/group-size"
MAX_GROUP_SIZE = 10_000
"""The largest declared group size read as one; a bigger (or unreadable) one declares nothing."""

GROUP_LABELS = ("gpu-admission.io/gpu-group", GROUP_LABEL, LWS_GROUP_KEY)
"""Labels naming a group, in order of preference: the webhook's own (:data:`GPU_GROUP`, on GPU
members only), then an explicit user label."""


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
            size = parse_count(source.get(key), cap=MAX_GROUP_SIZE, padded=True)
            if size:
                return size
    return None


GPU_GROUP = "gpu-admission.io/gpu-group"
"""The label the mutating webhook puts on the GPU members of a group, and the one their required
podAffinity selects. A label of our own, because the controllers' labels are also on their CPU pods
(an MPI launcher, a Ray head): a podAffinity selecting those would tie every GPU worker to the node
of a pod that lands where no product label exists, and none of them could ever schedule."""


def membership(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Membership | None:
    """The group a pod belongs to, from the labels its controller (or user) puts on it; ``None`` for
    a pod of no group: the user's own :data:`GROUP_LABEL` first, then each operator's group label
    (:attr:`webhook.core.operators.Registry.groups`: a LeaderWorkerSet group, a Kubeflow job, a
    JobSet, ...), then an Indexed Job, the one built-in controller whose pods are a group (only when a
    launch spans pods)."""
    explicit = labels.get(GROUP_LABEL)
    if explicit:
        return Membership("group", explicit, f"group/{explicit}")
    found = operators.REGISTRY.membership(labels, annotations)
    if found is not None:
        return found
    job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
    if job and "batch.kubernetes.io/job-completion-index" in annotations:
        return Membership("Indexed Job", job, f"job/{job}", always=False)
    return None


_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def group_value(member: Membership, pinned: frozenset[str] | None) -> str:
    """The :data:`GPU_GROUP` label value of a group: readable (the group's name, cut) and unique (a
    hash of the identity). Members whose user pinned them to different products (a pin is never
    contradicted) get different values, so each pinned set is kept homogeneous on its own."""
    import hashlib  # here, not at the top: loading OpenSSL is ~3 ms of every `check` start, and most runs have no group

    digest_of = member.identity + ("" if pinned is None else "|" + ",".join(sorted(pinned)))
    digest = hashlib.sha256(digest_of.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    readable = _LABEL_VALUE_BAD.sub("-", member.name)[:48].strip("-_.")
    return f"{readable}-{digest}" if readable else digest
