"""Serving operators whose pods are built from the custom resource's own fields: KubeAI Model, NVIDIA
NIM NIMService (and NIMPipeline, a list of them), Kaito Workspace, llm-d ModelService and NVIDIA Dynamo
DynamoGraphDeployment.

Except for a Kaito Workspace with ``inference.template``, none of these objects holds a pod template:
the operator writes the pod from an image, a GPU count, a model URL or a preset. The readers here
build the pod spec the operator would write, as far as the launchers (``webhook.core.launchers``) and
the policy need it: a container whose command line or image the launchers recognise, the GPU request,
and the node selection that pins the GPU product. Such a spec is ``synthesized``: the engine judges it
but never patches it (a patch has no pod spec to land in; the fix is a field of the custom resource,
which the notes name). What the resource states but no launcher reads (a preset's model, a declared
tensor parallelism) rides on the holder's ``metadata.annotations`` as the ``gpu-admission.io/*`` hints
``webhook.core.inference`` honours; the object's own ``gpu-admission.io/*`` annotations win over them.

GPU products named by a cloud SKU or a KubeAI resource profile are pinned with the catalog's label for
that product in every label scheme (``data/gpus.yaml``), so the policy reads the pin whichever scheme
it uses. These labels stand in for what the operator's node selection does; they are never written
to the cluster.

Upstream facts, each checked in the repository and file named (line numbers at that commit):

KubeAI ``kubeai.org/v1`` Model (substratusai/kubeai, now kubeai-project/kubeai):

- api/k8s/v1/model_types.go@0c67b3ba: ``spec.url`` (``hf://``, ``pvc://``, ``ollama://``, ``s3://``,
  ``gs://``, ``oss://``; :55), ``spec.engine`` enum OLlama, VLLM, FasterWhisper, Infinity (:64-66),
  ``spec.resourceProfile`` "<name>:<count>" (:68-72), ``spec.image`` (:79-81), ``spec.args`` (:84),
  ``spec.env`` (a map, :87), ``spec.replicas`` (:95), ``spec.minReplicas`` (default 0, :97-101).
- internal/modelcontroller/model_controller.go@0273527c: an unset ``replicas`` becomes ``minReplicas``
  (:78-81); each replica is one Pod of its own (``podForModel`` per missing replica, no group);
  ``applyResourceProfile`` splits the profile at ":" (exactly two parts, the count by ``strconv.Atoi``),
  multiplies the profile's requests and limits by the count and copies its ``nodeSelector``.
- internal/modelcontroller/engine_vllm.go@07722ae0: the vLLM server runs
  ``python3 -m vllm.entrypoints.openai.api_server`` (:85) with ``--model=<repo>``,
  ``--served-model-name=<name>`` then ``spec.args`` (:29-33).
- internal/modelcontroller/engine_ollama.go@0ce90dce: the Ollama container takes ``spec.args`` and no
  command; the model is pulled by the startup probe ``/bin/ollama pull <ref> && /bin/ollama cp ...``
  (``ollamaStartupProbeScript``). Here the pull rides on a postStart hook, where the Ollama parser
  looks for it.
- charts/kubeai/values.yaml (kubeai-project/kubeai@0d7de291, substratusai/kubeai@00218190):
  ``resourceProfiles`` nvidia-gpu-{t4,l4,l40s,h100,gh200,a100-80gb,a100-40gb,a16,rtx4070-8gb} request
  one ``nvidia.com/gpu`` per unit, amd-gpu-mi300x one ``amd.com/gpu``, and carry NO nodeSelector. The
  node selectors live in the cloud overlays: values-gke.yaml@26722f10 (``cloud.google.com/
  gke-accelerator``: nvidia-l4, nvidia-h100-80gb), values-eks.yaml@40ba1476 (``karpenter.k8s.aws/
  instance-gpu-name``: l4, l40s, h100, a100 + gpu memory). So the product is read from the profile's
  name (the user's stated choice) and a note says the cluster's own profile decides the pin.

NVIDIA NIM Operator ``apps.nvidia.com/v1alpha1`` NIMService (NVIDIA/k8s-nim-operator):

- api/apps/v1alpha1/nimservice_types.go (stored versions 0464933f, d7030c10, and the one with
  ``multiNode``): ``spec.image`` {repository, tag} made into "repository:tag" (``GetImage``),
  ``command``, ``args``, ``env`` (a list of EnvVar, merged over the standard NIM env), ``resources``,
  ``nodeSelector``, ``tolerations``, ``podAffinity``, ``replicas`` (default 1; 0 with autoscaling),
  container name "<name>-ctr". ``multiNode`` (LeaderWorkerSet backend): {size (default 1, "number of
  pods"), gpusPerPod, mpi} in the first multi-node releases (``GetLWSSize`` = size;
  config/samples/nim/llm/multi-node/multi-node-nimservice.yaml@b3631f3d: size 2, gpusPerPod 8), then
  {parallelism {tensor, pipeline} (first spelled tp/pp), mpi | ray} (config/samples/nim/serving/
  advanced/multi-node/multi-node-nimservice.yaml@414e8613 ``pp: 2`` with 8 GPUs per pod;
  multi-node-nimservice-ray.yaml@5d5f66ee ``tensor: 2, pipeline: 1``). The operator's own test gives a
  multi-node pod ``parallelism.tensor`` GPUs when ``resources`` names none; with neither it takes the
  NIMCache profile's tp, else 1.
- NIMPipeline (api/apps/v1alpha1/nimpipeline_types.go@07cace8f: ``spec.services[]`` of {name, enabled,
  spec: a NIMServiceSpec}; internal/controller/nimpipeline_controller.go@065ecfda
  ``reconcileNIMPipeline``: a service is created only when ``enabled`` is set and true, as a NIMService
  named ``name`` in the pipeline's namespace with ``spec``, and ``injectDependencies`` merges each
  dependency's ``envName``/``envValue`` into its env). Each is read as that NIMService.
- NOT verified in the operator source at a stored commit: how the LWS size is derived from
  ``parallelism``. NIM's documentation ("the pipeline-parallel size to the number of nodes") is
  followed: pods per group = pipeline (pp), else size, else 1.

Kaito ``kaito.sh/v1beta1`` (and ``v1alpha1``) Workspace (kaito-project/kaito):

- api/v1beta1/workspace_types.go@0228438b: ``resource``, ``inference``, ``tuning`` sit at the top level
  (no ``spec``); ``resource.count`` (default 1, deprecated in v1beta1; :26-31), ``instanceType``
  (:33-37), ``labelSelector`` (:39-40); ``inference.preset.name``, ``inference.template`` (a
  PodTemplateSpec); ``status.targetNodeCount`` (the node estimator's count).
- pkg/workspace/manifests/manifests.go@00dc9aa6 ``GenerateManifestWithPodTemplate``: the template is
  copied, its affinity REPLACED by a required nodeAffinity ``key In [value]`` per
  ``labelSelector.matchLabels`` (none when there are none), tolerations appended, and a StatefulSet of
  ``status.targetNodeCount`` replicas made. A patch of the template's affinity would be overwritten,
  so the template is judged where it is but not patched: the pin belongs in ``resource.labelSelector``.
- pkg/sku/azure_sku_handler.go@0d9b555e and aws_sku_handler.go@46dea37d: GPU count, memory and model
  per instance type. Preset pods request the SKU's GPU count (pkg/workspace/inference
  ``utils.GetSKUNumGPUs``); pkg/model/interface.go@9e0ac34d ``buildVLLMInferenceCommand``: vLLM
  ``tensor-parallel-size`` = GPUs per node and, across nodes, ``pipeline-parallel-size`` = nodes.

llm-d ``llm-d.ai/v1alpha1`` ModelService (llm-d/llm-d-model-service):

- api/v1alpha1/modelservice_types.go@0e99a73d: ``spec.decode`` / ``spec.prefill`` (PDSpec:
  ``replicas`` default 1, ``parallelism.tensor``, ``acceleratorTypes`` {labelKey, labelValues},
  ``containers`` / ``initContainers`` of ContainerSpec {name, image, command, args, env, envFrom,
  resources}), ``spec.routing.modelName``, ``spec.modelArtifacts.uri`` (hf://, pvc://, oci://),
  ``spec.baseConfigMapRef``.
- internal/controller/merge_transformers.go@2aa2b221: the ModelService's containers are merged by name
  into the base ConfigMap's Deployment templates (args prepended, command replaced, env by name), so
  image, command and GPU count usually come from the ConfigMap, which is not in the input: a note says
  so. ``acceleratorTypes`` becomes a required nodeAffinity (llm-d/llm-d-model-service
  internal/controller/accelerator_types.go, applied in child_resources.go). ``parallelism`` is
  declared (api/v1alpha1/modelservice_types.go) but not read by the controller at
  llm-d-model-service@403e9836; it is used here only as the GPU count when nothing else states one,
  with a note. Decode and prefill pods are independent replicas (group 1).

NVIDIA Dynamo ``nvidia.com/v1alpha1`` DynamoGraphDeployment (ai-dynamo/dynamo, deploy/cloud/operator):

- api/v1alpha1/dynamographdeployment_types.go@039eb630: ``spec.services`` maps a service name to a
  DynamoComponentDeploymentSharedSpec; ``spec.envs`` apply to every service.
- api/v1alpha1/dynamocomponentdeployment_types.go@02007306: ``replicas``, ``resources``, ``envs``,
  ``annotations``, ``labels``, ``extraPodMetadata``, ``extraPodSpec``, ``multinode.nodeCount``
  (default 2, minimum 2; "Total number of GPUs is NumberOfNodes * GPU limit"; ``GetNumberOfNodes`` is 1
  without ``multinode``).
- api/dynamo/common/common.go@3ca5653f: ``resources`` {requests, limits} of ResourceItem {cpu, memory,
  gpu (a string count), gpuType (default ``nvidia.com/gpu``), custom} (:25-41); ``extraPodSpec`` is a
  PodSpec plus ``mainContainer`` (:62-65).
- components/backends/vllm/deploy/disagg-multinode.yaml@416ff06e: ``multinode.nodeCount: 2`` with
  ``gpu: "1"`` and ``--tensor-parallel-size 2``: the nodeCount pods of one replica are one group.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from webhook.core import models, sizing
from webhook.core.counts import parse_count
from webhook.core.hardware import default_catalog
from webhook.core.nodepools import INSTANCE_FAMILIES
from webhook.core.operators.base import (MAX_COUNT_TEXT, Context, Found, OperatorKind, PodGroup, count, dig, mapping,
                                         merge_named, name_of, product)

HINT = "gpu-admission.io/"
MODEL_HINT = HINT + "model"
TP_HINT = HINT + "tensor-parallel"
MAX_TEXT = 512
"""Longest model name, URL or image read from a resource (longer ones are not names)."""
MAX_ITEMS = 256
"""Containers, env entries, args and services read per object: more than any real resource has."""

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"


# ---------------------------------------------------------------- shared helpers


def text(value: Any) -> str | None:
    """A non-empty string of reasonable length, else None."""
    return value if isinstance(value, str) and 0 < len(value) <= MAX_TEXT else None


def strings(value: Any) -> list[str]:
    """The strings of a list (command, args), others dropped; capped."""
    return [v for v in value[:MAX_ITEMS] if isinstance(v, str)] if isinstance(value, list) else []


def mappings(value: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of a list (env entries, containers), others dropped; capped."""
    return [v for v in value[:MAX_ITEMS] if isinstance(v, Mapping)] if isinstance(value, list) else []


def product_labels(product_id: str | None) -> dict[str, str]:
    """Node label -> value naming ``product_id`` in every label scheme the catalog has for it (the
    canonical spelling), so a pin reads the same whatever scheme the policy uses."""
    catalog = default_catalog()
    found = catalog.products.get(product_id) if product_id else None
    if found is None:
        return {}
    return {catalog.schemes[scheme]: values[0] for scheme, values in found.labels.items()
            if values and scheme in catalog.schemes}


def own_hints(obj: Mapping[str, Any]) -> dict[str, str]:
    """The object's own ``gpu-admission.io/*`` annotations (they win over what a reader derives)."""
    annotations = mapping(mapping(obj.get("metadata")).get("annotations"))
    return {k: v for k, v in annotations.items() if isinstance(k, str) and k.startswith(HINT) and isinstance(v, str)}


def holder(spec: Mapping[str, Any], *, hints: Mapping[str, str | None] | None = None,
           own: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A pod template (``metadata`` + ``spec``) for a synthesized spec: derived ``hints`` (None values
    dropped) under the user's ``own`` annotations."""
    annotations = {k: v for k, v in (hints or {}).items() if isinstance(v, str) and v}
    annotations.update(own or {})
    metadata: dict[str, Any] = {"annotations": annotations}
    if labels:
        metadata["labels"] = dict(labels)
    return {"metadata": metadata, "spec": dict(spec)}


def required_affinity(requirements: list[tuple[str, list[str]]]) -> dict[str, Any] | None:
    """``{nodeAffinity: required: one term}`` whose expressions are ``key In values``; None if empty."""
    exprs = [{"key": key, "operator": "In", "values": values} for key, values in requirements if values]
    if not exprs:
        return None
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": exprs}]}}}


def gpu_request(resources: Any) -> bool:
    """Whether a container's ``resources`` name any GPU-like extended resource."""
    resources = mapping(resources)
    return any(isinstance(k, str) and k.endswith("/gpu")
               for part in ("limits", "requests") for k in mapping(resources.get(part)))


def positive(value: Any) -> int | None:
    """A positive whole count (digit strings accepted, capped like every count), else None."""
    n = count(value, 0)
    return n if n > 0 else None


def strip_scheme(url: str | None, *schemes: str) -> str | None:
    """``hf://org/model`` -> ``org/model`` for the given schemes, other URLs unchanged."""
    if url is None:
        return None
    for scheme in schemes:
        if url.startswith(scheme + "://"):
            return url[len(scheme) + 3:] or None
    return url


def env_list(env: Any) -> list[dict[str, Any]]:
    """A Kubernetes env list from a list of EnvVar objects (entries without a string name dropped)."""
    return [dict(e) for e in mappings(env) if isinstance(e.get("name"), str)]


# ---------------------------------------------------------------- KubeAI


KUBEAI_PROFILES: Mapping[str, str | None] = {
    # resourceProfiles of charts/kubeai/values.yaml -> catalog product (None: not in the catalog)
    "nvidia-gpu-t4": "T4", "nvidia-gpu-l4": "L4", "nvidia-gpu-l40s": "L40S",
    # GKE's nvidia-h100-80gb and EKS's h100 both name the SXM H100 (values-gke.yaml, values-eks.yaml)
    "nvidia-gpu-h100": "H100-SXM5-80GB", "nvidia-gpu-gh200": "GH200",
    # EKS pins a100 + 81920/40960 MiB: the p4de/p4d SXM4 parts
    "nvidia-gpu-a100-80gb": "A100-SXM4-80GB", "nvidia-gpu-a100-40gb": "A100-SXM4-40GB",
    "nvidia-gpu-a16": None, "nvidia-gpu-rtx4070-8gb": None,
    "amd-gpu-mi300x": "MI300X",
}
KUBEAI_IMAGES: Mapping[str, str] = {
    # modelServers.<engine>.images.default of charts/kubeai/values.yaml (kubeai-project@0d7de291)
    "VLLM": "vllm/vllm-openai:v0.11.2", "OLlama": "ollama/ollama:0.11.11",
    "FasterWhisper": "fedirz/faster-whisper-server:latest-cuda", "Infinity": "michaelf34/infinity:0.0.77",
}


def _kubeai_profile(profile: Any) -> tuple[str | None, int, str | None, list[str]]:
    """(profile name, units, GPU resource or None, notes) of ``spec.resourceProfile``."""
    if profile is None:
        return None, 0, None, ["spec.resourceProfile is not set: KubeAI gives the model pods no GPU"]
    parts = profile.split(":") if isinstance(profile, str) and len(profile) <= MAX_TEXT else []
    units = (parse_count(parts[1], cap=MAX_COUNT_TEXT, padded=True, signs="+-")
             if len(parts) == 2 and parts[0] else None)
    if units is None:
        return None, 0, None, [f"spec.resourceProfile {str(profile)[:64]!r} is not <profile>:<count>: KubeAI "
                               "rejects it and creates no pods"]
    name, n = parts[0], count(units, 0)
    if name.startswith("nvidia-gpu"):
        resource: str | None = NVIDIA_GPU
    elif name.startswith("amd-gpu"):
        resource = AMD_GPU
    else:
        resource = None
    notes = []
    if name not in KUBEAI_PROFILES and resource is not None:
        notes.append(f"resource profile {name[:64]!r} is not one of KubeAI's defaults: one GPU per unit assumed "
                     "(the cluster's KubeAI config defines it)")
    elif resource is None and name != "cpu":
        notes.append(f"resource profile {name[:64]!r} names no GPU KubeAI's defaults know: judged without GPUs")
    return name, n, resource, notes


def _kubeai(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    name = name_of(dig(obj, "metadata", "name"), "model")
    url = text(spec.get("url"))
    stated = spec.get("engine") if isinstance(spec.get("engine"), str) else None
    engine = stated if stated in KUBEAI_IMAGES else "VLLM"
    notes: list[str] = []
    if stated not in KUBEAI_IMAGES:
        notes.append(f"spec.engine {str(spec.get('engine'))[:32]!r} is none of VLLM, OLlama, FasterWhisper, "
                     "Infinity: judged as VLLM")
    profile, units, resource, profile_notes = _kubeai_profile(spec.get("resourceProfile"))
    notes += profile_notes
    args = strings(spec.get("args"))
    env = [{"name": k, "value": v} for k, v in sorted(mapping(spec.get("env")).items())
           if isinstance(k, str) and isinstance(v, str)][:MAX_ITEMS]
    model = strip_scheme(url, "hf", "ollama")
    container: dict[str, Any] = {"name": "server", "image": text(spec.get("image")) or KUBEAI_IMAGES[engine],
                                 "env": env}
    hints: dict[str, str | None] = {}
    if engine == "VLLM":
        container["command"] = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        container["args"] = [f"--model={model or ''}", f"--served-model-name={name}", *args]
    elif engine == "OLlama":
        container["args"] = args
        if model:  # KubeAI pulls in its startup probe; the Ollama parser reads a postStart pull
            container["lifecycle"] = {"postStart": {"exec": {"command": ["/bin/ollama", "pull", model]}}}
    else:
        container["args"] = args
        hints[MODEL_HINT] = model
    if url and not url.startswith(("hf://", "ollama://")):
        notes.append(f"the model is at {url[:80]!r}: its name may not say its size (annotate "
                     f"{MODEL_HINT} or gpu-admission.io/params)")
    pod: dict[str, Any] = {"containers": [container]}
    if resource is not None and units > 0:
        container["resources"] = {"limits": {resource: str(units)}, "requests": {resource: str(units)}}
    product_id = KUBEAI_PROFILES.get(profile or "")
    pin = product_labels(product_id)
    if pin:
        pod["nodeSelector"] = pin
        notes.append(f"resource profile {profile!r} read as {product_id}: KubeAI's default profiles pin no "
                     "node label, its GKE and EKS values do; the cluster's own profile decides where pods land")
    elif profile in KUBEAI_PROFILES:
        notes.append(f"resource profile {profile!r} names a GPU the catalog does not hold: no product pin")
    replicas = spec.get("replicas")
    pods = count(replicas, 0) if replicas is not None else count(spec.get("minReplicas"), 0)
    yield Found((), holder(pod, hints=hints, own=own_hints(obj)), "server", pods,
                synthesized=True, group=1, notes=tuple(notes))


# ---------------------------------------------------------------- NVIDIA NIM


def _nim_parallelism(multi: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(tensor, pipeline) of ``multiNode.parallelism`` in either spelling (tensor/pipeline, tp/pp)."""
    par = mapping(multi.get("parallelism"))
    tensor = positive(par.get("tensor")) or positive(par.get("tp"))
    pipeline = positive(par.get("pipeline")) or positive(par.get("pp"))
    return tensor, pipeline


def _nim(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    name = name_of(dig(obj, "metadata", "name"), "nim")
    image = mapping(spec.get("image"))
    repository, tag = text(image.get("repository")), text(image.get("tag"))
    notes: list[str] = []
    if repository is None:
        notes.append("spec.image.repository is not set: the NIM's model cannot be read from its image")
    container: dict[str, Any] = {"name": f"{name}-ctr", "image": f"{repository}:{tag}" if repository and tag
                                 else (repository or ""), "env": env_list(spec.get("env"))}
    for key in ("command", "args"):
        if strings(spec.get(key)):
            container[key] = strings(spec.get(key))
    resources = mapping(spec.get("resources"))
    container["resources"] = {k: dict(mapping(resources.get(k))) for k in ("limits", "requests")
                              if isinstance(resources.get(k), Mapping)}
    multi = spec.get("multiNode")
    size, tensor, hints = 1, None, {}
    if isinstance(multi, Mapping):
        tensor, pipeline = _nim_parallelism(multi)
        size = pipeline or positive(multi.get("size")) or 1
        if pipeline:
            notes.append(f"multiNode.parallelism.pipeline={pipeline} read as {pipeline} pods per LeaderWorkerSet "
                         "group (NIM places one pipeline stage per node)")
        if tensor:
            hints[TP_HINT] = str(tensor)
        per_pod = tensor or positive(multi.get("gpusPerPod"))
    else:
        per_pod = None
    if not gpu_request(container["resources"]):
        gpus = per_pod or 1
        container["resources"] = {"limits": {NVIDIA_GPU: str(gpus)}, "requests": {NVIDIA_GPU: str(gpus)}}
        if per_pod is None:
            notes.append("spec.resources names no GPU: the operator takes the count from the NIMCache profile "
                         "(not in the input); 1 assumed")
    pod: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "runtimeClassName", "schedulerName"):
        if spec.get(key) is not None:
            pod[key] = spec[key]
    if isinstance(spec.get("tolerations"), list):
        pod["tolerations"] = spec["tolerations"]
    if isinstance(spec.get("podAffinity"), Mapping):
        pod["affinity"] = {"podAffinity": spec["podAffinity"]}
    replicas = count(spec.get("replicas"))
    yield Found((), holder(pod, hints=hints, own=own_hints(obj)), "service", product(replicas, size),
                synthesized=True, group=size, notes=tuple(notes))


def _nim_pipeline(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    """A NIMPipeline: each enabled service is the NIMService the controller creates from it (named
    ``services[].name``, in the pipeline's namespace, spec ``services[].spec`` with the dependencies'
    env merged in), read by the NIMService reader; a service whose ``enabled`` is not true makes none."""
    meta = mapping(obj.get("metadata"))
    services = dig(obj, "spec", "services")
    for i, service in enumerate(services[:MAX_ITEMS] if isinstance(services, list) else []):
        service = mapping(service)
        if service.get("enabled") is not True:
            continue
        name = text(service.get("name")) or f"services[{i}]"
        spec = dict(mapping(service.get("spec")))
        injected = [{"name": d["envName"], "value": d["envValue"]} for d in mappings(service.get("dependencies"))
                    if text(d.get("envName")) and text(d.get("envValue"))]
        if injected:
            spec["env"] = merge_named(spec.get("env"), injected)
        nim = {"metadata": {"name": name, "annotations": mapping(meta.get("annotations"))}, "spec": spec}
        for found in _nim(nim, "NIMService", context):
            yield replace(found, path=("spec", "services", str(i)), role=name)


# ---------------------------------------------------------------- Kaito


AZURE_SKUS: Mapping[str, tuple[int, str | None]] = {
    # pkg/sku/azure_sku_handler.go@46dea37d (every SKU it lists): SKU -> (GPUs per node, catalog product). The product is chosen by
    # Kaito's GPUModel and per-GPU memory (GPUMemGiB / GPUCount) with Azure's series: NC A100 v4 is the
    # 80 GB PCIe card, ND A100 v4 the 40 GB SXM4 and NDm A100 v4 the 80 GB SXM4, NC(C)ads H100 v5 the
    # 94 GB H100 NVL, ND H100 v5 the SXM5; None where the catalog has no such product.
    "Standard_NC6s_v3": (1, None), "Standard_NC12s_v3": (2, None), "Standard_NC24s_v3": (4, None),
    "Standard_NC24rs_v3": (4, None),  # V100 16 GB PCIe: not a catalog product (its 32 GB and SXM2 are)
    "Standard_NC4as_T4_v3": (1, "T4"), "Standard_NC8as_T4_v3": (1, "T4"),
    "Standard_NC16as_T4_v3": (1, "T4"), "Standard_NC64as_T4_v3": (4, "T4"),
    "Standard_NV36ads_A10_v5": (1, "A10"), "Standard_NV72ads_A10_v5": (2, "A10"),
    "Standard_NC24ads_A100_v4": (1, "A100-PCIE-80GB"), "Standard_NC48ads_A100_v4": (2, "A100-PCIE-80GB"),
    "Standard_NC96ads_A100_v4": (4, "A100-PCIE-80GB"),
    "Standard_ND96asr_A100_v4": (8, "A100-SXM4-40GB"), "Standard_ND96amsr_A100_v4": (8, "A100-SXM4-80GB"),
    "Standard_NC40ads_H100_v5": (1, "H100-NVL"), "Standard_NC80adis_H100_v5": (2, "H100-NVL"),
    "Standard_NCC40ads_H100_v5": (1, "H100-NVL"), "Standard_ND96isr_H100_v5": (8, "H100-SXM5-80GB"),
    "Standard_ND96isr_H200_v5": (8, "H200"),
    "Standard_NG32ads_V620_v1": (1, None), "Standard_NG32adms_V620_v1": (1, None),
    "Standard_NV6": (1, None), "Standard_NV12": (2, None), "Standard_NV24": (4, None),
    "Standard_NV12s_v3": (1, None), "Standard_NV24s_v3": (2, None), "Standard_NV48s_v3": (4, None),
    "Standard_NV32as_v4": (1, None),
}
AWS_GPUS: Mapping[str, int] = {
    # pkg/sku/aws_sku_handler.go: NVIDIA instance types of a family webhook.core.nodepools maps
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8, "p4d.24xlarge": 8,
    "p4de.24xlarge": 8, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.16xlarge": 1,
    "gr6.4xlarge": 1, "gr6.8xlarge": 1, "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.12xlarge": 4, "g5.16xlarge": 1,
    "g5.24xlarge": 4, "g5.48xlarge": 8, "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1,
    "g4dn.8xlarge": 1, "g4dn.16xlarge": 1, "g4dn.12xlarge": 4, "g4dn.metal": 8,
}


def kaito_sku(instance_type: str | None) -> tuple[int | None, str | None]:
    """(GPUs per node, catalog product) of a Kaito instance type; (None, None) when unknown."""
    if instance_type is None:
        return None, None
    if instance_type in AZURE_SKUS:
        return AZURE_SKUS[instance_type]
    if instance_type in AWS_GPUS:
        return AWS_GPUS[instance_type], INSTANCE_FAMILIES.get(instance_type.split(".", 1)[0])
    return None, None


def _kaito_nodes(obj: Mapping[str, Any]) -> int:
    """Nodes (= pods) of a Workspace: ``status.targetNodeCount`` once Kaito set it, else
    ``resource.count`` (default 1)."""
    target = positive(dig(obj, "status", "targetNodeCount"))
    return target or count(dig(obj, "resource", "count"))


KAITO_MAX_NODES = 16


def _kaito_estimate(preset: str, product_id: str | None, gpus: int | None) -> int | None:
    """The nodes Kaito's estimator would give a preset when ``status.targetNodeCount`` is not set yet.

    ``resource.count`` is deprecated in v1beta1 and the controller sizes the node count itself: the
    preset's total GPU memory requirement over the instance type's GPU memory per node, rounded up
    (pkg/workspace/estimator/skubasednodesestimator, kaito-project/kaito#1414; a maintainer confirms
    the count is ignored in kaito-project/kaito#1956). The preset table is Kaito's, not in the input,
    so the requirement is estimated the way this project sizes weights (the model catalog's size and
    native precision, 10% for the runtime and cache), and only ever raises the count: a 119B preset
    on one-A100 nodes is a multi-node group, not a model that "does not fit one GPU"."""
    info = models.describe(preset)
    catalog = default_catalog()
    if info is None or gpus is None or product_id not in catalog.products:
        return None
    bpp = sizing.bytes_per_param(dtype=None, quantization=info.name_quantization, native_dtype=info.native_dtype)
    need_gib = info.params_b * 1e9 * bpp / sizing.GIB * 1.1
    per_node = catalog.products[product_id].memory_gib * gpus
    return min(KAITO_MAX_NODES, max(1, math.ceil(need_gib / per_node))) if per_node > 0 else None


def _kaito_selection(obj: Mapping[str, Any], notes: list[str]) -> tuple[dict[str, Any] | None, int | None]:
    """The required nodeAffinity Kaito gives the pods (``resource.labelSelector.matchLabels``) with the
    instance type's product pinned too, and the GPUs per node of the instance type."""
    resource = mapping(obj.get("resource"))
    match = mapping(mapping(resource.get("labelSelector")).get("matchLabels"))
    requirements = [(k, [v]) for k, v in sorted(match.items())[:MAX_ITEMS]
                    if isinstance(k, str) and isinstance(v, str)]
    instance_type = text(resource.get("instanceType"))
    gpus, product_id = kaito_sku(instance_type)
    pin = product_labels(product_id)
    if pin:
        requirements += [(k, [v]) for k, v in pin.items() if k not in match]
        notes.append(f"resource.instanceType {instance_type} read as {product_id} (Kaito provisions that SKU "
                     "for resource.labelSelector)")
    elif instance_type and gpus is not None:
        notes.append(f"resource.instanceType {instance_type} has a GPU the catalog does not hold: no product pin")
    elif instance_type:
        notes.append(f"resource.instanceType {instance_type[:64]!r} is not in Kaito's SKU tables: its GPU is "
                     "not known")
    return required_affinity(requirements), gpus


def _kaito(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    inference = mapping(obj.get("inference"))
    nodes = _kaito_nodes(obj)
    group = max(nodes, 1)
    notes: list[str] = []
    affinity, sku_gpus = _kaito_selection(obj, notes)
    template = inference.get("template")
    if isinstance(template, Mapping):
        spec = dict(mapping(template.get("spec")))
        spec.pop("affinity", None)  # Kaito replaces it with the labelSelector's nodeAffinity
        if affinity is not None:
            spec["affinity"] = affinity
        notes.append("Kaito replaces the template's affinity with resource.labelSelector: pin the GPU product "
                     "there (the template is not patched)")
        copy = {**template, "spec": spec}
        yield Found(("inference", "template"), copy, "inference", nodes, synthesized=True, group=group,
                    notes=tuple(notes))
        return
    preset = mapping(inference.get("preset"))
    tuning = mapping(obj.get("tuning"))
    role, preset_name = "inference", text(preset.get("name"))
    if preset_name is None and tuning:
        role, preset_name = "tuning", text(mapping(tuning.get("preset")).get("name"))
    if preset_name is None:
        return
    gpus = sku_gpus
    if gpus is None:
        gpus = 1
        notes.append("the GPUs per node come from the preset (not in the input) or the nodes' labels: 1 assumed")
    if positive(dig(obj, "status", "targetNodeCount")) is None:
        estimate = _kaito_estimate(preset_name, kaito_sku(text(mapping(obj.get("resource")).get("instanceType")))[1],
                                   sku_gpus)
        if estimate is not None and estimate > nodes:
            notes.append(f"{estimate} nodes: Kaito's node estimator sizes the preset over the instance type's GPU "
                         f"memory (resource.count {nodes} is deprecated); status.targetNodeCount will say")
            nodes = group = estimate
    name = name_of(dig(obj, "metadata", "name"), "workspace")
    if role == "inference":
        args = ["--model", preset_name, "--tensor-parallel-size", str(gpus)]
        if nodes > 1:
            args += ["--pipeline-parallel-size", str(nodes)]
        container: dict[str, Any] = {"name": name, "command": ["python3", "-m", "vllm.entrypoints.openai.api_server",
                                                              *args]}
        hints: dict[str, str | None] = {}
        notes.append("preset judged as Kaito's default vLLM runtime (tensor parallel over the node's GPUs, "
                     "pipeline parallel over the nodes)")
    else:
        container = {"name": name}
        hints = {MODEL_HINT: preset_name}
        notes.append(f"tuning ({str(tuning.get('method'))[:16]}) of preset {preset_name}: the trainer's command "
                     "is Kaito's")
    container["resources"] = {"limits": {NVIDIA_GPU: str(gpus)}, "requests": {NVIDIA_GPU: str(gpus)}}
    pod: dict[str, Any] = {"containers": [container]}
    if affinity is not None:
        pod["affinity"] = affinity
    yield Found((), holder(pod, hints=hints, own=own_hints(obj)), role, nodes, synthesized=True, group=group,
                notes=tuple(notes))


# ---------------------------------------------------------------- llm-d ModelService


def _llmd_container(c: Mapping[str, Any]) -> dict[str, Any]:
    """A ContainerSpec as a container (``ConvertToContainerSlice``)."""
    out: dict[str, Any] = {"name": name_of(c.get("name"), "vllm")}
    if text(c.get("image")):
        out["image"] = c["image"]
    for key in ("command", "args"):
        if strings(c.get(key)):
            out[key] = strings(c.get(key))
    if env_list(c.get("env")):
        out["env"] = env_list(c.get("env"))
    if mappings(c.get("envFrom")):
        out["envFrom"] = mappings(c.get("envFrom"))
    if isinstance(c.get("resources"), Mapping):
        out["resources"] = c["resources"]
    return out


def _llmd(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    uri = text(dig(spec, "modelArtifacts", "uri"))
    model = strip_scheme(uri, "hf") if uri and uri.startswith("hf://") else text(dig(spec, "routing", "modelName"))
    base = text(dig(spec, "baseConfigMapRef", "name"))
    for role in ("decode", "prefill"):
        pd = spec.get(role)
        if not isinstance(pd, Mapping):
            continue
        notes = [f"image, command and GPUs come from the base ConfigMap {base or '(spec.baseConfigMapRef)'} "
                 f"merged with spec.{role}.containers; it is not in the input"]
        containers = [_llmd_container(c) for c in mappings(pd.get("containers"))] or [{"name": "vllm"}]
        tensor = positive(dig(pd, "parallelism", "tensor"))
        if not any(gpu_request(c.get("resources")) for c in containers) and tensor:
            containers[0]["resources"] = {"limits": {NVIDIA_GPU: str(tensor)}, "requests": {NVIDIA_GPU: str(tensor)}}
            notes.append(f"GPUs per pod read from spec.{role}.parallelism.tensor={tensor} (declared; the "
                         "controller does not read it)")
        pod: dict[str, Any] = {"containers": containers}
        init = [_llmd_container(c) for c in mappings(pd.get("initContainers"))]
        if init:
            pod["initContainers"] = init
        accel = mapping(pd.get("acceleratorTypes"))
        key = text(accel.get("labelKey"))
        values = [v for v in strings(accel.get("labelValues")) if len(v) <= 63]
        affinity = required_affinity([(key, values)]) if key else None
        if affinity is not None:
            pod["affinity"] = affinity
        hints = {MODEL_HINT: model}
        replicas = count(pd.get("replicas"))
        yield Found(("spec", role), holder(pod, hints=hints, own=own_hints(obj)), role, replicas,
                    synthesized=True, group=1, notes=tuple(notes))


# ---------------------------------------------------------------- NVIDIA Dynamo


_DYNAMO_ENGINE = re.compile(r"dynamo\.(vllm|sglang|trtllm)")
_MODEL_FLAGS = ("--model", "--model-path")
_TP_FLAGS = ("--tensor-parallel-size", "--tp-size", "--tp")


def dynamo_hints(container: Mapping[str, Any]) -> dict[str, str | None]:
    """Model and TP of a ``python3 -m dynamo.<engine> ...`` main container (no launcher reads those
    modules): the flags after the module, also inside a ``sh -c`` string. Unparseable text: nothing."""
    words: list[str] = []
    for part in strings(container.get("command")) + strings(container.get("args")):
        try:
            words += shlex.split(part[:16_384]) if " " in part else [part]
        except ValueError:
            return {}
    start = next((i for i, w in enumerate(words) if _DYNAMO_ENGINE.fullmatch(w)), None)
    if start is None:
        return {}
    hints: dict[str, str | None] = {}
    rest = words[start + 1:]
    for i, word in enumerate(rest):
        flag, eq, value = word.partition("=")
        value = value if eq else (rest[i + 1] if i + 1 < len(rest) else "")
        if flag in _MODEL_FLAGS and MODEL_HINT not in hints and text(value) and not value.startswith("-"):
            hints[MODEL_HINT] = value
        elif flag in _TP_FLAGS and TP_HINT not in hints and positive(value):
            hints[TP_HINT] = str(positive(value))
    return hints


def _dynamo_gpus(resources: Mapping[str, Any]) -> tuple[str, int] | None:
    """(resource name, count) of Dynamo's ``resources`` (limits first, then requests)."""
    for part in ("limits", "requests"):
        item = mapping(resources.get(part))
        n = positive(item.get("gpu"))
        if n:
            kind = text(item.get("gpuType"))
            return (kind if kind and "/" in kind else NVIDIA_GPU), n
    return None


def _dynamo(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    shared_env = env_list(spec.get("envs"))
    services = mapping(spec.get("services"))
    for name in sorted(k for k in services if isinstance(k, str))[:MAX_ITEMS]:
        svc = mapping(services[name])
        extra = mapping(svc.get("extraPodSpec"))
        pod = {k: v for k, v in extra.items() if k != "mainContainer" and isinstance(k, str)}
        main = dict(mapping(extra.get("mainContainer")))
        main.setdefault("name", "main")
        env = shared_env + env_list(svc.get("envs")) + env_list(main.get("env"))
        if env:
            main["env"] = env
        gpus = _dynamo_gpus(mapping(svc.get("resources")))
        if gpus is not None:
            main["resources"] = {**mapping(main.get("resources")),
                                 "limits": {**mapping(mapping(main.get("resources")).get("limits")),
                                            gpus[0]: str(gpus[1])}}
        others = [c for c in mappings(pod.get("containers")) if c.get("name") != main["name"]]
        pod["containers"] = [main, *others]
        multinode = svc.get("multinode")
        nodes = max(count(mapping(multinode).get("nodeCount"), 2), 1) if isinstance(multinode, Mapping) else 1
        annotations = {**mapping(svc.get("annotations")), **mapping(dig(svc, "extraPodMetadata", "annotations"))}
        own = {k: v for k, v in annotations.items() if isinstance(k, str) and k.startswith(HINT) and isinstance(v, str)}
        replicas = count(svc.get("replicas"))
        yield Found(("spec", "services", name), holder(pod, hints=dynamo_hints(main), own={**own_hints(obj), **own}),
                    name, product(replicas, nodes), synthesized=True, group=nodes)


KAITO_WORKSPACE = PodGroup("kaito.sh/workspace", "Kaito workspace", "kaito")
"""kaito-project/kaito: the StatefulSet of a multi-node Workspace (pkg/workspace/manifests/manifests.go;
the key in api/v1beta1/labels.go). NIM multi-node, KServe LLMInferenceService and llm-d run on
LeaderWorkerSets, whose pods carry LWS's labels."""

KINDS: tuple[OperatorKind, ...] = (
    OperatorKind("kubeai.org/v1", "Model", "models", _kubeai, source="kubeai-project/kubeai api/k8s/v1/model_types.go"),
    OperatorKind("apps.nvidia.com/v1alpha1", "NIMService", "nimservices", _nim,
                 source="NVIDIA/k8s-nim-operator api/apps/v1alpha1/nimservice_types.go"),
    OperatorKind("apps.nvidia.com/v1alpha1", "NIMPipeline", "nimpipelines", _nim_pipeline,
                 source="NVIDIA/k8s-nim-operator api/apps/v1alpha1/nimpipeline_types.go@07cace8f, "
                        "internal/controller/nimpipeline_controller.go@065ecfda"),
    *(OperatorKind(f"kaito.sh/{version}", "Workspace", "workspaces", _kaito, group=KAITO_WORKSPACE,
                   source=f"kaito-project/kaito api/{version}/workspace_types.go") for version in ("v1beta1", "v1alpha1")),
    OperatorKind("llm-d.ai/v1alpha1", "ModelService", "modelservices", _llmd,
                 source="llm-d/llm-d-model-service api/v1alpha1/modelservice_types.go"),
    OperatorKind("nvidia.com/v1alpha1", "DynamoGraphDeployment", "dynamographdeployments", _dynamo,
                 source="ai-dynamo/dynamo deploy/cloud/operator/api/v1alpha1/dynamographdeployment_types.go"),
)
