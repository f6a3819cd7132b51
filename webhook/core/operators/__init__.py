"""Where the AI workload operators keep their pod templates, and how many pods each one makes.

Multi-node GPU work mostly reaches a cluster through operators (Kubeflow training jobs, JobSet,
KubeRay, Volcano, KServe, ...), whose pod templates sit at kind-specific places and whose pod counts
are written differently by each. One module per family reads them; the facts (paths, defaults) come
from each operator's upstream API types and controllers, which each module names (repository, file,
commit where it matters):

- :mod:`.jobs`: Kubeflow v1 job kinds, MPIJob v2beta1, JobSet, Volcano Job;
- :mod:`.ray`: RayCluster, RayJob, RayService (``v1`` and ``v1alpha1``);
- :mod:`.trainer`: Kubeflow Trainer TrainJob with its (Cluster)TrainingRuntime;
- :mod:`.kserve`: KServe InferenceService (and KFServing's) and LLMInferenceService;
- :mod:`.model_servers`: KubeAI Model, NIM NIMService and NIMPipeline, Kaito Workspace, llm-d ModelService,
  Dynamo;
- :mod:`.katib`: Katib Experiment, whose trials are read with their own kind's reader;
- :mod:`.knative`: Knative Service;
- :mod:`.hyperpod`: SageMaker HyperPod HyperPodPyTorchJob;
- :mod:`.vllm_stack`: vLLM production-stack VLLMRuntime;
- :mod:`.lws`: LeaderWorkerSet;
- :mod:`.aibrix`: AIBrix RayClusterFleet, StormService, PodSet;
- :mod:`.ome`: OME InferenceService with its BaseModel and ServingRuntime.

Each family describes its kinds as :class:`OperatorKind` values (reader, the labels its controller
puts on pods, leader roles, the webhook entry); :data:`REGISTRY` holds them all, and everything the
rest of the core asks of operators goes through it. Adding a kind is adding its descriptor to its
family's ``KINDS``; ``make webhook-rules`` then writes its webhook rule into manifests/ and the chart.

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

from webhook.core.operators import (aibrix, hyperpod, jobs, katib, knative, kserve, lws, model_servers, ome, ray,
                                    trainer, vllm_stack)
from webhook.core.operators.base import (ENTRY_OPERATORS, MAX_COUNT_TEXT, MAX_PODS, Context, Found, Membership,
                                         OperatorKind, PodGroup, Reader, count, dig, mapping, merge_named, name_of,
                                         product)
from webhook.core.operators.registry import Registry

__all__ = ["CONTEXT_KINDS", "ENTRY_OPERATORS", "MAX_COUNT_TEXT", "MAX_PODS", "REGISTRY", "Context", "Found",
           "Membership", "OperatorKind", "PodGroup", "Reader", "Registry", "context_of", "count", "dig", "mapping",
           "merge_named", "name_of", "product", "templates"]

CONTEXT_KINDS: frozenset[str] = frozenset({"ClusterTrainingRuntime", "TrainingRuntime", "ClusterServingRuntime",
                                           "ServingRuntime", "ConfigMap", "ClusterBaseModel", "BaseModel"})
"""Kinds other objects take their pod templates (a TrainJob's runtime, an InferenceService's), their
model (an OME BaseModel) or their env (a ConfigMap, :mod:`webhook.core.configmaps`) from."""
_CLUSTER_SCOPED = frozenset({"ClusterTrainingRuntime", "ClusterServingRuntime", "ClusterBaseModel"})


def context_of(objects: Iterable[Any]) -> dict[tuple[str, str, str], Any]:
    """The objects of :data:`CONTEXT_KINDS` among ``objects``, by (kind, namespace or "", name): the
    ``context`` :func:`webhook.core.engine.judge` hands to the readers of the kinds that refer to them.

    Each object of an API group is also keyed by ``<group>/<kind>``: two groups use one kind name
    (KServe's and OME's ServingRuntime), and a reader that asks by its group's key never gets the
    other group's object, whichever comes last in the input."""
    out: dict[tuple[str, str, str], Any] = {}
    for obj in objects:
        if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str) or obj["kind"] not in CONTEXT_KINDS:
            continue
        meta = mapping(obj.get("metadata"))
        name, namespace = meta.get("name"), meta.get("namespace")
        if isinstance(name, str):
            # a cluster-scoped object has no namespace, whatever the manifest writes (the API server drops it)
            scoped = isinstance(namespace, str) and obj["kind"] not in _CLUSTER_SCOPED
            key_namespace = namespace if scoped else ""
            out[(str(obj["kind"]), key_namespace, name)] = obj
            group = str(obj.get("apiVersion")).rpartition("/")[0]
            if group:
                out[(f"{group}/{obj['kind']}", key_namespace, name)] = obj
    return out


REGISTRY = Registry((*lws.KINDS, *jobs.KINDS, *ray.KINDS, *trainer.KINDS, *kserve.KINDS, *model_servers.KINDS,
                     *aibrix.KINDS, *ome.KINDS, *katib.KINDS, *knative.KINDS, *hyperpod.KINDS, *vllm_stack.KINDS))
"""Every operator kind the core reads. The core reads it at call time, so a test may put a registry
with a made-up kind in its place."""


def templates(obj: Mapping[str, Any], context: Mapping[tuple[str, str, str], Any] | None = None) -> list[Found]:
    """The pod templates of an operator object, or ``[]`` when it is none of :data:`REGISTRY`.

    ``context``: other objects of the same input by (kind, namespace, name), for kinds whose pods
    come from another object (a TrainJob's runtime)."""
    kind = str(obj.get("kind"))
    reader = REGISTRY.readers.get((str(obj.get("apiVersion")), kind))
    return [] if reader is None else list(reader(obj, kind, context or {}))
