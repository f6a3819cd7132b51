"""LeaderWorkerSet (kubernetes-sigs/lws): a leader and a worker template, one group of ``size`` pods
per replica.

Facts from the upstream API types (kubernetes-sigs/lws ``api/leaderworkerset/v1/leaderworkerset_types.go``
at 024af08, ``LeaderWorkerSetSpec`` and ``LeaderWorkerTemplate``; the repository has no other version):
``spec.replicas`` groups, each of ``spec.leaderWorkerTemplate.size`` pods (default 1: the leader
only), one leader pod from ``leaderTemplate`` and ``size - 1`` workers from ``workerTemplate``; when
``leaderTemplate`` is not set the leader is made from ``workerTemplate``, so that one template is
judged alone. The CRD serves ``v1`` only. Each group is its own unit (``Found.group`` = size): the
pods of different replicas are not one job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, Labels, Membership, OperatorKind, PodGroup, count, dig, mapping

API_VERSION = "leaderworkerset.x-k8s.io/v1"
NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE = "leaderworkerset.sigs.k8s.io/size"
"""Pod labels and annotation keys of ``api/leaderworkerset/v1/leaderworkerset_types.go`` (same commit)."""
POD_INDEX = "apps.kubernetes.io/pod-index"
"""The StatefulSet controller's pod index label (Kubernetes 1.28+): the leader StatefulSet has one pod per group."""


def _leader_worker_set(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    lwt = mapping(dig(obj, "spec", "leaderWorkerTemplate"))
    size = count(lwt.get("size")) or 1
    replicas = count(dig(obj, "spec", "replicas"))
    for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
        if key in lwt:
            yield Found(("spec", "leaderWorkerTemplate", key), lwt[key], role, replicas, group=size)


def member(labels: Labels, annotations: Labels) -> Membership | None:
    """A LeaderWorkerSet group: a leader pod gets ``group-key`` and ``group-index`` from LWS's own
    mutating webhook, which may run after ours, so the group is (LWS name, group index) with the
    leader's index read from the StatefulSet's ``apps.kubernetes.io/pod-index`` when ``group-index``
    is not there yet (the leader StatefulSet has one pod per group, in group order); the group-key
    is the last resort."""
    name = labels.get(NAME)
    if not name:
        return None
    index = labels.get(GROUP_INDEX) or (labels.get(POD_INDEX) if labels.get(WORKER_INDEX, "0") == "0" else None)
    if index:
        return Membership("LeaderWorkerSet group", f"{name}-{index}", f"lws/{name}/{index}")
    key = labels.get(GROUP_KEY)
    if key:
        return Membership("LeaderWorkerSet group", key, f"lws-key/{key}")
    return None


GROUP = PodGroup(NAME, "LeaderWorkerSet group", "lws", read=member)

KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(API_VERSION, "LeaderWorkerSet", "leaderworkersets", _leader_worker_set, group=GROUP,
                 leaders=frozenset({"leader"}), entry="leaderworkersets",
                 source="kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go at 024af08"),
)
