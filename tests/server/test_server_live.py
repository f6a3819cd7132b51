"""The admission server as it runs in the cluster: ``gpu-admission serve`` (gunicorn, gthread workers,
TLS) started as a subprocess on loopback and called like kube-apiserver calls it, over keep-alive
HTTPS connections that verify the serving certificate against the CA bundle.

What only a real server shows: keep-alive reuse, metrics aggregated across worker processes,
certificate and policy reloads inside each worker, graceful shutdown, the body limit and the TLS floor
on the wire, and start-up refusals of the ``serve`` command.

Every wait has a timeout and every server is stopped (SIGTERM, then SIGKILL of its process group) by
the fixture, whatever the test did, so a broken server cannot hang or leak into the rest of the suite.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import signal
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import jsonpatch
import pytest

from webhook.cli import certs
from webhook.core import settings as settings_mod
from webhook.server import admission

from live import (  # noqa: F401 - helpers; the fixtures are in conftest.py
    CONSECUTIVE, IO_TIMEOUT, KEY, MAX_BODY, Pki, STOP_TIMEOUT, Server, StartServer, TP4, TP4_L4,
    client_context, der, encode, free_port, handshake_in_memory, live_workers, metric_samples, once,
    permissive_server, post_while_reading, replace_file, request_json, review, run_serve, until_consecutive,
    vllm_pod, wait_workers, write_policy,
)


def test_round_trip_over_one_keep_alive_connection(server: Server) -> None:
    conn = server.connection()
    try:
        status, doc, resp = request_json(conn, "POST", "/mutate", encode(review(TP4, uid="uid-mutate")))
        sock, local = conn.sock, conn.sock.getsockname()
        assert resp.version == 11 and not resp.will_close
        assert status == 200 and doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview"
        r = doc["response"]
        assert r["uid"] == "uid-mutate" and r["allowed"] is True and r["patchType"] == "JSONPatch"
        pinned = jsonpatch.apply_patch(copy.deepcopy(TP4), json.loads(base64.b64decode(r["patch"])))
        terms = pinned["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        exprs = [e for term in terms for e in term["matchExpressions"] if e["key"] == KEY]
        assert exprs and all(e["operator"] == "In" for e in exprs)
        assert "NVIDIA-A100-SXM4-80GB" in exprs[0]["values"] and "NVIDIA-L40S" not in exprs[0]["values"]

        status, doc, _ = request_json(conn, "POST", "/validate", encode(review(pinned, uid="uid-pinned")))
        assert status == 200 and doc["response"]["uid"] == "uid-pinned" and doc["response"]["allowed"] is True

        status, doc, _ = request_json(conn, "POST", "/validate", encode(review(TP4_L4, uid="uid-deny")))
        r = doc["response"]
        assert status == 200 and r["uid"] == "uid-deny" and r["allowed"] is False
        assert r["status"]["code"] == 403 and "model-does-not-fit" in r["status"]["message"]

        status, doc, _ = request_json(conn, "POST", "/validate?mode=audit", encode(review(TP4_L4, uid="uid-audit")))
        r = doc["response"]
        assert status == 200 and r["uid"] == "uid-audit" and r["allowed"] is True and "status" not in r
        assert r["warnings"][0].endswith(admission.DETAILS) and r["warnings"][1].startswith("model-does-not-fit:")

        # all four answers came over the one TCP connection (one TLS handshake), as kube-apiserver expects
        assert conn.sock is sock and conn.sock.getsockname() == local
    finally:
        conn.close()


def test_metrics_count_every_request_across_both_workers(server: Server) -> None:
    per_connection, threads, connections = 4, 5, 2  # 40 requests a round, over 10 new connections
    results: list[tuple[int, str, str]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(round_: int, t: int) -> None:
        try:
            for c in range(connections):
                conn = server.connection()  # a new connection: the kernel picks the worker
                try:
                    for i in range(per_connection):
                        uid = f"m-{round_}-{t}-{c}-{i}"
                        status, doc, _ = request_json(conn, "POST", "/validate", encode(review(TP4_L4, uid=uid)))
                        with lock:
                            results.append((status, uid, doc["response"]["uid"]))
                finally:
                    conn.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            with lock:
                errors.append(repr(exc))

    # The claim needs both worker processes to have counted some requests: prometheus_client keeps
    # one counter file per process that counted. Almost always one round of 40 does it; should the
    # kernel hand all of them to one worker, another round follows (and the expected total with it).
    (metrics_dir,) = server.run_dir.glob("gpu-admission-metrics-*")
    for round_ in range(5):
        clients = [threading.Thread(target=client, args=(round_, t), daemon=True) for t in range(threads)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(timeout=30)
        assert not any(c.is_alive() for c in clients), "client threads hung"
        assert not errors, errors
        if len(list(metrics_dir.glob("counter_*.db"))) == 2:
            break
    n = len(results)
    assert n % 40 == 0 and all(status == 200 and sent == got for status, sent, got in results)
    counting = sorted(p.name for p in metrics_dir.glob("counter_*.db"))
    assert len(counting) == 2, f"both workers should have served requests, counter files: {counting}"

    # whichever worker answers the scrape, it reports the whole server
    for _ in range(CONSECUTIVE):
        _, text, resp = server.probe("/metrics")
        assert resp.status == 200 and resp.getheader("Content-Type", "").startswith("text/plain")
        validate = [(labels, value) for labels, value in metric_samples(text, "gpu_admission_requests_total")
                    if labels.get("endpoint") == "validate"]
        assert sum(v for _, v in validate) == n, validate
        assert validate == [({"endpoint": "validate", "mode": "enforce", "allowed": "false", "dry_run": "false"},
                             float(n))]
        counts = [v for labels, v in metric_samples(text, "gpu_admission_request_duration_seconds_count")
                  if labels.get("endpoint") == "validate"]
        assert counts == [float(n)]
        # one object, sent n times: one generation, counted once by each worker that saw it
        # (webhook.server.denials keeps a ledger per worker), so 2 here, not n
        violations = [(labels, v) for labels, v in metric_samples(text, "gpu_admission_violations_total")
                      if labels.get("code") == "model-does-not-fit"]
        assert violations == [({"code": "model-does-not-fit", "mode": "enforce"}, 2.0)], violations
        assert metric_samples(text, "gpu_admission_denials_total") == [({"mode": "enforce"}, 2.0)]


class RequestLoop(threading.Thread):
    """Calls /validate without pause like kube-apiserver: keep-alive reuse, and a new connection
    (new TLS handshake) every ``per_connection`` requests. Records every failure."""

    def __init__(self, server: Server, per_connection: int = 3) -> None:
        super().__init__(daemon=True)
        self.server, self.per_connection = server, per_connection
        self.stop = threading.Event()
        self.requests = self.connections = 0
        self.failures: list[str] = []
        self.body = encode(review(TP4_L4, uid="uid-loop"))

    def run(self) -> None:
        conn: http.client.HTTPSConnection | None = None
        try:
            while not self.stop.is_set():
                if conn is None or self.requests % self.per_connection == 0:
                    if conn is not None:
                        conn.close()
                    conn = self.server.connection()
                    try:
                        conn.connect()
                    except (OSError, http.client.HTTPException) as exc:
                        self.failures.append(f"{time.monotonic():.3f} handshake: {exc!r}")
                        conn = None
                        continue
                    self.connections += 1
                try:
                    status, doc, _ = request_json(conn, "POST", "/validate", self.body)
                    if status != 200 or doc["response"]["uid"] != "uid-loop":
                        self.failures.append(f"{time.monotonic():.3f} answer {status}: {doc!r:.200}")
                except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as exc:
                    self.failures.append(f"{time.monotonic():.3f} request: {exc!r}")
                    conn.close()
                    conn = None
                self.requests += 1
        finally:
            if conn is not None:
                conn.close()


def peer_der(server: Server) -> bytes:
    sock = server.tls_socket()
    try:
        cert = sock.getpeercert(binary_form=True)
        assert cert is not None
        return cert
    finally:
        sock.close()


def wait_for_certificate(server: Server, issued: certs.Issued) -> None:
    wanted = der(issued)
    until_consecutive(lambda: (peer_der(server) == wanted, "old certificate"),
                      "new connections present the rotated certificate")


def test_certificate_rotation_under_load_has_no_failed_request(server: Server, pki: Pki) -> None:
    loop = RequestLoop(server)
    started = time.monotonic()
    loop.start()
    try:
        time.sleep(0.5)
        # 1: atomic rotation (what `gpu-admission certs` / write() does)
        first = pki.reissue()
        certs.write(first, pki.dir)
        wait_for_certificate(server, first)

        # 2: deliberately NOT atomic: tls.crt first, tls.key later. The window is longer than the 1 s
        # reload interval, so every worker does look at the mismatched pair (and must keep serving
        # the old one) instead of the test passing because no check fell into the window.
        second = pki.reissue()
        replace_file(pki.cert_file, second.cert_pem, 0o644)
        window_end = time.monotonic() + 1.3
        seen_in_window = set()
        while time.monotonic() < window_end:
            seen_in_window.add(peer_der(server))
            time.sleep(0.05)
        # an old certificate, never the new one (a worker not connected to since rotation 1 may still
        # hold the original pair; the loop thread counts any failed handshake)
        assert seen_in_window and seen_in_window <= {der(pki.issued), der(first)}
        replace_file(pki.key_file, second.key_pem)
        wait_for_certificate(server, second)

        # 3: atomic again
        third = pki.reissue()
        certs.write(third, pki.dir)
        wait_for_certificate(server, third)
        time.sleep(max(0.0, 6.0 - (time.monotonic() - started)))
    finally:
        loop.stop.set()
        loop.join(timeout=IO_TIMEOUT * 2)
    assert not loop.is_alive(), "request loop hung"
    assert loop.failures == [], f"{len(loop.failures)} failed of {loop.requests}: {loop.failures[:10]}"
    assert loop.requests >= 100 and loop.connections >= 30, (loop.requests, loop.connections)
    assert '"result":"deferred"' in server.stderr(), "no worker noticed the half-written pair"
    assert peer_der(server) == der(third)


def test_half_written_rotation_before_a_workers_first_connection(server: Server, pki: Pki) -> None:
    """Regression: a worker built its TLS context from the files on its FIRST connection, so a worker
    that had not been connected to yet failed every handshake while a rotation was half-written."""
    original = der(pki.issued)
    fresh = pki.reissue()
    replace_file(pki.cert_file, fresh.cert_pem, 0o644)  # only one worker has had a connection (readiness)
    seen, failures = [], []
    for _ in range(16):  # new connections land on both workers
        try:
            seen.append(peer_der(server))
        except (OSError, AssertionError) as exc:
            failures.append(repr(exc))
    assert failures == [] and set(seen) == {original}, (failures, len(seen))
    replace_file(pki.key_file, fresh.key_pem)
    wait_for_certificate(server, fresh)


def verdict(server: Server) -> tuple[bool, Any]:
    status, doc = once(server, "POST", "/validate", encode(review(TP4_L4)))
    assert status == 200, doc
    return doc["response"]["allowed"], doc["response"]


def metrics_text(server: Server) -> str:
    return server.probe("/metrics")[1]


def reloads(server: Server, result: str) -> float:
    """Policy reloads with ``result`` counted by all workers together (one per worker per file version)."""
    return sum(v for labels, v in metric_samples(metrics_text(server), "gpu_admission_config_reloads_total")
               if labels.get("result") == result)


HEADER = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"


def broken_reported(server: Server) -> tuple[bool, Any]:
    """/readyz (which, like an admission request, makes the worker look at the file) names the error."""
    status, body = once(server, "GET", "/readyz")
    return status == 200 and "invalid YAML" in body.get("policy_reload_error", ""), body


def test_policy_reload_good_then_broken(start_server: StartServer, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    write_policy(policy, HEADER + "mode: enforce\n")
    server = start_server(config=policy)
    for _ in range(CONSECUTIVE):
        allowed, response = verdict(server)
        assert allowed is False and response["status"]["code"] == 403

    write_policy(policy, HEADER + "mode: audit\n")
    until_consecutive(lambda: verdict(server), "the audit policy is in force after the rewrite")
    # Each worker reloads on its own, on its next request after the interval. Both must have loaded
    # the audit policy before the file breaks: a worker that never saw it rightly keeps enforce.
    until_consecutive(lambda: (verdict(server)[0] and reloads(server, "success") == 2, "one worker only"),
                      "both workers loaded the audit policy", k=1)

    write_policy(policy, HEADER + "mode: [broken\n")
    until_consecutive(lambda: (broken_reported(server)[0] and reloads(server, "failure") == 2, "one worker only"),
                      "both workers saw the broken file", k=1)
    for _ in range(CONSECUTIVE):  # the last good policy (audit) stays in force everywhere
        allowed, response = verdict(server)
        assert allowed is True and response["warnings"][1].startswith("model-does-not-fit:")
        assert broken_reported(server)[0]
    text = metrics_text(server)
    assert "gpu_admission_config_valid 0.0" in text
    assert reloads(server, "failure") == 2  # the same broken file is not parsed again and again


def test_worker_respawn_with_broken_policy_keeps_serving(start_server: StartServer, tmp_path: Path) -> None:
    """Regression: a worker that (re)starts while the policy file is invalid (after an OOM or timeout
    kill, or still booting when the file broke) failed to boot, and gunicorn then halted the whole
    server ("Worker failed to boot", exit 3) instead of keeping the last good policy."""
    policy = tmp_path / "policy.yaml"
    write_policy(policy, HEADER + "mode: enforce\n")
    server = start_server(config=policy)
    write_policy(policy, HEADER + "mode: [broken\n")
    until_consecutive(lambda: broken_reported(server), "both workers saw the broken file")
    before = live_workers(server)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)  # what the OOM killer does
    (replacement,) = wait_workers(server, 1, exclude=before)
    assert server.alive(), f"the server died (exit {server.proc.returncode}); stderr:\n{server.stderr_tail()}"

    def last_good_everywhere() -> tuple[bool, Any]:
        allowed, response = verdict(server)
        status, ready = once(server, "GET", "/readyz")
        return allowed is False and status == 200 and "policy_reload_error" in ready, (response, ready)
    until_consecutive(last_good_everywhere, "every worker, the new one too, judges with the last good policy",
                      k=2 * CONSECUTIVE)
    assert server.alive() and live_workers(server) == (before - {victim}) | {replacement}


def test_metrics_survive_a_worker_restart(server: Server) -> None:
    """Regression: a worker leaving through sys.exit (gunicorn's timeout abort, a failed boot, a
    graceful reload) unwound through serve's cleanup and deleted the metrics directory that the other
    workers still use; /metrics then failed with a 500 until the server was restarted."""
    for _ in range(10):
        assert verdict(server)[0] is False
    before = live_workers(server)
    victim = min(before)
    os.kill(victim, signal.SIGABRT)  # what the master sends a worker that exceeded the timeout
    wait_workers(server, 1, exclude=before)
    for _ in range(CONSECUTIVE):
        _, text, resp = server.probe("/metrics")
        assert resp.status == 200, text[:300]
        total = sum(v for labels, v in metric_samples(text, "gpu_admission_requests_total")
                    if labels.get("endpoint") == "validate")
        assert total == 10  # the counts of the restarted worker are kept
    assert server.alive()


@dataclass
class ShutdownStats:
    ok: list[tuple[float, float, str]] = field(default_factory=list)  # (write began, answered, uid)
    refused_before_write: int = 0
    idle_close: list[tuple[float, str]] = field(default_factory=list)  # (write began, what): reused
    # connection closed, not one byte answered
    broken: list[str] = field(default_factory=list)  # written, then no or a partial/invalid answer


def test_sigterm_answers_every_request_in_flight(server: Server) -> None:
    big = encode(review(vllm_pod("--tensor-parallel-size", "4", containers=200), uid="placeholder"))
    stats = ShutdownStats()
    lock = threading.Lock()
    stop = threading.Event()

    def client(t: int) -> None:
        conn = server.connection()
        used = n = 0
        while not stop.is_set():
            if conn.sock is None:
                try:
                    conn.connect()  # a refused or reset connect never carried a request
                except (OSError, http.client.HTTPException):
                    with lock:
                        stats.refused_before_write += 1
                    conn.close()
                    return
                used = 0
            uid = f"s-{t}-{n}"
            n += 1
            body = big.replace(b'"uid":"placeholder"', f'"uid":"{uid}"'.encode(), 1)
            reused = used > 0
            began = time.monotonic()
            try:
                conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
            except (OSError, http.client.HTTPException) as exc:
                # the server closed the connection while we were writing: never read whole, never judged
                with lock:
                    if reused:
                        stats.idle_close.append((began, f"{uid} write {exc!r}"))
                    else:
                        stats.broken.append(f"{uid} write {exc!r}")
                conn.close()
                continue
            try:
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:
                # not one byte of an answer: on a reused keep-alive connection this is the close race
                # every HTTP client retries (kube-apiserver too); on a fresh one it is a dropped request
                with lock:
                    if reused:
                        stats.idle_close.append((began, f"{uid} {exc!r}"))
                    else:
                        stats.broken.append(f"{uid} {exc!r}")
                conn.close()
                continue
            except (OSError, http.client.HTTPException) as exc:  # partial answer, timeout
                with lock:
                    stats.broken.append(f"{uid} {exc!r}")
                conn.close()
                continue
            answered = time.monotonic()
            used += 1
            try:
                doc = json.loads(raw)
                good = resp.status == 200 and doc["response"]["uid"] == uid and doc["response"]["allowed"] is False
            except (ValueError, KeyError, TypeError):
                good = False
            with lock:
                if good:
                    stats.ok.append((began, answered, uid))
                else:
                    stats.broken.append(f"{uid} {resp.status} {raw[:200]!r}")
            if resp.will_close:
                conn.close()  # the server said "Connection: close"; the next request reconnects

    clients = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(8)]
    for c in clients:
        c.start()
    time.sleep(1.5)
    with lock:
        before = len(stats.ok)
    assert before >= 8, f"warm-up too slow: {before} answers"
    sigterm_at = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        rc = server.proc.wait(timeout=STOP_TIMEOUT)
    finally:
        stop.set()
        for c in clients:
            c.join(timeout=IO_TIMEOUT * 2)
    shutdown = time.monotonic() - sigterm_at
    assert not any(c.is_alive() for c in clients), "client threads hung"
    assert rc == 0, f"exit code {rc}; stderr:\n{server.stderr_tail()}"
    assert shutdown < 20, shutdown

    assert stats.broken == [], stats.broken
    # A request already on its way when the signal came is in flight: it must be answered. The close
    # race is allowed only for requests written after the signal, and only if the server never judged them.
    lost = [what for began, what in stats.idle_close if began < sigterm_at]
    assert lost == [], f"in flight at SIGTERM, never answered: {lost}"
    log = server.stderr()
    judged = [what for _, what in stats.idle_close if f'"uid":"{what.split()[0]}"' in log]
    assert judged == [], f"judged but never answered: {judged}"
    in_flight = [uid for began, answered, uid in stats.ok if began < sigterm_at < answered]
    assert in_flight, "no request was in flight at SIGTERM: the test proved nothing"
    assert stats.refused_before_write >= 1, "clients should have found the listener closed"
    print(f"\nSIGTERM: {len(stats.ok)} answered ({len(in_flight)} in flight at the signal), "
          f"{stats.refused_before_write} connects refused, {len(stats.idle_close)} idle-close races, "
          f"shutdown {shutdown:.2f} s")


@pytest.mark.parametrize("shape", [
    pytest.param("tls-handshake-after-sigterm", id="connected-before-sigterm-handshake-after"),
    pytest.param("request-in-three-pieces", id="request-pieces-before-and-after-sigterm"),
])
def test_a_request_still_arriving_at_sigterm_is_answered(server: Server, shape: str) -> None:
    """gthread (27) closes a connection that a stopping worker's thread defers to the poller (a TLS
    handshake not yet finished has no parser, and its keep-alive branch fails on it). Since requests
    are read in the poller, a connection accepted before SIGTERM whose TLS handshake went on after it
    was dropped unanswered: kube-apiserver does not retry a fresh connection, so a review was lost at
    rollouts (found as a rare write error of test_sigterm_answers_every_request_in_flight, where
    the client's connect had returned before the server had read its Finished). Now every request
    that arrives whole within its read deadline is answered, with "Connection: close", and the server
    still exits 0."""
    uid = f"late-{shape}"
    body = encode(review(TP4_L4, uid=uid))
    request = (f"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT)
    sock: socket.socket = raw
    try:
        if shape == "request-in-three-pieces":
            sock = server.client_ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            third = len(request) // 3
            sock.sendall(request[:third])
            time.sleep(0.3)  # the worker has read the first piece and deferred the connection
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)  # the workers are stopping
            sock.sendall(request[third:2 * third])  # read by a stopping worker's thread, deferred again
            time.sleep(0.3)
            sock.sendall(request[2 * third:])
        else:
            time.sleep(0.3)  # accepted by a worker, nothing sent yet
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            sock = server.client_ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.find(b"\r\n\r\n") + 4 + _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
    assert b"connection: close" in data.split(b"\r\n\r\n", 1)[0].lower()
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["response"]["uid"] == uid
    assert server.proc.wait(timeout=STOP_TIMEOUT) == 0


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def post_reading_early(server: Server, headers: dict[str, str], chunks: Iterable[bytes]) -> tuple[int, Any]:
    """POST /validate like a client that reads the answer while still sending
    (:func:`live.post_while_reading`). Returns (status, JSON body)."""
    status, _headers, doc, _sent = post_while_reading(server.tls_socket(), "/validate", headers, chunks)
    return status, doc


def padded_review(size: int) -> bytes:
    """A valid AdmissionReview of exactly ``size`` bytes (padding in the request's options)."""
    doc = review(TP4_L4, uid="uid-padded")
    doc["request"]["options"] = {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": ""}
    pad = size - len(encode(doc))
    assert pad >= 0
    doc["request"]["options"]["fieldManager"] = "x" * pad
    body = encode(doc)
    assert len(body) == size
    return body


def pieces(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def chunked(data: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    for piece in pieces(data, size):
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def test_body_over_4_mib_is_413_and_the_server_keeps_working(server: Server) -> None:
    exact = padded_review(MAX_BODY)
    conn = server.connection(timeout=30)
    try:
        status, doc, _ = request_json(conn, "POST", "/validate", exact)  # the limit is inclusive
        assert status == 200 and doc["response"]["uid"] == "uid-padded", doc
    finally:
        conn.close()

    for body in (padded_review(MAX_BODY + 1), padded_review(6 * 1024 * 1024)):
        status, doc = post_reading_early(server, {"Content-Length": str(len(body))}, pieces(body))
        assert status == 413 and str(MAX_BODY) in doc["error"], (status, doc)
    # a chunked body has no Content-Length to refuse up front: it must be cut off and refused, not
    # truncated to the limit and then judged (or called "not JSON")
    body = padded_review(6 * 1024 * 1024)
    status, doc = post_reading_early(server, {"Transfer-Encoding": "chunked"}, chunked(body))
    assert status == 413 and str(MAX_BODY) in doc["error"], (status, doc)

    for _ in range(CONSECUTIVE):
        allowed, response = verdict(server)
        assert allowed is False and response["status"]["code"] == 403
    text = metrics_text(server)
    assert [v for labels, v in metric_samples(text, "gpu_admission_errors_total")
            if labels.get("status") == "413"] == [3.0]


def _tls11_only(ctx: ssl.SSLContext) -> None:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")


def _weak_tls12(ctx: ssl.SSLContext) -> None:
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # TLS 1.3 suites are not governed by set_ciphers
    ctx.set_ciphers("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:AES128-SHA:DES-CBC3-SHA:@SECLEVEL=0")


def test_tls_1_1_client_is_refused(server: Server, pki: Pki) -> None:
    try:
        ctx = client_context(pki, _tls11_only)
        capable = handshake_in_memory(permissive_server(pki), ctx) in ("TLSv1", "TLSv1.1")
    except (ValueError, ssl.SSLError):
        capable = False
    if not capable:
        pytest.skip("this OpenSSL cannot negotiate TLS 1.0/1.1 at all, even with a permissive server "
                    "in-process, so it cannot show that the webhook refuses it")
    with pytest.raises(ssl.SSLError) as refused:
        server.tls_socket(ctx).close()
    assert "PROTOCOL_VERSION" in str(refused.value).upper() or "UNSUPPORTED" in str(refused.value).upper()
    assert verdict(server)[0] is False  # and the server carries on


def test_tls_1_2_with_only_weak_ciphers_is_refused(server: Server, pki: Pki) -> None:
    weak = client_context(pki, _weak_tls12)
    # the client can offer these (a permissive server accepts them), so the refusal is the webhook's
    assert handshake_in_memory(permissive_server(pki), weak) == "TLSv1.2"
    with pytest.raises(ssl.SSLError, match="(?i)handshake failure|no shared cipher"):
        server.tls_socket(weak).close()

    def modern(ctx: ssl.SSLContext) -> None:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256")
    sock = server.tls_socket(client_context(pki, modern))
    try:
        assert sock.version() == "TLSv1.2" and "GCM" in sock.cipher()[0]
    finally:
        sock.close()


def test_serve_refuses_to_start_without_key(pki: Pki, tmp_path: Path) -> None:
    port = free_port()
    missing = tmp_path / "absent.key"
    done, took = run_serve("--cert", str(pki.cert_file), "--key", str(missing), "--bind", f"127.0.0.1:{port}")
    assert done.returncode == 2, done
    assert str(missing) in done.stderr and "cannot read" in done.stderr and "Traceback" not in done.stderr
    assert took < 15
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def policy_generations(server: Server) -> dict[str, str]:
    """The generation each live worker serves, from gpu_admission_policy_info (pid -> generation)."""
    return {labels["pid"]: labels["generation"]
            for labels, v in metric_samples(metrics_text(server), "gpu_admission_policy_info") if v == 1}


def test_a_respawned_worker_serves_the_same_last_good_policy(start_server: StartServer, tmp_path: Path) -> None:
    """Regression (issue 25): enforce, then audit, then an empty file; a worker killed and respawned
    by gunicorn then served the master's start-up policy (enforce) while its sibling served the last
    good one (audit), and /readyz said 200 on both: verdicts alternated from one connection to the next."""
    policy = tmp_path / "policy.yaml"
    write_policy(policy, HEADER + "mode: enforce\n")
    server = start_server(config=policy)
    write_policy(policy, HEADER + "mode: audit\n")
    audit = settings_mod.generation_of(policy.read_text())
    until_consecutive(lambda: (verdict(server)[0] and reloads(server, "success") == 2, "one worker only"),
                      "both workers loaded the audit policy", k=1)
    write_policy(policy, "")  # what a ConfigMap emptied by mistake mounts
    until_consecutive(lambda: (reloads(server, "failure") == 2, "one worker only"), "both workers saw the empty file",
                      k=1)
    before = live_workers(server)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    (replacement,) = wait_workers(server, 1, exclude=before)
    assert server.alive(), f"the server died (exit {server.proc.returncode}); stderr:\n{server.stderr_tail()}"

    def same_everywhere() -> tuple[bool, Any]:
        allowed, response = verdict(server)
        status, ready = once(server, "GET", "/readyz")
        return (allowed is True and status == 200 and ready["generation"] == audit
                and "empty" in ready.get("policy_reload_error", "")), (response, ready)
    until_consecutive(same_everywhere, "every worker, the respawned one too, serves the audit policy",
                      k=4 * CONSECUTIVE)
    for _ in range(40):  # and keeps doing so, whichever worker a new connection reaches
        assert same_everywhere()[0]
    served = policy_generations(server)
    assert set(served) == {str(p) for p in (before - {victim}) | {replacement}}, served
    assert set(served.values()) == {audit}, served


def test_a_restarted_server_serves_the_last_good_copy(start_server: StartServer, tmp_path: Path) -> None:
    """A container restarted while the file is broken (same pod, same emptyDir at /tmp) finds the
    last good copy the previous run kept, instead of exiting into a crash loop."""
    policy = tmp_path / "policy.yaml"
    write_policy(policy, HEADER + "mode: audit\n")
    audit = settings_mod.generation_of(policy.read_text())
    first = start_server(config=policy)
    assert verdict(first)[0] is True
    assert first.stop() == 0
    write_policy(policy, HEADER + "tiers: 42\n")
    again = start_server(config=policy, tmpdir=first.run_dir)
    status, ready = once(again, "GET", "/readyz")
    assert status == 200 and ready["generation"] == audit and "tiers" in ready["policy_reload_error"], ready
    for _ in range(CONSECUTIVE):
        assert verdict(again)[0] is True


def test_serve_starts_unready_with_a_broken_policy_and_no_copy(start_server: StartServer, tmp_path: Path) -> None:
    """Regression (issue 25): `serve` exited with code 2 when the policy did not load, so a pod that
    started while the ConfigMap was broken crash-looped (each drain or rollout lost a replica). Now it
    runs, live (/healthz 200) and unready (/readyz 503 naming the reason), until the file loads."""
    policy = tmp_path / "policy.yaml"
    write_policy(policy, "".join(settings_mod.embedded_policy_text().splitlines(keepends=True)[:3]))
    server = start_server(config=policy, wait=False)
    deadline = time.monotonic() + 20
    while True:
        assert server.alive(), f"serve exited with {server.proc.returncode}; stderr:\n{server.stderr_tail()}"
        try:
            status, ready = once(server, "GET", "/readyz")
            break
        except (OSError, http.client.HTTPException):
            assert time.monotonic() < deadline, server.stderr_tail()
            time.sleep(0.1)
    wait_workers(server)
    for _ in range(CONSECUTIVE):
        status, ready = once(server, "GET", "/readyz")
        assert status == 503 and ready["generation"] is None, ready
        assert any("no policy" in r and "the policy file is empty" in r for r in ready["reasons"]), ready
        assert once(server, "GET", "/healthz")[0] == 200
        status, doc = once(server, "POST", "/validate", encode(review(TP4_L4)))
        assert status == 503 and "no policy to judge with" in doc["error"], doc
    assert server.alive() and "Traceback" not in server.stderr()
    write_policy(policy, HEADER + "mode: enforce\n")

    def ready_and_enforcing() -> tuple[bool, Any]:
        # each call reaches either worker: one may still be without a policy for up to a second
        ready_status, ready = once(server, "GET", "/readyz")
        status, doc = once(server, "POST", "/validate", encode(review(TP4_L4)))
        return (ready_status == 200 and status == 200 and doc["response"]["allowed"] is False), (ready, doc)
    until_consecutive(ready_and_enforcing, "both workers ready with the fixed policy")
