"""Prometheus collectors of the admission server.

Correct under several gunicorn workers: when ``PROMETHEUS_MULTIPROC_DIR`` is set (``serve`` sets it
before any worker starts), prometheus_client writes each worker's samples to files there and
``/metrics`` aggregates them, so a scrape that hits any worker sees the whole server. Each app gets
its own registry, so tests can create many apps in one process.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# 0.5 ms .. 10 s: an admission webhook lives in the low milliseconds, but the tail up to the
# apiserver's timeout is what breaks clusters, so the buckets must reach it.
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's collectors, registered in a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "gpu_admission_requests_total", "Admission reviews answered",
            ["endpoint", "mode", "allowed", "dry_run"], registry=r)
        self.violations = Counter(
            "gpu_admission_violations_total", "Violations found, by code and mode, once per object generation "
            "(a controller's retries of the same template are not counted again; webhook.server.denials)",
            ["code", "mode"], registry=r)
        self.denials = Counter(
            "gpu_admission_denials_total", "Objects denied (dry runs left out), once per object generation: what "
            "the denials alert counts, so one stuck ReplicaSet retrying is one denial", ["mode"], registry=r)
        self.duration = Histogram(
            "gpu_admission_request_duration_seconds", "Time to answer an admission review",
            ["endpoint"], buckets=BUCKETS, registry=r)
        self.reloads = Counter(
            "gpu_admission_config_reloads_total", "Policy file reloads, by result", ["result"], registry=r)
        self.config_valid = Gauge(
            "gpu_admission_config_valid", "1 when the policy file on disk is the one in use, 0 when the "
            "last reload failed and the last good policy is kept", registry=r, multiprocess_mode="livemostrecent")
        self.policy_info = Gauge(
            "gpu_admission_policy_info", "1 for the policy this worker serves, by generation (the first 12 hex "
            "digits of the sha256 of its file); every worker of a server serves the same one", ["generation"],
            registry=r, multiprocess_mode="liveall")
        self.cert_expiry = Gauge(
            "gpu_admission_certificate_expiry_timestamp_seconds", "notAfter of the serving certificate",
            registry=r, multiprocess_mode="livemostrecent")
        self.memo = Counter(
            "gpu_admission_verdict_memo_total", "Verdict memo lookups of CREATEs: hit (a controller's copy "
            "answered from the memo), miss (judged and kept), unkept (judged, not a controller's copy)",
            ["result"], registry=r)
        self.errors = Counter(
            "gpu_admission_errors_total", "Requests answered with an HTTP error, by status", ["status"], registry=r)
        self.config_valid.set(1)

    def exposition(self) -> tuple[bytes, str]:
        """The text to serve on ``/metrics``: all workers' samples when running multi-process."""
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


CONNECTIONS_CLOSED = Counter(
    "gpu_admission_connections_closed_total", "Connections the server closed before their request was whole, by "
    "reason: read_deadline (not whole within --read-deadline of its first byte), read_budget (the worker's "
    "buffer of partial requests was full)", ["reason"], registry=None)
"""Counted by the gunicorn worker, outside any app: not in an app's registry, but in the multi-process files
that ``/metrics`` aggregates under ``serve``."""


def mark_worker_dead(pid: int) -> None:
    """gunicorn ``child_exit`` hook: drop a dead worker's live gauges from the aggregate."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)
