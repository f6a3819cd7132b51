"""Rendering ``check`` results: the stable JSON shape, plain text for people, JUnit XML for CI.

The JSON shape is an interface (other tools parse it): keep field names exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Sequence

from webhook.core.domain import JSON, Decision, WorkloadProfile
from webhook.core.engine import TemplateResult, object_identity
from webhook.core.templating import FOUND as TEMPLATED, MESSAGE as TEMPLATED_MESSAGE
from webhook.core.workloads import PodTemplate

FAILED = "error"
"""``found`` of a row standing for an object the engine raised on: a bug in gpu-admission, reported
as one line naming the object and the exception (``check`` then exits 2), never a traceback."""
FAILED_MESSAGE = "internal error, not judged (a bug in gpu-admission: please report it)"
_ERROR_CHARS = 300


@dataclass(frozen=True)
class Row:
    """One judged template, with the identity of its object and where it came from."""

    source: str
    obj: Any
    pointer: str
    result: TemplateResult

    def slim(self) -> "Row":
        """This row with only what the renderers read: the object's identity and the template's name,
        not the object or the pod spec (``check_pool`` sends rows between processes)."""
        ident = object_identity(self.obj)
        meta = {k: v for k, v in (("name", ident["name"]), ("namespace", ident["namespace"])) if v is not None}
        obj = {"apiVersion": ident["apiVersion"], "kind": ident["kind"], "metadata": meta}
        template = replace(self.result.template, metadata={}, spec={}, annotations={}, labels={})
        return Row(self.source, obj, self.pointer, replace(self.result, template=template))


def failed(obj: Any, pointer: str, exc: BaseException, mode: str) -> TemplateResult:
    """The row's result for an object whose judging raised ``exc``: not judged, not admitted (a tool
    reading only ``allowed`` must not take a crash for a pass), its one note the exception's type
    and first line, so the report names the bug and the object without a traceback."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    kind = obj.get("kind") if isinstance(obj, Mapping) and isinstance(obj.get("kind"), str) else "object"
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # noqa: BLE001 - an exception whose message cannot be made: its type is the news
        lines = []
    error = f"{type(exc).__name__}: {lines[0]}"[:_ERROR_CHARS] if lines else type(exc).__name__
    template = PodTemplate(pointer, meta if isinstance(meta, Mapping) else {}, {}, kind=kind, found=FAILED,
                           patchable=False, notes=(error,))
    decision = Decision(allowed=False, mode=mode, tier=None, placement=None)
    return TemplateResult(template, WorkloadProfile(gpus_per_pod=0, kind=kind), decision, ())


UNREADABLE = "unreadable"
"""``found`` of a row standing for a file that could not be read or parsed: reported in its place
among the others, and ``check`` exits 2 once everything is printed."""


def unreadable(name: str, note: str, *, templated: bool, mode: str) -> Row:
    """The one row of a file that was not read: ERROR (``unreadable``), or SKIP "render first" when
    it is a template (a Helm chart's ``templates/``, or ``{{ ... }}`` that is not YAML). Not
    admitted, so a tool reading only ``allowed`` does not take it for a pass; ``note`` is the reason
    naming the file (``sources.Unreadable.about``: with the parser's line where it gave one)."""
    found = TEMPLATED if templated else UNREADABLE
    template = PodTemplate("", {}, {}, kind="file", found=found, patchable=False, notes=(note,))
    warnings = (note,) if templated else ()
    decision = Decision(allowed=templated, mode=mode, tier=None, placement=None, warnings=warnings)
    return Row(name, None, "", TemplateResult(template, WorkloadProfile(gpus_per_pod=0, kind="file"), decision, ()))


def is_unreadable(row: Row) -> bool:
    """A file that could not be read or parsed (:func:`unreadable`): ``check`` exits 2."""
    return row.result.template.found == UNREADABLE


def is_error(row: Row) -> bool:
    """Either kind of error row: an object the engine raised on, or a file not read."""
    return is_failed(row) or is_unreadable(row)


def is_failed(row: Row) -> bool:
    """An object the engine raised on (:func:`failed`): reported, and ``check`` exits 2."""
    return row.result.template.found == FAILED


def result_json(row: Row) -> dict[str, JSON]:
    r = row.result
    d = r.decision
    out: dict[str, JSON] = {"source": row.source}
    out.update(object_identity(row.obj))
    if row.pointer:
        out["pointer"] = row.pointer
    out.update({
        "template": r.template.role,
        "found": r.template.found,
        "allowed": d.allowed,
        "mode": d.mode,
        "profile": r.profile.public(),
        "tier": d.tier,
        "products": list(d.placement.values) if d.placement else None,
        "patch": list(r.patch),
        "warnings": list(d.warnings),
        "violations": [v.public() for v in d.violations],
        "misplaced": [v.public() for v in d.misplaced],
    })
    if is_templated(row):  # the places that are still a template, for people and tools alike
        out["reason"] = "; ".join(r.template.notes)
    if is_error(row):
        out["error"] = "; ".join(r.template.notes)
    return out


def is_unjudged(row: Row) -> bool:
    """An object that asks for GPUs where no pod template could be read (``engine.unjudged``)."""
    return row.result.template.found == "unjudged"


def is_templated(row: Row) -> bool:
    """An object that is still a template, reported instead of judged (``engine.templated``)."""
    return row.result.template.found == TEMPLATED


def is_skipped(row: Row) -> bool:
    """Not judged, for either reason: not counted in ``checked``, a failure only under ``--strict``."""
    return is_unjudged(row) or is_templated(row)


def is_without_gpus(row: Row) -> bool:
    """A pod template that asks for no GPU and gives nothing to say (a CPU sidecar Deployment, a Ray
    head, a Job's CPU launcher): read, but not a GPU workload checked, so not counted in ``checked``
    (a repository of CPU services would otherwise report as many checks as objects)."""
    r = row.result
    return (row.obj is not None and r.profile.gpus_per_pod == 0 and not r.decision.violations
            and not r.decision.warnings and not r.patch and r.decision.allowed)


def summary(rows: Sequence[Row]) -> dict[str, int]:
    judged = [r for r in rows if not is_skipped(r) and not is_error(r)]
    without_gpus = [r for r in judged if is_without_gpus(r)]
    judged = [r for r in judged if not is_without_gpus(r)]
    return {
        "checked": len(judged),
        "without_gpus": len(without_gpus),
        "allowed": sum(1 for r in judged if r.result.decision.allowed),
        "denied": sum(1 for r in judged if not r.result.decision.allowed),
        "warned": sum(1 for r in judged if r.result.decision.warnings),
        "unjudged": sum(1 for r in rows if is_unjudged(r)),
        "templated": sum(1 for r in rows if is_templated(r)),
        "errors": sum(1 for r in rows if is_failed(r)),
        "unreadable": sum(1 for r in rows if is_unreadable(r)),
    }


def render_json(rows: Sequence[Row]) -> str:
    return json.dumps({"results": [result_json(r) for r in rows], "summary": summary(rows)}, indent=2)


def label(row: Row) -> str:
    """How a row names its object in text: kind, namespace/name, template, "(found generically)"."""
    if row.obj is None:  # a file not read (:func:`unreadable`)
        return "(file)"
    ident = object_identity(row.obj)
    ns = f"{ident['namespace']}/" if ident["namespace"] else ""
    tpl = f" [{row.result.template.role}]" if row.result.template.role else ""
    how = " (found generically)" if row.result.template.found == "generic" else ""
    return f"{ident['kind']} {ns}{ident['name'] or '(unnamed)'}{tpl}{how}"


def _verdict(row: Row) -> str:
    if is_error(row):
        return "ERROR"
    if is_skipped(row):
        return "SKIP"
    d = row.result.decision
    if not d.allowed:
        return "DENY"
    return "WARN" if d.warnings else "OK"


def render_text(rows: Sequence[Row]) -> str:
    lines: list[str] = []
    for row in rows:
        d, p = row.result.decision, row.result.profile
        if is_unjudged(row):
            lines.append(f"SKIP  {row.source}  {label(row)}: not judged")
            lines.extend(f"      warning: {w}" for w in d.warnings)
            continue
        if row.obj is None:  # a file's own row (:func:`unreadable`): the note names the file
            note = "; ".join(row.result.template.notes)
            lines.append(f"SKIP  {note}" if is_templated(row) else f"ERROR {note}: not judged")
            continue
        if is_templated(row):
            lines.append(f"SKIP  {row.source}  {label(row)}: {TEMPLATED_MESSAGE}")
            lines.extend(f"      {note}" for note in row.result.template.notes)
            continue
        if is_failed(row):
            at = f" at {row.pointer}" if row.pointer else ""
            lines.append(f"ERROR {row.source}  {label(row)}{at}: {'; '.join(row.result.template.notes)}: "
                         f"{FAILED_MESSAGE}")
            continue
        facts = []
        if p.model:
            facts.append(p.model.rstrip("/").rsplit("/", 1)[-1] or p.model)  # the org is in --output json
        if p.params_b is not None:
            facts.append(f"{p.params_b:g}B")
        if p.tensor_parallel:
            pp = f"xPP{p.pipeline_parallel}" if p.pipeline_parallel and p.pipeline_parallel > 1 else ""
            facts.append(f"TP{p.tensor_parallel}{pp}")
        facts.append(f"{p.gpus_per_pod} GPU" + ("s" if p.gpus_per_pod != 1 else ""))
        if p.pods > 1:
            facts.append(f"x {p.pods} pods")
        tier = f"tier {d.tier}" if d.tier else "no tier"
        # one name per product (the catalog's short name), not one per label spelling: --output json
        # lists every label value under "products"
        products = f" -> {', '.join(d.placement.products or d.placement.values)}" if d.placement else ""
        lines.append(f"{_verdict(row):4}  {row.source}  {label(row)}: {' '.join(facts)}; {tier}{products}")
        for v in d.violations:
            lines.append(f"      {v.whole()}")
        for w in d.warnings:
            if not _is_violation_echo(w, d):  # audit echoes violations as warnings; shown above
                lines.append(f"      warning: {w}")
        if row.result.patch:
            what = f" pin {d.placement.label_key}" if d.placement else ""
            lines.append(f"      patch: {len(row.result.patch)} op(s){what}")
    s = summary(rows)
    not_judged = f", {s['unjudged']} GPU object(s) not judged" if s["unjudged"] else ""
    templated = f", {s['templated']} templated (not judged)" if s["templated"] else ""
    errors = f", {s['errors']} internal error(s) (not judged)" if s["errors"] else ""
    unread = f", {s['unreadable']} file(s) not read" if s["unreadable"] else ""
    cpu = f", {s['without_gpus']} without GPUs" if s["without_gpus"] else ""
    lines.append(f"{s['checked']} checked, {s['allowed']} allowed, {s['denied']} denied, {s['warned']} warned"
                 f"{cpu}{not_judged}{templated}{errors}{unread}")
    return "\n".join(lines) + "\n"


def _is_violation_echo(warning: str, decision: Any) -> bool:
    return any(v.echoed_by(warning) for v in decision.violations)


def render_junit(rows: Sequence[Row]) -> str:
    # imported here: xml.sax.saxutils pulls in urllib.request and http.client, a tenth of the
    # start-up time of every `check`, and only the junit report needs it
    from xml.sax.saxutils import escape as xml_escape

    s = summary(rows)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="gpu-admission" tests="{s["checked"]}" failures="{s["denied"]}">',
        f'  <testsuite name="gpu-admission check" tests="{s["checked"]}" failures="{s["denied"]}"'
        f' errors="{s["errors"] + s["unreadable"]}"'
        f' skipped="{s["unjudged"] + s["templated"]}">',
    ]
    for row in rows:
        d = row.result.decision
        name = xml_escape(label(row), {'"': "&quot;"})
        out.append(f'    <testcase classname="{xml_escape(row.source, {chr(34): "&quot;"})}" name="{name}">')
        if is_unjudged(row):
            out.append(f'      <skipped message="not judged: {xml_escape(d.warnings[0][:200], {chr(34): "&quot;"})}"/>')
        elif is_templated(row):
            out.append(f'      <skipped message="{xml_escape(d.warnings[0][:400], {chr(34): "&quot;"})}"/>')
        elif is_error(row):
            error = "; ".join(row.result.template.notes)
            body = FAILED_MESSAGE if is_failed(row) else "the file was not read: nothing in it was judged"
            out.append(f'      <error message="{xml_escape(error, {chr(34): "&quot;"})}">'
                       f"{xml_escape(body)}</error>")
        if not d.allowed and not is_error(row):
            message = "; ".join(v.code for v in d.violations)
            body = "\n".join(v.whole() for v in d.violations)
            out.append(f'      <failure message="{xml_escape(message, {chr(34): "&quot;"})}">'
                       f"{xml_escape(body)}</failure>")
        if d.warnings:
            out.append(f"      <system-out>{xml_escape(chr(10).join(d.warnings))}</system-out>")
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"
