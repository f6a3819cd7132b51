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

from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, count, mapping, name_of, product

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


KUBEFLOW_JOB = PodGroup("training.kubeflow.org/job-name", "Kubeflow job", "kubeflow")
"""kubeflow/training-operator pkg/apis/kubeflow.org/v1/common_types.go ``JobNameLabel``; the MPI
operator v2 labels its pods with the same key."""
JOBSET = PodGroup("jobset.sigs.k8s.io/jobset-name", "JobSet", "jobset")
"""kubernetes-sigs/jobset pkg/controllers/jobset_controller.go ``labelAndAnnotateObject``."""
JOBSET_PER_COPY = frozenset({"jobset.sigs.k8s.io/job-index", "jobset.sigs.k8s.io/job-global-index",
                             "jobset.sigs.k8s.io/restart-attempt"})
"""Set by the same function as labels and annotations, different on the pods of each child Job."""
VOLCANO_JOB = PodGroup("volcano.sh/job-name", "Volcano job", "volcano")
"""volcano-sh/volcano pkg/controllers/job/job_controller_util.go ``createJobPod`` (the key in
volcano-sh/apis pkg/apis/batch/v1alpha1/labels.go)."""

KINDS: tuple[OperatorKind, ...] = (
    *(OperatorKind("kubeflow.org/v1", kind, kind.lower() + "s", _kubeflow_v1, group=KUBEFLOW_JOB,
                   source="kubeflow/training-operator pkg/apis/kubeflow.org/v1 (the <kind>_types.go of each kind)")
      for kind in KUBEFLOW_V1_SPECS),
    OperatorKind("kubeflow.org/v2beta1", "MPIJob", "mpijobs", _mpijob, group=KUBEFLOW_JOB,
                 leaders=frozenset({"Launcher"}),
                 source="kubeflow/mpi-operator pkg/apis/kubeflow/v2beta1/types.go (MPIReplicaTypeLauncher, "
                        "MPIReplicaTypeWorker)"),
    OperatorKind("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", _jobset, group=JOBSET,
                 per_copy_labels=JOBSET_PER_COPY, per_copy_annotations=JOBSET_PER_COPY,
                 source="kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go"),
    OperatorKind("batch.volcano.sh/v1alpha1", "Job", "jobs", _volcano, group=VOLCANO_JOB,
                 source="volcano-sh/apis pkg/apis/batch/v1alpha1/job.go"),
)
