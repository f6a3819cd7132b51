"""KubeRay: ``ray.io/v1`` (and ``v1alpha1``, the same fields) RayCluster (``/spec``), RayJob
(``/spec/rayClusterSpec``) and RayService (``/spec/rayClusterConfig``).

The head group is one pod; each worker group makes the larger of ``replicas`` and ``minReplicas``
(both default 0 in the CRD; the operator keeps replicas at least minReplicas:
ray-operator/apis/ray/v1/raycluster_types.go, WorkerGroupSpec) x ``numOfHosts`` (default 1) pods.

The pods run ``ray start``; the model they serve is named elsewhere, and what that states is put on
the worker groups' holder annotations (``gpu-admission.io/model``, ``gpu-admission.io/tensor-parallel``,
``gpu-admission.io/pipeline-parallel``) of a copy of the template (the input is not changed; the pod
spec is still the object's own, so it is patched as before):

- a RayService's ``/spec/serveConfigV2``, a YAML string: Ray Serve LLM ``llm_configs`` (mappings, or
  paths of LLMConfig files a ConfigMap of the input mounts in the cluster's pods) and a custom app's
  ``runtime_env.env_vars`` (:func:`webhook.core.operators.ray_llm.serve_applications`; kuberay
  ray-operator/config/samples/ray-service.llm-serve.yaml@0ca87180);
- a RayJob's ``/spec/entrypoint`` (a shell command ``ray job submit`` runs as the job's driver in
  the cluster): the Python script it runs (``LLMConfig``, Ray Data's ``vLLMEngineProcessorConfig``),
  ``python -c`` code, or the Serve config of ``serve run``/``serve deploy``, when a ConfigMap of the
  input mounts that file in the cluster's pods, the head's mounts first (kuberay
  ray-operator/config/samples/ray-job.sample.yaml@00741298: ``entrypoint: python
  /home/ray/samples/sample_code.py``, the head mounting ConfigMap ``ray-job-code-sample`` at
  ``/home/ray/samples``).

Only one model is attributed: when the config names several, no worker group can be told which one
it runs, and a note says so. A Ray ``accelerator_type`` is reported, not pinned
(:func:`webhook.core.operators.ray_llm.accelerator_note` says why). A text over
:data:`MAX_SERVE_CONFIG` or that does not parse is a note, never an exception; the user's own
annotations on a template win.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from webhook.core import configmaps
from webhook.core.operators import ray_llm
from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, count, dig, mapping, name_of, product
from webhook.core.shell import invocations

RAY_CLUSTER_SPEC: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig"),
}
MAX_SERVE_CONFIG = ray_llm.MAX_TEXT
"""Longest serveConfigV2 parsed (bytes of its text): the YAML parser is the dearest step here."""
MAX_ENTRYPOINT = 64 * 1024
MODEL = "gpu-admission.io/model"
TENSOR_PARALLEL = "gpu-admission.io/tensor-parallel"
PIPELINE_PARALLEL = "gpu-admission.io/pipeline-parallel"
SERVE_CONFIG = "spec.serveConfigV2"
ENTRYPOINT = "spec.entrypoint"


def _hints(found: Sequence[ray_llm.LLMFacts], where: str,
           notes: Sequence[str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The annotations the deployments ``found`` in ``where`` state, and notes."""
    model, tp, pp, accelerators, more = ray_llm.summary(found, where)
    hints: dict[str, str] = {MODEL: model} if model else {}
    if tp:
        hints[TENSOR_PARALLEL] = str(tp)
    if pp and pp > 1:  # 1 is the default: nothing to carry
        hints[PIPELINE_PARALLEL] = str(pp)
    accelerator = ray_llm.accelerator_note(where, accelerators)
    out = [*notes, *more, *([accelerator] if accelerator else [])]
    return hints, tuple(dict.fromkeys(out))


def serve_config_hints(config: Any, files: Mapping[str, str] | None = None,
                       workdir: str = "") -> tuple[dict[str, str], tuple[str, ...]]:
    """The annotations a RayService's ``serveConfigV2`` states for its worker groups, and notes.
    ``files``: what the cluster's pods mount from ConfigMaps of the input (path -> text)."""
    if config is None:
        return {}, ()
    doc, note = ray_llm.load_yaml(config, SERVE_CONFIG)
    if note is not None:
        return {}, (note,)
    found, notes = ray_llm.serve_applications(doc, SERVE_CONFIG, files or {}, workdir)
    return _hints(found, SERVE_CONFIG, notes)


def entrypoint_hints(entrypoint: Any, files: Mapping[str, str],
                     workdir: str = "") -> tuple[dict[str, str], tuple[str, ...]]:
    """The annotations a RayJob's ``entrypoint`` states for its worker groups, and notes: the Python
    script (or ``python -c`` code) or Serve config it runs, when ``files`` show it."""
    if not isinstance(entrypoint, str) or not entrypoint.strip() or len(entrypoint) > MAX_ENTRYPOINT:
        return {}, ()
    runs, _ = invocations({"command": ["sh", "-c", entrypoint]}, {})
    found: list[ray_llm.LLMFacts] = []
    notes: list[str] = []
    for kind, target in ray_llm.entrypoint_files([run.argv for run in runs]):
        if kind == "code":
            more, why = ray_llm.python_facts(target, f"{ENTRYPOINT} (python -c)")
        else:
            shown = ray_llm.files_at(files, target, workdir)
            if not shown:
                continue  # a script from a working_dir or the image: the worker's own warning says so
            path, text = shown[0]
            if kind == "python":
                more, why = ray_llm.python_facts(text, path)
            else:
                doc, note = ray_llm.load_yaml(text, path)
                more, why = ray_llm.serve_applications(doc, path, files, workdir) if note is None else ([], [note])
        found += more
        notes += why
    return _hints(found, ENTRYPOINT, notes)


def _cluster_files(obj: Mapping[str, Any], cluster: Mapping[str, Any],
                   context: Context) -> tuple[dict[str, str], str]:
    """Files the cluster's pods mount from ConfigMaps of the input (the head's first, then each worker
    group's: the driver and Serve's app builder run on the head), and the head container's
    ``workingDir``."""
    lookup = configmaps.context_lookup(context, dig(obj, "metadata", "namespace"))
    head = mapping(mapping(cluster.get("headGroupSpec")).get("template"))
    containers = dig(head, "spec", "containers")
    first = mapping(containers[0]) if isinstance(containers, list) and containers else {}
    workdir = first.get("workingDir") if isinstance(first.get("workingDir"), str) else ""
    if lookup is None:
        return {}, workdir
    groups = cluster.get("workerGroupSpecs")
    workers = groups[:64] if isinstance(groups, list) else []
    templates = [head, *(mapping(mapping(g).get("template")) for g in workers)]
    files: dict[str, str] = {}
    for template in templates:
        for path, text in configmaps.pod_files(template.get("spec"), lookup).items():
            files.setdefault(path, text)
    return files, workdir


def _with_hints(template: Any, hints: Mapping[str, str], where: str) -> tuple[Any, tuple[str, ...]]:
    """A copy of ``template`` whose annotations hold ``hints`` under its own (the template itself when
    it is not an object or there is nothing to add), and notes.

    The engine builds a worker's group-label patch from the metadata it judged, so the copy must not
    differ from the object in which maps exist where the patch adds a key: a template with labels but
    no annotations map (the only case where group ops can meet an annotations map that the copy has
    and the object lacks) keeps no hints, and a note says how to state them."""
    if not hints or not isinstance(template, Mapping):
        return template, ()
    metadata = mapping(template.get("metadata"))
    own = metadata.get("annotations")
    if not isinstance(own, Mapping) and mapping(metadata.get("labels")):
        return template, (f"{where} names {hints.get(MODEL, 'the model')}: annotate the worker "
                          f"template with {MODEL} to have it read (it has labels but no annotations)",)
    return {**template, "metadata": {**metadata, "annotations": {**hints, **mapping(own)}}}, ()


def _stated(obj: Mapping[str, Any], kind: str, cluster: Mapping[str, Any],
            context: Context) -> tuple[dict[str, str], tuple[str, ...], str]:
    """(hints, notes, where) the object states for its worker groups."""
    if kind == "RayService":
        config = dig(obj, "spec", "serveConfigV2")
        if config is None:
            return {}, (), SERVE_CONFIG
        files, workdir = _cluster_files(obj, cluster, context)
        return (*serve_config_hints(config, files, workdir), SERVE_CONFIG)
    if kind == "RayJob" and isinstance(dig(obj, "spec", "entrypoint"), str):
        files, workdir = _cluster_files(obj, cluster, context)
        return (*entrypoint_hints(dig(obj, "spec", "entrypoint"), files, workdir), ENTRYPOINT)
    return {}, (), ""


def _ray(obj: Mapping[str, Any], kind: str, context: Context) -> Iterator[Found]:
    base = RAY_CLUSTER_SPEC[kind]
    cluster = mapping(dig(obj, *base))
    hints, notes, where = _stated(obj, kind, cluster, context)
    head = mapping(cluster.get("headGroupSpec"))
    if "template" in head:
        yield Found((*base, "headGroupSpec", "template"), head["template"], "head", 1)
    groups = cluster.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        group = mapping(group)
        if "template" not in group:
            continue
        replicas = max(count(group.get("replicas"), 0), count(group.get("minReplicas"), 0))
        template, hint_notes = _with_hints(group["template"], hints, where)
        yield Found((*base, "workerGroupSpecs", str(i), "template"), template,
                    name_of(group.get("groupName"), f"workerGroupSpecs[{i}]"),
                    product(replicas, count(group.get("numOfHosts"))), notes=notes + hint_notes)


RAY_CLUSTER = PodGroup("ray.io/cluster", "Ray cluster", "ray")
"""ray-project/kuberay ray-operator/controllers/ray/common/pod.go ``labelPod`` (the key in
utils/constant.go ``RayClusterLabelKey``)."""

KINDS: tuple[OperatorKind, ...] = (
    *(OperatorKind("ray.io/v1", kind, kind.lower() + "s", _ray, group=RAY_CLUSTER,
                   source="ray-project/kuberay ray-operator/apis/ray/v1 (raycluster_types.go, rayjob_types.go, "
                          "rayservice_types.go)")
      for kind in RAY_CLUSTER_SPEC),
    # v1alpha1 has the same fields where the reader looks: RayClusterSpec.headGroupSpec.template,
    # workerGroupSpecs[].{groupName, replicas, minReplicas, template} (no numOfHosts: 1), RayJob
    # rayClusterSpec and entrypoint, RayService rayClusterConfig and serveConfigV2
    *(OperatorKind("ray.io/v1alpha1", kind, kind.lower() + "s", _ray, group=RAY_CLUSTER,
                   source="ray-project/kuberay ray-operator/apis/ray/v1alpha1 raycluster_types.go@4e5b501c, "
                          "rayjob_types.go@bef631bd, rayservice_types.go@4e5b501c")
      for kind in RAY_CLUSTER_SPEC),
)
