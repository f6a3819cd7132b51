"""AIBrix orchestration (``orchestration.aibrix.ai/v1alpha1``): RayClusterFleet, StormService and
PodSet.

Facts read in vllm-project/aibrix (the file index used gives no line numbers, so types and functions
are named instead):

RayClusterFleet (api/orchestration/v1alpha1/rayclusterfleet_types.go@3ffbcdee, raycluster_type.go):
a Deployment-shaped fleet of KubeRay RayClusters. ``spec.replicas`` (kubebuilder default 1) clusters,
each made from ``spec.template``, a ``RayClusterTemplateSpec`` whose ``spec`` is KubeRay's own
``RayClusterSpec``. The cluster spec is read by the KubeRay reader (:mod:`.ray`); each replica is an
independent RayCluster, so the group is the GPU pods of ONE cluster, never the fleet. KubeRay labels
every pod of a cluster with ``ray.io/cluster`` = the cluster's name (generated per replica), which
separates the fleet's clusters.

StormService (api/orchestration/v1alpha1/stormservice_types.go@0066fbd7, roleset_types.go@0a53a25f):
``spec.replicas`` (default 1) RoleSets made from ``spec.template.spec``, a RoleSetSpec whose
``roles[]`` each hold ``replicas``, ``podGroupSize``, ``stateful`` and a pod ``template``. In Pooled
mode (``spec.mode``, else inferred from replicas <= 1: ``ResolvedMode``) there is one RoleSet and each
role scales through its own ``replicas``; either way the RoleSets are ``spec.replicas``.

- A role's replicas: pkg/controller/roleset ``getRoleReplicas``: unset or below 1 is 0.
- ``podGroupSize`` > 1 (pkg/controller/roleset ``GetRoleSyncerWithRecorder``): each
  replica of the role is a PodSet of ``podGroupSize`` pods from the role's template
  (podset_rollsyncer.go@2cd834cf ``createPodSetForRole``), one multi-node instance; otherwise each
  replica is one pod of its own (StatelessRoleSyncer / StatefulRoleSyncer after ``stateful``).
- Labels (pkg/controller/constants/stormservice.go@0ef41651): the PodSet controller puts
  ``stormservice.orchestration.aibrix.ai/podset-name`` = the PodSet's name and
  ``stormservice.orchestration.aibrix.ai/pod-group-index`` = the pod's index on every pod it creates
  (pkg/controller/podset/podset_controller.go@009aa45c ``createPodFromTemplate``) and copies the
  PodSet's labels (``roleset-name``, ``role-name``, ``storm-service-name``, ``role-template-hash``,
  ``stormservice.orchestration.aibrix.ai/role-replica-index``). The PodSet name is the group; the
  pod-group index, replica index and RoleSet name differ per copy of one template.

PodSet (api/orchestration/v1alpha1/podset_types.go@0e642dcf): "one atomic group of pods",
``spec.podGroupSize`` (minimum 2) pods from ``spec.template``; the RoleSet controller makes them, a
user may too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators import ray
from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, Reader, count, dig, mapping, name_of, product

API_VERSION = "orchestration.aibrix.ai/v1alpha1"
PODSET_NAME = "stormservice.orchestration.aibrix.ai/podset-name"
POD_GROUP_INDEX = "stormservice.orchestration.aibrix.ai/pod-group-index"
ROLE_REPLICA_INDEX = "stormservice.orchestration.aibrix.ai/role-replica-index"
ROLESET_INDEX = "stormservice.orchestration.aibrix.ai/roleset-index"
ROLESET_NAME = "roleset-name"
"""Label and annotation keys of pkg/controller/constants/stormservice.go (module docstring)."""

FLEET_CLUSTER: tuple[str, ...] = ("spec", "template", "spec")
"""Where a RayClusterFleet keeps its RayClusterSpec."""


def _ray_cluster_reader() -> Reader:
    """KubeRay's RayCluster reader, taken from its descriptor so the fleet reads a cluster exactly as
    a RayCluster is read (head, worker groups, ``replicas``/``minReplicas`` x ``numOfHosts``)."""
    return next(k.reader for k in ray.KINDS if k.api_version == "ray.io/v1" and k.kind == "RayCluster")


def _fleet(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    """One RayCluster of the fleet, at the fleet's own pointers; the fleet's replicas are independent
    clusters, so the counts (and the group) are one cluster's."""
    clusters = count(dig(obj, "spec", "replicas"))
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": mapping(obj.get("metadata")),
               "spec": dig(obj, *FLEET_CLUSTER)}
    for found in _ray_cluster_reader()(cluster, "RayCluster", context):
        yield Found((*FLEET_CLUSTER, *found.path[1:]), found.holder, found.role,
                    found.pods if clusters > 0 else 0, inline=found.inline, synthesized=found.synthesized,
                    group=found.group, notes=found.notes)


def _group_size(role: Mapping[str, Any]) -> int:
    """Pods per instance of a role: ``podGroupSize`` when above 1 (a PodSet), else 1."""
    size = count(role.get("podGroupSize"), 1)
    return size if size > 1 else 1


def _storm_service(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    """Each role of the RoleSet template: RoleSets x role replicas x podGroupSize pods, in groups of
    podGroupSize (independent pods when it is 1)."""
    role_sets = count(dig(obj, "spec", "replicas"))
    base = ("spec", "template", "spec", "roles")
    roles = dig(obj, *base)
    for i, role in enumerate(roles if isinstance(roles, list) else []):
        role = mapping(role)
        if "template" not in role:
            continue
        size = _group_size(role)
        yield Found((*base, str(i), "template"), role["template"], name_of(role.get("name"), f"roles[{i}]"),
                    product(role_sets, count(role.get("replicas"), 0), size), group=size)


def _pod_set(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    if "template" in spec:
        size = max(count(spec.get("podGroupSize"), 1), 1)
        role = name_of(mapping(dig(obj, "metadata", "labels")).get("role-name"), "podset")
        yield Found(("spec", "template"), spec["template"], role, size, group=size)


PODSET = PodGroup(PODSET_NAME, "AIBrix PodSet", "aibrix-podset")
"""The pods of one PodSet (a multi-node role instance of a StormService, or a PodSet of your own)."""
PER_COPY_LABELS = frozenset({POD_GROUP_INDEX, ROLE_REPLICA_INDEX, ROLESET_NAME})
PER_COPY_ANNOTATIONS = frozenset({ROLE_REPLICA_INDEX, ROLESET_INDEX})
_SOURCE = "vllm-project/aibrix api/orchestration/v1alpha1/"

KINDS: tuple[OperatorKind, ...] = (
    # a fleet's pods are KubeRay's, labelled with their own cluster's name
    # the head's `vllm serve` (vLLM over Ray, AIBrix's fleet samples) names what the Ray workers run
    OperatorKind(API_VERSION, "RayClusterFleet", "rayclusterfleets", _fleet, group=ray.RAY_CLUSTER,
                 leaders=frozenset({"head"}), source=_SOURCE + "rayclusterfleet_types.go@3ffbcdee"),
    OperatorKind(API_VERSION, "StormService", "stormservices", _storm_service, group=PODSET,
                 per_copy_labels=PER_COPY_LABELS, per_copy_annotations=PER_COPY_ANNOTATIONS,
                 source=_SOURCE + "stormservice_types.go@0066fbd7, roleset_types.go@0a53a25f"),
    OperatorKind(API_VERSION, "PodSet", "podsets", _pod_set, group=PODSET, per_copy_labels=PER_COPY_LABELS,
                 per_copy_annotations=PER_COPY_ANNOTATIONS, source=_SOURCE + "podset_types.go@0e642dcf"),
)
