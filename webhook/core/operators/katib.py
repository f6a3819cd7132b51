"""Katib ``kubeflow.org/v1beta1`` Experiment: hyperparameter tuning, whose trials are jobs of their own kind.

An Experiment holds no pod template of its own: ``spec.trialTemplate.trialSpec`` is a whole object (a
batch Job, a PyTorchJob, a TrainJob, ...) that Katib creates once per trial, after substituting the
trial's parameter values into it. So the trial object is read with its own kind's reader, and each
trial is a job (a group) of its own. Facts read in kubeflow/katib:

- pkg/apis/controller/experiments/v1beta1/experiment_types.go@0c733696: ``ExperimentSpec.parameters``
  (``name``, ``parameterType`` int/double/discrete/categorical, ``feasibleSpace`` {min, max, list,
  step}), ``trialTemplate`` (``trialSpec`` an unstructured object, or ``configMap`` {configMapName,
  configMapNamespace, templatePath}; ``trialParameters`` [{name, reference}]),
  ``parallelTrialCount`` ("How many trials can be processed in parallel").
- experiment_defaults.go@0dfd5228 ``setDefaultParallelTrialCount``: unset, ``DefaultTrialParallelCount``
  (3, the types' comment "Defaults to 3").
- pkg/controller.v1beta1/experiment/manifest/generator.go (``applyParameters``; the file index gives no
  commit for it): each ``trialParameters[].name`` is a placeholder ``${trialParameters.<name>}``
  replaced, in the template's text, by the assignment of the search-space parameter its ``reference``
  names; a reference ``${trialSpec.<Name|Namespace|Kind|APIVersion|Labels[k]|Annotations[k]>}`` takes
  the trial's metadata instead (pkg/controller.v1beta1/consts/const.go
  ``TrialTemplateParamReplaceFormat``, ``TrialTemplateMetaReplaceFormatRegex``). Then the trial
  object gets the trial's name and the Experiment's namespace.

What is judged: one trial. The assignments are the suggestion algorithm's choice at run time, so the
reader fills each placeholder with a value the search space allows: the largest of an int, double or
discrete parameter (a size the largest assignment fits, every other fits: batch sizes, GPU counts, TP
degrees), the first of a categorical one (no order to choose by), and says so in a note; a parameter it
cannot resolve is left as written, also with a note. The trial's pods are counted as its kind's
reader counts them and form that kind's group (a PyTorchJob's replicas together); the
``parallelTrialCount`` trials that run at once are separate groups, which a note states, so the
count is never multiplied into one group. A ConfigMap-sourced template is read from the input when
the ConfigMap is in it (judged, not patched: the pods' spec lives in the ConfigMap), else a note says
the trials were not judged.

Patching: a pin written into ``trialSpec`` reaches every trial, so an inline template is patched at
its place in the Experiment, unless a substitution changed its ``affinity`` (the patch is computed
from what was judged, and must not write a substituted value back): then it is judged only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from webhook.core.operators import jobs, lws, ray, trainer
from webhook.core.operators.base import Context, Found, OperatorKind, Reader, count, dig, mapping, name_of

API_VERSION = "kubeflow.org/v1beta1"
DEFAULT_PARALLEL = 3
PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^{}]{1,253})\}")
META_REFERENCE = re.compile(r"\$\{trialSpec\.([A-Za-z]{1,16})(?:\[([^\]]{1,253})\])?\}")
MAX_NODES = 20_000
"""Values visited when substituting a trial template (a bound on hostile input)."""
MAX_DEPTH = 64
"""Nesting the substitution descends into: deeper values are left as they are (a pod template is a
dozen levels deep; a hostile one hundreds, which recursion must not follow)."""
MAX_CONFIGMAP_TEMPLATE = 256 * 1024
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_INNER: Mapping[tuple[str, str], Reader] = {
    (k.api_version, k.kind): k.reader for family in (jobs.KINDS, ray.KINDS, lws.KINDS, trainer.KINDS)
    for k in family if k.entry is not None}
"""The trial kinds read with their own reader (Kubeflow jobs, JobSet, Volcano, Ray, LWS, TrainJob);
a ``batch/v1`` Job is read here (:func:`_batch_job`)."""


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(text.strip())
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def _feasible(parameter: Mapping[str, Any]) -> str | None:
    """The value judged for a search-space parameter (module docstring), ``None`` when it states none."""
    space = mapping(parameter.get("feasibleSpace"))
    listed = [v for v in space.get("list", []) if isinstance(v, str)] if isinstance(space.get("list"), list) else []
    if parameter.get("parameterType") == "categorical":
        return listed[0] if listed else None
    numbers = [(n, v) for v in listed if (n := _number(v)) is not None]
    if numbers:
        return max(numbers)[1]
    top = space.get("max")
    return top if isinstance(top, str) and _number(top) is not None else None


def _meta_value(match: re.Match[str], trial: Mapping[str, Any], name: str, namespace: str) -> str | None:
    key, index = match.group(1), match.group(2)
    meta = mapping(trial.get("metadata"))
    if key == "Name" and index is None:
        return name
    if key == "Namespace" and index is None:
        return namespace
    if key == "Kind" and index is None:
        return trial.get("kind") if isinstance(trial.get("kind"), str) else None
    if key == "APIVersion" and index is None:
        return trial.get("apiVersion") if isinstance(trial.get("apiVersion"), str) else None
    if key in ("Labels", "Annotations") and index is not None:
        value = mapping(meta.get(key.lower())).get(index)
        return value if isinstance(value, str) else None
    return None


def trial_values(experiment: Mapping[str, Any], trial: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Placeholder name -> the value judged for it, and what was assumed or not resolved."""
    spec = mapping(experiment.get("spec"))
    exp_name = name_of(dig(experiment, "metadata", "name"), "experiment")
    namespace = name_of(dig(experiment, "metadata", "namespace"), "")
    listed = spec.get("parameters")
    parameters = {p["name"]: p for p in (listed if isinstance(listed, list) else [])
                  if isinstance(p, Mapping) and isinstance(p.get("name"), str)}
    declared = dig(spec, "trialTemplate", "trialParameters")
    values: dict[str, str] = {}
    chosen: list[str] = []
    unresolved: list[str] = []
    for item in declared if isinstance(declared, list) else []:
        item = mapping(item)
        name, reference = item.get("name"), item.get("reference")
        if not isinstance(name, str) or not isinstance(reference, str):
            continue
        meta = META_REFERENCE.fullmatch(reference)
        value = (_meta_value(meta, trial, f"{exp_name}-trial", namespace) if meta is not None
                 else _feasible(mapping(parameters.get(reference))))
        if value is None:
            unresolved.append(name)
            continue
        values[name] = value
        if meta is None:
            chosen.append(f"{name}={value[:32]}")
    notes = []
    if chosen:
        notes.append("trial parameters judged at " + ", ".join(chosen[:8]) + " (the largest a numeric "
                     "parameter may take, the first of a categorical one): each trial runs its own assignment")
    if unresolved:
        notes.append("trial parameters not resolved from spec.parameters: " + ", ".join(n[:32] for n in unresolved[:8]))
    return values, notes


def substituted(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` with every ``${trialParameters.<name>}`` of ``values`` replaced in its strings, as
    Katib replaces them in the template's text; a copy where anything changed, else ``value`` itself."""
    budget = [MAX_NODES]

    def walk(v: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:  # a hostile object is left as it is, never a RecursionError
            return v
        if isinstance(v, str):
            return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), v) if "${" in v else v
        if isinstance(v, Mapping):
            out = {k: walk(x, depth + 1) for k, x in v.items()}
            return v if all(out[k] is v[k] for k in v) else out
        if isinstance(v, list):
            items = [walk(x, depth + 1) for x in v]
            return v if all(a is b for a, b in zip(items, v)) else items
        return v

    return walk(value, 0)


def _batch_job(trial: Mapping[str, Any], _kind: str, _context: Context) -> Iterator[Found]:
    """A ``batch/v1`` Job trial: its pod template, ``parallelism`` (default 1) pods, independent, as
    the project judges a Job on its own."""
    spec = mapping(trial.get("spec"))
    if isinstance(spec.get("template"), Mapping):
        yield Found(("spec", "template"), spec["template"], "trial", count(spec.get("parallelism")), group=1)


def _trial_source(obj: Mapping[str, Any], context: Context) -> tuple[Any, tuple[str, ...], str | None]:
    """(the trial object, its path in the Experiment or ``()`` when it came from a ConfigMap, a note)."""
    template = mapping(dig(obj, "spec", "trialTemplate"))
    if isinstance(template.get("trialSpec"), Mapping):
        return template["trialSpec"], ("spec", "trialTemplate", "trialSpec"), None
    source = mapping(template.get("configMap"))
    name, key = source.get("configMapName"), source.get("templatePath")
    if not isinstance(name, str) or not isinstance(key, str):
        return None, (), "spec.trialTemplate holds neither a trialSpec nor a configMap: no trial to judge"
    namespace = name_of(source.get("configMapNamespace"), name_of(dig(obj, "metadata", "namespace"), ""))
    found = context.get(("ConfigMap", namespace, name)) or context.get(("ConfigMap", "", name))
    text = mapping(mapping(found).get("data")).get(key)
    if not isinstance(text, str):
        return None, (), (f"the trial template is ConfigMap {name[:64]} key {key[:64]}, which is not in the input: "
                          f"the trials' pods were not judged")
    if len(text) > MAX_CONFIGMAP_TEMPLATE:
        return None, (), f"the trial template in ConfigMap {name[:64]} is over 256 KiB: not read"
    try:
        trial = yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except Exception as exc:  # noqa: BLE001 (YAMLError, RecursionError: all mean "unreadable")
        return None, (), f"the trial template in ConfigMap {name[:64]} does not parse ({type(exc).__name__})"
    return trial, (), None


def _placeholder_trial(note: str) -> Found:
    """A template with no pod in it, carrying ``note``: the Experiment is reported, never passed silently."""
    return Found(("spec", "trialTemplate"), {"metadata": {}, "spec": {"containers": []}}, "trial", 0,
                 synthesized=True, group=1, notes=(note,))


def _experiment(obj: Mapping[str, Any], _kind: str, context: Context) -> Iterator[Found]:
    trial, base, problem = _trial_source(obj, context)
    exp = name_of(dig(obj, "metadata", "name"), "(unnamed)")
    if problem is not None or not isinstance(trial, Mapping):
        yield _placeholder_trial(f"Experiment {exp}: {problem or 'the trial template is not an object'}")
        return
    kind, api_version = str(trial.get("kind")), str(trial.get("apiVersion"))
    reader = _batch_job if (api_version, kind) == ("batch/v1", "Job") else _INNER.get((api_version, kind))
    if reader is None:
        yield _placeholder_trial(f"Experiment {exp}: trials of kind {kind[:64]} ({api_version[:64]}) are not a kind "
                                 f"gpu-admission reads: not judged")
        return
    values, notes = trial_values(obj, trial)
    filled = substituted(trial, values)
    # Katib names the trial object and puts it in the Experiment's namespace (GetRunSpecWithHyperParameters)
    namespace = dig(obj, "metadata", "namespace")
    filled = {**filled, "metadata": {**mapping(filled.get("metadata")), "name": f"{exp}-trial",
                                     **({"namespace": namespace} if isinstance(namespace, str) else {})}}
    parallel = count(dig(obj, "spec", "parallelTrialCount"), DEFAULT_PARALLEL)
    notes.append(f"Experiment {exp}: up to {parallel} trials run at once (parallelTrialCount), each a {kind} "
                 f"of its own: one trial's pods are judged as one group")
    for found in reader(filled, kind, context):
        # a substituted affinity must not be written back by a patch computed from it
        changed = bool(base) and not found.inline and (
            dig(trial, *found.path, "spec", "affinity") != dig(found.holder, "spec", "affinity"))
        yield replace(found, path=(*base, *found.path) if base else ("spec", "trialTemplate", "configMap"),
                      synthesized=found.synthesized or not base or changed, notes=(*found.notes, *notes))


KINDS: tuple[OperatorKind, ...] = (
    # the trial kinds' leader roles: an MPIJob trial's launcher names what its workers run
    OperatorKind(API_VERSION, "Experiment", "experiments", _experiment, leaders=frozenset({"Launcher", "leader"}),
                 source="kubeflow/katib pkg/apis/controller/experiments/v1beta1/experiment_types.go@0c733696, "
                        "pkg/controller.v1beta1/experiment/manifest/generator.go"),
)
