"""A model named only by the object: ``gemma-2-9b-it-server``, ``app: llama-3-70b``.

Many GPU pods run an image whose entrypoint loads a model no command line, env variable, config
file or annotation of the pod names (a custom server, a model baked into the image), yet their
authors name the Deployment, or label the pods, after the model. When nothing better exists, that
name is the best hint of the model's size there is: :func:`hint` reads it from the well-known
labels of the pod template (:data:`LABELS`, most specific first), then from the object's own
``metadata.name``, and takes it only when :func:`webhook.core.models.describe` finds the name in the
model catalog or reads a size from it. The caller only suggests it, in a note that names the
annotations which state the model for sure: a name is a convention, not a configuration, and says
neither the precision nor the split.

The object's name is not read from a Pod that a controller made: its name is the controller's
stamp, different on every copy (``<deployment>-<hash>-<suffix>``), and the server's memo of verdicts
(:mod:`webhook.core.verdicts`) relies on such per-copy fields never changing a verdict. Labels are
copied from the template to every pod alike, so they are read on both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core import models
from webhook.core.domain import ModelInfo

LABELS = ("ai.gke.io/model", "model", "app.kubernetes.io/name", "app.kubernetes.io/instance", "app")
"""Labels that name what a pod serves: ``ai.gke.io/model`` (Google's GKE AI/ML tutorials label their
model servers with the model, e.g. ``ai.gke.io/model: gemma-2-2b-it``), a plain ``model``, the
recommended ``app.kubernetes.io/name``/``instance`` (kubernetes.io docs, "Recommended Labels") and
the ubiquitous ``app``."""
MAX_NAME = 253
"""The longest object name Kubernetes accepts (a DNS subdomain)."""
JOB_KINDS = frozenset({"Job", "CronJob", "JobSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob",
                       "MXJob", "MPIJob", "TrainJob", "TrainingRuntime", "ClusterTrainingRuntime",
                       "HyperPodPyTorchJob", "Experiment", "RayJob"})
"""Run-to-completion kinds (batch and Volcano Jobs, JobSet, the training operators' jobs and runtimes,
Katib, RayJob): their names often name the base model a fine-tune starts from, while their memory
depends on how they train (optimizer state, LoRA, offload), which no name says. Their pods get no
name hint (nor do the pods they make); a training launch of any kind gets none either (:mod:`webhook.core.inference`)."""


@dataclass(frozen=True)
class NameHint:
    """A model size read from a name the object gives itself or its pods."""

    model: str
    info: ModelInfo
    source: str
    """Where the name is (``label app``, ``the object's name``), for the note."""


@dataclass(frozen=True)
class Holder:
    """What a hint may read of the object that holds a template."""

    name: str | None
    """Its ``metadata.name`` (``None`` for a controller-made Pod: per copy)."""
    job: bool = False
    """A run-to-completion object (:data:`JOB_KINDS`), or a Pod one of them made."""


def holder(obj: Any) -> Holder:
    """``obj`` as :func:`hint` reads it: its name, unless a controller made it (a Pod with
    ``ownerReferences``), and whether it is a job or a job's pod."""
    if not isinstance(obj, Mapping):
        return Holder(None)
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    kind = obj.get("kind")
    owners = metadata.get("ownerReferences")
    owners = owners if isinstance(owners, list) else []
    job = kind in JOB_KINDS or (kind == "Pod" and any(isinstance(o, Mapping) and o.get("kind") in JOB_KINDS
                                                      for o in owners[:16]))
    name = metadata.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or (kind == "Pod" and owners):
        name = None
    return Holder(name, job)


def hint(labels: Mapping[str, str], held: Holder | None) -> NameHint | None:
    """The first of the template's :data:`LABELS`, then the holding object's name, that names a
    model the catalog knows or whose size it states; ``None`` when none does, or when the holder is
    a job or a job's pod (:data:`JOB_KINDS`)."""
    if held is not None and held.job:
        return None
    for key in LABELS:
        value = labels.get(key)
        info = _sized(value)
        if info is not None and isinstance(value, str):
            return NameHint(value, info, f"label {key}")
    name = held.name if held is not None else None
    info = _sized(name)
    if info is not None and isinstance(name, str):
        return NameHint(name, info, "the object's name")
    return None


def _sized(text: Any) -> ModelInfo | None:
    if not isinstance(text, str) or not text or len(text) > MAX_NAME:
        return None
    info = models.describe(text)
    return info if info is not None and info.source in ("catalog", "name") and info.params_b else None
