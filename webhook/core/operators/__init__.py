"""Where the AI workload operators keep their pod templates, and how many pods each one makes.

Multi-node GPU work mostly reaches a cluster through operators (Kubeflow training jobs, JobSet,
KubeRay, Volcano), whose pod templates sit at kind-specific places and whose pod counts are
written differently by each. This module reads them; the facts (paths, defaults) are those of
``shared/reference/operators.md``, checked against the upstream types:

- Kubeflow ``kubeflow.org/v1`` PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob:
  ``/spec/<x>ReplicaSpecs/<Type>/template``, ``replicas`` (default 1) pods each;
- Kubeflow ``kubeflow.org/v2beta1`` MPIJob: ``/spec/mpiReplicaSpecs/{Launcher,Worker}/template``;
- ``jobset.x-k8s.io/v1alpha2`` JobSet: ``/spec/replicatedJobs/<i>/template/spec/template``,
  ``replicas`` (default 1) Jobs x ``parallelism`` (default 1) pods;
- ``ray.io/v1`` RayCluster (``/spec``), RayJob (``/spec/rayClusterSpec``), RayService
  (``/spec/rayClusterConfig``): the head group (one pod) and each worker group, the larger of
  ``replicas`` and ``minReplicas`` (both default 0 in the CRD) x ``numOfHosts`` (default 1) pods;
- ``batch.volcano.sh/v1alpha1`` Job: ``/spec/tasks/<i>/template``, ``replicas`` (the Go type is a
  plain ``int32`` with ``omitempty`` and no kubebuilder default; whether Volcano's own admission
  webhook defaults an absent one is not confirmed here, so 1 is assumed, as every public sample
  writes it).

Every template of one of these objects belongs to one job: the engine counts the pods of its GPU
templates as the job's group (a CPU-only launcher or Ray head is not a member). A count that is not
a whole number (a string of digits is read as one, as the API's own defaulting would refuse
anything else) falls back to the kind's default; a negative one counts no pods; counts are capped
at ``MAX_PODS``, so a hostile number cannot make a huge group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_COUNT_RE = re.compile(r"-?[0-9]{1,12}")
"""A count written as a string: ASCII digits only (``isdigit`` also takes other scripts' digits)."""
MAX_PODS = 100_000
"""More pods than any one job runs: counts above are capped here."""

KUBEFLOW_V1_SPECS: Mapping[str, str] = {
    "PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs",
}
RAY_CLUSTER_SPEC: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig"),
}

Found = tuple[tuple[str, ...], Any, str, int]
"""(path from the object root to the pod template, the template, its role name, pods it makes)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def count(value: Any, default: int = 1) -> int:
    """A pod or replica count as the operators write it (see the module docstring)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str) and _COUNT_RE.fullmatch(value.strip()):
        value = int(value.strip())
    if not isinstance(value, int):
        return default
    return max(0, min(value, MAX_PODS))


def _replica_specs(specs: Any, base: tuple[str, ...]) -> Iterator[Found]:
    for role, spec in sorted(_mapping(specs).items()):
        spec = _mapping(spec)
        if isinstance(role, str) and "template" in spec:
            yield (*base, role, "template"), spec["template"], role, count(spec.get("replicas"))


def _kubeflow_v1(obj: Mapping[str, Any], kind: str) -> Iterator[Found]:
    field = KUBEFLOW_V1_SPECS[kind]
    yield from _replica_specs(_mapping(obj.get("spec")).get(field), ("spec", field))


def _mpijob(obj: Mapping[str, Any], _kind: str) -> Iterator[Found]:
    yield from _replica_specs(_mapping(obj.get("spec")).get("mpiReplicaSpecs"), ("spec", "mpiReplicaSpecs"))


def _jobset(obj: Mapping[str, Any], _kind: str) -> Iterator[Found]:
    jobs = _mapping(obj.get("spec")).get("replicatedJobs")
    for i, job in enumerate(jobs if isinstance(jobs, list) else []):
        job = _mapping(job)
        job_spec = _mapping(_mapping(job.get("template")).get("spec"))
        if "template" not in job_spec:
            continue
        name = job.get("name") if isinstance(job.get("name"), str) else f"replicatedJobs[{i}]"
        pods = count(job.get("replicas")) * count(job_spec.get("parallelism"))
        yield ("spec", "replicatedJobs", str(i), "template", "spec", "template"), job_spec["template"], name, \
            min(pods, MAX_PODS)


def _ray(obj: Mapping[str, Any], kind: str) -> Iterator[Found]:
    base = RAY_CLUSTER_SPEC[kind]
    cluster: Any = obj
    for key in base:
        cluster = _mapping(cluster).get(key)
    cluster = _mapping(cluster)
    head = _mapping(cluster.get("headGroupSpec"))
    if "template" in head:
        yield (*base, "headGroupSpec", "template"), head["template"], "head", 1
    groups = cluster.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        group = _mapping(group)
        if "template" not in group:
            continue
        # the CRD defaults replicas and minReplicas to 0; the operator keeps replicas at least minReplicas
        # (ray-operator/apis/ray/v1/raycluster_types.go, WorkerGroupSpec)
        replicas = max(count(group.get("replicas"), 0), count(group.get("minReplicas"), 0))
        name = group.get("groupName") if isinstance(group.get("groupName"), str) else f"workerGroupSpecs[{i}]"
        yield (*base, "workerGroupSpecs", str(i), "template"), group["template"], name, \
            min(replicas * count(group.get("numOfHosts")), MAX_PODS)


def _volcano(obj: Mapping[str, Any], _kind: str) -> Iterator[Found]:
    tasks = _mapping(obj.get("spec")).get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        task = _mapping(task)
        if "template" not in task:
            continue
        name = task.get("name") if isinstance(task.get("name"), str) else f"tasks[{i}]"
        yield ("spec", "tasks", str(i), "template"), task["template"], name, count(task.get("replicas"))


READERS: Mapping[tuple[str, str], Callable[[Mapping[str, Any], str], Iterator[Found]]] = {
    **{("kubeflow.org/v1", kind): _kubeflow_v1 for kind in KUBEFLOW_V1_SPECS},
    ("kubeflow.org/v2beta1", "MPIJob"): _mpijob,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): _jobset,
    **{("ray.io/v1", kind): _ray for kind in RAY_CLUSTER_SPEC},
    ("batch.volcano.sh/v1alpha1", "Job"): _volcano,
}
"""(apiVersion, kind) -> reader. Keyed by apiVersion too: a Volcano ``Job`` is not a ``batch/v1`` Job."""

KINDS: frozenset[str] = frozenset(kind for _, kind in READERS)


def templates(obj: Mapping[str, Any]) -> list[Found]:
    """The pod templates of an operator object, or ``[]`` when it is none of :data:`READERS`."""
    reader = READERS.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    return list(reader(obj, str(obj.get("kind")))) if reader is not None else []
