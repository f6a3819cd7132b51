"""AdmissionReview request -> engine -> AdmissionReview response, for both webhook endpoints.

Pure: no Flask, no clock. ``/mutate`` pins pods and never denies (denial is the validator's job, so
the order of mutating webhooks cannot matter); ``/validate`` judges pods as they arrive (after
mutation) and workload templates as their pods will be once mutated, so ``kubectl apply`` of a
Deployment gets the verdict at apply time instead of in a ReplicaSet event nobody reads.
DRA ResourceClaims and ResourceClaimTemplates (``dra``) follow the same split: ``/mutate`` adds the
productName constraint on CREATE, ``/validate`` judges the claim as it arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Hashable, MutableMapping, Sequence

from webhook.core import dra, engine
from webhook.core.domain import JSON, counted
from webhook.core.engine import Judgement, TemplateResult, describe
from webhook.core.inventory import Inventory
from webhook.core.redaction import MIN_QUOTED_CHARS, REDACTED, quotable
from webhook.core.settings import Settings
from webhook.server import review
from webhook.server.review import Request
from webhook.server.verdict_cache import HIT, VerdictCache

JUDGED_OPERATIONS = frozenset({"CREATE", "UPDATE"})


@dataclass(frozen=True)
class Outcome:
    """A completed response plus the facts the server logs and counts."""

    review: dict[str, JSON]
    allowed: bool
    mode: str
    codes: tuple[str, ...] = ()
    tier: str | None = None
    judged: bool = False
    """False when the request was allowed at once (other operations, kinds or subresources)."""
    memo: str | None = None
    """How the verdict memo answered (:data:`webhook.server.verdict_cache.HIT`, ``MISS``, ``UNKEPT``);
    None when it was not asked."""
    wire: bytes | None = field(default=None, compare=False)
    """``review`` already encoded (:func:`webhook.server.review.encode`), when it came from a reply
    kept for a controller's earlier copy of the pod; None: the server encodes ``review``."""


Replies = MutableMapping[Hashable, Any]
"""The finished replies kept with one memo entry (:meth:`VerdictCache.lookup`)."""


def _reused(req: Request, replies: Replies | None, variant: tuple[Hashable, ...]) -> Outcome | None:
    """The reply kept for an earlier copy of this pod, answered for ``req``'s uid."""
    kept = replies.get(variant) if replies is not None else None
    if kept is None:
        return None
    reusable, outcome = kept
    reply, wire = reusable.answer(req.uid)
    return Outcome(reply, outcome.allowed, outcome.mode, outcome.codes, outcome.tier, outcome.judged, HIT, wire)


def _keep(outcome: Outcome, replies: Replies | None, variant: tuple[Hashable, ...]) -> Outcome:
    """Keep an allowing reply for the next copies (a denial names the object: it is built each time)."""
    if replies is not None and outcome.allowed:
        reusable = review.Reusable.of(outcome.review)
        if reusable is not None:
            replies[variant] = (reusable, outcome)
    return outcome


def _allow_at_once(req: Request, mode: str) -> Outcome:
    return Outcome(review.respond(req, allowed=True), True, mode)


def _asked(req: Request, *, entry_mode: str | None = None, mutate: bool | None = None) -> engine.Request:
    """The core's request for ``req``: the object as it arrived (the one object it is: kube-apiserver
    sends a Pod or a workload, never a v1 List, which is the CLI's input, see workloads.documents;
    expanding one here would let a single review carry thousands of pods and blow the admission
    deadline) and, for an UPDATE, the stored object it changes."""
    return engine.Request(req.obj, req.operation, req.old_obj if req.operation == "UPDATE" else None,
                          entry_mode=entry_mode, mutate=mutate)


def _judge(asked: engine.Request, settings: Settings, *, mode: str, inventory: Inventory | None,
           memo: VerdictCache | None) -> tuple[Judgement, Replies | None, str | None]:
    """The judgement of ``asked``, the table of replies kept with it when the verdict memo answered
    (None when it was judged now), and how the memo lookup went (None for an UPDATE, judged against
    its stored object and never kept, and without a memo). ``mode``: the one ``asked`` resolves to
    (:func:`engine.resolve_mode`), part of the memo's key.

    ``memo``: the server's verdicts on CREATEs (:mod:`webhook.server.verdict_cache`, one per app),
    by the object's content without its per-copy fields: the replicas of a Deployment, the
    completions of a Job and the pods of a JobSet are judged once per template, not once per pod."""
    if asked.operation == "UPDATE" or memo is None:
        return engine.judge(asked, settings, inventory), None, None
    found = memo.lookup(asked.obj, settings, inventory, (mode, asked.mutate),
                        lambda: engine.judge(asked, settings, inventory).detached())
    return found.value, found.replies, found.result


def _subject(req: Request) -> str:
    ns = f"{req.namespace}/" if req.namespace else ""
    return f"{req.kind_name or 'object'} {ns}{req.name or '(generated name)'}"


def _audit_annotations(results: Sequence[TemplateResult]) -> dict[str, str]:
    """What the apiserver's audit log should remember: tier, products, model, size, TP, verdict."""
    gpu = [r for r in results if r.profile.gpus_per_pod > 0] or list(results)
    if not gpu:
        return {}
    first = gpu[0]
    d, p = first.decision, first.profile
    out = {
        "decision": "allowed" if all(r.decision.allowed for r in results) else "denied",
        "mode": d.mode,
        "tier": d.tier or "none",
        "products": ",".join(d.placement.values) if d.placement else ("none" if not d.allowed else "any"),
        "model": (p.model if quotable(p.model) else REDACTED) if p.model else "unknown",
        "params-b": f"{p.params_b:g}" if p.params_b is not None else "unknown",
        "tensor-parallel": str(p.tensor_parallel) if p.tensor_parallel else "unknown",
        "gpus-per-pod": str(p.gpus_per_pod),
    }
    codes = sorted({v.code for r in results for v in r.decision.violations})
    if codes:
        out["violations"] = ",".join(codes)
    # each finding's kind: cannot-work denies, misplaced warns unless the policy says
    # deny, trap is a misplacement denied because the cluster offers the way out
    kinds = sorted({f"{v.code}={'trap' if v.trap else v.kind}" for r in results
                    for v in (*r.decision.violations, *r.decision.misplaced)})
    if kinds:
        out["violation-kinds"] = ",".join(kinds)
    message = full_message(results)
    if message:
        out["message"] = message
    withheld = _unquotable(results)
    if withheld:
        out = {key: _withhold(text, withheld) for key, text in out.items()}
    return out


def _unquotable(results: Sequence[TemplateResult]) -> tuple[str, ...]:
    """The values of the pod the annotations quote (the model, its short name as
    ``placing.describe`` writes it, the precision) that are not plain enough for the audit log
    (:func:`webhook.core.redaction.quotable`), longest first. Env values reach a message only
    through these fields (the launchers write any other env value as ``<value>``), so this is the
    rule that keeps an env value's free text out of the audit log, whatever the variable's name."""
    found: set[str] = set()
    for r in results:
        p = r.profile
        for value in (p.model, p.model.rsplit("/", 1)[-1] if p.model else None, p.dtype, p.quantization):
            if isinstance(value, str) and len(value.strip()) >= MIN_QUOTED_CHARS and not quotable(value):
                found.add(value)
    return tuple(sorted(found, key=len, reverse=True))


def _withhold(text: str, values: Sequence[str]) -> str:
    """``text`` with each of ``values`` written ``[redacted]`` (longest first, so a value holding
    another goes whole); the reply's own redaction still follows (``review.respond``)."""
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def full_message(results: Sequence[TemplateResult]) -> str:
    """Every violation and warning of the object, whole: kubectl shows each warning cut to one line,
    so the audit annotation ``message`` and the decision log line carry the complete texts."""
    parts = []
    for r in results:
        where = f"[{r.template.role}] " if r.template.role else ""
        parts += [f"{where}{v.whole()}" for v in r.decision.violations]
        parts += [f"{where}{v.code} (misplaced, admitted): {v.message} (at {v.path or '/'})"
                  for v in r.decision.misplaced]
        found = (*r.decision.violations, *r.decision.misplaced)
        parts += [f"{where}{w}" for w in r.decision.warnings if not any(v.echoed_by(w) for v in found)]
    return "; ".join(dict.fromkeys(parts))


def _denial_message(req: Request, results: Sequence[TemplateResult]) -> str:
    parts = []
    for r in results:
        where = f"[{r.template.role}] " if r.template.role else ""
        for v in r.decision.violations:
            parts.append(f"{where}{v.whole()}")
    return f"gpu-admission denied {_subject(req)}: " + "; ".join(parts)


DETAILS = "details: gpu-admission explain, audit log *.gpu-admission.io/message"
"""Where the whole texts are, for a reader of kubectl's cut lines: ``explain`` offline, and the audit
annotation ``message`` (the apiserver records it under the entry's name, e.g.
``validate-pods.gpu-admission.io/message``)."""


def lead_line(results: Sequence[TemplateResult]) -> str | None:
    """The first warning of a reply that has any from a GPU template: what was judged (model, size,
    precision, TP, GPUs) and where the full texts are. Each finding's own line is ``code: fix``
    within 120 characters and cannot also name the workload, so the reply names it once, first.
    The subject drops its precision, then its facts, then is cut at a space, to keep :data:`DETAILS`
    whole within 120."""
    r = next((r for r in results if r.profile.gpus_per_pod > 0 and r.decision.warnings), None)
    if r is None:
        return None
    p = r.profile
    gpus = f" on {counted(p.gpus_per_pod, 'GPU')}" + (f" x {p.pods} pods" if p.pods > 1 else "")
    where = f"[{r.template.role}] " if r.template.role else ""
    subjects = (describe(p), describe(replace(p, dtype=None, quantization=None)),
                describe(replace(p, dtype=None, quantization=None, params_b=None)))
    for subject in subjects:
        line = f"{where}{subject}{gpus}; {DETAILS}"
        if len(line) <= review.WARNING_MAX_CHARS:
            return line
    room = review.WARNING_MAX_CHARS - len(f"{where}{gpus}; {DETAILS}")
    return f"{where}{review.one_line(subjects[0], max(room, 8))}{gpus}; {DETAILS}"


def _warnings(results: Sequence[TemplateResult]) -> list[str]:
    out: list[str] = []
    for r in results:
        out.extend(r.decision.warnings)
    lead = lead_line(results) if out else None
    return [lead, *out] if lead else out


def _claim(judged: Judgement) -> dra.DraResult | None:
    """The DRA verdict when ``judged`` is a claim's (:func:`engine.claim_result`)."""
    return judged.results[0].claim if len(judged.results) == 1 else None


def _mutate_claim(req: Request, settings: Settings) -> Outcome:
    """Add the productName constraint to a multi-GPU claim on CREATE (its spec is immutable after)."""
    mode = settings.mode
    if req.operation != "CREATE" or req.sub_resource or not settings.mutate:
        return _allow_at_once(req, mode)
    result = _claim(engine.judge(_asked(req, mutate=True), settings))
    if result is None:
        return _allow_at_once(req, mode)
    warnings = [f"gpu-admission added constraint matchAttribute {dra.PRODUCT_ATTRIBUTE} over "
                f"{', '.join(result.gpu_requests)}: all GPUs of this claim will be one model"] if result.patch else []
    return Outcome(review.respond(req, allowed=True, patch=result.patch, warnings=warnings), True, mode,
                   judged=True)


def _validate_claim(req: Request, settings: Settings, *, mode: str, entry_mode: str) -> Outcome:
    """Judge a claim as it arrives (an UPDATE, metadata only, in audit: :func:`engine.judge`)."""
    if req.operation not in JUDGED_OPERATIONS or req.sub_resource:
        return _allow_at_once(req, mode)
    result = _claim(engine.judge(_asked(req, entry_mode=entry_mode, mutate=False), settings))
    if result is None:
        return _allow_at_once(req, mode)
    codes = tuple(v.code for v in result.violations)
    annotations = {"decision": "allowed" if result.allowed else "denied", "mode": result.mode,
                   "gpu-requests": ",".join(result.gpu_requests) or "none",
                   "gpu-devices": "all" if result.gpu_devices is None else str(result.gpu_devices)}
    if codes:
        annotations["violations"] = ",".join(codes)
    message = None if result.allowed else f"gpu-admission denied {_subject(req)}: " + "; ".join(
        v.whole() for v in result.violations)
    reply = review.respond(req, allowed=result.allowed, message=message, warnings=result.warnings,
                           audit_annotations=annotations)
    return Outcome(reply, result.allowed, result.mode, codes, judged=True)


def mutate(req: Request, settings: Settings, inventory: Inventory | None = None, *,
           memo: VerdictCache | None = None) -> Outcome:
    """Pin a pod to its tier. Never denies; other kinds and operations pass untouched, and so does
    everything under the policy's ``mode: audit`` (audit mutates nothing: :func:`policy.decide`)."""
    mode = settings.mode
    if req.kind_name in dra.KINDS:
        return _mutate_claim(req, settings)
    if req.operation != "CREATE" or req.kind_name != "Pod" or req.sub_resource or not settings.mutate \
            or mode == "audit":
        return _allow_at_once(req, mode)
    judged, replies, looked = _judge(_asked(req, mutate=True), settings, mode=mode, inventory=inventory, memo=memo)
    # what else the reply depends on: the mode it states, and the object's kind and namespace
    variant = ("mutate", mode, req.kind_name, req.namespace)
    reused = _reused(req, replies, variant)
    if reused is not None:
        return reused
    results = judged.results
    patch = [op for r in results for op in r.patch]
    warnings = []
    tier = next((r.decision.tier for r in results if r.decision.tier), None)
    if patch:
        placed = next(r.decision for r in results if r.patch)
        assert placed.placement is not None
        warnings.append(f"gpu-admission pinned this pod to GPU tier {tier} "
                        f"({placed.placement.label_key} In {counted(len(placed.placement.values), 'value')})")
    return _keep(Outcome(review.respond(req, allowed=True, patch=patch, warnings=warnings, secrets=judged.secrets),
                         True, mode, tier=tier, judged=True, memo=looked), replies, variant)


Parent = Callable[[Request], Any]
"""Reads the stored object a subresource request is for (``webhook.server.parents``): raises with a
reason the reply can quote when it cannot."""


def _replicas(scale: Any) -> int | None:
    spec = scale.get("spec") if isinstance(scale, dict) else None
    value = spec.get("replicas", 0) if isinstance(spec, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _scale(req: Request, settings: Settings, *, mode: str, entry_mode: str, inventory: Inventory | None,
           parent: Parent | None) -> Outcome:
    """A ``scale`` subresource UPDATE (``kubectl scale``, an HPA): always admitted. A scale-up of a
    workload whose new pods will be denied says so (the pods are new objects, judged when the
    ReplicaSet creates them; without this the ReplicaSet sits at FailedCreate while kubectl printed
    "scaled"). The Scale carries no pod template: its object is read from the API (one GET, on
    scale-ups only); when that fails the reply says it could not tell, never nothing."""
    new, old = _replicas(req.obj), _replicas(req.old_obj)
    if new is None or (old is not None and new <= old):
        return _allow_at_once(req, mode)
    what = f"{req.resource.get('resource') or 'object'} {req.namespace}/{req.name}"
    try:
        if parent is None:
            raise LookupError("this server has no Kubernetes client")
        obj = parent(req)
    except Exception as exc:  # noqa: BLE001 - any failure to read: admitted, and said
        reason = " ".join(str(exc).split()) or type(exc).__name__
        # the reason first: kubectl shows a warning cut at review.WARNING_MAX_CHARS
        warning = f"scale-up not checked, {what} not read ({reason}): its new pods may be denied"
        return Outcome(review.respond(req, allowed=True, warnings=[warning]), True, mode, judged=True)
    judged = engine.judge(engine.Request(obj, scale_to=new, entry_mode=entry_mode), settings, inventory)
    warnings = [w for r in judged.results for w in r.decision.warnings]
    if not warnings:
        return Outcome(review.respond(req, allowed=True), True, mode, judged=True)
    tier = next((r.decision.tier for r in judged.results if r.decision.tier), None)
    return Outcome(review.respond(req, allowed=True, warnings=warnings, secrets=judged.secrets), True, mode,
                   tier=tier, judged=True)


def validate(req: Request, settings: Settings, *, mode: str, inventory: Inventory | None = None,
             parent: Parent | None = None, memo: VerdictCache | None = None) -> Outcome:
    """Judge a pod (as it arrives) or a workload's templates (as their pods will be after mutation);
    a scale-up through the ``scale`` subresource is admitted with what its new pods will meet
    (``parent`` reads its object). ``mode``: the entry's (``/validate/audit`` for audit
    namespaces), which :func:`engine.resolve_mode` weighs with the policy's."""
    entry_mode = mode
    mode = engine.resolve_mode(settings, entry_mode=entry_mode)
    kind = req.kind_name
    if kind in dra.KINDS:
        return _validate_claim(req, settings, mode=mode, entry_mode=entry_mode)
    if req.sub_resource == "scale" and req.operation == "UPDATE":
        return _scale(req, settings, mode=mode, entry_mode=entry_mode, inventory=inventory, parent=parent)
    # any kind that arrives is judged: the shipped configurations send WORKLOAD_KINDS, and a kind a
    # user registers on their own (an Argo Workflow, an in-house CRD) is read by shape
    # (webhook.core.unknown_kinds) instead of passing unjudged
    if req.operation not in JUDGED_OPERATIONS or req.sub_resource:
        return _allow_at_once(req, mode)
    if kind == "Pod" and req.operation != "CREATE":
        return _allow_at_once(req, mode)  # pod node selection is immutable after creation
    asked = _asked(req, entry_mode=entry_mode, mutate=False if kind == "Pod" else None)
    judged, replies, looked = _judge(asked, settings, mode=mode, inventory=inventory, memo=memo)
    variant = ("validate", mode, kind, req.namespace)
    reused = _reused(req, replies, variant)
    if reused is not None:
        return reused
    results = judged.results
    if not results or all(r.profile.gpus_per_pod == 0 and r.decision.allowed and r.template.found != "unjudged"
                          and not r.template.notes for r in results):
        return _keep(Outcome(review.respond(req, allowed=True), True, mode, judged=True, memo=looked), replies, variant)
    allowed = all(r.decision.allowed for r in results)
    codes = tuple(dict.fromkeys(v.code for r in results for v in r.decision.violations))
    tier = next((r.decision.tier for r in results if r.decision.tier), None)
    reply = review.respond(
        req,
        allowed=allowed,
        message=None if allowed else _denial_message(req, results),
        warnings=_warnings(results),
        audit_annotations=_audit_annotations(results),
        secrets=judged.secrets,
    )
    return _keep(Outcome(reply, allowed, results[0].decision.mode, codes, tier, judged=True, memo=looked),
                 replies, variant)
