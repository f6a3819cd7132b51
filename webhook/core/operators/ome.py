"""OME (``ome.io/v1beta1``): InferenceService, with the BaseModel / ClusterBaseModel it serves and the
ServingRuntime / ClusterServingRuntime that holds its containers.

An OME InferenceService holds almost no pod: ``spec.model`` names the model, ``spec.runtime`` the
runtime, and ``spec.engine`` / ``spec.decoder`` hold overrides (replicas, a runner container, pod
fields). The pods are the runtime's ``engineConfig`` / ``decoderConfig`` with those overrides, and
the model's path and the parallelism reach the runner's command line through environment variables
the controller adds (``$(MODEL_PATH)``, ``$(PARALLELISM_SIZE)``, expanded by the kubelet). So the
reader needs the other two objects; it finds them in ``context`` (other objects of the same input,
keyed with the ``ome.io`` group so a KServe ServingRuntime of the same name is never taken), and
when one is not in the input it judges what the InferenceService states and says what is elsewhere.

Facts read in sgl-project/ome (the file index used gives no line numbers, so functions are named):

- pkg/apis/ome/v1beta1/inference_service.go@07fae195: ``spec.model`` {name, kind (default
  ClusterBaseModel), apiGroup (default ome.io)}, ``spec.runtime`` {name, kind (default
  ClusterServingRuntime)} (runtime optional: "the operator will automatically select the best
  runtime"), ``spec.engine`` / ``spec.decoder``: an inline PodSpec + ComponentExtensionSpec +
  ``runner`` (a container) + ``leader`` {PodSpec, runner} + ``worker`` {PodSpec, ``size`` (worker
  pods), runner}. component.go@10e3e311: ``minReplicas`` "defaults to 1".
- servingruntime_types.go@0878bedc: the runtime's ``engineConfig`` / ``decoderConfig`` have the same
  shape. model.go (BaseModelSpec): ``storage.storageUri`` (where the model comes from),
  ``storage.path`` (where it sits on the node), ``modelParameterSize`` ("7B", "70B"),
  ``modelFormat``, ``quantization``.
- pkg/controller/v1beta1/inferenceservice/utils/merging.go@291ce9c7 ``MergeEngineSpec`` /
  ``MergeDecoderSpec``: a component exists only when the InferenceService states it; the runtime's
  config is the base and the InferenceService's fields win (strategic merge: maps merged, lists of
  named items merged by name, other lists replaced).
- utils/deployment.go@20e702d9 ``DetermineEngineDeploymentMode``: a ``leader`` or ``worker`` makes
  the component MultiNode (a LeaderWorkerSet of 1 leader + ``worker.size`` workers; the OME LWS
  reconciler's size is workerSize + 1), else a Deployment of ``minReplicas`` independent pods.
- components/engine.go@01bcab56 ``reconcilePodSpec`` / ``reconcileWorkerPodSpec``: MultiNode takes
  the leader's PodSpec and runner (the engine's own when there is no leader), the worker's for the
  workers; ``UpdateEnvVariables`` adds ``MODEL_PATH`` = the BaseModel's ``storage.path`` when the
  runner does not set it; ``setParallelismEnvVarForEngine`` sets ``PARALLELISM_SIZE`` = GPUs of the
  runner x (1 leader + ``worker.size``) (components/decoder.go: 1 leader only when the decoder has a
  leader or a runner). Runtimes pass it as ``--tp-size $(PARALLELISM_SIZE)`` and the model as
  ``--model-path $(MODEL_PATH)`` (config/runtimes/srt/deepseek-rdma-rt.yaml@12a59438, runner
  ``ome-container``).

A ClusterServingRuntime or ServingRuntime alone (``check`` on a runtime file; no webhook entry: a
runtime makes no pods) is judged as an InferenceService naming it with ``engine: {}`` runs it.

The judged spec is built from up to three objects, so it is ``synthesized`` (never patched). The
model's name rides on the holder's ``gpu-admission.io/model`` (the ``hf://`` id of
``storage.storageUri``, else the BaseModel's name) and its size on ``gpu-admission.io/params``
(``modelParameterSize``); the InferenceService's own ``gpu-admission.io/*`` annotations win.

Not modelled: runtime auto-selection (no runtime named), accelerator classes (they replace the GPU
count and skip ``PARALLELISM_SIZE``), the per-component deployment-mode annotation; each is a note.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators import lws
from webhook.core.operators.base import Context, Found, OperatorKind, count, dig, mapping, name_of, product
from webhook.core.operators.model_servers import HINT, MODEL_HINT, holder, own_hints, strip_scheme, text

GROUP = "ome.io"
API_VERSION = GROUP + "/v1beta1"
RUNNER = "ome-container"
"""The runner's name in OME's runtimes, used when a runner names none."""
MODEL_PATH, PARALLELISM_SIZE = "MODEL_PATH", "PARALLELISM_SIZE"
PARAMS_HINT = HINT + "params"
MODEL_KINDS = ("ClusterBaseModel", "BaseModel")
RUNTIME_KINDS = ("ClusterServingRuntime", "ServingRuntime")
NOT_POD_FIELDS = frozenset({
    # ComponentExtensionSpec (component.go) and EngineSpec's own fields: not PodSpec fields
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "containerConcurrency", "timeoutSeconds",
    "canaryTrafficPercent", "logger", "labels", "annotations", "deploymentStrategy", "kedaConfig",
    "runner", "leader", "worker", "size",
})
MAX_DEPTH = 16
"""Nesting merged (a pod spec is a few levels deep; a hostile one is not followed further)."""


def qualified(kind: str) -> str:
    """The context key's kind for an OME object (:func:`webhook.core.operators.context_of`)."""
    return f"{GROUP}/{kind}"


def _find(context: Context, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    """An OME object of ``kind`` from ``context``: cluster-scoped kinds by name, namespaced ones in
    the InferenceService's namespace or written without one (``kubectl apply -n`` puts both in one)."""
    keys = [(qualified(kind), "", name)] if kind.startswith("Cluster") else \
        [(qualified(kind), namespace, name), (qualified(kind), "", name)]
    for key in dict.fromkeys(keys):
        found = context.get(key) if isinstance(context, Mapping) else None
        if isinstance(found, Mapping) and found.get("kind") == kind \
                and str(found.get("apiVersion")).startswith(GROUP + "/"):
            return found
    return None


def _ref(spec: Mapping[str, Any], field: str, kinds: tuple[str, ...], legacy: str) -> tuple[str | None, str, bool]:
    """(name, kind, legacy) of ``spec.<field>`` (kind defaults to the cluster-scoped one), else of the
    deprecated ``spec.predictor.model.<legacy>`` (a name only: ``legacy`` True)."""
    ref = mapping(spec.get(field))
    name = text(ref.get("name"))
    if name is not None:
        kind = name_of(ref.get("kind"), kinds[0])
        return name, kind if kind in kinds else kinds[0], False
    return text(dig(spec, "predictor", "model", legacy)), kinds[1], True


def _resolve(context: Context, name: str | None, kind: str, namespace: str,
             legacy: bool) -> Mapping[str, Any] | None:
    """The object a reference names; a legacy name is tried as the namespaced kind, then the
    cluster-scoped one (predictor_model.go ``GetBaseModel``)."""
    if name is None:
        return None
    found = _find(context, kind, namespace, name)
    if found is None and legacy:
        found = _find(context, "Cluster" + kind, namespace, name)
    return found


# --- merging, as OME does it ------------------------------------------------------------------


def merge(base: Any, override: Any, depth: int = 0) -> Any:
    """``override`` strategic-merged over ``base`` (merging.go ``mergeSpec``): objects merged key by
    key, lists of objects with a ``name`` merged by name (containers, env, volumes, volumeMounts),
    any other value replaced (``command`` and ``args`` are replaced whole)."""
    if depth > MAX_DEPTH:
        return override
    if isinstance(base, Mapping) and isinstance(override, Mapping):
        out = dict(base)
        for key, value in override.items():
            out[key] = merge(base[key], value, depth + 1) if key in base else value
        return out
    if _named_list(base) and _named_list(override):
        out_list = list(base)
        for item in override:
            index = next((i for i, b in enumerate(out_list) if b.get("name") == item.get("name")), None)
            if index is None:
                out_list.append(item)
            else:
                out_list[index] = merge(out_list[index], item, depth + 1)
        return out_list
    return override


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, Mapping) and isinstance(v.get("name"), str) for v in value[:256]) and len(value) <= 256


# --- the pods of one component ------------------------------------------------------------------


def _gpus(container: Mapping[str, Any]) -> int:
    """GPUs of a runner (isvcutils ``GetGpuCountFromContainer``: its GPU limit, else its request)."""
    resources = mapping(container.get("resources"))
    for part in ("limits", "requests"):
        for key, value in mapping(resources.get(part)).items():
            if isinstance(key, str) and key.endswith("/gpu") and count(value, 0) > 0:
                return count(value, 0)
    return 0


def _with_env(container: Mapping[str, Any], env: Mapping[str, str], *, replace: frozenset[str]) -> dict[str, Any]:
    """``container`` with ``env`` added: names in ``replace`` overwrite (``UpdateEnvVars``), the others
    only when the container does not set them (``AppendEnvVarsIfNotExist``)."""
    own = [e for e in container.get("env", []) if isinstance(e, Mapping)] \
        if isinstance(container.get("env"), list) else []
    names = {e.get("name") for e in own}
    out = [e for e in own if e.get("name") not in replace or e.get("name") not in env]
    out += [{"name": k, "value": v} for k, v in env.items() if k in replace or k not in names]
    return {**container, "env": out}


def _pod(pod_fields: Mapping[str, Any], runner: Any, env: Mapping[str, str], leaders: int,
         workers: int) -> tuple[dict[str, Any], bool]:
    """A PodSpec from a component's (or its leader's / worker's) fields and runner, with the env the
    controller adds; whether a runner was there."""
    pod = {k: v for k, v in pod_fields.items() if isinstance(k, str) and k not in NOT_POD_FIELDS}
    if not isinstance(runner, Mapping):
        return pod, False
    container = dict(runner)
    container["name"] = name_of(container.get("name"), RUNNER)
    values = dict(env)
    gpus = _gpus(container)
    if gpus > 0 and leaders + workers > 0:
        values[PARALLELISM_SIZE] = str(product(gpus, leaders + workers))
    container = _with_env(container, values, replace=frozenset({PARALLELISM_SIZE}))
    others = pod.get("containers") if isinstance(pod.get("containers"), list) else []
    pod["containers"] = [container, *(c for c in others if mapping(c).get("name") != container["name"])]
    return pod, True


def _component(obj: Mapping[str, Any], spec: Mapping[str, Any], name: str, role: str, env: Mapping[str, str],
               hints: Mapping[str, str | None], notes: list[str],
               path: tuple[str, ...] | None = None) -> Iterator[Found]:
    """The pods of one merged component (engine or decoder) at ``path`` (default ``/spec/<role>``): a
    Deployment of independent pods, or a LeaderWorkerSet of 1 leader + ``worker.size`` workers per
    replica."""
    replicas = count(spec.get("minReplicas"))
    # the component's annotations go on its pods (ComponentExtensionSpec); the object's own hints win
    own = {**{k: v for k, v in mapping(spec.get("annotations")).items()
              if isinstance(k, str) and k.startswith(HINT) and isinstance(v, str)}, **own_hints(obj)}
    leader, worker = spec.get("leader"), spec.get("worker")
    path = path or ("spec", role)
    missing = (f"{name}: the {{}} has no runner container in the input (it comes from the runtime): its "
               f"image, command and GPUs are not known here")
    if not isinstance(leader, Mapping) and not isinstance(worker, Mapping):
        pod, has_runner = _pod(spec, spec.get("runner"), env, 1, 0)
        notes += [] if has_runner else [missing.format(role)]
        yield Found(path, holder(pod, hints=hints, own=own), role, replicas, synthesized=True, group=1,
                    notes=tuple(notes))
        return
    workers = count(mapping(worker).get("size"), 0)
    size = 1 + workers
    has_lead = isinstance(leader, Mapping) or (role == "engine") or isinstance(spec.get("runner"), Mapping)
    base = mapping(leader) if isinstance(leader, Mapping) else spec
    pod, has_runner = _pod(base, base.get("runner"), env, 1 if has_lead else 0, workers)
    notes += [] if has_runner else [missing.format(f"{role} leader")]
    yield Found((*path, "leader") if isinstance(leader, Mapping) else path, holder(pod, hints=hints, own=own),
                f"{role}-leader", replicas, synthesized=True, group=size, notes=tuple(notes))
    if workers > 0:
        wpod, has_runner = _pod(mapping(worker), mapping(worker).get("runner"), env, 1 if has_lead else 0, workers)
        yield Found((*path, "worker"), holder(wpod, hints=hints, own=own), f"{role}-worker",
                    product(replicas, workers), synthesized=True, group=size,
                    notes=() if has_runner else (missing.format(f"{role} worker"),))


def _model_facts(model: Mapping[str, Any] | None, ref: str | None) -> tuple[dict[str, str | None], dict[str, str]]:
    """(holder hints, env) a BaseModel gives: the ``hf://`` id (else the model's name) and its
    parameter size; ``MODEL_PATH`` = ``storage.path``."""
    if model is None:
        return {MODEL_HINT: ref}, {}
    spec = mapping(model.get("spec"))
    uri = text(dig(spec, "storage", "storageUri"))
    hf = strip_scheme(uri, "hf") if uri and uri.startswith("hf://") else None
    hints: dict[str, str | None] = {MODEL_HINT: hf or text(dig(model, "metadata", "name")) or ref,
                                    PARAMS_HINT: text(spec.get("modelParameterSize"))}
    path = text(dig(spec, "storage", "path"))
    return hints, ({MODEL_PATH: path} if path else {})


def _inference_service(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    spec = mapping(obj.get("spec"))
    name = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    namespace = dig(obj, "metadata", "namespace")
    namespace = namespace if isinstance(namespace, str) else ""
    model_name, model_kind, legacy_model = _ref(spec, "model", MODEL_KINDS, "baseModel")
    runtime_name, runtime_kind, legacy_runtime = _ref(spec, "runtime", RUNTIME_KINDS, "runtime")
    model = _resolve(context, model_name, model_kind, namespace, legacy_model)
    runtime = _resolve(context, runtime_name, runtime_kind, namespace, legacy_runtime)
    notes: list[str] = []
    if runtime is None:
        what = f"runtime {runtime_kind}/{runtime_name} is not in the input" if runtime_name else \
            "no runtime is named (OME selects one for the model)"
        notes.append(f"InferenceService {name}: {what}; its containers, GPUs and parallelism are judged from "
                     f"spec.engine / spec.decoder alone")
    if model is None and model_name is not None:
        notes.append(f"InferenceService {name}: model {model_kind}/{model_name} is not in the input; the model "
                     f"is read from its name")
    elif model_name is None:
        notes.append(f"InferenceService {name}: spec.model names no model")
    hints, env = _model_facts(model, model_name)
    components = [(role, spec.get(role), config) for role, config in (("engine", "engineConfig"),
                                                                       ("decoder", "decoderConfig"))
                  if isinstance(spec.get(role), Mapping)]
    if not components:
        if isinstance(spec.get("predictor"), Mapping):
            # the deprecated predictor form: OME migrates it to an engine run from the runtime
            engine = {k: v for k, v in spec["predictor"].items() if k == "minReplicas"}
        else:
            engine = {}
            notes.append(f"InferenceService {name}: no spec.engine; OME releases differ on whether the runtime's "
                         f"engineConfig is then deployed (utils/merging.go): judged as if it were")
        components = [("engine", engine, "engineConfig")]
    for role, own, config in components:
        # MergeEngineSpec / MergeDecoderSpec: the runtime's config under the InferenceService's fields
        base = dig(runtime, "spec", config) if runtime is not None else None
        merged = merge(base, own) if isinstance(base, Mapping) else dict(mapping(own))
        yield from _component(obj, mapping(merged), f"InferenceService {name}", role, env, hints, list(notes))
        notes = []  # said once, on the first component


def _runtime(obj: Mapping[str, Any], kind: str, _context: Context) -> Iterator[Found]:
    """A ClusterServingRuntime or ServingRuntime alone (``check`` on a runtime file): its engine and
    decoder as an InferenceService naming it with ``engine: {}`` (and ``decoder: {}``) runs them, at the
    runtime's own pointers; the model (``MODEL_PATH``) is the InferenceService's, not known here."""
    spec = mapping(obj.get("spec"))
    name = f"{kind} {name_of(dig(obj, 'metadata', 'name'), '(unnamed)')}"
    for role, config in (("engine", "engineConfig"), ("decoder", "decoderConfig")):
        if isinstance(spec.get(config), Mapping):
            yield from _component(obj, spec[config], name, role, {}, {}, [], ("spec", config))


_SOURCE = ("sgl-project/ome pkg/apis/ome/v1beta1/inference_service.go@07fae195, servingruntime_types.go@0878bedc; "
           "pkg/controller/v1beta1/inferenceservice (components/engine.go@01bcab56, utils/merging.go@291ce9c7, "
           "utils/deployment.go@20e702d9)")

KINDS: tuple[OperatorKind, ...] = (
    # a multi-node engine or decoder runs on a LeaderWorkerSet, whose labels its pods carry; single-node
    # replicas are independent
    OperatorKind(API_VERSION, "InferenceService", "inferenceservices", _inference_service, group=lws.GROUP,
                 leaders=frozenset({"engine-leader", "decoder-leader"}), source=_SOURCE),
    # runtimes make no pods themselves (no webhook entry): read by `check` and as an InferenceService's context
    *(OperatorKind(API_VERSION, kind, kind.lower() + "s", _runtime, leaders=frozenset({"engine-leader", "decoder-leader"}),
                   entry=None, source=_SOURCE) for kind in RUNTIME_KINDS),
)
