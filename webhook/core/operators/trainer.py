"""Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1``): TrainJob and the ClusterTrainingRuntime /
TrainingRuntime whose pod templates it runs.

A TrainJob holds no pod template. Its pods are the runtime's
``/spec/template/spec/replicatedJobs/<i>/template/spec/template`` with the TrainJob's ``spec.trainer``
written over them, so the reader needs the runtime: it is looked up in ``context`` (the other objects
of the same input, see :func:`find_runtime`). Facts read in kubeflow/trainer at trainjob_types.go@0015772c,
pkg/runtime/core/trainingruntime.go@067e5c66, pkg/runtime/framework/plugins/jobset/builder.go@08595084 and
plugins/mpi/mpi.go (master, Nov 2026); functions are named instead of lines (the file index used gives
none):

- ``spec.runtimeRef``: ``name``; ``kind`` defaults to ClusterTrainingRuntime, ``apiGroup`` to
  trainer.kubeflow.org (pkg/apis/trainer/v1alpha1/trainjob_types.go, ``RuntimeRef``). A TrainingRuntime
  is read from the TrainJob's own namespace, a ClusterTrainingRuntime by name only
  (pkg/runtime/core/trainingruntime.go ``NewObjects``; clustertrainingruntime.go).
- Pods per replicatedJob (trainingruntime.go ``newRuntimeInfo``): ``template.spec.parallelism``
  (default 1); the Job labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` on its *Job
  template metadata* counts ``mlPolicy.numNodes`` (default 1); the torch / plain-ML plugins replace that
  with ``spec.trainer.numNodes``; the MPI plugin sets the Job named ``node`` to ``trainer.numNodes``,
  minus one when ``mpi.runLauncherAsNode`` (pkg/runtime/framework/plugins/mpi/mpi.go ``EnforceMLPolicy``).
- pkg/runtime/framework/plugins/jobset/builder.go: ``Trainer`` forces the trainer Job's ``replicas`` to
  1 and sets its parallelism and completions to that count; ``Initializer`` forces the dataset and model
  initializer Jobs' replicas to 1; other Jobs keep ``replicas`` (JobSet: replicas x parallelism pods).
  In every Job, the containers named ``node`` (and ``launcher`` when runLauncherAsNode) get the trainer's
  ``image``, ``command``, ``args``, ``resourcesPerNode`` (it *replaces* the container's resources when it
  has limits or requests) and ``env`` (upserted by name).
- ``spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[]`` is strategic-merged into
  the Job of the same name (trainingruntime.go ``mergeRuntimePatches``); releases before it had
  ``spec.podTemplateOverrides[]`` with ``targetJobs[].name``. Only the placement fields of those patches
  (``nodeSelector``, ``affinity``, ``tolerations``) are applied here: they are what the policy reads.

The judged spec is built from two objects, so it is ``synthesized`` (never patched) and written in place
(``inline``): its metadata is the TrainJob's, so the TrainJob's own ``gpu-admission.io/*`` annotations
apply, and violations point at ``/spec/trainer`` (the trainer step: what the user of the TrainJob can
change) or ``/spec/runtimeRef`` (a Job only the runtime defines).

A runtime on its own is judged as a TrainJob without overrides would run it (trainer Job:
``mlPolicy.numNodes`` pods), at its real pointers and patchable, so ``check`` on a runtime file judges
its GPU templates and a pin can be written into the runtime itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, OperatorKind, count, dig, mapping, merge_named, name_of, product
from webhook.core.operators.jobs import JOBSET, JOBSET_PER_COPY

GROUP = "trainer.kubeflow.org"
API_VERSION = GROUP + "/v1alpha1"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""pkg/constants/constants.go ``LabelTrainJobAncestor``; values ``trainer``, ``dataset-initializer``,
``model-initializer``."""
TRAINER, INITIALIZERS = "trainer", ("dataset-initializer", "model-initializer")
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations")


def find_runtime(job: Mapping[str, Any], context: Any) -> tuple[Mapping[str, Any] | None, str]:
    """The runtime ``job`` references, from ``context``, and how it was named (``Kind/name``).

    Keys are (kind, namespace, name), namespace ``""`` for cluster-scoped objects and for objects
    written without one. A ClusterTrainingRuntime is found at ``(kind, "", name)`` only. A
    TrainingRuntime is found in the TrainJob's namespace; a runtime written without a namespace in the
    same input is taken to share the TrainJob's (``kubectl apply -n`` puts both in one), so
    ``(kind, "", name)`` is tried next; a runtime in another namespace is not the one the TrainJob uses.
    The object must be of the trainer.kubeflow.org group. Returns ``(None, label)`` when not found."""
    ref = mapping(dig(job, "spec", "runtimeRef"))
    name = ref.get("name")
    kind = name_of(ref.get("kind"), RUNTIME_KINDS[0])
    group = name_of(ref.get("apiGroup"), GROUP)
    label = f"{kind}/{name}" if isinstance(name, str) and name else f"{kind}/(no name)"
    if not (isinstance(name, str) and name) or group != GROUP or kind not in RUNTIME_KINDS \
            or not isinstance(context, Mapping):
        return None, label
    namespace = dig(job, "metadata", "namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    keys = [(kind, "", name)] if kind == RUNTIME_KINDS[0] else [(kind, namespace, name), (kind, "", name)]
    for key in dict.fromkeys(keys):
        found = context.get(key)
        if isinstance(found, Mapping) and found.get("kind") == kind \
                and str(found.get("apiVersion")).startswith(GROUP + "/"):
            return found, label
    return None, label


def _override(container: Mapping[str, Any], trainer: Mapping[str, Any]) -> dict[str, Any]:
    """A ``node`` container with the TrainJob's trainer values (jobset/builder.go ``Trainer``)."""
    out = dict(container)
    if isinstance(trainer.get("image"), str):
        out["image"] = trainer["image"]
    for key in ("command", "args"):
        if isinstance(trainer.get(key), list):
            out[key] = trainer[key]
    resources = mapping(trainer.get("resourcesPerNode"))
    if isinstance(resources.get("limits"), Mapping) or isinstance(resources.get("requests"), Mapping):
        out["resources"] = {k: resources[k] for k in ("limits", "requests") if isinstance(resources.get(k), Mapping)}
    if "env" in trainer:
        out["env"] = merge_named(out.get("env"), trainer.get("env"))
    return out


def _with_trainer(spec: Mapping[str, Any], trainer: Mapping[str, Any], targets: tuple[str, ...]) -> tuple[dict[str, Any], bool]:
    """``spec`` with the trainer values in its ``targets`` containers; whether any container took them."""
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return dict(spec), False
    hit = [isinstance(c, Mapping) and c.get("name") in targets for c in containers]
    return {**spec, "containers": [_override(c, trainer) if h else c for c, h in zip(containers, hit)]}, any(hit)


def _placement_patches(job: Mapping[str, Any], job_name: str) -> Iterator[Mapping[str, Any]]:
    """The PodSpec patches the TrainJob addresses to the replicatedJob ``job_name``, in order."""
    spec = mapping(job.get("spec"))
    patches = spec.get("runtimePatches")
    for patch in patches if isinstance(patches, list) else []:
        jobs = dig(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        for rjob in jobs if isinstance(jobs, list) else []:
            if mapping(rjob).get("name") == job_name:
                yield mapping(dig(rjob, "template", "spec", "template", "spec"))
    overrides = spec.get("podTemplateOverrides")
    for override in overrides if isinstance(overrides, list) else []:
        targets = mapping(override).get("targetJobs")
        if any(mapping(t).get("name") == job_name for t in (targets if isinstance(targets, list) else [])):
            yield mapping(mapping(override).get("spec"))


def _placed(spec: dict[str, Any], job: Mapping[str, Any], job_name: str) -> dict[str, Any]:
    """``spec`` with the placement fields of the TrainJob's patches: ``nodeSelector`` maps merged (the
    patch wins), ``affinity`` merged per kind of affinity, ``tolerations`` replaced (an atomic list)."""
    for patch in _placement_patches(job, job_name):
        if isinstance(patch.get("nodeSelector"), Mapping):
            spec["nodeSelector"] = {**mapping(spec.get("nodeSelector")), **patch["nodeSelector"]}
        if isinstance(patch.get("affinity"), Mapping):
            spec["affinity"] = {**mapping(spec.get("affinity")), **patch["affinity"]}
        if isinstance(patch.get("tolerations"), list):
            spec["tolerations"] = patch["tolerations"]
    return spec


def _job_pods(rjob: Mapping[str, Any], ancestor: str | None, policy: Mapping[str, Any] | None,
              trainer: Mapping[str, Any]) -> int:
    """Pods one replicatedJob makes (module docstring: newRuntimeInfo, the ML plugins, builder.go)."""
    job_spec = mapping(dig(rjob, "template", "spec"))
    per_job = count(job_spec.get("parallelism"))
    mpi = mapping(policy.get("mpi")) if policy is not None and "mpi" in policy else None
    nodes = trainer.get("numNodes")
    if ancestor == TRAINER:
        if policy is not None:
            per_job = count(policy.get("numNodes"))
        if mpi is None and nodes is not None:
            per_job = count(nodes)
        return per_job
    if mpi is not None and rjob.get("name") == "node" and nodes is not None:
        per_job = max(count(nodes) - 1, 1) if mpi.get("runLauncherAsNode") is True else count(nodes)
    replicas = 1 if ancestor in INITIALIZERS else count(rjob.get("replicas"))
    return product(replicas, per_job)


def _runtime_jobs(runtime: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any], str | None, Any]]:
    """(index, replicatedJob, its ancestor-step label, its pod template) for each Job of a runtime."""
    jobs = dig(runtime, "spec", "template", "spec", "replicatedJobs")
    for i, rjob in enumerate(jobs if isinstance(jobs, list) else []):
        rjob = mapping(rjob)
        job_spec = mapping(dig(rjob, "template", "spec"))
        if "template" not in job_spec:
            continue
        ancestor = mapping(dig(rjob, "template", "metadata", "labels")).get(ANCESTOR_LABEL)
        yield i, rjob, ancestor if isinstance(ancestor, str) else None, job_spec["template"]


def _policy(runtime: Mapping[str, Any]) -> Mapping[str, Any] | None:
    policy = dig(runtime, "spec", "mlPolicy")
    return policy if isinstance(policy, Mapping) else None


def _targets(policy: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Containers that take the trainer values: ``node``, and ``launcher`` when MPI runs it as a node."""
    launcher = dig(policy, "mpi", "runLauncherAsNode") is True
    return ("node", "launcher") if launcher else ("node",)


def _runtime(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    """A ClusterTrainingRuntime or TrainingRuntime alone: its templates as a TrainJob naming it would
    run them without overrides."""
    policy = _policy(obj)
    for i, rjob, ancestor, template in _runtime_jobs(obj):
        yield Found(("spec", "template", "spec", "replicatedJobs", str(i), "template", "spec", "template"),
                    template, name_of(rjob.get("name"), f"replicatedJobs[{i}]"),
                    _job_pods(rjob, ancestor, policy, {}))


def _alone(job: Mapping[str, Any], trainer: Mapping[str, Any], note: str) -> Found:
    """The trainer step from ``spec.trainer`` alone: one container ``node`` (the name the runtimes use)."""
    container: dict[str, Any] = {"name": "node"}
    for key, kind in (("image", str), ("command", list), ("args", list), ("env", list)):
        if isinstance(trainer.get(key), kind):
            container[key] = trainer[key]
    container = _override(container, {"resourcesPerNode": trainer.get("resourcesPerNode")})
    spec = _placed({"containers": [container]}, job, "node")
    return Found(("spec", "trainer"), spec, "node", count(trainer.get("numNodes")), inline=True,
                 synthesized=True, notes=(note,))


def _trainjob(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    """A TrainJob: the runtime's templates with the trainer values, or, without the runtime in the
    input, the trainer step as ``spec.trainer`` describes it (with a note: never skipped silently)."""
    trainer = mapping(dig(obj, "spec", "trainer"))
    runtime, label = find_runtime(obj, context)
    name = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    if runtime is None:
        ref = dig(obj, "spec", "runtimeRef")
        missing = f"runtime {label} is not in the input" if isinstance(mapping(ref).get("name"), str) \
            else "spec.runtimeRef names no runtime"
        gpus = "" if mapping(trainer.get("resourcesPerNode")) else \
            "; spec.trainer sets no resourcesPerNode, so the GPUs are the runtime's and unknown here"
        yield _alone(obj, trainer, f"TrainJob {name}: {missing}; judged from spec.trainer alone{gpus}")
        return
    policy = _policy(runtime)
    for i, rjob, ancestor, template in _runtime_jobs(runtime):
        job_name = name_of(rjob.get("name"), f"replicatedJobs[{i}]")
        spec, took = _with_trainer(mapping(mapping(template).get("spec")), trainer, _targets(policy))
        path = ("spec", "trainer") if took or ancestor == TRAINER else ("spec", "runtimeRef")
        yield Found(path, _placed(spec, obj, job_name), job_name, _job_pods(rjob, ancestor, policy, trainer),
                    inline=True, synthesized=True)


KINDS: tuple[OperatorKind, ...] = (
    # a TrainJob's pods are a JobSet's (named after the TrainJob), with the JobSet controller's labels
    OperatorKind(API_VERSION, "TrainJob", "trainjobs", _trainjob, group=JOBSET, per_copy_labels=JOBSET_PER_COPY,
                 per_copy_annotations=JOBSET_PER_COPY,
                 source="kubeflow/trainer pkg/apis/trainer/v1alpha1/trainjob_types.go"),
    *(OperatorKind(API_VERSION, kind, kind.lower() + "s", _runtime, entry=None,
                   source="kubeflow/trainer pkg/apis/trainer/v1alpha1/trainingruntime_types.go")
      for kind in RUNTIME_KINDS),
)
