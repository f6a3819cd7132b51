"""Where the AI workload operators keep their pod templates, and how many pods each one makes.

Multi-node GPU work mostly reaches a cluster through operators (Kubeflow training jobs, JobSet,
KubeRay, Volcano, KServe, ...), whose pod templates sit at kind-specific places and whose pod counts
are written differently by each. One module per family reads them; the facts (paths, defaults) come
from each operator's upstream API types and controllers, which each module names (repository, file,
commit where it matters):

- :mod:`.training`: Kubeflow v1 job kinds, MPIJob v2beta1, JobSet, Volcano Job;
- :mod:`.ray`: RayCluster, RayJob, RayService;
- :mod:`.trainer`: Kubeflow Trainer TrainJob with its (Cluster)TrainingRuntime;
- :mod:`.kserve`: KServe InferenceService and LLMInferenceService;
- :mod:`.serving`: KubeAI Model, NIM NIMService, Kaito Workspace, llm-d ModelService, Dynamo.

A reader yields :class:`Found` per template. By default every template of one object belongs to one
job: the engine counts the pods of its GPU templates as the job's group (a CPU-only launcher or Ray
head is not a member). A kind whose group is not the whole object (an LWS-shaped replica of a
serving kind) states ``group`` instead.

Counts: a count that is not a whole number (a string of ASCII digits is read as one, by
:func:`webhook.core.counts.parse_count`, as the API's own defaulting would refuse anything else) falls
back to the kind's default; a negative one counts no pods; counts are capped at ``MAX_PODS``, so a
hostile number cannot make a huge group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.counts import parse_count

MAX_COUNT_TEXT = 10**12 - 1
"""A count written as a string is read up to twelve digits (then capped at :data:`MAX_PODS`); a
longer one is no count at all."""
MAX_PODS = 100_000
"""More pods than any one job runs: counts above are capped here."""


@dataclass(frozen=True)
class Found:
    """One pod template of an operator object, as its reader found it."""

    path: tuple[str, ...]
    """From the object root to the template: the object holding ``metadata`` + ``spec``, or, when
    ``inline``, the PodSpec itself."""
    holder: Any
    role: str
    """The template's name inside the object (replica type, group name, task, component)."""
    pods: int
    """Pods this template makes."""
    inline: bool = False
    """``holder`` is a PodSpec written in place (KServe's predictor): its labels and annotations are
    the object's own."""
    synthesized: bool = False
    """``holder`` was built by the reader from the object's fields (an image, a GPU count, a runtime's
    template merged with overrides): the object holds no pod spec a patch could change."""
    group: int | None = None
    """Pods per group when the kind fixes it per template (1 = independent replicas); ``None``: the
    object's GPU pods form one group (a job)."""
    notes: tuple[str, ...] = ()
    """What the reader could not see (a runtime not in the input): reported as warnings."""


Reader = Callable[[Mapping[str, Any], str], Iterator[Found]]


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (readers never trust the shape)."""
    return value if isinstance(value, Mapping) else {}


def dig(obj: Any, *path: str) -> Any:
    """The value at ``path`` (object keys), ``None`` where any step is missing or not an object."""
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def name_of(value: Any, fallback: str) -> str:
    """A template's name from a ``name``-like field, or ``fallback`` when it is not a string."""
    return value if isinstance(value, str) and value else fallback


def merge_named(base: Any, extra: Any) -> list[Any]:
    """Lists keyed by ``name`` (env, volumeMounts) merged as the operators merge them (strategic
    merge, the trainer's ``UpsertEnvVars``): an ``extra`` item replaces the ``base`` item of its name
    and goes last."""
    out = list(base) if isinstance(base, list) else []
    for item in extra if isinstance(extra, list) else []:
        name = mapping(item).get("name")
        out = [e for e in out if not (isinstance(name, str) and mapping(e).get("name") == name)]
        out.append(item)
    return out


def count(value: Any, default: int = 1) -> int:
    """A pod or replica count as the operators write it (see the module docstring)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        value = parse_count(value, cap=MAX_COUNT_TEXT, padded=True, signs="-")
    if not isinstance(value, int):
        return default
    return max(0, min(value, MAX_PODS))


def product(*counts: int) -> int:
    """Counts multiplied, capped at :data:`MAX_PODS`."""
    total = 1
    for c in counts:
        total = min(total * c, MAX_PODS)
    return total


CONTEXT_KINDS: frozenset[str] = frozenset({"ClusterTrainingRuntime", "TrainingRuntime", "ClusterServingRuntime",
                                           "ServingRuntime", "ConfigMap"})
"""Kinds other objects take their pod templates (a TrainJob's runtime, an InferenceService's) or
their env (a ConfigMap, :mod:`webhook.core.configmaps`) from."""
_CLUSTER_SCOPED = frozenset({"ClusterTrainingRuntime", "ClusterServingRuntime"})


def context_of(objects: Iterable[Any]) -> dict[tuple[str, str, str], Any]:
    """The objects of :data:`CONTEXT_KINDS` among ``objects``, by (kind, namespace or "", name): the
    ``context`` :func:`webhook.core.engine.judge` hands to the readers of the kinds that refer to them."""
    out: dict[tuple[str, str, str], Any] = {}
    for obj in objects:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str) or obj["kind"] not in CONTEXT_KINDS:
            continue
        meta = mapping(obj.get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace")
        if isinstance(name, str):
            # a cluster-scoped object has no namespace, whatever the manifest writes (the API server drops it)
            scoped = isinstance(namespace, str) and obj["kind"] not in _CLUSTER_SCOPED
            out[(str(obj["kind"]), namespace if scoped else "", name)] = obj
    return out


# imported after the helpers they use
from webhook.core.operators import kserve, ray, serving, trainer, training  # noqa: E402

READERS: Mapping[tuple[str, str], Reader] = {
    **training.READERS, **ray.READERS, **trainer.READERS, **kserve.READERS, **serving.READERS,
}
"""(apiVersion, kind) -> reader. Keyed by apiVersion too: a Volcano ``Job`` is not a ``batch/v1`` Job."""

KINDS: frozenset[str] = frozenset(kind for _, kind in READERS)


def templates(obj: Mapping[str, Any], context: Mapping[tuple[str, str, str], Any] | None = None) -> list[Found]:
    """The pod templates of an operator object, or ``[]`` when it is none of :data:`READERS`.

    ``context``: other objects of the same input by (kind, namespace, name), for kinds whose pods
    come from another object (a TrainJob's runtime)."""
    kind = str(obj.get("kind"))
    reader = READERS.get((str(obj.get("apiVersion")), kind))
    if reader is None:
        return []
    if getattr(reader, "wants_context", False):
        return list(reader(obj, kind, context or {}))  # type: ignore[call-arg]
    return list(reader(obj, kind))
