"""Training job operators whose templates sit in the object: Kubeflow v1 job kinds, MPIJob, JobSet,
Volcano Job.

- Kubeflow ``kubeflow.org/v1`` PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob:
  ``/spec/<x>ReplicaSpecs/<Type>/template``, ``replicas`` (default 1) pods each;
- Kubeflow ``kubeflow.org/v2beta1`` MPIJob: ``/spec/mpiReplicaSpecs/{Launcher,Worker}/template``;
- ``jobset.x-k8s.io/v1alpha2`` JobSet: ``/spec/replicatedJobs/<i>/template/spec/template``,
  ``replicas`` (default 1) Jobs x ``parallelism`` (default 1) pods;
- ``batch.volcano.sh/v1alpha1`` Job: ``/spec/tasks/<i>/template``, ``replicas`` (the Go type is a
  plain ``int32`` with ``omitempty`` and no kubebuilder default; whether Volcano's own admission
  webhook defaults an absent one is not confirmed here, so 1 is assumed, as every public sample
  writes it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, Reader, count, mapping, name_of, product

KUBEFLOW_V1_SPECS: Mapping[str, str] = {
    "PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs",
}


def _replica_specs(specs: Any, base: tuple[str, ...]) -> Iterator[Found]:
    for role, spec in sorted(mapping(specs).items()):
        spec = mapping(spec)
        if isinstance(role, str) and "template" in spec:
            yield Found((*base, role, "template"), spec["template"], role, count(spec.get("replicas")))


def _kubeflow_v1(obj: Mapping[str, Any], kind: str, _context: Context) -> Iterator[Found]:
    field = KUBEFLOW_V1_SPECS[kind]
    yield from _replica_specs(mapping(obj.get("spec")).get(field), ("spec", field))


def _mpijob(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    yield from _replica_specs(mapping(obj.get("spec")).get("mpiReplicaSpecs"), ("spec", "mpiReplicaSpecs"))


def replicated_jobs(jobs: Any, base: tuple[str, ...]) -> Iterator[tuple[int, Mapping[str, Any], Found]]:
    """The replicatedJobs of a JobSet spec (also a TrainingRuntime's ``spec.template.spec``):
    (index, the replicatedJob, its pod template found)."""
    for i, job in enumerate(jobs if isinstance(jobs, list) else []):
        job = mapping(job)
        job_spec = mapping(mapping(job.get("template")).get("spec"))
        if "template" not in job_spec:
            continue
        pods = product(count(job.get("replicas")), count(job_spec.get("parallelism")))
        yield i, job, Found((*base, str(i), "template", "spec", "template"), job_spec["template"],
                            name_of(job.get("name"), f"replicatedJobs[{i}]"), pods)


def _jobset(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    for _, _, found in replicated_jobs(mapping(obj.get("spec")).get("replicatedJobs"), ("spec", "replicatedJobs")):
        yield found


def _volcano(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    tasks = mapping(obj.get("spec")).get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        task = mapping(task)
        if "template" in task:
            yield Found(("spec", "tasks", str(i), "template"), task["template"],
                        name_of(task.get("name"), f"tasks[{i}]"), count(task.get("replicas")))


READERS: Mapping[tuple[str, str], Reader] = {
    **{("kubeflow.org/v1", kind): _kubeflow_v1 for kind in KUBEFLOW_V1_SPECS},
    ("kubeflow.org/v2beta1", "MPIJob"): _mpijob,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): _jobset,
    ("batch.volcano.sh/v1alpha1", "Job"): _volcano,
}
