"""Amazon SageMaker HyperPod ``sagemaker.amazonaws.com/v1`` HyperPodPyTorchJob: the HyperPod training
operator's distributed PyTorch job.

The operator is not open source; its API is read from the CRD schema the HyperPod CLI/SDK carries,
aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py
@4b7c5926 (``_HyperPodPytorchJob``, ``ReplicaSpec``, ``Template``) and hyperpod_pytorch_job.py@01a1534b
(``TRAINING_GROUP = "sagemaker.amazonaws.com"``, ``API_VERSION = "v1"``, ``PLURAL =
"hyperpodpytorchjobs"``, ``KIND = "HyperPodPyTorchJob"``):

- ``spec.replicaSpecs[]``: ``name``, ``replicas`` (default 1), ``spares`` (default 0: capacity Kueue
  reserves for replacements, not running pods), ``template`` (a PodTemplateSpec);
- ``spec.nprocPerNode``: processes per pod, ``auto`` (default), ``cpu``, ``gpu`` or a number. The
  container runs ``hyperpodrun``, the launcher of the HyperPod elastic agent (PyPI hyperpod-elastic-agent
  1.1.0, its project description: "an extension of PyTorch's ElasticAgent" that takes every torchrun
  argument, ``--nnodes``, ``--nproc-per-node``, plus pre/post-train scripts; the launchers read it as
  torchrun), so a number that differs from the pod's GPUs is said in a note (one process per GPU is
  what ``auto`` and ``gpu`` start).

Every replica spec's pods are one job (one group, the default): the operator starts them as one
torchrun world. No pod label naming the job is verified in a public source, so the kind names no
:class:`~webhook.core.operators.base.PodGroup`; a pin written into the job's templates reaches every pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, OperatorKind, count, dig, mapping, name_of

API_VERSION = "sagemaker.amazonaws.com/v1"


def _gpus(template: Any) -> int:
    """GPUs a pod template's containers ask for (limits, else requests, of any ``*/gpu`` resource)."""
    total = 0
    containers = dig(template, "spec", "containers")
    for c in containers if isinstance(containers, list) else []:
        res = mapping(mapping(c).get("resources"))
        for part in ("limits", "requests"):
            found = [count(v, 0) for k, v in mapping(res.get(part)).items()
                     if isinstance(k, str) and k.endswith("/gpu")]
            if found:
                total += sum(found)
                break
    return total


def _nproc_note(value: Any, template: Any) -> tuple[str, ...]:
    """What ``spec.nprocPerNode`` says that the template does not: a process count other than its GPUs."""
    if value is None or value in ("auto", "gpu", "cpu"):
        return ()
    procs = count(value, -1) if isinstance(value, (str, int)) else -1
    if procs < 0:
        return (f"spec.nprocPerNode {str(value)[:16]!r} is none of auto, cpu, gpu or a number",)
    gpus = _gpus(template)
    if procs == gpus:
        return ()
    return (f"spec.nprocPerNode={procs}: the operator starts {procs} training processes in each pod of {gpus} GPUs",)


def _job(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    specs = dig(obj, "spec", "replicaSpecs")
    nproc = dig(obj, "spec", "nprocPerNode")
    for i, spec in enumerate(specs if isinstance(specs, list) else []):
        spec = mapping(spec)
        if "template" in spec:
            yield Found(("spec", "replicaSpecs", str(i), "template"), spec["template"],
                        name_of(spec.get("name"), f"replicaSpecs[{i}]"), count(spec.get("replicas")),
                        notes=_nproc_note(nproc, spec["template"]))


KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(API_VERSION, "HyperPodPyTorchJob", "hyperpodpytorchjobs", _job,
                 source="aws/sagemaker-hyperpod-cli src/sagemaker/hyperpod/training/config/"
                        "hyperpod_pytorch_job_unified_config.py@4b7c5926, hyperpod_pytorch_job.py@01a1534b"),
)
