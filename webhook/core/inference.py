"""Pod template -> WorkloadProfile: what model runs, how big it is, how it is split over GPUs.

The launcher parsers (``launchers``) read one container's command line; the model catalog
(``models``) turns a model name into parameter counts; ``resources`` counts GPUs the way Kubernetes
does. This module combines them with the user's annotations, which always win because they are the
escape hatch for everything the engine cannot see (models on a PVC, values in a ConfigMap).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import Any

from webhook.core import launchers, models, sizing
from webhook.core.domain import LaunchSpec, ModelInfo, Violation, WorkloadProfile
from webhook.core.groups import declared_size
from webhook.core.resources import pod_gpus
from webhook.core.workloads import PodTemplate, join

PREFIX = "gpu-admission.io/"
MODEL = PREFIX + "model"
PARAMS = PREFIX + "params"
TENSOR_PARALLEL = PREFIX + "tensor-parallel"
TIER = PREFIX + "tier"
MODE = PREFIX + "mode"

AUTO_SHARDING = frozenset({"tgi", "nim"})
"""Launchers that shard over every visible GPU when no TP is given."""
DP_INSIDE_LAUNCH = frozenset({"vllm", "lmdeploy"})
"""Launchers whose data-parallel ranks each take TP x PP GPUs of the same launch."""


@dataclass(frozen=True)
class Inferred:
    profile: WorkloadProfile
    problems: tuple[Violation, ...] = ()
    """Malformed input (GPU quantities, annotations): violations in their own right."""


def _annotation_path(template: PodTemplate, key: str) -> str:
    return join(template.pointer, "metadata", "annotations", key)


MAX_CONTAINERS = 64
"""Containers read for a launcher per pod, those requesting GPUs first. The API server sets no
limit and reading one costs up to ~0.1 ms, so a 4 MiB pod of tiny containers would otherwise outlast
the admission deadline; GPUs are still counted in every container (``resources.pod_gpus``)."""


def _container_gpus(container: Any, i: int, by_container: Mapping[str, int]) -> int:
    name = container.get("name") if isinstance(container, Mapping) else None
    return by_container.get(name if isinstance(name, str) else f"containers[{i}]", 0)


def _launch(spec: Mapping[str, Any], by_container: Mapping[str, int]) -> tuple[LaunchSpec | None, str | None,
                                                                                  tuple[str, ...]]:
    """The launcher of the pod: prefer a container that requests GPUs, else the first one found.
    Also returns notes (containers left unread)."""
    containers = spec.get("containers")
    listed = list(enumerate(containers)) if isinstance(containers, list) else []
    notes: tuple[str, ...] = ()
    if len(listed) > MAX_CONTAINERS:
        # GPU containers first, each group in pod order (a stable sort), so none can hide behind others
        listed = sorted(listed, key=lambda ic: _container_gpus(ic[1], ic[0], by_container) <= 0)[:MAX_CONTAINERS]
        notes = (f"pod has {len(containers)} containers: only {MAX_CONTAINERS} (GPU containers first) "
                 f"were read for a launcher",)
    found: list[tuple[int, LaunchSpec, str | None]] = []
    for i, container in listed:
        launch = launchers.parse_container(container)
        if launch is None:
            continue
        name = container.get("name") if isinstance(container, Mapping) else None
        found.append((_container_gpus(container, i, by_container), launch, name if isinstance(name, str) else None))
    if not found:
        return None, None, notes
    best = max(found, key=lambda item: item[0] > 0)  # first GPU container, else first launcher
    return best[1], best[2], notes


def _model_info(template: PodTemplate, model: str | None, problems: list[Violation]) -> ModelInfo | None:
    params_text = template.annotations.get(PARAMS)
    info = models.describe(model) if model else None
    if params_text is None:
        return info
    params = models.parse_params(params_text)
    if params is None or params <= 0:
        problems.append(Violation(
            "invalid-annotation",
            f"annotation {PARAMS}={params_text[:40]!r} is not a size: write e.g. \"70B\", \"1.5B\" or \"560M\"",
            _annotation_path(template, PARAMS),
        ))
        return info
    base = info or ModelInfo(name=model or "(annotated)", params_b=params)
    return replace(base, params_b=params, active_params_b=None, source="annotation")


def _tp_annotation(template: PodTemplate, problems: list[Violation]) -> int | None:
    text = template.annotations.get(TENSOR_PARALLEL)
    if text is None:
        return None
    if text.strip().isdigit() and 0 < int(text.strip()) <= 4096:
        return int(text.strip())
    problems.append(Violation(
        "invalid-annotation",
        f"annotation {TENSOR_PARALLEL}={text[:40]!r} must be a positive integer, e.g. \"4\"",
        _annotation_path(template, TENSOR_PARALLEL),
    ))
    return None


def _group_pods(template: PodTemplate, launch: LaunchSpec | None) -> int:
    """Pods forming one model instance: the LeaderWorkerSet size (template or the size annotation LWS
    puts on its pods), a declared ``gpu-admission.io/group-size``, else the launcher's node count."""
    if template.group_size > 1:
        return template.group_size
    declared = declared_size(template.labels, template.annotations)
    if declared is not None:
        return declared
    if launch is not None and launch.nnodes and launch.nnodes > 1:
        return launch.nnodes
    return 1


def _gpus_used(launch: LaunchSpec | None, tp: int | None, pp: int | None, dp: int | None,
               gpus: int, pods: int) -> int | None:
    """GPUs the declared parallelism occupies across the group, None when the launcher is silent."""
    if launch is None:
        return tp * (pp or 1) if tp else None
    if launch.role == "training":
        if launch.total_procs:
            return launch.total_procs
        if launch.procs_per_node:
            return launch.procs_per_node * pods
        return None
    if tp is None:
        return None
    used = tp * (pp or 1)
    if dp and launch.framework in DP_INSIDE_LAUNCH:
        used *= dp
    return used


def profile(template: PodTemplate, *, gpu_resources: tuple[str, ...],
            leader: WorkloadProfile | None = None) -> Inferred:
    """Infer the workload profile of one pod template.

    ``leader``: for the worker template of a multi-template group (LeaderWorkerSet), the leader's
    profile; workers usually carry no model flags and run the leader's model.
    """
    problems: list[Violation] = []
    gpu_req = pod_gpus(template.spec, template.spec_pointer, gpu_resources)
    problems.extend(gpu_req.problems)
    launch, container, cut = _launch(template.spec, gpu_req.by_container or {})
    inherited = launch is None and leader is not None and leader.model is not None

    model = template.annotations.get(MODEL) or (launch.model if launch else None)
    if model is None and inherited:
        model = leader.model
    info = _model_info(template, model, problems)

    tp = _tp_annotation(template, problems)
    tp_declared = tp is not None
    pp = launch.pipeline_parallel if launch else None
    dp = launch.data_parallel if launch else None
    framework = launch.framework if launch else None
    if launch is not None and tp is None and launch.tensor_parallel is not None:
        tp, tp_declared = launch.tensor_parallel, True
    if inherited and leader is not None:
        framework = framework or leader.framework
        tp = tp or leader.tensor_parallel
        pp = pp or leader.pipeline_parallel
        dp = dp or leader.data_parallel
        tp_declared = tp_declared or leader.tp_declared
    pods = _group_pods(template, launch) if not inherited or leader is None else leader.pods
    if launch is not None and tp is None and launch.role == "inference":
        if launch.uses_all_gpus or launch.framework in AUTO_SHARDING:
            tp = max(gpu_req.gpus, 1)
        elif launch.framework not in ("ollama", "triton-trtllm"):
            tp = 1  # vLLM, SGLang, TRT-LLM, LMDeploy: TP defaults to 1 whatever the pod requests
    if launch is not None and launch.role == "inference" and tp is not None and pp is None:
        pp = 1

    role = launch.role if launch else (leader.role if inherited and leader else None)
    dtype = launch.dtype if launch else (leader.dtype if inherited and leader else None)
    quantization = (launch.quantization if launch else None) or (info.name_quantization if info else None)
    if inherited and leader is not None:
        quantization = quantization or leader.quantization
    native = info.native_dtype if info else None
    bpp = sizing.bytes_per_param(dtype=dtype, quantization=quantization, native_dtype=native, role=role)
    gpus_used = _gpus_used(launch if not inherited else None, tp, pp, dp, gpu_req.gpus, pods)

    prof = WorkloadProfile(
        framework=framework,
        model=model,
        params_b=round(info.params_b, 3) if info else None,
        active_params_b=round(info.active_params_b, 3) if info and info.active_params_b else None,
        dtype=dtype,
        quantization=quantization,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        gpus_per_pod=gpu_req.gpus,
        pods=pods,
        role=role,
        kind=info.kind if info else None,
        bytes_per_param=bpp,
        layers=info.layers if info else None,
        gpu_memory_utilization=launch.gpu_memory_utilization if launch else None,
        tp_declared=tp_declared,
        gpus_used=gpus_used,
        hidden=tuple(launch.hidden) if launch else (),
        notes=(tuple(launch.notes) if launch else ()) + cut,
        tier_override=template.annotations.get(TIER),
        container=container,
    )
    return Inferred(prof, tuple(problems))
