"""Slow and hostile clients cannot stall the server (issue 25, point 1): a request is read whole in
the worker's poller within ``--read-deadline`` of its first byte, and no thread waits for a client.

Before this, 16 connections that sent two bytes each (``PO``) held all 16 threads of a two-worker
server, and reviews, ``/healthz`` and ``/metrics`` timed out for as long as they were held. These
tests run the real ``gpu-admission serve`` (gunicorn, TLS) and a real attacker process
(tests/server/slowloris.py).
"""

from __future__ import annotations

import json
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from live import Server, StartServer, encode, once, review, vllm_pod  # noqa: F401

TP4_L4 = vllm_pod("--tensor-parallel-size", "4", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"})
ATTACKER = Path(__file__).with_name("slowloris.py")


def _review_latency(server: Server, uid: str) -> float:
    started = time.monotonic()
    status, doc = once(server, "POST", "/validate", encode(review(TP4_L4, uid=uid)))
    assert status == 200 and doc["response"]["uid"] == uid
    return time.monotonic() - started


def _trickle(server: Server, stop: threading.Event, socks: list[ssl.SSLSocket]) -> None:
    request = b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 50000\r\n\r\n" + b"{" * 50000
    sent = 0
    while not stop.wait(0.5):
        for sock in list(socks):
            try:
                sock.send(request[sent:sent + 1])
            except OSError:
                socks.remove(sock)
        sent += 1


@pytest.mark.parametrize("shape", ["stalled-PO", "one-byte-trickle", "no-bytes-at-all-raw-tcp",
                                   "half-a-client-hello"])
def test_sixteen_slow_connections_leave_reviews_and_probes_answered(start_server: StartServer, shape: str) -> None:
    """24 such connections (3x the fixture's 2 workers x 4 threads), held while reviews and probes
    are sent: every one answered within a second."""
    server = start_server()
    held: list[Any] = []
    stop = threading.Event()
    try:
        for _ in range(24):
            if shape in ("no-bytes-at-all-raw-tcp", "half-a-client-hello"):
                raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                if shape == "half-a-client-hello":
                    raw.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's first bytes
                held.append(raw)
            else:
                sock = server.tls_socket(timeout=5)
                sock.sendall(b"PO")
                held.append(sock)
        if shape == "one-byte-trickle":
            trickler = threading.Thread(target=_trickle, args=(server, stop, held), daemon=True)
            trickler.start()
        time.sleep(0.5)
        for i in range(8):
            assert _review_latency(server, f"uid-{shape}-{i}") < 1.0
            started = time.monotonic()
            assert once(server, "GET", "/healthz")[0] == 200
            assert time.monotonic() - started < 1.0
    finally:
        stop.set()
        for sock in held:
            sock.close()


@pytest.mark.parametrize("shape", ["stalled-PO", "trickle", "half-a-client-hello"])
def test_a_request_not_whole_within_the_deadline_is_closed(start_server: StartServer, shape: str) -> None:
    server = start_server("--read-deadline", "1")
    started = time.monotonic()
    if shape == "half-a-client-hello":
        sock: Any = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"\x16\x03\x01\x02\x00\x01")
    else:
        sock = server.tls_socket(timeout=10)
        sock.sendall(b"PO")
    closed_after = None
    try:
        while time.monotonic() - started < 8:
            if shape == "trickle":
                try:
                    sock.send(b"S")
                except OSError:
                    closed_after = time.monotonic() - started
                    break
            sock.settimeout(0.3)
            try:
                data = sock.recv(100)
            except (socket.timeout, ssl.SSLWantReadError):
                continue
            except OSError:
                data = b""
            if not data:
                closed_after = time.monotonic() - started
                break
    finally:
        sock.close()
    assert closed_after is not None, "the server kept a connection whose request never came whole"
    assert 0.9 <= closed_after < 4.0, closed_after


def test_a_request_sent_in_pieces_within_the_deadline_is_served(start_server: StartServer) -> None:
    """Pieces, a pause, the body in two writes (and an Expect: 100-continue client, as curl is for big
    bodies): all answered; the deadline is for a whole request, not for each read."""
    server = start_server("--read-deadline", "3")
    body = encode(review(TP4_L4, uid="uid-pieces"))
    head = (b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n".encode())
    sock = server.tls_socket(timeout=10)
    try:
        for piece in (head[:7], head[7:30], head[30:]):
            sock.sendall(piece)
            time.sleep(0.3)
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body[:100])
        time.sleep(0.3)
        sock.sendall(body[100:])
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    finally:
        sock.close()
    # gunicorn answers the Expect header a second time when it parses the request: RFC 9110 section 15.2
    # lets a server send several 1xx responses, and clients must read past them
    while data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"):
        data = data[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
    assert data.startswith(b"HTTP/1.1 200") and b"uid-pieces" in data


def test_keep_alive_connections_are_served_after_a_pause(start_server: StartServer) -> None:
    """An idle kept-alive connection is not a slow request: it is reused after longer than the deadline."""
    server = start_server("--read-deadline", "1")
    conn = server.connection(timeout=10)
    try:
        for i in range(2):
            conn.request("POST", "/validate", body=encode(review(TP4_L4, uid=f"uid-ka-{i}")),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 200 and f"uid-ka-{i}".encode() in response.read()
            time.sleep(2.0)
    finally:
        conn.close()


def test_an_oversized_body_is_refused_from_its_headers(start_server: StartServer) -> None:
    server = start_server("--read-deadline", "30")
    sock = server.tls_socket(timeout=10)
    try:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n{")
        started = time.monotonic()
        data = sock.recv(65536)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 413"), data[:80]
    assert time.monotonic() - started < 2.0


def _latencies(server: Server, count: int, tag: str) -> list[float]:
    conn = server.connection(timeout=30)
    out = []
    try:
        for i in range(count):
            body = encode(review(TP4_L4, uid=f"uid-{tag}-{i}"))
            started = time.monotonic()
            conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            payload = response.read()
            out.append(time.monotonic() - started)
            assert response.status == 200 and f"uid-{tag}-{i}".encode() in payload
            time.sleep(0.01)
    finally:
        conn.close()
    return out


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def test_a_thousand_slowloris_connections_do_not_stall_reviews(start_server: StartServer) -> None:
    """The attack of the issue, both TLS: 1,000 connections, half sending a request one byte a second,
    half stalled after two bytes, re-opened as the server closes them (5 s deadline). A keep-alive
    client's reviews (as kube-apiserver sends them) are all answered, each well inside the webhooks'
    3 s timeoutSeconds. The latency ratio (the issue's p99 within 2x of unloaded) is a number, so it
    is measured by bench/reliability/slowloris.py (`make reliability`, figures in RELIABILITY.md),
    not asserted here."""
    server = start_server("--workers", "2", "--threads", "8")
    _latencies(server, 50, "warm")
    unloaded = _latencies(server, 300, "quiet")
    attacker = subprocess.Popen([sys.executable, str(ATTACKER), str(server.port), str(server.pki.ca_file), "1000"],
                                stdout=subprocess.PIPE, text=True)
    lines: list[dict[str, int]] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(line) for line in attacker.stdout),
                              daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not lines and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lines and lines[0]["open"] >= 900, lines  # the attack is in place before the client measures
        time.sleep(6.0)  # past the first deadline: the server is closing and the attacker re-opening
        during = len(lines)
        loaded = _latencies(server, 300, "attack")
        # the attack went on while measured and after: the server kept closing and the attacker kept
        # re-opening. The re-openings come in waves at the server's 5 s deadline, and 300 reviews can
        # take less than a wave apart, so the next wave is waited for (CI saw none inside the window)
        waves = time.monotonic() + 15
        while (not lines or lines[-1]["reopened"] <= lines[during - 1]["reopened"]) and time.monotonic() < waves:
            time.sleep(0.2)
        status = lines[-1]
        assert len(lines) > during, "the attacker stopped reporting"
        assert status["reopened"] > lines[during - 1]["reopened"], lines
    finally:
        attacker.terminate()
        attacker.wait(timeout=10)
    assert status["reopened"] > 0, status  # and the deadline closed connections
    assert max(loaded) < 1.0, (p99(unloaded), p99(loaded), max(loaded))
