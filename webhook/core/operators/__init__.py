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
- :mod:`.serving`: KubeAI Model, NIM NIMService, Kaito Workspace, llm-d ModelService, Dynamo;
- :mod:`.lws`: LeaderWorkerSet.

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

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core.operators import kserve, lws, ray, serving, trainer, training
from webhook.core.operators.base import (MAX_COUNT_TEXT, MAX_PODS, Context, Found, Reader, count, dig, mapping,
                                         merge_named, name_of, product)

__all__ = ["CONTEXT_KINDS", "KINDS", "MAX_COUNT_TEXT", "MAX_PODS", "OWN_ENTRY_KINDS", "READERS", "Context", "Found", "Reader",
           "context_of", "count", "dig", "mapping", "merge_named", "name_of", "product", "templates"]

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


READERS: Mapping[tuple[str, str], Reader] = {
    **training.READERS, **ray.READERS, **trainer.READERS, **kserve.READERS, **serving.READERS, **lws.READERS,
}
"""(apiVersion, kind) -> reader. Keyed by apiVersion too: a Volcano ``Job`` is not a ``batch/v1`` Job."""

KINDS: frozenset[str] = frozenset(kind for _, kind in READERS)

OWN_ENTRY_KINDS: frozenset[str] = frozenset({"LeaderWorkerSet"})
"""Kinds the shipped webhook configurations send through an entry of their own, whose CEL condition
finds their pod templates at one depth (``validate-leaderworkersets``); every other kind of
:data:`READERS` goes through the operators' entry, which has no condition."""


def templates(obj: Mapping[str, Any], context: Mapping[tuple[str, str, str], Any] | None = None) -> list[Found]:
    """The pod templates of an operator object, or ``[]`` when it is none of :data:`READERS`.

    ``context``: other objects of the same input by (kind, namespace, name), for kinds whose pods
    come from another object (a TrainJob's runtime)."""
    kind = str(obj.get("kind"))
    reader = READERS.get((str(obj.get("apiVersion")), kind))
    return [] if reader is None else list(reader(obj, kind, context or {}))
