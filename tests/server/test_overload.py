"""Load shedding (``webhook.server.gunicorn.overload``): a review that waited longer than ``max_queue_age`` for a worker
thread is refused with 503 instead of judged after kube-apiserver has given up on it.

In process the worker's stamp is simulated through the WSGI environ; the live test shows the real
gunicorn worker stamping requests that queue behind a busy thread. The figures under 3x overload are
in RELIABILITY.md (``bench/reliability/overload.py``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import http.client
import itertools
import json
import logging
import socket
import threading
import time
from typing import Any

import pytest
from gunicorn.workers.gthread import ThreadWorker

from live import (  # noqa: F401 - helpers; the fixtures are in conftest.py
    StartServer, encode, once, request_json, run_serve, vllm_pod, wait_ready, wait_workers,
    review as live_review,
)
from webhook.core import settings as settings_mod
from webhook.server.app import create_app
from webhook.server import DEFAULT_MAX_QUEUE_AGE
from webhook.server.gunicorn.overload import QUEUED_AT, TASKS_PER_THREAD, stamped_worker
from webhook.server.probes import LISTENER, PROBE

PROBE_ENV = {LISTENER: PROBE}  # /metrics answers on the probe port only (its listener's environ key)

TP4_L4 = vllm_pod("--tensor-parallel-size", "4", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"})


def post(client: Any, path: str, waited: float | None) -> Any:
    environ = {QUEUED_AT: time.monotonic() - waited} if waited is not None else {}
    return client.post(path, json=live_review(TP4_L4, uid="uid-q"), environ_base=environ)


@pytest.mark.parametrize("path", ["/mutate", "/validate", "/validate/audit"])
def test_a_review_that_waited_too_long_is_refused_with_503(path: str, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(settings_mod.default())
    client = app.test_client()
    with caplog.at_level(logging.INFO, logger="gpu_admission"):
        resp = post(client, path, DEFAULT_MAX_QUEUE_AGE + 0.5)
    assert resp.status_code == 503 and "Retry-After" not in resp.headers  # client-go would retry it
    assert "overloaded" in resp.get_json()["error"] and "failurePolicy" in resp.get_json()["error"]
    assert not [r for r in caplog.records if getattr(r, "event", None) == "decision"], "a shed review was judged"
    assert [r for r in caplog.records if getattr(r, "event", None) == "shed"]
    metrics = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert 'gpu_admission_errors_total{status="503"} 1.0' in metrics


def test_a_fresh_review_is_judged_and_its_wait_logged(caplog: pytest.LogCaptureFixture) -> None:
    client = create_app(settings_mod.default()).test_client()
    with caplog.at_level(logging.INFO, logger="gpu_admission"):
        resp = post(client, "/validate", 0.2)
    assert resp.status_code == 200 and resp.get_json()["response"]["allowed"] is False
    (decision,) = [r for r in caplog.records if getattr(r, "event", None) == "decision"]
    assert 150 <= decision.fields["queued_ms"] < 2000


def test_shedding_off_and_without_a_stamp() -> None:
    never = create_app(settings_mod.default(), max_queue_age=0).test_client()
    assert post(never, "/validate", 30).status_code == 200
    default = create_app(settings_mod.default()).test_client()
    assert post(default, "/validate", None).status_code == 200  # no worker stamp (tests, other servers)


def test_health_endpoints_are_never_shed() -> None:
    client = create_app(settings_mod.default()).test_client()
    environ = {QUEUED_AT: time.monotonic() - 60}
    assert client.get("/healthz", environ_base=environ).status_code == 200
    assert client.get("/readyz", environ_base=environ).status_code == 200


def test_serve_rejects_a_bad_max_queue_age(pki: Any) -> None:
    done, _ = run_serve("--cert", str(pki.cert_file), "--key", str(pki.key_file), "--max-queue-age", "-1")
    assert done.returncode == 2 and "--max-queue-age" in done.stderr


def test_the_real_worker_stamps_queued_requests(start_server: StartServer) -> None:
    """One worker, one thread, a 0.05 s limit, a heavy review. Requests that queue behind the others
    on established keep-alive connections are refused with 503; new connections that queue are closed
    before their TLS handshake; none is judged after waiting past the limit."""
    server = start_server("--workers", "1", "--threads", "1", "--max-queue-age", "0.05", wait=False)
    wait_ready(server)
    wait_workers(server, 1)
    # each pod its own: the server's verdict memo would answer copies at once
    bodies = (encode(live_review(vllm_pod("--tensor-parallel-size", "4", "--max-model-len", str(4096 + i),
                                          containers=60), uid="uid-heavy")) for i in itertools.count())

    def burst(established: int, fresh: int) -> tuple[list[int], list[int]]:
        """``established`` keep-alive connections (handshaken, one cheap request each, before) and
        ``fresh`` new ones post the heavy review together; the new ones dial 20 ms after the others
        sent, so their handshakes queue behind reviews being judged (a thread that only advances a
        handshake without waiting would otherwise get every handshake done before the reviews came)."""
        statuses: dict[bool, list[int]] = {True: [], False: []}
        lock = threading.Lock()
        ready = threading.Barrier(established + fresh, timeout=30)
        clients = [(server.connection(timeout=30), True, next(bodies)) for _ in range(established)]
        for conn, _, _ in clients:
            request_json(conn, "GET", "/healthz")
        clients += [(server.connection(timeout=30), False, next(bodies)) for _ in range(fresh)]

        def client(conn: http.client.HTTPSConnection, kept: bool, heavy: bytes) -> None:
            ready.wait()
            if not kept:
                time.sleep(0.02)
            try:
                status, _doc, resp = request_json(conn, "POST", "/validate", heavy)
                assert status != 503 or resp.getheader("Retry-After") is None
            except (OSError, http.client.HTTPException):
                status = -1  # closed by the server before (or during) the TLS handshake
            finally:
                conn.close()
            with lock:
                statuses[kept].append(status)

        threads = [threading.Thread(target=client, args=c, daemon=True) for c in clients]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        return statuses[True], statuses[False]

    kept, _ = burst(32, 0)
    assert 200 in kept and 503 in kept and set(kept) <= {200, 503}, kept
    behind, fresh = burst(8, 24)
    assert -1 in fresh and set(fresh) <= {200, 503, -1}, fresh
    assert 200 in behind + fresh and set(behind) <= {200, 503}, behind
    kept += behind
    stderr = server.stderr()
    decisions = [json.loads(line) for line in stderr.splitlines() if '"event":"decision"' in line]
    judged = [d for d in decisions if d["uid"] == "uid-heavy"]
    assert len(judged) == kept.count(200) + fresh.count(200)
    assert all(d["queued_ms"] <= 50 for d in judged), [d["queued_ms"] for d in judged]
    assert '"event":"shed"' in stderr and "closed before their TLS handshake" in stderr


def test_a_connection_idle_before_its_first_request_is_not_shed(start_server: StartServer) -> None:
    """Go's transport may dial a connection and keep it idle before writing a request on it: the time
    before the request is not time spent waiting for a thread, so such a request is judged."""
    server = start_server("--max-queue-age", "0.2")
    sock = server.tls_socket()
    try:
        time.sleep(1.0)  # connected and handshaken, nothing sent yet
        body = encode(live_review(TP4_L4, uid="uid-late"))
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:300]
    assert b'"uid":"uid-late"' in data


def test_idle_handshaken_connections_do_not_hold_the_threads(start_server: StartServer) -> None:
    """Regression: Go's HTTP client (kube-apiserver's) dials a connection when none is idle and, if
    another becomes idle first, keeps the new one unused for up to 90 s. gthread held a thread on each
    such connection after its TLS handshake, until a request came: 8 of them stopped a worker (a
    closed loop of 32 Go clients got 24 answers a second instead of 700). Now a handshaken connection
    without a request waits in the poller; 24 of them (3x the threads) leave the server responsive."""
    server = start_server()  # 2 workers x 4 threads
    idle = []
    try:
        for _ in range(24):
            idle.append(server.tls_socket(timeout=5))  # the handshake completes: no thread is stuck
        for _ in range(6):
            started = time.monotonic()
            status, doc = once(server, "POST", "/validate", encode(live_review(TP4_L4, uid="uid-busy")))
            assert status == 200 and doc["response"]["uid"] == "uid-busy"
            assert time.monotonic() - started < 2.0
        # and an idle connection that finally sends its request is served
        body = encode(live_review(TP4_L4, uid="uid-late-idle"))
        idle[0].sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        data = b""
        while chunk := idle[0].recv(65536):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and b"uid-late-idle" in data
    finally:
        for sock in idle:
            sock.close()


class _Pool:
    """What ``ThreadWorker.enqueue_req`` uses of its thread pool: ``submit`` (recorded, never run)."""

    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, fn: Any, conn: Any) -> Any:
        self.submitted.append(conn)
        return concurrent.futures.Future()


class _Conn:
    """A connection as the worker's main loop sees it; its socket is a closed-on-demand socketpair end."""

    def __init__(self, initialized: bool = False) -> None:
        self.sock, self._peer = socket.socketpair()
        self.initialized = initialized

    def close(self) -> None:
        self.sock.close()
        self._peer.close()


def bare_accepting_worker(threads: int, max_queue_age: float) -> Any:
    cls = stamped_worker(ThreadWorker, max_queue_age=max_queue_age)
    worker = cls.__new__(cls)
    worker.cfg = type("Cfg", (), {"threads": threads})()
    worker.tpool = _Pool()
    worker.nr_conns = 0
    worker.log = logging.getLogger("test.accepting")
    worker._new = collections.deque()  # what init_process creates
    worker.alive = True
    return worker


def test_new_connections_wait_behind_queued_work_and_stale_ones_are_closed_before_their_handshake() -> None:
    """Under overload the handshakes of new connections must not crowd out the work already queued
    (RELIABILITY.md, "Overload"): past TASKS_PER_THREAD tasks per thread a new connection waits, is
    submitted as a task finishes, and is closed unhandshaken once it waited past max_queue_age.
    Requests on connections already set up are never held back."""
    worker = bare_accepting_worker(threads=2, max_queue_age=0.2)
    limit = TASKS_PER_THREAD * 2
    conns = [_Conn() for _ in range(limit + 3)]
    try:
        for conn in conns:
            worker.nr_conns += 1
            worker.enqueue_req(conn)
        assert worker.tpool.submitted == conns[:limit] and list(worker._new) == conns[limit:]
        established = _Conn(initialized=True)
        worker.enqueue_req(established)  # a keep-alive request: never waits behind new connections
        assert worker.tpool.submitted[-1] is established
        assert worker._tasks == limit + 1
        worker._tasks -= 3  # three tasks finished (finish_request's count): two new connections go, oldest first
        worker._admit_new()
        assert worker.tpool.submitted[-2:] == conns[limit:limit + 2] and list(worker._new) == conns[limit + 2:]
        time.sleep(0.3)  # the last one waits past max_queue_age while the threads stay busy
        worker._admit_new()
        assert not worker._new and worker.nr_conns == limit + 2
        assert conns[-1].sock.fileno() == -1  # closed, never handed to a thread
        assert conns[-1] not in worker.tpool.submitted
    finally:
        for conn in conns + [established]:
            conn.close()


def test_a_stopping_worker_hands_its_waiting_connections_to_the_threads() -> None:
    """At SIGTERM gthread lets submitted tasks finish; a connection still waiting here would be closed
    unanswered at exit, a lost review at every rollout under load."""
    worker = bare_accepting_worker(threads=1, max_queue_age=5.0)
    conns = [_Conn() for _ in range(TASKS_PER_THREAD + 2)]
    try:
        for conn in conns:
            worker.enqueue_req(conn)
        assert len(worker._new) == 2
        worker.alive = False  # gunicorn's SIGTERM handler
        worker._admit_new()
        assert not worker._new and worker.tpool.submitted == conns
    finally:
        for conn in conns:
            conn.close()
