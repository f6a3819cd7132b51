"""Which multi-pod group a pod belongs to, and how big the group is.

Tensor/pipeline-parallel groups span pods (LeaderWorkerSet groups, or pods a user ties together with
``gpu-admission.io/group``). Each member is admitted on its own, so only a label every member
carries can keep them on one GPU product: the policy turns it into a required podAffinity whose
topology key is the product label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from webhook.core.counts import parse_count

GROUP_LABEL = "gpu-admission.io/group"
GROUP_SIZE = "gpu-admission.io/group-size"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
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


@dataclass(frozen=True)
class Membership:
    """The multi-pod group a pod belongs to, as its controller (or its user) names it."""

    source: str
    """Who made the group, for messages (``Kubeflow job``, ``JobSet``, ``Ray cluster``, ...)."""
    name: str
    """The group's name as the controller labels it (job name, cluster name, group key)."""
    identity: str
    """What every member has in common and no other group has (namespace aside: pod affinity only
    selects pods of the pod's own namespace)."""
    always: bool = True
    """True for controllers whose pods are one job (a gang); False for controllers whose pods are
    one group only when the launch spans pods (KServe replicas, an Indexed Job)."""


_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
_LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
_POD_INDEX = "apps.kubernetes.io/pod-index"
_LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"

_CONTROLLERS: tuple[tuple[str, str, str], ...] = (
    # (pod label naming the group, source for messages, identity prefix). Where each key is set:
    # kubeflow/training-operator pkg/apis/kubeflow.org/v1/common_types.go (JobNameLabel; the MPI
    # operator v2 uses the same key); kubernetes-sigs/jobset pkg/controllers/jobset_controller.go
    # labelAndAnnotateObject; ray-project/kuberay ray-operator/controllers/ray/common/pod.go labelPod
    # (keys in utils/constant.go); volcano-sh/volcano pkg/controllers/job/job_controller_util.go
    # createJobPod (keys in volcano-sh/apis pkg/apis/batch/v1alpha1/labels.go).
    ("training.kubeflow.org/job-name", "Kubeflow job", "kubeflow"),
    ("jobset.sigs.k8s.io/jobset-name", "JobSet", "jobset"),
    ("ray.io/cluster", "Ray cluster", "ray"),
    ("volcano.sh/job-name", "Volcano job", "volcano"),
    # Kaito: the StatefulSet of a multi-node Workspace (pkg/workspace/manifests/manifests.go; the label
    # key in api/v1beta1/labels.go). NIM multi-node, KServe LLMInferenceService and llm-d run on
    # LeaderWorkerSets, whose pods are read above.
    ("kaito.sh/workspace", "Kaito workspace", "kaito"),
)


def membership(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Membership | None:
    """The group a pod belongs to, from the labels its controller (or user) puts on it; ``None`` for
    a pod of no group.

    LeaderWorkerSet: a leader pod gets ``group-key`` and ``group-index`` from LWS's own mutating
    webhook, which may run after ours, so the group is (LWS name, group index) with the leader's
    index read from the StatefulSet's ``apps.kubernetes.io/pod-index`` when ``group-index`` is not
    there yet (the leader StatefulSet has one pod per group, in group order); the group-key is the
    last resort. A TrainJob's pods carry the JobSet labels of the JobSet named after it."""
    explicit = labels.get(GROUP_LABEL)
    if explicit:
        return Membership("group", explicit, f"group/{explicit}")
    lws = labels.get(_LWS_NAME)
    if lws:
        index = labels.get(_LWS_GROUP_INDEX) or (labels.get(_POD_INDEX) if labels.get(_LWS_WORKER_INDEX, "0") == "0"
                                                 else None)
        if index:
            return Membership("LeaderWorkerSet group", f"{lws}-{index}", f"lws/{lws}/{index}")
        key = labels.get(LWS_GROUP_KEY)
        if key:
            return Membership("LeaderWorkerSet group", key, f"lws-key/{key}")
    for label, source, prefix in _CONTROLLERS:
        value = labels.get(label)
        if value:
            return Membership(source, value, f"{prefix}/{value}")
    isvc = labels.get("serving.kserve.io/inferenceservice")
    if isvc:
        return Membership("KServe InferenceService", isvc, f"kserve/{isvc}", always=False)
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
