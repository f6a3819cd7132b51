"""vLLM production-stack operator ``production-stack.vllm.ai/v1alpha1`` VLLMRuntime: a vLLM Deployment
built from the resource's fields (vllm-project/production-stack, ``operator/``).

The resource holds no pod template; the controller writes one, and the reader writes it the same way
(only what the judgement reads: the command line, the env the user sets, the GPU request, node
selection). Facts read in vllm-project/production-stack:

- operator/api/v1alpha1/vllmruntime_types.go@18f0b206: ``spec.model`` {modelURL, enableLoRA, enableTool,
  toolCallParser, maxModelLen, dtype, maxNumSeqs}, ``spec.vllmConfig`` {enableChunkedPrefill,
  enablePrefixCaching, tensorParallelSize, gpuMemoryUtilization, maxLoras, extraArgs, v1, port (default
  8000), env [{name, value}]}, ``spec.deploymentConfig`` {replicas (default 1), nodeSelectorTerms,
  toleration, resources {cpu, memory, gpu, gpuType}, image {registry, name}}; the scale subresource is
  ``deploymentConfig.replicas``.
- operator/internal/controller/vllmruntime_controller.go@0f1e8295 ``deploymentForVLLMRuntime``: one
  container ``vllm``, image ``<registry>/<name>``, command ``/opt/venv/bin/vllm serve``, args
  ``<modelURL> --host 0.0.0.0 --port <port>`` then ``--enable-lora``, ``--enable-auto-tool-choice``,
  ``--tool-call-parser``, ``--(no-)enable-chunked-prefill``, ``--(no-)enable-prefix-caching``,
  ``--max-model-len``, ``--dtype``, ``--tensor-parallel-size`` (when > 0), ``--max-num-seqs``,
  ``--gpu_memory_utilization``, ``--max_loras``, then ``extraArgs``; the GPU count ``resources.gpu`` as
  both request and limit of ``gpuType`` (default ``nvidia.com/gpu``; at 3310887f always that);
  ``nodeSelectorTerms`` become a required nodeAffinity, ``toleration`` the tolerations; a Deployment of
  ``deploymentConfig.replicas`` independent pods.
- The prefill/decode version of the same controller (``reconcilePDDisaggregation``,
  ``deploymentForNode``, ``buildVLLMArgsForNode``, ``buildResourceRequirementsForNode``; read in the
  file index without a commit, and the sample config/samples/production-stack_v1alpha1_vllmruntime_1p1d.yaml
  @ae0fce0a): with ``spec.enablePDDisaggregation`` the Deployments ``<name>-prefill`` and
  ``<name>-decode`` are built from ``spec.topology.prefill`` and ``.decode``, each a NodeConfig with
  its own model, vllmConfig, lmCacheConfig, storageConfig and deploymentConfig, with the same command
  line and GPU request, and no affinity or tolerations.

The spec is ``synthesized`` (nothing in the resource a patch could land in); the pin belongs in
``deploymentConfig.nodeSelectorTerms``, which a note names. Pods are independent replicas (group 1).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators.base import Context, Found, OperatorKind, count, dig, mapping
from webhook.core.operators.model_servers import env_list, holder, mappings, own_hints, positive, strings, text

API_VERSION = "production-stack.vllm.ai/v1alpha1"
COMMAND = ["/opt/venv/bin/vllm", "serve"]
NVIDIA_GPU = "nvidia.com/gpu"


def vllm_args(model: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """``deploymentForVLLMRuntime`` / ``buildVLLMArgsForNode``: the vLLM command line's arguments, in order."""
    port = positive(config.get("port")) or 8000
    args = [text(model.get("modelURL")) or "", "--host", "0.0.0.0", "--port", str(port)]
    if model.get("enableLoRA") is True:
        args.append("--enable-lora")
    if model.get("enableTool") is True:
        args.append("--enable-auto-tool-choice")
    if text(model.get("toolCallParser")):
        args += ["--tool-call-parser", model["toolCallParser"]]
    args.append("--enable-chunked-prefill" if config.get("enableChunkedPrefill") is True
                else "--no-enable-chunked-prefill")
    args.append("--enable-prefix-caching" if config.get("enablePrefixCaching") is True
                else "--no-enable-prefix-caching")
    for key, flag, source in (("maxModelLen", "--max-model-len", model), ("dtype", "--dtype", model),
                              ("tensorParallelSize", "--tensor-parallel-size", config),
                              ("maxNumSeqs", "--max-num-seqs", model),
                              ("gpuMemoryUtilization", "--gpu_memory_utilization", config),
                              ("maxLoras", "--max_loras", config)):
        value = source.get(key)
        if key in ("dtype", "gpuMemoryUtilization"):
            word = text(value)
            if word:
                args += [flag, word]
        elif positive(value):
            args += [flag, str(positive(value))]
    return args + strings(config.get("extraArgs"))


def _pod(node: Mapping[str, Any], *, placement: bool) -> tuple[dict[str, Any], list[str]]:
    """The pod spec the controller writes for one NodeConfig (or the single-mode spec), and notes."""
    model, config = mapping(node.get("model")), mapping(node.get("vllmConfig"))
    deploy = mapping(node.get("deploymentConfig"))
    image = mapping(deploy.get("image"))
    registry, name = text(image.get("registry")), text(image.get("name"))
    container: dict[str, Any] = {"name": "vllm", "image": f"{registry}/{name}" if registry and name else (name or ""),
                                 "command": list(COMMAND), "args": vllm_args(model, config)}
    env = [{"name": e["name"], "value": e.get("value")} for e in env_list(config.get("env"))]
    if config.get("v1") is not True:
        env.insert(0, {"name": "VLLM_USE_V1", "value": "0"})
    container["env"] = env
    notes: list[str] = []
    resources = mapping(deploy.get("resources"))
    gpus = count(resources.get("gpu"), -1) if resources.get("gpu") not in (None, "") else 0
    if gpus < 0:
        notes.append(f"deploymentConfig.resources.gpu {str(resources.get('gpu'))[:16]!r} is not a whole number of GPUs")
        gpus = 0
    if gpus > 0:
        kind = text(resources.get("gpuType")) or NVIDIA_GPU
        container["resources"] = {"limits": {kind: str(gpus)}, "requests": {kind: str(gpus)}}
    pod: dict[str, Any] = {"containers": [container]}
    if placement:
        terms = mappings(deploy.get("nodeSelectorTerms"))
        if terms:
            pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms}}}
        if mappings(deploy.get("toleration")):
            pod["tolerations"] = mappings(deploy.get("toleration"))
        if gpus > 0 and not terms:
            notes.append("the GPU product pin belongs in spec.deploymentConfig.nodeSelectorTerms (the VLLMRuntime "
                         "is not patched)")
    elif gpus > 0:
        notes.append("the prefill/decode Deployments carry no node selection the VLLMRuntime can set: their pods "
                     "are pinned when they are created")
    return pod, notes


def _runtime(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    own = own_hints(obj)
    if spec.get("enablePDDisaggregation") is True:
        topology = mapping(spec.get("topology"))
        for role in ("prefill", "decode"):
            node = topology.get(role)
            if isinstance(node, Mapping):
                pod, notes = _pod(node, placement=False)
                yield Found(("spec", "topology", role), holder(pod, own=own), role,
                            count(dig(node, "deploymentConfig", "replicas")), synthesized=True, group=1,
                            notes=tuple(notes))
        return
    pod, notes = _pod(spec, placement=True)
    yield Found((), holder(pod, own=own), "vllm", count(dig(spec, "deploymentConfig", "replicas")),
                synthesized=True, group=1, notes=tuple(notes))


KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(API_VERSION, "VLLMRuntime", "vllmruntimes", _runtime,
                 source="vllm-project/production-stack operator/api/v1alpha1/vllmruntime_types.go@18f0b206, "
                        "operator/internal/controller/vllmruntime_controller.go@0f1e8295"),
)
