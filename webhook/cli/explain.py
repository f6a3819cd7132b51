"""``gpu-admission explain``: the engine's reasoning as a table for people.

Shows the inferred profile, every product of every tier with its memory fit and estimated decode
time (so "why not L40S?" has a numeric answer), and the verdict with its reasons.
"""

from __future__ import annotations

from typing import Sequence

from webhook.cli.report import FAILED_MESSAGE, TEMPLATED_MESSAGE, Row, is_failed, label, is_templated, is_unjudged
from webhook.core.domain import WorkloadProfile
from webhook.core.engine import effective_precision, placement_rule, tier_fits
from webhook.core.settings import Settings


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _profile_lines(p: WorkloadProfile) -> list[str]:
    params = "unknown" if p.params_b is None else f"{p.params_b:g}B"
    if p.active_params_b:
        params += f" total, {p.active_params_b:g}B active"
    parallel = "-" if p.tensor_parallel is None else f"TP{p.tensor_parallel} x PP{p.pipeline_parallel or 1}"
    if p.data_parallel:
        parallel += f" x DP{p.data_parallel}"
    if p.expert_parallel:
        parallel += " (expert parallel)"
    rows = [
        ("framework", p.framework or "unknown"),
        ("role", p.role or "-"),
        ("model", p.model or "unknown"),
        ("parameters", params),
        ("precision", effective_precision(p).label()),
        ("parallelism", parallel),
        ("GPUs", f"{p.gpus_per_pod} per pod x {p.pods} pod(s)"),
    ]
    return [f"  {k:<12} {v}" for k, v in rows]


def render_explain(rows: Sequence[Row], settings: Settings) -> str:
    out: list[str] = []
    for row in rows:
        d, p = row.result.decision, row.result.profile
        out.append(f"== {row.source}  {label(row)}")
        if is_unjudged(row):
            out.append("Verdict: NOT JUDGED")
            out.extend(f"  warning: {w}" for w in d.warnings)
            out.append("")
            continue
        if is_templated(row):
            out.append(f"Verdict: NOT JUDGED, {TEMPLATED_MESSAGE}")
            out.extend(f"  {note}" for note in row.result.template.notes)
            out.append("")
            continue
        if is_failed(row):
            out.append(f"Verdict: NOT JUDGED, {FAILED_MESSAGE}")
            out.extend(f"  error: {note}" for note in row.result.template.notes)
            out.append("")
            continue
        out.append("Profile")
        out.extend(_profile_lines(p))
        rule = placement_rule(p, settings, d.tier)
        if rule is not None:
            out.append(f"  {'placement':<12} {rule}")
        if p.gpus_per_pod > 0:
            out.append(f"Candidates ({settings.label_key}; * = tier chosen)")
            out.append(f"  {'':1} {'label value':<34} {'tier':<11} {'fits':<5} {'need/usable GiB':<17} decode ms/token")
            for tier in settings.tiers:
                seen: set[tuple[str, ...]] = set()
                for fit in tier_fits(p, tier, settings):
                    named = settings.catalog.named_products(fit.value, settings.label_scheme)
                    if named in seen:
                        continue  # another label spelling of a product already shown
                    seen.add(named)
                    mark = "*" if tier.name == d.tier else " "
                    need = f"{_fmt(fit.need_gib)} / {_fmt(fit.usable_gib)}"
                    out.append(f"  {mark} {fit.value:<34} {tier.name:<11} {'yes' if fit.fits else 'no':<5} "
                               f"{need:<17} {_fmt(fit.decode_ms)}")
                    if fit.precision:  # runs by a fallback, or not at all: the reason says which and why
                        out.append(f"      {fit.reason}")
        verdict = "ALLOWED" if d.allowed else "DENIED"
        # label values, as the table above and the selector spell them (a catalog id such as
        # H100-SXM5-80GB is no node label value and could not be pasted into a selector)
        where = (f"; lands on {d.placement.label_key} In [{', '.join(d.placement.values)}]"
                 if d.placement else "")
        tier = f"tier {d.tier}" if d.tier else "not constrained"
        out.append(f"Verdict: {verdict} ({d.mode}), {tier}{where}")
        if row.result.patch:
            out.append(f"  the mutating webhook adds {len(row.result.patch)} patch op(s) pinning {settings.label_key}")
        for v in d.violations:
            why = "the seed's trap: the cluster offers NVLink GPUs" if v.trap else v.kind
            out.append(f"  {v.code} [{why}, denies in {d.mode}]: {v.message}")
        for v in d.misplaced:
            out.append(f"  {v.code} [misplaced, admitted under misplaced: warn]: {v.message}")
        shown = [*d.violations, *d.misplaced]
        for w in d.warnings:
            if not any(v.echoed_by(w) for v in shown):
                out.append(f"  warning: {w}")
        out.append("")
    return "\n".join(out)
