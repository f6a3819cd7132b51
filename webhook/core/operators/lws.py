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

from webhook.core.operators.base import Context, Found, Reader, count, dig, mapping

API_VERSION = "leaderworkerset.x-k8s.io/v1"


def _leader_worker_set(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    lwt = mapping(dig(obj, "spec", "leaderWorkerTemplate"))
    size = count(lwt.get("size")) or 1
    replicas = count(dig(obj, "spec", "replicas"))
    for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
        if key in lwt:
            yield Found(("spec", "leaderWorkerTemplate", key), lwt[key], role, replicas, group=size)


READERS: Mapping[tuple[str, str], Reader] = {(API_VERSION, "LeaderWorkerSet"): _leader_worker_set}
