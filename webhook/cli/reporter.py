"""``gpu-admission reporter``: the background audit, written as PolicyReports (issue 29).

A loop, in its own Deployment from the same image (its own ServiceAccount, whose ClusterRole reads
workloads, pods and nodes and writes nothing but reports): every ``--interval`` seconds it lists
what the audit reads (:mod:`webhook.cli.audit`, pages of 500), judges it (:mod:`webhook.core.audit`)
and writes one report per namespace and one cluster report (:mod:`webhook.core.policy_reports`) for
each report API the cluster serves (``wgpolicyk8s.io/v1alpha2``, ``openreports.io/v1alpha1``; it
installs no CRD). A report whose results did not change is not rewritten; a namespace left with no
GPU workload loses its report; nothing is written more often than once an interval.

Why a rescan and not a watch: a workload's result depends on its pods, its ReplicaSets, the nodes
and the policy, which change independently; a full rescan every interval is what Kyverno's
background scan does too, and its cost is measured (BENCHMARKS.md: 5,000 workloads, 1,000 nodes).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from webhook.cli import audit as audit_cli
from webhook.core import audit as audit_mod, policy_reports as pr
from webhook.core.settings import SettingsError, load as load_settings

DEFAULT_INTERVAL = 60.0
MIN_INTERVAL = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", default=None,
                        help="kubeconfig of the cluster (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy)")
    parser.add_argument("--interval", metavar="SECONDS", type=float, default=DEFAULT_INTERVAL,
                        help=f"seconds between scans, and the least time between two writes of a report "
                             f"(default {DEFAULT_INTERVAL:g}, at least {MIN_INTERVAL:g})")
    parser.add_argument("--metrics-bind", metavar="HOST:PORT", default="0.0.0.0:8082",
                        help="plain-HTTP /metrics and /healthz (default 0.0.0.0:8082)")
    parser.add_argument("--once", action="store_true", help="scan and write once, then exit (for a CronJob or a test)")


class Metrics:
    """The reporter's Prometheus text: results by rule, result and namespace (label values bounded:
    the policy's rule codes, five results, and the namespaces that have GPU workloads), scan
    duration and the time of the last scan. The namespace label is ``workload_namespace``: the
    Prometheus Operator gives every target a ``namespace`` label (the reporter's own), which would
    rename this one ``exported_namespace``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[tuple[str, str, str], int] = {}
        self._duration = 0.0
        self._last = 0.0
        self._scans = 0
        self._errors = 0

    def scanned(self, rows: Mapping[str, list[Mapping[str, Any]]], seconds: float, when: float) -> None:
        counts: dict[tuple[str, str, str], int] = {}
        for ns, items in rows.items():
            for row in items:
                key = (ns, str(row["rule"]), str(row["result"]))
                counts[key] = counts.get(key, 0) + 1
        with self._lock:
            self._results, self._duration, self._last = counts, seconds, when
            self._scans += 1

    def failed(self) -> None:
        with self._lock:
            self._errors += 1

    def text(self) -> str:
        with self._lock:
            lines = ["# HELP gpu_admission_report_results Results of the last scan by the workloads' namespace, rule "
                     "and result.",
                     "# TYPE gpu_admission_report_results gauge"]
            for (ns, rule, result), n in sorted(self._results.items()):
                lines.append(f'gpu_admission_report_results{{workload_namespace="{ns}",rule="{rule}",result="{result}"}} {n}')
            lines += ["# HELP gpu_admission_report_scan_seconds Duration of the last scan.",
                      "# TYPE gpu_admission_report_scan_seconds gauge",
                      f"gpu_admission_report_scan_seconds {self._duration:.3f}",
                      "# HELP gpu_admission_report_last_scan_timestamp_seconds When the last scan finished.",
                      "# TYPE gpu_admission_report_last_scan_timestamp_seconds gauge",
                      f"gpu_admission_report_last_scan_timestamp_seconds {self._last:.0f}",
                      "# HELP gpu_admission_report_scans_total Scans finished.",
                      "# TYPE gpu_admission_report_scans_total counter",
                      f"gpu_admission_report_scans_total {self._scans}",
                      "# HELP gpu_admission_report_scan_errors_total Scans that failed (the reports stay as they were).",
                      "# TYPE gpu_admission_report_scan_errors_total counter",
                      f"gpu_admission_report_scan_errors_total {self._errors}"]
            return "\n".join(lines) + "\n"


def served(api_client: Any) -> tuple[pr.Api, ...]:
    """The report APIs the cluster serves (discovery); none is installed here."""
    return tuple(api for api in pr.APIS
                 if audit_cli.api_request(api_client, "GET", f"/apis/{api.api_version}")[0] != 404)


class Writer:
    """Creates, replaces and deletes this project's reports (label :data:`pr.MANAGED_BY`) through
    the generic API client. Each scan reads the reports as they are, so a report whose results did
    not change is not rewritten and one edited or deleted by hand is put back."""

    def __init__(self, api_client: Any, apis: tuple[pr.Api, ...]) -> None:
        self.api = api_client
        self.apis = apis
        self.writes = 0
        self.deletes = 0

    def _call(self, method: str, path: str, body: Any = None, query: list[tuple[str, str]] | None = None) -> Any:
        return audit_cli.api_request(self.api, method, path, query=query or (), body=body)[1]

    def _existing(self, api: pr.Api) -> dict[str | None, dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in pr.MANAGED_BY.items())
        found: dict[str | None, dict[str, Any]] = {}
        for plural, namespaced in ((api.plural, True), (api.cluster_plural, False)):
            body = self._call("GET", f"/apis/{api.api_version}/{plural}", query=[("labelSelector", selector)])
            for item in (body or {}).get("items") or ():
                meta = item.get("metadata") or {}
                if meta.get("name") == pr.NAME:
                    found[meta.get("namespace") if namespaced else None] = item
        return found

    def sync(self, report: audit_mod.Report, rows: Mapping[str, list[dict[str, Any]]], now: int) -> None:
        """Write ``rows`` (:func:`pr.results` of ``report``) and the cluster report of ``report``."""
        for api in self.apis:
            existing = self._existing(api)
            for ns, items in rows.items():
                self._put(api, f"/apis/{api.api_version}/namespaces/{ns}/{api.plural}",
                          pr.namespace_report(api, ns, items), existing.get(ns))
            for ns, item in existing.items():
                if ns is not None and ns not in rows:
                    self._call("DELETE", f"/apis/{api.api_version}/namespaces/{ns}/{api.plural}/{pr.NAME}")
                    self.deletes += 1
            self._put(api, f"/apis/{api.api_version}/{api.cluster_plural}", pr.cluster_report(api, report, now),
                      existing.get(None))

    def _put(self, api: pr.Api, collection: str, wanted: dict[str, Any], current: Mapping[str, Any] | None) -> None:
        if pr.same_results(current, wanted):
            return
        if current is None:
            self._call("POST", collection, wanted)
        else:
            wanted["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            self._call("PUT", f"{collection}/{pr.NAME}", wanted)
        self.writes += 1


def scan_once(api_client: Any, settings: Any, writer: Writer, metrics: Metrics, err: TextIO,
              clock: Callable[[], float] = time.time) -> audit_mod.Report:
    started = time.monotonic()
    report = audit_cli.judge_snapshot(list(audit_cli.objects_of(api_client, err)), settings)
    now = int(clock())
    rows = pr.results(report, now)
    writer.sync(report, rows, now)
    metrics.scanned(rows, time.monotonic() - started, clock())
    return report


def _serve_metrics(bind: str, metrics: Metrics) -> Any:
    """``/metrics`` and ``/healthz`` on a plain-HTTP thread (http.server is imported here: only the
    reporter needs it, and every other command would pay for its import)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    host, _, port = bind.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/metrics":
                body, ctype = metrics.text().encode(), "text/plain; version=0.0.4"
            elif self.path in ("/healthz", "/readyz"):
                body, ctype = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.interval < MIN_INTERVAL:
        print(f"gpu-admission reporter: --interval must be at least {MIN_INTERVAL:g} seconds", file=err)
        return 2
    try:
        settings = load_settings(args.config, read=Path.read_bytes)
    except SettingsError as exc:
        print(f"gpu-admission reporter: {exc}", file=err)
        return 2
    from webhook.server import load_client

    try:
        api_client = load_client(args.kubeconfig).api_client
        apis = served(api_client)
    except Exception as exc:  # noqa: BLE001 - credentials, RBAC, network: one clear line, exit 2
        print(f"gpu-admission reporter: cannot read the cluster: {type(exc).__name__}: {str(exc)[:300]}", file=err)
        return 2
    if not apis:
        print("gpu-admission reporter: the cluster serves neither wgpolicyk8s.io/v1alpha2 nor openreports.io/v1alpha1 "
              "reports: install one of their CRDs (docs/install.md, Reports)", file=err)
        return 2
    metrics = Metrics()
    writer = Writer(api_client, apis)
    server = None if args.once else _serve_metrics(args.metrics_bind, metrics)
    try:
        while True:
            started = time.monotonic()
            try:
                report = scan_once(api_client, settings, writer, metrics, err)
                print(json.dumps({"msg": "scan", "workloads": len(report.workloads), "writes": writer.writes,
                                  "deletes": writer.deletes, "seconds": round(time.monotonic() - started, 2)}),
                      file=err, flush=True)
            except Exception as exc:  # noqa: BLE001 - the reports stay as they were; the next scan retries
                metrics.failed()
                print(json.dumps({"msg": "scan failed", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}),
                      file=err, flush=True)
                if args.once:
                    return 1
            if args.once:
                return 0
            time.sleep(max(args.interval - (time.monotonic() - started), 1.0))
    finally:
        if server is not None:
            server.shutdown()
