"""The audit as PolicyReports: one per namespace, one cluster report for placement (issue 29).

Why reports: platform teams already read Kyverno's and Gatekeeper's findings as ``PolicyReport``
objects (Policy Reporter shows them in a UI); gpu-admission's background audit speaks the same API,
so "what would enforce deny here?" is one ``kubectl get polr -A`` away.

The shape is the Policy WG's ``wgpolicyk8s.io/v1alpha2`` (kubernetes-sigs/wg-policy-prototypes
``policy-report/pkg/api/wgpolicyk8s.io/v1alpha2/policyreport_types.go`` @ 7132d6fc8ba754cf0aa2888a64f9da18ab394e41:
``summary`` {pass, fail, warn, error, skip}; ``results`` of {source, policy, rule, category,
severity (critical|high|medium|low|info), timestamp {seconds, nanos}, result
(pass|fail|warn|error|skip), scored, resources (ObjectReferences), message, properties}) and its
successor ``openreports.io/v1alpha1`` (openreports/reports-api ``apis/openreports.io/v1alpha1/report_types.go``
@ 6e36367da1fba084d29385a3685ced74809ead6e: ``Report`` / ``ClusterReport``, the same result fields, and
a report-level ``source``), written when the cluster serves it.

Pure: an :class:`webhook.core.audit.Report` in, plain objects out; writing them is the reporter's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core import audit

SOURCE = "gpu-admission"
"""``source`` of every result, and the policy name."""
NAME = "gpu-admission"
"""The name of every report this project writes (one per namespace, one cluster report)."""
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-admission"}
"""The label of the reports written here: what the reporter lists, rewrites and deletes, and nothing else."""
CATEGORY = "GPU placement"


@dataclass(frozen=True)
class Api:
    """One report API: its apiVersion and the kinds of its namespaced and cluster reports."""

    api_version: str
    namespaced: str
    cluster: str
    plural: str
    cluster_plural: str
    report_source: bool = False
    """Whether the report itself carries ``source`` (openreports.io does, wgpolicyk8s.io does not)."""


WGPOLICY = Api("wgpolicyk8s.io/v1alpha2", "PolicyReport", "ClusterPolicyReport", "policyreports",
               "clusterpolicyreports")
OPENREPORTS = Api("openreports.io/v1alpha1", "Report", "ClusterReport", "reports", "clusterreports",
                  report_source=True)
APIS = (WGPOLICY, OPENREPORTS)

SEVERITY = {audit.FAIL: "high", audit.ERROR: "medium", audit.WARN: "medium", audit.SKIP: "low", audit.PASS: "info"}
"""A result's severity by its result: what enforce would deny is high, a warning medium."""
RULE_SEVERITY = {audit.MIXED: "critical"}
"""Rules more severe than their result says: a group split over products is the failure this project
exists to prevent (NCCL timeouts, the slowest card sets the pace)."""


def _reference(w: audit.WorkloadAudit) -> dict[str, str]:
    return {"apiVersion": w.api_version, "kind": w.kind, "name": w.name, "namespace": w.namespace, "uid": w.uid}


def results(report: audit.Report, now: int) -> dict[str, list[dict[str, Any]]]:
    """namespace -> its results, one per workload and rule (a workload that passes has one ``pass``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for w in report.workloads:
        rows = out.setdefault(w.namespace, [])
        seen: set[tuple[str, str]] = set()
        for f in w.findings:
            key = (f.rule, f.result)
            if key in seen and f.result == audit.PASS:
                continue  # one pass per workload and rule, whatever its templates
            seen.add(key)
            row: dict[str, Any] = {
                "source": SOURCE, "policy": SOURCE, "rule": f.rule, "category": CATEGORY,
                "severity": RULE_SEVERITY.get(f.rule, SEVERITY[f.result]), "result": f.result,
                "scored": f.result != audit.SKIP, "timestamp": {"seconds": now, "nanos": 0},
                "resources": [_reference(w)], "message": f.message[:1024],
            }
            props = {k: v for k, v in (("template", f.template), ("tier", w.tier or "")) if v}
            if props:
                row["properties"] = props
            rows.append(row)
    return out


def summary(rows: list[Mapping[str, Any]]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for row in rows:
        counts[str(row["result"])] += 1
    return counts


def namespace_report(api: Api, namespace: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = {"apiVersion": api.api_version, "kind": api.namespaced,
           "metadata": {"name": NAME, "namespace": namespace, "labels": dict(MANAGED_BY)},
           "summary": summary(rows), "results": rows}
    if api.report_source:
        out["source"] = SOURCE
    return out


def cluster_report(api: Api, report: audit.Report, now: int) -> dict[str, Any]:
    """The placement summary: idle GPUs per product, and every group split over products."""
    rows: list[dict[str, Any]] = []
    for i in report.idle:
        rows.append({"source": SOURCE, "policy": SOURCE, "rule": "idle-capacity", "category": CATEGORY,
                     "severity": "info", "result": audit.PASS, "scored": False,
                     "timestamp": {"seconds": now, "nanos": 0},
                     "message": f"{i.value}: {i.idle} of {i.allocatable} GPUs idle on {i.nodes} node(s)",
                     "properties": {"product": i.product or "", "value": i.value, "nodes": str(i.nodes),
                                    "allocatable": str(i.allocatable), "requested": str(i.requested),
                                    "idle": str(i.idle)}})
    for w in report.workloads:
        for f in w.findings:
            if f.rule == audit.MIXED:
                rows.append({"source": SOURCE, "policy": SOURCE, "rule": f.rule, "category": CATEGORY,
                             "severity": RULE_SEVERITY[audit.MIXED], "result": f.result, "scored": True,
                             "timestamp": {"seconds": now, "nanos": 0}, "resources": [_reference(w)],
                             "message": f.message[:1024]})
    out = {"apiVersion": api.api_version, "kind": api.cluster,
           "metadata": {"name": NAME, "labels": dict(MANAGED_BY)}, "summary": summary(rows), "results": rows}
    if api.report_source:
        out["source"] = SOURCE
    return out


def same_results(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    """Whether two reports say the same, timestamps aside: a rescan that finds nothing new writes
    nothing (the reports' writes are what a cluster of thousands of workloads pays for)."""
    if a is None:
        return False

    def strip(report: Mapping[str, Any]) -> list[Any]:
        return sorted((str(sorted((k, str(v)) for k, v in r.items() if k != "timestamp"))
                       for r in report.get("results") or ()))
    return strip(a) == strip(b)
