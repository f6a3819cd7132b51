"""The audit as reports (webhook/core/policy_reports.py, issue 29): the Policy WG's
``wgpolicyk8s.io/v1alpha2`` shape and ``openreports.io/v1alpha1``'s, from the snapshot of
tests/core/test_audit.py. The API server's own validation of these objects (the real CRDs) runs in
tests/e2e/test_audit_e2e.py."""

from __future__ import annotations

import copy

import pytest

from tests.core.test_audit import INVENTORY, S, SNAPSHOT
from webhook.core import audit, policy_reports as pr

RESULTS = {"pass", "fail", "warn", "error", "skip"}
SEVERITIES = {"critical", "high", "medium", "low", "info"}
RESULT_FIELDS = {"source", "policy", "rule", "category", "severity", "timestamp", "result", "scored", "resources",
                 "resourceSelector", "message", "properties"}
"""PolicyReportResult's JSON fields (wg-policy-prototypes v1alpha2 policyreport_types.go; openreports'
ReportResult has the same)."""
NOW = 1_765_000_000


@pytest.fixture(scope="module")
def report() -> audit.Report:
    return audit.audit(SNAPSHOT, S, INVENTORY)


@pytest.mark.parametrize("api", pr.APIS, ids=lambda a: a.api_version)
def test_one_report_per_namespace_with_a_result_per_workload_and_rule(report: audit.Report, api: pr.Api) -> None:
    rows = pr.results(report, NOW)
    assert set(rows) == {"serving", "training"}
    for ns, items in rows.items():
        obj = pr.namespace_report(api, ns, items)
        assert (obj["apiVersion"], obj["kind"]) == (api.api_version, api.namespaced)
        assert obj["metadata"] == {"name": "gpu-admission", "namespace": ns,
                                   "labels": {"app.kubernetes.io/managed-by": "gpu-admission"}}
        assert ("source" in obj) is api.report_source
        assert sum(obj["summary"].values()) == len(obj["results"])
        for r in obj["results"]:
            assert set(r) <= RESULT_FIELDS, set(r) - RESULT_FIELDS
            assert r["result"] in RESULTS and r["severity"] in SEVERITIES and r["source"] == "gpu-admission"
            assert r["timestamp"] == {"seconds": NOW, "nanos": 0}
            (ref,) = r["resources"]
            assert ref["namespace"] == ns and ref["uid"] and ref["kind"] and ref["apiVersion"]
    pretrain = [r for r in rows["training"] if r["rule"] == audit.MIXED]
    assert pretrain and pretrain[0]["result"] == "fail" and pretrain[0]["severity"] == "critical"
    assert any(r["rule"] == "tier-mismatch" and r["result"] == "fail" and "pin nvidia.com/gpu.product" in r["message"]
               for r in rows["serving"])


def test_the_cluster_report_holds_idle_capacity_and_split_groups(report: audit.Report) -> None:
    obj = pr.cluster_report(pr.WGPOLICY, report, NOW)
    assert obj["kind"] == "ClusterPolicyReport" and "namespace" not in obj["metadata"]
    idle = {r["properties"]["value"]: r["properties"]["idle"] for r in obj["results"] if r["rule"] == "idle-capacity"}
    assert idle == {"NVIDIA-A100-SXM4-80GB": "3", "NVIDIA-H100-80GB-HBM3": "0", "NVIDIA-L40S": "11"}
    assert [r["resources"][0]["name"] for r in obj["results"] if r["rule"] == audit.MIXED] == ["pretrain"]
    assert all(isinstance(v, str) for r in obj["results"] for v in r.get("properties", {}).values())


def test_a_rescan_that_finds_the_same_writes_nothing(report: audit.Report) -> None:
    before = pr.namespace_report(pr.WGPOLICY, "serving", pr.results(report, NOW)["serving"])
    later = pr.namespace_report(pr.WGPOLICY, "serving", pr.results(report, NOW + 60)["serving"])
    assert pr.same_results(before, later)
    changed = copy.deepcopy(later)
    changed["results"][0]["result"] = "error"
    assert not pr.same_results(before, changed)
    assert not pr.same_results(None, later)
