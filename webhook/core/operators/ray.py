"""KubeRay: ``ray.io/v1`` RayCluster (``/spec``), RayJob (``/spec/rayClusterSpec``) and RayService
(``/spec/rayClusterConfig``).

The head group is one pod; each worker group makes the larger of ``replicas`` and ``minReplicas``
(both default 0 in the CRD; the operator keeps replicas at least minReplicas:
ray-operator/apis/ray/v1/raycluster_types.go, WorkerGroupSpec) x ``numOfHosts`` (default 1) pods.

A RayService names its model in ``/spec/serveConfigV2``, a YAML string the pod templates never see.
What it states is put on the worker groups' holder annotations (``gpu-admission.io/model``,
``gpu-admission.io/tensor-parallel``) of a copy of the template (the input is not changed; the pod
spec is still the object's own, so it is patched as before). Two shapes are read:

- Ray Serve LLM (ray-project/ray python/ray/llm/_internal/serve/configs/server_models.py,
  ``ModelLoadingConfig``: ``model_id``, and ``model_source``, which defaults to ``model_id``;
  kuberay ray-operator/config/samples/ray-service.llm-serve.yaml@0ca87180):
  ``applications[].args.llm_configs[]`` with ``model_loading_config.{model_source, model_id}`` and
  the vLLM ``engine_kwargs.tensor_parallel_size`` (``pipeline_parallel_size`` is noted, no annotation
  carries it);
- a custom app's ``runtime_env.env_vars`` (kuberay ray-operator/config/samples/vllm/
  ray-service.vllm.yaml@09a89552: ``MODEL_ID``, ``TENSOR_PARALLELISM``).

Only one model is attributed: when the config names several, no worker group can be told which one
it runs, and a note says so. A string over :data:`MAX_SERVE_CONFIG` or that does not parse is a note,
never an exception; the user's own annotations on a template win.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from webhook.core.operators.base import Context, Found, OperatorKind, PodGroup, count, dig, mapping, name_of, product

RAY_CLUSTER_SPEC: Mapping[str, tuple[str, ...]] = {
    "RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"), "RayService": ("spec", "rayClusterConfig"),
}
MAX_SERVE_CONFIG = 256 * 1024
"""Longest serveConfigV2 parsed (bytes of its text): the YAML parser is the dearest step here."""
MAX_APPS = 64
"""Applications and llm_configs read per serveConfigV2."""
MODEL = "gpu-admission.io/model"
TENSOR_PARALLEL = "gpu-admission.io/tensor-parallel"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 512 else None


def _positive(value: Any) -> int | None:
    n = count(value, 0)
    return n if n > 0 else None


def _app_models(app: Mapping[str, Any]) -> Iterator[tuple[str | None, int | None, int | None]]:
    """(model, TP, PP) per model an application states."""
    configs = dig(app, "args", "llm_configs")
    for config in configs[:MAX_APPS] if isinstance(configs, list) else []:
        config = mapping(config)  # a string is a path to a config file the input does not hold
        loading = mapping(config.get("model_loading_config"))
        engine = mapping(config.get("engine_kwargs"))
        model = _text(loading.get("model_source")) or _text(loading.get("model_id"))
        yield model, _positive(engine.get("tensor_parallel_size")), _positive(engine.get("pipeline_parallel_size"))
    env = mapping(dig(app, "runtime_env", "env_vars"))
    if _text(env.get("MODEL_ID")):
        yield env["MODEL_ID"], _positive(env.get("TENSOR_PARALLELISM")), _positive(env.get("PIPELINE_PARALLELISM"))


def serve_config_hints(config: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """The annotations a RayService's ``serveConfigV2`` states for its worker groups, and notes."""
    if config is None:
        return {}, ()
    if not isinstance(config, str):
        return {}, ("spec.serveConfigV2 is not a string: its model is not read",)
    if len(config) > MAX_SERVE_CONFIG or len(config.encode("utf-8", "replace")) > MAX_SERVE_CONFIG:
        return {}, (f"spec.serveConfigV2 is over {MAX_SERVE_CONFIG // 1024} KiB: its model is not read",)
    try:
        doc = yaml.load(config, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except Exception as exc:  # noqa: BLE001 (YAMLError, RecursionError on deep nesting, ...: all mean "unreadable")
        return {}, (f"spec.serveConfigV2 does not parse as YAML ({type(exc).__name__}): its model is not read",)
    apps = mapping(doc).get("applications")
    found = [m for app in (apps[:MAX_APPS] if isinstance(apps, list) else []) for m in _app_models(mapping(app))]
    models = sorted({m for m, _, _ in found if m})
    if len(models) > 1:
        return {}, (f"spec.serveConfigV2 serves {len(models)} models ({', '.join(m[:64] for m in models[:4])}): "
                    "which worker group runs which is not known; annotate the groups with " + MODEL,)
    hints: dict[str, str] = {MODEL: models[0]} if models else {}
    tps = {tp for _, tp, _ in found if tp}
    if len(tps) == 1:
        hints[TENSOR_PARALLEL] = str(tps.pop())
    pps = {pp for _, _, pp in found if pp and pp > 1}
    notes = (f"spec.serveConfigV2 sets pipeline parallelism {max(pps)}: not carried by an annotation",) if pps else ()
    return hints, notes


def _with_hints(template: Any, hints: Mapping[str, str]) -> tuple[Any, tuple[str, ...]]:
    """A copy of ``template`` whose annotations hold ``hints`` under its own (the template itself when
    it is not an object or there is nothing to add), and notes.

    The engine builds a worker's group-label patch from the metadata it judged, so the copy must not
    differ from the object in which maps exist where the patch adds a key: a template with labels but
    no annotations map (the only case where group ops can meet an annotations map that the copy has
    and the object lacks) keeps no hints, and a note says how to state them."""
    if not hints or not isinstance(template, Mapping):
        return template, ()
    metadata = mapping(template.get("metadata"))
    own = metadata.get("annotations")
    if not isinstance(own, Mapping) and mapping(metadata.get("labels")):
        return template, (f"spec.serveConfigV2 names {hints.get(MODEL, 'the model')}: annotate the worker "
                          f"template with {MODEL} to have it read (it has labels but no annotations)",)
    return {**template, "metadata": {**metadata, "annotations": {**hints, **mapping(own)}}}, ()


def _ray(obj: Mapping[str, Any], kind: str, _context: Context) -> Iterator[Found]:
    base = RAY_CLUSTER_SPEC[kind]
    cluster = mapping(dig(obj, *base))
    hints, notes = serve_config_hints(dig(obj, "spec", "serveConfigV2")) if kind == "RayService" else ({}, ())
    head = mapping(cluster.get("headGroupSpec"))
    if "template" in head:
        yield Found((*base, "headGroupSpec", "template"), head["template"], "head", 1)
    groups = cluster.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        group = mapping(group)
        if "template" not in group:
            continue
        replicas = max(count(group.get("replicas"), 0), count(group.get("minReplicas"), 0))
        template, hint_notes = _with_hints(group["template"], hints)
        yield Found((*base, "workerGroupSpecs", str(i), "template"), template,
                    name_of(group.get("groupName"), f"workerGroupSpecs[{i}]"),
                    product(replicas, count(group.get("numOfHosts"))), notes=notes + hint_notes)


RAY_CLUSTER = PodGroup("ray.io/cluster", "Ray cluster", "ray")
"""ray-project/kuberay ray-operator/controllers/ray/common/pod.go ``labelPod`` (the key in
utils/constant.go ``RayClusterLabelKey``)."""

KINDS: tuple[OperatorKind, ...] = tuple(
    OperatorKind("ray.io/v1", kind, kind.lower() + "s", _ray, group=RAY_CLUSTER,
                 source="ray-project/kuberay ray-operator/apis/ray/v1 (raycluster_types.go, rayjob_types.go, "
                        "rayservice_types.go)")
    for kind in RAY_CLUSTER_SPEC)
