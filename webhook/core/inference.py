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

from webhook.core import architecture, launchers, models, object_names, sizing, training_memory
from webhook.core.counts import parse_count
from webhook.core.domain import LaunchSpec, ModelInfo, Violation, WorkloadProfile, counted
from webhook.core.groups import declared_size
from webhook.core.launchers import traits as launcher_traits
from webhook.core.resources import pod_gpus
from webhook.core.workloads import PodTemplate, join

PREFIX = "gpu-admission.io/"
MODEL = PREFIX + "model"
PARAMS = PREFIX + "params"
TENSOR_PARALLEL = PREFIX + "tensor-parallel"
MAX_TENSOR_PARALLEL = 4096
"""The largest ``tensor-parallel`` annotation read as one; above it the annotation is invalid."""
PIPELINE_PARALLEL = PREFIX + "pipeline-parallel"
"""The pipeline-parallel size, when the launch does not show it (a Ray Serve LLM config's
``pipeline_parallel_size``, put on the worker template by :mod:`webhook.core.operators.ray`); it wins
over the launch's, as ``tensor-parallel`` does."""
TIER = PREFIX + "tier"
MODE = PREFIX + "mode"
TRAINING_STRATEGY = PREFIX + "training-strategy"
"""The training strategy, when the launch does not show it (a torchrun script that wraps its model
in FSDP itself): one of ``training_memory.STRATEGIES``; it makes the pod a training pod."""

holder_of = object_names.holder
"""The object holding a template, as :func:`profile` takes it (for the engine)."""

DECLARE = ("set annotation gpu-admission.io/model to its Hugging Face id, or gpu-admission.io/params "
           "(e.g. \"7B\")")
"""How to declare a model the engine cannot read (the annotations ``profile`` honours first)."""


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
    When no GPU container runs a known launcher, a model id in a well-known env name or script flag
    of a GPU container is the last resort (``launchers.parse_env_model``). Also returns notes
    (containers left unread)."""
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
        found.append((_container_gpus(container, i, by_container), launch, _name(container)))
    if not any(gpus > 0 for gpus, _, _ in found):
        for i, container in listed:
            if _container_gpus(container, i, by_container) > 0:
                generic = launchers.parse_env_model(container)
                if generic is not None:
                    return generic, _name(container), notes
    if not found:
        return None, None, notes
    best = max(found, key=lambda item: item[0] > 0)  # first GPU container, else first launcher
    return best[1], best[2], notes


def _name(container: Any) -> str | None:
    name = container.get("name") if isinstance(container, Mapping) else None
    return name if isinstance(name, str) else None


def _model_info(template: PodTemplate, model: str | None, problems: list[Violation],
                launch: LaunchSpec | None = None, notes: list[str] | None = None) -> ModelInfo | None:
    params_text = template.annotations.get(PARAMS)
    info = models.describe(model) if model else None
    if info is None and params_text is None and launch is not None and launch.architecture is not None:
        info = _from_architecture(model, launch.architecture, notes if notes is not None else [])
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


def _from_architecture(model: str | None, arch: architecture.Architecture, notes: list[str]) -> ModelInfo | None:
    """The size the launch's architecture flags give, when no catalog row or name does; the note says
    it is an estimate and from what, so a wrong one is easy to spot and to overrule (``params``)."""
    estimate = architecture.estimate(arch)
    if estimate is None:
        return None
    assumed = f"; assumed {', '.join(estimate.assumed)}" if estimate.assumed else ""
    active = f" ({estimate.active_params_b:.2f}B active)" if estimate.active_params_b is not None else ""
    notes.append(f"model size {estimate.params_b:.2f}B{active} estimated from the architecture flags "
                 f"({architecture.describe(arch)}{assumed}): set annotation {PARAMS} if it is wrong")
    return ModelInfo(name=model or "(architecture flags)", params_b=estimate.params_b,
                     active_params_b=estimate.active_params_b, layers=arch.layers, source="architecture")


def _tp_annotation(template: PodTemplate, problems: list[Violation], key: str = TENSOR_PARALLEL) -> int | None:
    """The positive count annotation ``key`` states (tensor or pipeline parallel), else None; a
    malformed one is a problem."""
    text = template.annotations.get(key)
    if text is None:
        return None
    size = parse_count(text, cap=MAX_TENSOR_PARALLEL, padded=True)
    if size:
        return size
    problems.append(Violation(
        "invalid-annotation",
        f"annotation {key}={text[:40]!r} must be a positive integer, e.g. \"4\"",
        _annotation_path(template, key),
    ))
    return None


def _name_hint(template: PodTemplate, holder: object_names.Holder | None, launch: LaunchSpec | None,
               gpus: int, notes: list[str]) -> tuple[str | None, ModelInfo | None]:
    """The note a template's labels or its object's name give (:mod:`webhook.core.object_names`) for
    a GPU pod where nothing else names a model: the model the name suggests and what to state instead.
    Never used to size or place the pod: a name says neither the precision (``llama-3-70b`` may be an
    AWQ image on one L4) nor the split, and a size guessed from it would pin the pod to the cards that
    hold the bf16 weights, or refuse it, where the deployment works. Not for a training launch nor a
    job's pod (``object_names.JOB_KINDS``), which are named after the base model they tune."""
    if launch is not None and launch.role == "training":
        return None, None
    found = object_names.hint(template.labels, holder)
    if found is None:
        return None, None
    notes.append(f"{found.source} {found.model[:96]!r} suggests a {found.info.params_b:g}B model, not used to size or "
                 f"place this pod ({counted(gpus, 'GPU')}): a name does not say its precision or split; {DECLARE}")
    return None, None


def _split_stated(launch: LaunchSpec | None) -> bool:
    """Whether a launch states (or its launcher implies) how its model is split over the pod's GPUs."""
    if launch is None or "tensor_parallel" in launch.unresolved:
        return False
    traits = launcher_traits.of(launch.framework)
    return (launch.tensor_parallel is not None or launch.uses_all_gpus or traits.shards_all_gpus
            or traits.tp_assumed)


_STRATEGY_FIELDS = ("training_strategy", "strategy_source", "training_offload", "distributed_optimizer", "peft")


def _strategy(template: PodTemplate, launch: LaunchSpec | None, leader: WorkloadProfile | None,
              problems: list[Violation]) -> dict[str, Any]:
    """The training-strategy fields of the profile: the annotation, else the launch's (a worker that
    runs no launcher of its own takes its leader's)."""
    text = template.annotations.get(TRAINING_STRATEGY)
    source: Any = launch if launch is not None else leader
    if text is None and (source is None or source.role != "training"):
        return {}  # an inference pod (most of them) has no strategy to carry
    out = {name: getattr(source, name, None) for name in _STRATEGY_FIELDS} if source is not None else {}
    if text is None:
        return out
    value = text.strip().lower()
    if value not in training_memory.STRATEGIES:
        names = ", ".join(training_memory.STRATEGIES)
        problems.append(Violation(
            "invalid-annotation",
            f"annotation {TRAINING_STRATEGY}={text[:40]!r} names no training strategy: use one of {names}",
            _annotation_path(template, TRAINING_STRATEGY),
        ))
        return out
    out.update(training_strategy=value, strategy_source=f"annotation {TRAINING_STRATEGY}")
    return out


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
    """GPUs the declared parallelism occupies across the group, None when the launcher is silent or
    a factor is not visible (``-tp $(TP)`` from a ConfigMap: a default would be a guess)."""
    if launch is None:
        return tp * (pp or 1) if tp else None
    if launch.role == "training":
        if launch.total_procs:
            return launch.total_procs
        if launch.procs_per_node:
            return launch.procs_per_node * pods
        return None
    unresolved = set(launch.unresolved)
    if tp is None or unresolved & {"tensor_parallel", "pipeline_parallel"}:
        return None
    used = tp * (pp or 1)
    if _dp_adds_gpus(launch):
        if dp is None and "data_parallel" in unresolved:
            return None
        used *= dp or 1
    return used


def _dp_adds_gpus(launch: LaunchSpec) -> bool:
    """Whether each DP rank takes GPUs of its own (vLLM, LMDeploy, SGLang without DP attention)."""
    traits = launcher_traits.of(launch.framework)
    return traits.dp_takes_gpus and not (traits.dp_attention and launch.dp_attention)


def _data_parallel(launch: LaunchSpec | None, pods: int, notes: list[str]) -> int | None:
    """The launch's DP size; when it is not visible (``--data-parallel-size $((LWS_GROUP_SIZE * L))``)
    but the local ranks are, ``L x pods``: vLLM runs ``--data-parallel-size-local`` ranks in each pod
    of the group."""
    if launch is None:
        return None
    local = launch.data_parallel_local
    if (launch.data_parallel is None and "data_parallel" in launch.unresolved
            and isinstance(local, int) and local > 0 and pods >= 1):
        notes.append(f"data parallel size taken as {local} local ranks x {pods} pod(s) = {local * pods}")
        return local * pods
    return launch.data_parallel


def _unrecognised(launch: LaunchSpec | None, model: str | None, info: ModelInfo | None, gpus: int) -> tuple[str, ...]:
    """Why a GPU pod's model size is unknown, and the annotation that fixes it: no GPU workload may
    end without a tier and without saying why."""
    if gpus <= 0 or info is not None:
        return ()
    if model:
        return (f"model {model[:96]!r} is not in the catalog and its name states no size: set annotation "
                f"gpu-admission.io/params (e.g. \"7B\")",)
    if launch is None:
        return (f"no known launcher or model id found in this GPU pod: {DECLARE}, and "
                f"gpu-admission.io/tensor-parallel when it spans GPUs",)
    if any("gpu-admission.io/model" in text for text in (*launch.notes, *launch.hidden)):
        return ()  # the parser already said why and how
    return (f"{launch.framework or 'the launcher'} runs, but its model is not visible at admission: {DECLARE}",)


def _inherited_unrecognised(leader: WorkloadProfile | None, info: ModelInfo | None, gpus: int) -> tuple[str, ...]:
    """Why a GPU pod that runs its leader's launch has no model size: the leader's states its split
    but no model (the leader's own note says why); said here too, so this pod is not left silent."""
    if gpus <= 0 or info is not None or leader is None or leader.model is not None:
        return ()
    return (f"runs the launch of its group's leader ({leader.framework or 'a launcher'}), whose model is not "
            f"visible at admission: {DECLARE}",)


def profile(template: PodTemplate, *, gpu_resources: tuple[str, ...],
            leader: WorkloadProfile | None = None, holder: object_names.Holder | None = None) -> Inferred:
    """Infer the workload profile of one pod template.

    ``leader``: for the worker template of a multi-template group (LeaderWorkerSet), the leader's
    profile; workers usually carry no model flags and run the leader's model.
    ``holder``: the object holding the template (``object_names.holder``): its name is the last
    hint of the model.
    """
    problems: list[Violation] = []
    gpu_req = pod_gpus(template.spec, template.spec_pointer, gpu_resources)
    problems.extend(gpu_req.problems)
    launch, container, cut = _launch(template.spec, gpu_req.by_container or {})
    # a pod that runs no launcher of its own runs its leader's when the leader states a model or a split
    # (an LWS worker of vLLM over Ray, of the TensorRT-LLM tutorials' mpirun: the leader starts its ranks)
    inherited = launch is None and leader is not None and (leader.model is not None or leader.tp_declared)

    model = template.annotations.get(MODEL) or (launch.model if launch else None)
    if model is None and inherited:
        model = leader.model
    notes: list[str] = []
    info = _model_info(template, model, problems, launch, notes)
    if model is None and info is None and not inherited and gpu_req.gpus > 0:
        model, info = _name_hint(template, holder, launch, gpu_req.gpus, notes)

    tp = _tp_annotation(template, problems)
    tp_declared = tp is not None
    pp = _tp_annotation(template, problems, PIPELINE_PARALLEL) or (launch.pipeline_parallel if launch else None)
    framework = launch.framework if launch else None
    if launch is not None and tp is None and launch.tensor_parallel is not None:
        tp, tp_declared = launch.tensor_parallel, True
    pods = _group_pods(template, launch) if not inherited or leader is None else leader.pods
    dp = _data_parallel(launch, pods, notes)
    if inherited and leader is not None:
        framework = framework or leader.framework
        tp = tp or leader.tensor_parallel
        pp = pp or leader.pipeline_parallel
        dp = dp or leader.data_parallel
        tp_declared = tp_declared or leader.tp_declared
    if launch is not None and tp is None and launch.role == "inference":
        traits = launcher_traits.of(launch.framework)
        if traits.layers_over_gpus and pp is None:
            tp, pp = 1, max(gpu_req.gpus, 1)
        elif launch.uses_all_gpus or traits.shards_all_gpus:
            tp = max(gpu_req.gpus, 1)
        elif traits.tp_assumed:
            tp = 1  # vLLM, SGLang, TRT-LLM, LMDeploy: TP defaults to 1 whatever the pod requests
    if launch is not None and launch.role == "inference" and tp is not None and pp is None:
        pp = 1

    role = launch.role if launch else (leader.role if inherited and leader else None)
    strategy = _strategy(template, launch, leader if inherited else None, problems)
    if TRAINING_STRATEGY in template.annotations and strategy.get("training_strategy"):
        role = "training"  # stating how training memory is laid out states that the pod trains
    dtype = launch.dtype if launch else (leader.dtype if inherited and leader else None)
    quantization = (launch.quantization if launch else None) or (info.name_quantization if info else None)
    if inherited and leader is not None:
        quantization = quantization or leader.quantization
    native = info.native_dtype if info else None
    bpp = sizing.bytes_per_param(dtype=dtype, quantization=quantization, native_dtype=native, role=role,
                                 peft=strategy.get("peft"))
    gpus_used = _gpus_used(launch if not inherited else None, tp, pp, dp, gpu_req.gpus, pods)
    parallel = _expert_data_parallel(launch, leader if inherited else None, tp, dp)
    kind = (launch.kind if launch else (leader.kind if inherited and leader else None)) \
        or (info.kind if info else None)
    notes.extend(_unrecognised(launch, model, info, gpu_req.gpus) if not inherited
                 else _inherited_unrecognised(leader, info, gpu_req.gpus))

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
        kind=kind,
        bytes_per_param=bpp,
        layers=info.layers if info else None,
        gpu_memory_utilization=launch.gpu_memory_utilization if launch else None,
        tp_declared=tp_declared,
        gpus_used=gpus_used,
        hidden=tuple(launch.hidden) if launch else (),
        notes=(tuple(launch.notes) if launch else ()) + cut + tuple(notes),
        tier_override=template.annotations.get(TIER),
        container=container,
        **parallel,
        **strategy,
    )
    note = training_memory.assumption_note(prof)
    if note is not None:
        prof = replace(prof, notes=prof.notes + (note,))
    return Inferred(prof, tuple(problems))


def _expert_data_parallel(launch: LaunchSpec | None, leader: WorkloadProfile | None, tp: int | None,
                          dp: int | None) -> dict[str, Any]:
    """The expert/data-parallel facts ``sizing`` splits memory by (a worker inherits its leader's).

    vLLM's EP group is TP x DP; when the launch could not multiply them (DP recovered here from
    ``--data-parallel-size-local`` x pods), the product is taken now."""
    if launch is None:
        if leader is None:
            return {}
        return {"expert_parallel": leader.expert_parallel, "expert_parallel_size": leader.expert_parallel_size,
                "data_parallel_local": leader.data_parallel_local, "dp_attention": leader.dp_attention}
    size = launch.expert_parallel
    enabled = bool(launch.expert_parallel_enabled or (size or 0) > 1)
    if enabled and size is None and launcher_traits.of(launch.framework).experts_over_dp and tp and dp \
            and "tensor_parallel" not in launch.unresolved:
        size = tp * dp
    return {
        "expert_parallel": enabled,
        "expert_parallel_size": size,
        "data_parallel_local": launch.data_parallel_local,
        "dp_attention": launch.dp_attention,
    }
