"""The pure pipeline both front doors call: object -> templates -> profiles -> decisions -> patches.

The HTTP server and the ``check`` CLI build a :class:`Request` and call :func:`judge`, the one
entry, and nothing below it, so the live webhook and the CI checker cannot disagree. No I/O, no
clock; no state but the bounded memos of pure results (:mod:`webhook.core.memo`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from webhook.core import (configmaps, dra, gpu_shares, inference, operators, patches, policy, templating,
                          unknown_kinds, updates)
from webhook.core.domain import Decision, JSON, WorkloadProfile
from webhook.core.inventory import Inventory
from webhook.core.placing import describe
from webhook.core.policy import tier_fits
from webhook.core.redaction import secret_values
from webhook.core.settings import Settings
from webhook.core.sizing import effective_precision
from webhook.core.tiering import placement_rule
from webhook.core.resources import pod_gpus
from webhook.core.workloads import NOT_WORKLOADS, PodTemplate, pod_templates, resolve

__all__ = ["CONTEXT_KINDS", "NOT_JUDGED", "Judgement", "Request", "TemplateResult", "claim_result", "describe",
           "effective_precision", "judge", "object_identity", "resolve_mode", "runtime_context", "templated",
           "placement_rule", "tier_fits", "unjudged"]


@dataclass(frozen=True)
class TemplateResult:
    """The verdict on one pod template of an object."""

    template: PodTemplate
    profile: WorkloadProfile
    decision: Decision
    patch: tuple[dict[str, JSON], ...]
    """RFC 6902 ops relative to the document that was judged (empty when nothing changes)."""
    claim: dra.DraResult | None = None
    """The DRA verdict itself, when the object is a ResourceClaim(Template): its GPU requests and
    device count, which a template's profile has no place for."""


@dataclass(frozen=True)
class Judgement:
    """The verdicts on one object and what the reply quoting them needs, from ONE walk of it.

    The server's reply redacts every text with the literal values of the object's secret-named env
    variables; those live in the templates the engine just walked, so they travel with the verdicts
    instead of the response path walking the object a second time."""

    results: tuple[TemplateResult, ...]
    known_secrets: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    """The secrets, when they were taken before the templates were slimmed (:meth:`detached`)."""

    @property
    def secrets(self) -> tuple[str, ...]:
        """Secret env values of the judged templates, longest first (:func:`redaction.secret_values`):
        computed when asked (most replies carry no text that could quote one)."""
        if self.known_secrets is not None:
            return self.known_secrets
        return secret_values(r.template.spec for r in self.results)

    def detached(self) -> "Judgement":
        """The same verdicts, patches and secrets without the judged object: its templates keep their
        names, pointers, notes and counts but not the pod spec and metadata (a memo of verdicts keeps
        these, not a copy of every pod it has seen)."""
        slim = tuple(replace(r, template=replace(r.template, metadata={}, spec={}, labels={}, annotations={}))
                     for r in self.results)
        return Judgement(slim, self.secrets)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _metadata(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


class Request(NamedTuple):
    """What a door asks the core to judge: one object, as it arrived.

    The server builds one from an AdmissionReview, ``check`` from each document of its input; both
    then call :func:`judge`, so the live webhook and the CI checker run the same code for every
    kind (pods, workloads, operator kinds, DRA claims) and every operation. Immutable; a NamedTuple
    rather than a frozen dataclass because the server builds one per review, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (bench/NOTES.md)."""

    obj: Any
    operation: str = "CREATE"
    """``CREATE`` or ``UPDATE`` (kube-apiserver's names); ``check`` judges everything as a CREATE."""
    old_obj: Any = None
    """The stored object of an UPDATE: what it already had is pre-existing, not news."""
    scale_to: int | None = None
    """A scale-up through the ``scale`` subresource: ``obj`` is the stored object the Scale is of
    and this its new replica count (:func:`_scaled`)."""
    mode: str | None = None
    """The mode asked for (``check --mode``): replaces the policy's."""
    entry_mode: str | None = None
    """The mode of the webhook entry the request came through (``/validate/audit`` for audit
    namespaces): it can only soften the policy's, never harden it."""
    mutate: bool | None = None
    """Judge templates as the mutating webhook will leave them; ``None``: the policy's ``mutate``."""
    prefix: str = ""
    """The JSON pointer of ``obj`` inside the judged document (items of a v1 List)."""
    context: Mapping[tuple[str, str, str], Any] | None = None
    """The other objects of the same input by (kind, namespace, name), for kinds whose pods come
    from another object (a TrainJob's runtime, a pod's ConfigMaps)."""


def resolve_mode(settings: Settings, *, mode: str | None = None, entry_mode: str | None = None) -> str:
    """The one place an object's mode is decided: a mode asked for replaces the policy's (``check
    --mode enforce`` on an audit policy asks what enforce would deny); an entry's mode only softens
    (an audit namespace's entry never enforces an audit policy, whose ``mode: audit`` is the kill
    switch). A pod's own audit annotation softens further per template, where the policy allows it
    (rule ``mode``, :func:`webhook.core.rules.mode`)."""
    if mode is not None:
        return mode
    if entry_mode is not None:
        return "audit" if "audit" in (entry_mode, settings.mode) else "enforce"
    return settings.mode


def judge(request: Request, settings: Settings, inventory: Inventory | None = None) -> Judgement:
    """The verdicts on ``request``'s object, for both doors: its pod templates judged (kinds
    without any give no result, unless the object asks for GPUs somewhere: then one result says it
    was not judged, :func:`unjudged`); a ``resource.k8s.io/v1`` claim judged by
    :func:`webhook.core.dra.judge_claim`; an UPDATE judged against its stored object
    (:func:`_updated`); a scale-up by what its new pods will meet (:func:`_scaled`).
    ``inventory``: the cluster's GPU nodes, when known."""
    mode = resolve_mode(settings, mode=request.mode, entry_mode=request.entry_mode)
    mutate = settings.mutate if request.mutate is None else request.mutate
    obj = request.obj
    if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"] in dra.KINDS:
        # a claim's spec is immutable: only a CREATE can be patched, and an UPDATE (metadata only)
        # is judged in audit, since denying it would fix nothing and block finalizer removal
        update = request.operation == "UPDATE"
        claim = dra.judge_claim(obj, mode="audit" if update else mode, mutate=mutate and not update,
                                prefix=request.prefix)
        if claim is not None:
            return Judgement((claim_result(claim, obj, request.prefix),))
    if request.scale_to is not None:
        return _scaled(obj, request.scale_to, settings, mode=mode, inventory=inventory)
    if request.operation == "UPDATE" and request.old_obj is not None:
        return _updated(obj, request.old_obj, settings, mode=mode, mutate=mutate, inventory=inventory)
    return Judgement(_templates(obj, settings, mode=mode, mutate=mutate, prefix=request.prefix,
                                inventory=inventory, context=request.context))


def _templates(obj: Any, settings: Settings, *, mode: str, mutate: bool, prefix: str = "",
               inventory: Inventory | None = None,
               context: Mapping[tuple[str, str, str], Any] | None = None) -> tuple[TemplateResult, ...]:
    """Judge every pod template of ``obj`` (see :func:`judge`)."""
    results: list[TemplateResult] = []
    leader: WorkloadProfile | None = None
    leaders = operators.REGISTRY.leaders(obj)
    lookup = _configmaps(obj, context)
    shared = False
    for template in _job_groups(pod_templates(obj, prefix, context), settings.gpu_resources):
        read = replace(template, spec=configmaps.materialize(template.spec, lookup)) if lookup else template
        inferred = inference.profile(read, gpu_resources=settings.gpu_resources, leader=leader,
                                     holder=inference.holder_of(obj))
        if template.role in leaders:
            # an LWS leader, an MPI launcher (whose mpirun command names what the workers, sshd, run)
            leader = inferred.profile
        decision = policy.decide(inferred.profile, template, settings, mode=mode, mutate=mutate,
                                 problems=inferred.problems, inventory=inventory)
        ops: tuple[dict[str, JSON], ...] = ()
        if template.patchable and (decision.patch_needed or decision.group is not None):
            placement = decision.placement if decision.patch_needed else None
            if placement is not None and template.spec_at is not None:
                # a PodSpec written in place (KServe's predictor) has the object's metadata, not its own:
                # the pinned note belongs on the pods, which the pod webhook writes it on
                placement = replace(placement, reason="")
            ops = tuple(patches.build(template.pointer, template.spec, placement, decision.group,
                                      spec_pointer=template.spec_pointer,
                                      metadata=_written_metadata(obj, template.pointer[len(prefix):])))
        slices = gpu_shares.judge(inferred.profile, read, settings)
        if slices:  # MIG slices or a shared GPU, which no GPU count reads: said, as notes both doors show
            template, shared = replace(template, notes=(*template.notes, *slices)), True
        if template.notes:  # what the kind's reader could not see (a runtime not in the input)
            decision = replace(decision, warnings=tuple(dict.fromkeys((*template.notes, *decision.warnings))))
        results.append(TemplateResult(template, inferred.profile, decision, ops))
    if not shared and not any(r.profile.gpus_per_pod > 0 or r.decision.violations for r in results) and not (
            isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) and obj["kind"] in NOT_WORKLOADS):
        where = unknown_kinds.gpu_requests(obj)
        if where:
            results.append(unjudged(obj, prefix, where, mode))
    return tuple(results)


NOT_JUDGED = "not-judged"

CONTEXT_KINDS = operators.CONTEXT_KINDS
runtime_context = operators.context_of
"""Re-exported for the doors (which import the core through :data:`webhook.core.PUBLIC` only)."""


def unjudged(obj: Any, prefix: str, where: tuple[str, ...], mode: str) -> TemplateResult:
    """The result for an object that asks for GPUs (at ``where``) in no pod template we could read:
    admitted (we cannot say it is wrong) but never silently. ``check --strict`` fails on it."""
    meta = _metadata(obj)
    kind = obj.get("kind") if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) else "object"
    template = PodTemplate(prefix, meta, {}, kind=kind, found="unjudged")
    shown = ", ".join(prefix + w for w in where)
    warning = (f"{NOT_JUDGED}: this {kind} asks for GPUs ({shown}) but gpu-admission read no pod template that "
               f"requests them, so its GPU placement was not judged: name the GPUs in a pod template's "
               f"resources (policy gpuResources), or see docs/inference.md, supported kinds")
    decision = Decision(allowed=True, mode=mode, tier=None, placement=None, violations=(), warnings=(warning,))
    return TemplateResult(template, WorkloadProfile(gpus_per_pod=0, kind=kind), decision, ())


def templated(obj: Any, prefix: str, markers: tuple[templating.Marker, ...], mode: str) -> TemplateResult:
    """The result for an object that is still a template (``markers``, from :func:`templating.find`),
    in place of judging it: admitted, never silently, and not a denial, because kube-apiserver
    refuses such an object before any webhook sees it (see :mod:`webhook.core.templating`). Only
    ``check`` asks for it; at admission the object is judged (``invalid-gpu-request``).
    ``check --strict`` fails on it, as on an unjudged object."""
    meta = _metadata(obj)
    kind = obj.get("kind") if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) else "object"
    notes = tuple(m.describe() for m in markers) + gpu_shares.launcher_statements(obj, prefix)
    template = PodTemplate(prefix, meta, {}, kind=kind, found=templating.FOUND, patchable=False, notes=notes)
    decision = Decision(allowed=True, mode=mode, tier=None, placement=None, violations=(),
                        warnings=(f"{templating.MESSAGE}: {templating.reason(markers)}",))
    return TemplateResult(template, WorkloadProfile(gpus_per_pod=0, kind=kind), decision, ())


def _configmaps(obj: Any, context: Mapping[tuple[str, str, str], Any] | None) -> configmaps.Lookup | None:
    """ConfigMap name -> data for the ConfigMaps of the input in ``obj``'s namespace (one written
    without a namespace matches any), or ``None`` when the input has none."""
    if not context or not any(isinstance(key, tuple) and key[:1] == ("ConfigMap",) for key in context):
        return None
    namespace = _metadata(obj).get("namespace")
    namespace = namespace if isinstance(namespace, str) else ""

    def lookup(name: str) -> Mapping[str, str] | None:
        found = context.get(("ConfigMap", namespace, name)) or context.get(("ConfigMap", "", name))
        return configmaps.data_of(found)

    return lookup


def _written_metadata(obj: Any, pointer: str) -> Mapping[str, Any] | None:
    """The metadata of the template at ``pointer`` (relative to ``obj``) as the object has it, for
    the label and annotation ops: a reader may judge a copy with hints in its annotations (a
    RayService's serveConfigV2), but the patch applies to what is written. ``None`` when absent."""
    holder = resolve(obj, pointer)
    metadata = holder.get("metadata") if isinstance(holder, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else None


def _job_groups(templates: tuple[PodTemplate, ...], gpu_resources: tuple[str, ...]) -> tuple[PodTemplate, ...]:
    """An operator's job (gang templates) is one group of its GPU pods: each GPU template gets the
    job's GPU pod count as its group size, so a PyTorchJob of 1 master + 3 workers at 8 GPUs is
    judged as 8 GPUs x 4 pods. CPU-only templates (an MPI launcher, a Ray head) are not members."""
    if not any(t.gang for t in templates):
        return templates
    member = [t.gang and pod_gpus(t.spec, t.spec_pointer, gpu_resources).gpus > 0 for t in templates]
    pods = sum(t.replicas or 0 for t, m in zip(templates, member) if m)
    if pods <= 1:
        return templates
    return tuple(replace(t, group_size=pods) if m else t for t, m in zip(templates, member))


def _updated(obj: Any, old_obj: Any, settings: Settings, *, mode: str, mutate: bool,
             inventory: Inventory | None) -> Judgement:
    """An UPDATE: with the policy's ``updates: judgeChange`` (the default) a violation ``old_obj``
    already had in the same template is a pre-existing warning, not a denial
    (:mod:`webhook.core.updates`); ``judgeObject`` judges the object as if it were new. Either way,
    a Kueue-managed workload's update that only adds Kueue's flavor node selection is never denied
    (:func:`webhook.core.updates.kueue_admissions`)."""
    results = _templates(obj, settings, mode=mode, mutate=mutate, inventory=inventory)
    queued = isinstance(_mapping(_metadata(obj).get("labels")).get(updates.KUEUE_QUEUE), str)
    if settings.updates != updates.JUDGE_CHANGE and not queued:
        return Judgement(results)
    # the stored templates read as _templates reads them, job group sizes included, so an unchanged
    # operator template compares equal and is not judged again
    old_templates = _job_groups(pod_templates(old_obj), settings.gpu_resources)
    if settings.updates == updates.JUDGE_CHANGE:
        results = updates.against_old(results, old_templates,
                                      lambda: _templates(old_obj, settings, mode=mode, mutate=mutate, inventory=inventory),
                                      scaled=updates.scaled_up(old_obj, obj))
    results = updates.kueue_admissions(results, old_templates, queued=queued)
    return Judgement(results)


def _scaled(parent: Any, replicas: int, settings: Settings, *, mode: str,
            inventory: Inventory | None) -> Judgement:
    """A scale-up through the ``scale`` subresource (``kubectl scale``, an HPA): never denied, but
    what its new pods will meet is said. ``parent`` is the stored object the Scale is of (the server
    reads it: a Scale carries no pod template), judged as its pods will be (after mutation) with
    ``replicas``; every violation that would deny them becomes a ``scale-up`` warning
    (:func:`webhook.core.updates.pre_existing_warnings`), and nothing else is said (a scale changes no
    template: its other warnings were given when the template was written)."""
    scaled = parent
    if isinstance(parent, Mapping) and isinstance(parent.get("spec"), Mapping):
        scaled = {**parent, "spec": {**parent["spec"], "replicas": replicas}}
    results = _templates(scaled, settings, mode=mode, mutate=settings.mutate, inventory=inventory)
    out = []
    for r in results:
        denied = [v for v in r.decision.violations if not r.decision.allowed]
        warnings = tuple(w for v in denied for w in updates.pre_existing_warnings(v, scaled_up=True))
        out.append(replace(r, decision=replace(r.decision, allowed=True, violations=(), warnings=warnings),
                           patch=()))
    return Judgement(tuple(out))


def claim_result(claim: dra.DraResult, obj: Any, prefix: str = "") -> TemplateResult:
    """A DRA verdict as a TemplateResult: the claim stands in for the template (no pod spec), its GPU
    devices for the GPUs per pod (0 when it takes ``All`` matching devices), no tier or placement."""
    meta = _metadata(obj)
    template = PodTemplate(prefix, meta, {}, kind=claim.kind,
                           labels={k: v for k, v in _mapping(meta.get("labels")).items() if isinstance(v, str)},
                           annotations={k: v for k, v in _mapping(meta.get("annotations")).items()
                                        if isinstance(v, str)})
    profile = WorkloadProfile(gpus_per_pod=claim.gpu_devices or 0, kind=claim.kind)
    decision = Decision(allowed=claim.allowed, mode=claim.mode, tier=None, placement=None,
                        violations=claim.violations, warnings=claim.warnings)
    return TemplateResult(template, profile, decision, claim.patch, claim)


def object_identity(obj: Any) -> dict[str, JSON]:
    """apiVersion, kind, name and namespace of an object (``None`` where absent)."""
    meta = _metadata(obj)
    ident = obj if isinstance(obj, Mapping) else {}
    return {
        "apiVersion": ident.get("apiVersion") if isinstance(ident.get("apiVersion"), str) else None,
        "kind": ident.get("kind") if isinstance(ident.get("kind"), str) else None,
        "name": meta.get("name") if isinstance(meta.get("name"), str) else meta.get("generateName")
        if isinstance(meta.get("generateName"), str) else None,
        "namespace": meta.get("namespace") if isinstance(meta.get("namespace"), str) else None,
    }
