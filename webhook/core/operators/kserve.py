"""KServe: ``serving.kserve.io/v1beta1`` InferenceService (and KFServing's ``serving.kubeflow.org/v1beta1``,
the same shape: :data:`KFSERVING_GROUP`) and ``serving.kserve.io/v1alpha1`` /
``v1alpha2`` LLMInferenceService (both versions are served upstream; the sample manifests use both).

Facts read in kserve/kserve at the commits below (the file index used gives no line numbers, so
functions are named instead; they are stable across versions): predictor.go@0187b461,
deployment_reconciler.go (master, Nov 2026), inference_service_validation.go@00ff0005,
pkg/controller/v1beta1/inferenceservice/utils/utils.go (master), llm_inference_service_types.go@01b12410,
llm_inference_service_types_func.go@01be8780, workload_multi_node.go@0aef3762,
config/runtimes/kserve-huggingfaceserver-multinode.yaml@0e7051f2,
config/llmisvcconfig/config-llm-worker-pipeline-parallel.yaml@04184a46.

InferenceService (pkg/controller/v1beta1/inferenceservice/components/predictor.go):
- ``spec.predictor`` embeds a PodSpec. With ``predictor.model`` (or an older framework shortcut,
  ``predictor.huggingface`` ...), the model container is strategic-merged into the ServingRuntime's
  ``kserve-container``, with the runtime's ``args`` first and the model's appended; the pod-level fields
  are the runtime's ``nodeSelector``/``affinity``/``tolerations``/``volumes`` overridden by the
  predictor's (``buildPodSpec``; pkg/controller/v1beta1/inferenceservice/utils/utils.go
  ``MergeRuntimeContainers``, ``MergePodSpec``). The runtime is a ServingRuntime in the ISVC's
  namespace, else a ClusterServingRuntime of that name (utils.go ``GetServingRuntime``).
- Multi-node (``predictor.workerSpec`` set; ``multiNodeProcess``): TP and PP come from
  ``predictor.workerSpec.{tensor,pipeline}ParallelSize``, else the runtime's ``workerSpec``, else 1
  (constants.go ``DefaultTensorParallelSize``/``DefaultPipelineParallelSize``). The total is TP x PP
  GPUs. ``computeRayNodeAndGPUs`` (the default Ray backend) reads the GPU *requests* (not limits) of the
  head's and the worker's first container and derives the node count and GPUs per pod, which
  reconcilers/deployment/deployment_reconciler.go (``createRawDeployment``,
  ``addGPUResourceToDeployment``) writes into both Deployments' limits and requests, overwriting what
  the user wrote; the worker Deployment gets node count - 1 replicas, the head Deployment
  ``minReplicas``. The ``mp`` executor backend (node count = PP, GPUs = TP) is chosen by a
  ServingRuntime annotation whose key was not verified here, so it is not modelled.
- pkg/apis/serving/v1beta1/inference_service_validation.go ``validateMultiNodeVariables``: TP/PP < 1
  and TP/PP set through env are rejected; with ``predictor.model`` the storageUri must be pvc:// or
  oci:// and the autoscaler class ``none``.
- One replica of a single-node predictor is one pod: replicas are independent (``group=1``);
  ``minReplicas`` (default 1) pods. A multi-node replica is the head plus its workers.

LLMInferenceService (pkg/apis/serving/v1alpha2/llm_inference_service_types.go;
pkg/controller/v1alpha2/llmisvc/workload_multi_node.go ``expectedMainMultiNodeLWS`` /
``expectedPrefillMultiNodeLWS``):
- ``spec`` (decode or only workload) and ``spec.prefill`` are WorkloadSpecs: ``replicas``,
  ``parallelism``, ``template`` (PodSpec), ``worker`` (PodSpec). With ``worker`` the controller builds a
  LeaderWorkerSet: replicas = ``replicas``, leader = ``template``, workers = ``worker``, size =
  ``parallelism.GetSize()`` (llm_inference_service_types_func.go: data / dataLocal when data parallel,
  else ``pipeline``; LWS's own default 1 when neither). Without ``worker``: a Deployment of ``replicas``.
- ``template`` is merged over LLMInferenceServiceConfig presets (config/llmisvcconfig/*.yaml) whose
  ``main`` container runs ``vllm serve /mnt/models`` with the parallelism as flags. When the manifest's
  ``main`` container has no command or args, the reader writes that preset command line with the model
  URI in place of /mnt/models (the storage initializer puts ``spec.model.uri`` there) so the model and
  parallelism are read.
- ``spec.model.name`` is the name clients ask for (``--served-model-name`` in the presets), not the
  checkpoint; when the URI names no model the catalog knows (a ``pvc://`` claim, an ``s3://`` bucket, a
  path) and the served name does, the served name sizes the pods, with a note saying so
  (:func:`_served_model`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core import models
from webhook.core.operators import lws
from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, count, dig, mapping, merge_named, name_of, product

GROUP = "serving.kserve.io"
MODEL_CONTAINER, WORKER_CONTAINER = "kserve-container", "worker-container"
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml",
              "lightgbm", "paddle")
"""The older ``PredictorSpec`` framework shortcuts (pkg/apis/serving/v1beta1/predictor.go)."""
CONTAINER_FIELDS = ("image", "command", "args", "env", "envFrom", "resources", "workingDir", "volumeMounts")
WORKER_ONLY = ("tensorParallelSize", "pipelineParallelSize")
GPU_TYPES = ("nvidia.com/gpu", "amd.com/gpu", "intel.com/gpu", "habana.ai/gaudi")
"""constants.DefaultGPUResourceTypeList; more through the annotation below."""
GPU_TYPES_ANNOTATION = "serving.kserve.io/gpu-resource-types"
HF_IMAGE = "kserve/huggingfaceserver"
BUILTIN_IMAGES: Mapping[str, str] = {"kserve-huggingfaceserver": HF_IMAGE, "kserve-huggingfaceserver-multinode": HF_IMAGE,
                                     "huggingface": HF_IMAGE}
"""Image of a runtime KServe ships (config/runtimes/kserve-huggingfaceserver*.yaml), by runtime name or,
when the ISVC names none, by model format: used when that runtime is not in the input. Other runtimes
are unknown here (a note says so)."""
HF_SERVER = re.compile(r"(?:^|/)huggingfaceserver(?:[:@]|$)")


# --- merging, as KServe does it -------------------------------------------------------------


def merge_container(runtime: Mapping[str, Any], isvc: Mapping[str, Any]) -> dict[str, Any]:
    """utils.go ``MergeRuntimeContainers``: the ISVC's fields over the runtime's, resources merged per
    key, env by name, and ``args`` concatenated (runtime first)."""
    out = dict(runtime)
    for key, value in isvc.items():
        if key in ("env", "volumeMounts"):
            out[key] = merge_named(runtime.get(key), value)
        elif key == "resources" and isinstance(value, Mapping):
            rres = mapping(runtime.get("resources"))
            out[key] = {**rres, **{k: {**mapping(rres.get(k)), **mapping(v)} if isinstance(v, Mapping) else v
                                   for k, v in value.items()}}
        elif key == "args":
            out[key] = [*(runtime.get("args") if isinstance(runtime.get("args"), list) else []),
                        *(value if isinstance(value, list) else [])]
        else:
            out[key] = value
    return out


def _pod_fields(runtime_spec: Mapping[str, Any], isvc_spec: Mapping[str, Any], drop: tuple[str, ...]) -> dict[str, Any]:
    """utils.go ``MergePodSpec``: the runtime's scheduling fields under the ISVC's PodSpec fields."""
    base = {k: runtime_spec[k] for k in ("nodeSelector", "affinity", "tolerations", "volumes") if k in runtime_spec}
    return {**base, **{k: v for k, v in isvc_spec.items() if k not in drop}}


def _find_runtime(obj: Mapping[str, Any], name: Any, context: Any) -> Mapping[str, Any] | None:
    """ServingRuntime in the ISVC's namespace (or written without one), else a ClusterServingRuntime."""
    if not (isinstance(name, str) and name and isinstance(context, Mapping)):
        return None
    namespace = dig(obj, "metadata", "namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    # keyed by group (operators.context_of): OME's ServingRuntime of the same name is another object
    for key in dict.fromkeys([(f"{GROUP}/ServingRuntime", namespace, name), (f"{GROUP}/ServingRuntime", "", name),
                              (f"{GROUP}/ClusterServingRuntime", "", name)]):
        found = context.get(key)
        if isinstance(found, Mapping) and str(found.get("apiVersion")).startswith(GROUP + "/"):
            return found
    return None


def _named(containers: Any, name: str) -> Mapping[str, Any] | None:
    for c in containers if isinstance(containers, list) else []:
        if isinstance(c, Mapping) and c.get("name") == name:
            return c
    return None


# --- GPUs, as KServe counts them ------------------------------------------------------------


def _gpu_types(obj: Mapping[str, Any]) -> tuple[str, ...]:
    raw = mapping(dig(obj, "metadata", "annotations")).get(GPU_TYPES_ANNOTATION)
    try:
        extra = json.loads(raw) if isinstance(raw, str) and len(raw) < 4096 else []
    except (ValueError, RecursionError):  # a hostile annotation: "[[[[..." nests past the recursion limit
        extra = []
    return (*GPU_TYPES, *(t for t in (extra if isinstance(extra, list) else []) if isinstance(t, str)))


def _gpu_request(container: Mapping[str, Any], types: tuple[str, ...], field: str = "requests") -> int:
    """``utils.GetGPUResourceQtyByType(..., "Request")``: the first GPU type in the requests, else 0."""
    listed = mapping(dig(container, "resources", field))
    for key, value in listed.items():
        if key in types:
            return count(value, 0)
    return 0


def _with_gpus(container: Mapping[str, Any], n: int, types: tuple[str, ...]) -> dict[str, Any]:
    """deployment_reconciler.go ``addGPUResourceToDeployment``: the container's GPU type (else
    nvidia.com/gpu) set to ``n`` in both limits and requests."""
    res = mapping(container.get("resources"))
    limits, requests = dict(mapping(res.get("limits"))), dict(mapping(res.get("requests")))
    kind = next((k for src in (limits, requests) for k in src if k in types and count(src[k], 0) > 0), GPU_TYPES[0])
    limits[kind] = requests[kind] = str(n)
    return {**container, "resources": {**res, "limits": limits, "requests": requests}}


def _with_env(container: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    return {**container, "env": merge_named(container.get("env"), [{"name": k, "value": v} for k, v in values.items()])}


def ray_nodes(total: int, head: int, worker: int) -> tuple[int, int, int] | None:
    """predictor.go ``computeRayNodeAndGPUs``: (nodes, GPUs per worker, GPUs on the head) for ``total``
    GPUs given the head's and worker's GPU requests; ``None`` where KServe refuses the ISVC."""
    def nodes_for(gpus: int, per: int) -> int:
        return 1 if per == 0 else -(-gpus // per)

    def short(nodes: int, h: int, w: int) -> bool:
        return total > h + w * (nodes - 1)

    if worker > 0:
        nodes = nodes_for(total, worker)
        if head > 0:
            if nodes_for(total, head) == 1:
                nodes = 1
        else:
            head = total - worker * (nodes - 1)
        if nodes == 1:
            worker, head = 0, total
        return None if short(nodes, head, worker) else (nodes, worker, head)
    if head > 0:
        nodes = 1 + (max(total - head, 0))  # single-GPU worker nodes for the rest
        return None if short(nodes, head, 1) else (nodes, 1, head)
    return total, 1, 1


# --- InferenceService -----------------------------------------------------------------------


def _implementation(predictor: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], str] | None:
    """(field, spec, model format) of a model-style predictor, ``None`` for custom containers."""
    if isinstance(predictor.get("model"), Mapping):
        model = predictor["model"]
        return "model", model, name_of(dig(model, "modelFormat", "name"), "")
    for key in FRAMEWORKS:
        if isinstance(predictor.get(key), Mapping):
            return key, predictor[key], key
    return None


def _model_container(obj: Mapping[str, Any], impl: Mapping[str, Any], fmt: str,
                     runtime: Mapping[str, Any] | None, notes: list[str]) -> dict[str, Any]:
    """The predictor's model container as KServe runs it: merged into the runtime's kserve-container
    when the runtime is in the input, else alone (with the built-in runtime's image for its format)."""
    own = {k: impl[k] for k in CONTAINER_FIELDS if k in impl}
    base = _named(dig(runtime, "spec", "containers"), MODEL_CONTAINER) if runtime is not None else None
    name = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    if base is not None:
        merged = merge_container(base, own)
    else:
        merged = dict(own)
        runtime_name = name_of(impl.get("runtime"), "")
        what = f"runtime {runtime_name}" if runtime_name else f"the runtime KServe picks for format {fmt or '?'}"
        builtin = BUILTIN_IMAGES.get(runtime_name or fmt.lower())
        if runtime is not None:
            notes.append(f"InferenceService {name}: {what} has no {MODEL_CONTAINER} container")
        elif builtin is not None:
            merged.setdefault("image", builtin)
        else:
            notes.append(f"InferenceService {name}: {what} is not in the input; the model container is "
                         f"judged from spec.predictor alone")
    merged["name"] = MODEL_CONTAINER
    uri = impl.get("storageUri")
    args = merged.get("args") if isinstance(merged.get("args"), list) else []
    if isinstance(uri, str) and HF_SERVER.search(str(merged.get("image"))) and merged.get("command") is None \
            and not any(isinstance(a, str) and a.startswith(("--model_id", "--model-id")) for a in args):
        merged["args"] = [*args, f"--model_id={uri}"]  # what the storage initializer puts at /mnt/models
    return merged


def _head_spec(predictor: Mapping[str, Any], field: str, container: Mapping[str, Any],
               runtime: Mapping[str, Any] | None) -> dict[str, Any]:
    """The predictor PodSpec with the model container first (``buildPodSpec``)."""
    rspec = mapping(dig(runtime, "spec")) if runtime is not None else {}
    spec = _pod_fields(rspec, predictor, (field, "workerSpec", "containers"))
    extra = predictor.get("containers")
    spec["containers"] = [container, *(c for c in (extra if isinstance(extra, list) else [])
                                       if mapping(c).get("name") != MODEL_CONTAINER)]
    return spec


def _with_parallel_flags(container: dict[str, Any], tp: int, pp: int) -> dict[str, Any]:
    """The built-in multi-node runtime passes ``--tensor-parallel-size=${TENSOR_PARALLEL_SIZE}
    --pipeline-parallel-size=${PIPELINE_PARALLEL_SIZE}`` to huggingfaceserver
    (config/runtimes/kserve-huggingfaceserver-multinode.yaml); a head container built without that
    runtime (no command) gets the same flags."""
    args = container.get("args") if isinstance(container.get("args"), list) else []
    if container.get("command") is not None or not HF_SERVER.search(str(container.get("image"))) \
            or any(isinstance(a, str) and a.startswith("--tensor-parallel-size") for a in args):
        return container
    return {**container, "args": [*args, f"--tensor-parallel-size={tp}", f"--pipeline-parallel-size={pp}"]}


def _multi_node(obj: Mapping[str, Any], predictor: Mapping[str, Any], model_own: Mapping[str, Any],
                head: dict[str, Any], runtime: Mapping[str, Any] | None, replicas: int,
                notes: list[str]) -> Iterator[Found]:
    """Head and workers of a multi-node predictor, counted as ``multiNodeProcess`` does."""
    name = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    types = _gpu_types(obj)
    wspec = mapping(predictor.get("workerSpec"))
    rworker = mapping(dig(runtime, "spec", "workerSpec")) if runtime is not None else {}
    sizes = {}
    for key in WORKER_ONLY:
        value = wspec.get(key, rworker.get(key))
        sizes[key] = count(value, 1)
        if sizes[key] < 1:
            notes.append(f"InferenceService {name}: KServe rejects workerSpec.{key} < 1; counted as 1")
            sizes[key] = 1
    tp, pp = sizes["tensorParallelSize"], sizes["pipelineParallelSize"]
    own = mapping((wspec.get("containers") or [None])[0] if isinstance(wspec.get("containers"), list) else None)
    base = _named(rworker.get("containers"), WORKER_CONTAINER)
    worker_c = merge_container(base, own) if base is not None else {**own, "name": WORKER_CONTAINER}
    hc = mapping(head["containers"][0])
    for label, c in (("predictor.model", model_own), ("workerSpec container", own)):
        if _gpu_request(c, types, "limits") > 0 and _gpu_request(c, types) == 0:
            notes.append(f"InferenceService {name}: {label} sets GPU limits but no GPU requests; KServe reads "
                         f"requests only and sizes the pods from tensor x pipeline parallel size")
    counted = ray_nodes(product(tp, pp), _gpu_request(hc, types), _gpu_request(worker_c, types))
    if counted is None:
        notes.append(f"InferenceService {name}: KServe refuses this GPU allocation (TP {tp} x PP {pp} GPUs do "
                     f"not fit the head's and workers' GPU requests); judged as written")
        nodes, worker_gpus, head_gpus = 1 + max(pp - 1, 0), _gpu_request(worker_c, types), _gpu_request(hc, types)
    else:
        nodes, worker_gpus, head_gpus = counted
    env = {"TENSOR_PARALLEL_SIZE": str(tp), "PIPELINE_PARALLEL_SIZE": str(pp), "RAY_NODE_COUNT": str(nodes)}
    hc = _with_env(_with_gpus(hc, head_gpus, types), {**env, "REQUEST_GPU_COUNT": str(head_gpus)})
    head["containers"][0] = _with_parallel_flags(hc, tp, pp)
    yield Found(("spec", "predictor"), head, "leader", replicas, inline=True, group=nodes, notes=tuple(notes))
    if nodes > 1:
        wpod = _pod_fields(rworker, wspec, (*WORKER_ONLY, "containers"))
        wpod["containers"] = [_with_env(_with_gpus(worker_c, worker_gpus, types),
                                        {**env, "REQUEST_GPU_COUNT": str(worker_gpus)})]
        yield Found(("spec", "predictor", "workerSpec"), wpod, "worker", nodes - 1, inline=True, group=nodes)


def _inference_service(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    """An InferenceService's predictor: single pods (independent replicas) or a multi-node group."""
    predictor = mapping(dig(obj, "spec", "predictor"))
    replicas = count(predictor.get("minReplicas"))
    impl = _implementation(predictor)
    notes: list[str] = []
    if impl is None:
        if isinstance(predictor.get("containers"), list):
            if "workerSpec" in predictor:
                notes.append(f"InferenceService {name_of(dig(obj, 'metadata', 'name'), '(unnamed)')}: "
                             f"workerSpec needs predictor.model and a multi-node ServingRuntime; judged as one pod")
            yield Found(("spec", "predictor"), predictor, "predictor", replicas, inline=True, group=1,
                        notes=tuple(notes))
        return
    field, spec, fmt = impl
    runtime = _find_runtime(obj, spec.get("runtime"), context)
    container = _model_container(obj, spec, fmt, runtime, notes)
    head = _head_spec(predictor, field, container, runtime)
    if isinstance(predictor.get("workerSpec"), Mapping):
        yield from _multi_node(obj, predictor, spec, head, runtime, replicas, notes)
        return
    yield Found(("spec", "predictor"), head, "predictor", replicas, inline=True, group=1, notes=tuple(notes))


# --- LLMInferenceService --------------------------------------------------------------------


def lws_size(parallelism: Any) -> int | None:
    """llm_inference_service_types_func.go ``GetSize``: data / dataLocal (at least 1) when data
    parallel, else ``pipeline``, else ``None`` (the LeaderWorkerSet's own default, 1)."""
    par = mapping(parallelism)
    if count(par.get("data"), 0) > 0 or count(par.get("dataLocal"), 0) > 0:
        return max(max(count(par.get("data")), 1) // max(count(par.get("dataLocal")), 1), 1)
    if count(par.get("pipeline"), 0) > 0:
        return count(par.get("pipeline"))
    return None


def _preset_args(parallelism: Any) -> list[str]:
    """The parallelism flags the presets pass to ``vllm serve`` (config/llmisvcconfig/*.yaml)."""
    par = mapping(parallelism)
    args: list[str] = []
    for key, flag in (("tensor", "--tensor-parallel-size"), ("pipeline", "--pipeline-parallel-size"),
                      ("data", "--data-parallel-size"), ("dataLocal", "--data-parallel-size-local")):
        if count(par.get(key), 0) > 0:
            args += [flag, str(count(par.get(key)))]
    if par.get("expert") is True:
        args.append("--enable-expert-parallel")
    return args


ADDITIONAL_ARGS = "VLLM_ADDITIONAL_ARGS"
"""The presets' way to add vLLM flags from the manifest: their ``main`` command ends
``exec vllm serve /mnt/models ... ${VLLM_ADDITIONAL_ARGS} $@`` (kserve/kserve
config/llmisvcconfig/config-llm-decode-template.yaml @01b1241), so ``--tensor-parallel-size=8`` in this
env var of the manifest's ``main`` container is the engine's TP (after the preset's own flags: the
last occurrence of a flag wins in vLLM's argument parser)."""


def _additional_args(container: Mapping[str, Any]) -> list[str]:
    """The words of the ``main`` container's literal ``VLLM_ADDITIONAL_ARGS`` (shell-split, as the
    preset's ``eval`` splits them); none when it is absent, not literal or not splittable."""
    env = container.get("env")
    for item in env if isinstance(env, list) else ():
        if isinstance(item, Mapping) and item.get("name") == ADDITIONAL_ARGS and isinstance(item.get("value"), str):
            try:
                return shlex.split(item["value"][:4096])[:256]
            except ValueError:
                return []
    return []


def _llm_pod(template: Mapping[str, Any], model: str, parallelism: Any) -> tuple[dict[str, Any], bool]:
    """``template`` with the preset's command line in a ``main`` container that sets none, and
    whether one was written (only then is ``model`` what the pod is read to serve)."""
    containers = template.get("containers")
    if not isinstance(containers, list):
        return dict(template), False
    wrote = False

    def filled(c: Any) -> Any:
        nonlocal wrote
        if not isinstance(c, Mapping) or c.get("name") != "main" or "command" in c or "args" in c:
            return c
        wrote = True
        return {**c, "command": ["vllm", "serve", model], "args": [*_preset_args(parallelism), *_additional_args(c)]}
    pod = {**template, "containers": [filled(c) for c in containers]}
    return pod, wrote


SERVED_NAME = ("model", "name")
"""``spec.model.name``: "the name of the model as it will be set in the "model" parameter for an
incoming request. If omitted, it will default to ``metadata.name``" (kserve/kserve
pkg/apis/serving/v1alpha1/llm_inference_service_types.go @ 9db434652687900a817e7005b89ce6f691253cbf,
``LLMModelSpec.Name``); the presets pass it to vLLM as ``--served-model-name "{{ .Spec.Model.Name }}"``
beside ``vllm serve /mnt/models`` (config/llmisvcconfig/config-llm-worker-data-parallel.yaml
@ 70e53e8bb001570b314de9211374eba399d03322). It is a name for clients, not the checkpoint: the weights
are what ``spec.model.uri`` holds."""


def _served_model(spec: Mapping[str, Any], name: str) -> tuple[str, str | None]:
    """The model reference the preset's ``vllm serve`` is read with, and a note when it is not the URI.

    The URI, where the storage initializer fetches the weights from, is the model; but a ``pvc://``
    claim, an ``s3://`` bucket or a path often names no model the catalog or the name rules know
    (``pvc://llm-test-pvc-deepseek``), while the served name is usually the Hugging Face id of the
    checkpoint (``deepseek-ai/DeepSeek-R1-0528``). Then the served name sizes the pod, and a note says
    the size comes from it. An ``hf://`` URI is a checkpoint id itself and is never replaced.
    """
    uri = dig(spec, "model", "uri")
    uri = uri if isinstance(uri, str) and uri.strip() else None
    served = dig(spec, *SERVED_NAME)
    served = served.strip()[:256] if isinstance(served, str) and served.strip() else None
    if served is None or (uri is not None and (uri.startswith("hf://") or models.describe(uri) is not None)) \
            or models.describe(served) is None:
        return uri or "/mnt/models", None
    source = f"spec.model.uri {uri[:128]} names no model" if uri else "spec.model.uri is not set"
    return served, (f"LLMInferenceService {name}: {source}; the model size comes from spec.model.name "
                    f"{served[:128]}, the name it is served under (--served-model-name), taken as the checkpoint")


def _workload(spec: Mapping[str, Any], base: tuple[str, ...], prefix: str, model: tuple[str, str | None],
              note: str | None) -> Iterator[Found]:
    """One WorkloadSpec (decode/main or prefill): an LWS when it has a worker, else a Deployment.
    ``model``: the model reference for the preset command line and the note that goes with it."""
    template, worker = spec.get("template"), spec.get("worker")
    replicas = count(spec.get("replicas")) if "replicas" in spec else count(dig(spec, "scaling", "minReplicas"))
    par = spec.get("parallelism")
    notes = (note,) if note else ()
    ref, model_note = model

    def pod(holder: Mapping[str, Any], own: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
        filled, wrote = _llm_pod(holder, ref, par)
        return filled, (*own, model_note) if wrote and model_note else own

    if isinstance(worker, Mapping):
        size = lws_size(par) or 1
        if isinstance(template, Mapping):
            leader, leader_notes = pod(template, notes)
            yield Found((*base, "template"), leader, prefix + "leader", replicas,
                        inline=True, group=size, notes=leader_notes)
            workers, notes = product(replicas, size - 1), ()
        else:
            workers = product(replicas, size)  # the worker template serves the leader too (LWS)
        if workers > 0:
            worker_pod, worker_notes = pod(worker, notes)
            yield Found((*base, "worker"), worker_pod, prefix + "worker", workers,
                        inline=True, group=size, notes=worker_notes)
    elif isinstance(template, Mapping):
        main, main_notes = pod(template, notes)
        yield Found((*base, "template"), main, prefix.rstrip("-") or "main", replicas,
                    inline=True, group=1, notes=main_notes)


def _llm_inference_service(obj: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    """Decode (or the only) workload at ``/spec``, then prefill at ``/spec/prefill``."""
    spec = mapping(obj.get("spec"))
    name = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    model = _served_model(spec, name)
    refs = spec.get("baseRefs")
    note = (f"LLMInferenceService {name}: spec.baseRefs may change the containers; the default vLLM preset "
            f"is assumed where the manifest gives no command") if isinstance(refs, list) and refs else None
    found = list(_workload(spec, ("spec",), "", model, note))
    if isinstance(spec.get("prefill"), Mapping):
        found += _workload(spec["prefill"], ("spec", "prefill"), "prefill-", model, None)
    if not found:
        container = {"name": "main", "command": ["vllm", "serve", model[0]],
                     "args": _preset_args(spec.get("parallelism"))}
        found.append(Found(("spec", "template"), {"containers": [container]}, "main",
                           count(spec.get("replicas")), inline=True, synthesized=True, group=1,
                           notes=(f"LLMInferenceService {name}: no spec.template; its pods come from "
                                  f"LLMInferenceServiceConfig presets that are not in the input",
                                  *((model[1],) if model[1] else ()))))
    yield from found


INFERENCE_SERVICE = PodGroup("serving.kserve.io/inferenceservice", "KServe InferenceService", "kserve", always=False)
"""kserve/kserve pkg/constants/constants.go ``InferenceServicePodLabelKey``: on every pod of the
service, whose replicas are independent, so they are one group only when a launch spans pods."""

KFSERVING_GROUP = "serving.kubeflow.org"
"""KFServing, KServe before its rename: the same ``v1beta1`` InferenceService in another API group
(kubeflow/kfserving pkg/apis/serving/v1beta1@4ccd9bec: ``PredictorSpec`` embeds the PodSpec beside the
framework shortcuts and ``minReplicas``, inference_service_defaults.go registers the defaulter for
``groups=serving.kubeflow.org, versions=v1beta1``). Its predictor has no ``model`` or ``workerSpec``
yet and it had no ServingRuntimes, so the reader above reads it unchanged: custom containers in place,
a framework shortcut as its container alone. Its ``v1alpha2`` (``spec.default.predictor`` with
``custom.container``) is another shape and is not read."""
KFSERVING_INFERENCE_SERVICE = PodGroup(KFSERVING_GROUP + "/inferenceservice", "KFServing InferenceService",
                                       "kfserving", always=False)
"""The pod label of the older group (the key whose ``enabled`` value also marks KFServing's namespaces)."""

KINDS: tuple[OperatorKind, ...] = (
    OperatorKind(GROUP + "/v1beta1", "InferenceService", "inferenceservices", _inference_service,
                 group=INFERENCE_SERVICE, leaders=frozenset({"leader"}),
                 source="kserve/kserve pkg/apis/serving/v1beta1/inference_service.go"),
    OperatorKind(KFSERVING_GROUP + "/v1beta1", "InferenceService", "inferenceservices", _inference_service,
                 group=KFSERVING_INFERENCE_SERVICE, leaders=frozenset({"leader"}),
                 source="kubeflow/kfserving pkg/apis/serving/v1beta1 (inference_service_defaults.go, "
                        "predictor_custom_test.go) at 4ccd9bec"),
    # an LLMInferenceService with a worker runs on a LeaderWorkerSet, whose labels its pods carry
    *(OperatorKind(GROUP + "/" + version, "LLMInferenceService", "llminferenceservices", _llm_inference_service,
                   group=lws.GROUP, leaders=frozenset({"leader", "prefill-leader"}),
                   source=f"kserve/kserve pkg/apis/serving/{version}/llm_inference_service_types.go")
      for version in ("v1alpha1", "v1alpha2")),
)
