"""KubeRay: ``ray.io/v1`` RayCluster (``/spec``), RayJob (``/spec/rayClusterSpec``) and RayService
(``/spec/rayClusterConfig``).

The head group is one pod; each worker group makes the larger of ``replicas`` and ``minReplicas``
(both default 0 in the CRD; the operator keeps replicas at least minReplicas:
ray-operator/apis/ray/v1/raycluster_types.go, WorkerGroupSpec) x ``numOfHosts`` (default 1) pods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators import Found, Reader, count, dig, mapping, name_of, product

RAY_CLUSTER_SPEC: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig"),
}


def _ray(obj: Mapping[str, Any], kind: str) -> Iterator[Found]:
    base = RAY_CLUSTER_SPEC[kind]
    cluster = mapping(dig(obj, *base))
    head = mapping(cluster.get("headGroupSpec"))
    if "template" in head:
        yield Found((*base, "headGroupSpec", "template"), head["template"], "head", 1)
    groups = cluster.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        group = mapping(group)
        if "template" not in group:
            continue
        replicas = max(count(group.get("replicas"), 0), count(group.get("minReplicas"), 0))
        yield Found((*base, "workerGroupSpecs", str(i), "template"), group["template"],
                    name_of(group.get("groupName"), f"workerGroupSpecs[{i}]"),
                    product(replicas, count(group.get("numOfHosts"))))


READERS: Mapping[tuple[str, str], Reader] = {("ray.io/v1", kind): _ray for kind in RAY_CLUSTER_SPEC}
