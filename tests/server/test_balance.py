"""Keep-alive connections spread over the workers (``webhook.server.gunicorn.balance``).

The table and the accept rule are tested in process; the live test shows the count staying right
when clients hang up without a TLS close_notify (what wrk, and a client timing out, do), which is
what gthread 27 counted twice until ``BalancedThreadWorker.finish_request``.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from live import (  # noqa: F401 - helpers; the fixtures are in conftest.py
    StartServer, encode, live_workers, request_json, review, vllm_pod, wait_ready, wait_workers,
)
from bench import common
from webhook.server.gunicorn import balance, closing


# ----------------------------------------------------------------------------- the table


def test_claim_update_fewest_and_release() -> None:
    table = balance.ConnectionTable(4)
    me, other = os.getpid(), os.getppid()  # two live processes
    a, b = table.claim(me), table.claim(other)
    assert a is not None and b is not None and a != b
    assert table.fewest_elsewhere(a) == 0
    table.update(b, other, 5)
    assert table.fewest_elsewhere(a) == 5
    assert table.fewest_elsewhere(b) == 0
    table.release(other)
    assert table.fewest_elsewhere(a) is None  # no other live worker


def test_a_stale_or_dead_slot_does_not_count_and_is_reclaimed() -> None:
    table = balance.ConnectionTable(2)
    me = os.getpid()
    a = table.claim(me)
    assert a is not None
    table._write(1, 2**22 + 12345, 0, time.monotonic())  # a pid that does not exist
    assert table.fewest_elsewhere(a) is None
    table._write(1, os.getppid(), 0, time.monotonic() - balance.STALE - 1)  # alive but silent
    assert table.fewest_elsewhere(a) is None
    assert table.claim(os.getppid()) == 1  # the stale slot is free again
    assert table.claim(me) is None  # full: that worker simply runs unbalanced


# ----------------------------------------------------------------------------- the worker


class FakeConn:
    """What gthread's finish_request touches of a connection. A graceful close fails like one of a
    socket that was already closed (a TLS EOF seen in handle(), or a connection shed before its
    handshake); a plain close ignores that, as gunicorn's ``util.close`` does."""

    def __init__(self, close_raises: bool) -> None:
        self.close_raises = close_raises
        self.closes = 0

    def close(self, graceful: bool = False) -> None:
        self.closes += 1
        if graceful and self.close_raises:
            raise OSError(9, "Bad file descriptor")


def bare_worker(conns: int, table: balance.ConnectionTable | None = None, slot: int | None = None) -> Any:
    worker = balance.BalancedThreadWorker.__new__(balance.BalancedThreadWorker)
    worker.alive = True
    worker._slot = slot
    worker._nr_conns = conns
    worker._graceful_closer = closing.GracefulCloser()  # what init_process creates
    return worker


def done(result: Any) -> concurrent.futures.Future[Any]:
    fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut.set_result(result)
    return fut


def wait_for(check: Any) -> bool:
    return common.wait_until(check, 5.0, 0.01)


@pytest.mark.parametrize("close_raises", [False, True], ids=["clean-close", "close-raises"])
def test_a_finished_connection_is_counted_once(close_raises: bool) -> None:
    worker = bare_worker(3)
    conn = FakeConn(close_raises)
    worker.finish_request(conn, done(False))  # handle() said: close this connection
    assert worker.nr_conns == 2
    assert wait_for(lambda: conn.closes >= 1)  # closed, on the closer's thread
    assert worker.nr_conns == 2


def test_a_crashed_handler_is_still_one_connection() -> None:
    worker = bare_worker(1)
    fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fut.set_exception(RuntimeError("handler thread blew up"))
    conn = FakeConn(close_raises=True)
    worker.finish_request(conn, fut)  # gthread's own except branch: a plain close
    assert worker.nr_conns == 0 and conn.closes == 1


class LingeringConn(FakeConn):
    """A graceful close that lingers, as ``util.close_graceful`` does for up to 2 s on a silent peer."""

    def __init__(self, linger: float) -> None:
        super().__init__(close_raises=False)
        self.linger = linger
        self.graceful: list[bool] = []

    def close(self, graceful: bool = False) -> None:
        self.graceful.append(graceful)
        if graceful:
            time.sleep(self.linger)
        super().close(graceful)


def test_a_lingering_close_does_not_hold_the_main_loop() -> None:
    worker = bare_worker(4)
    conns = [LingeringConn(0.5) for _ in range(4)]
    started = time.monotonic()
    for conn in conns:
        worker.finish_request(conn, done(False))
    assert time.monotonic() - started < 0.2  # gthread's close would take 4 x 0.5 s here
    assert worker.nr_conns == 0
    assert wait_for(lambda: all(c.graceful == [True] for c in conns))


def test_the_closer_is_bounded() -> None:
    closer = closing.GracefulCloser(threads=1, backlog=2)
    slow = [LingeringConn(0.3) for _ in range(2)]
    for conn in slow:
        closer.close(conn)
    extra = LingeringConn(0.3)
    closer.close(extra)  # the backlog is full: closed at once, without the linger
    assert extra.graceful == [False] and closer.immediate == 1
    assert wait_for(lambda: closer.pending == 0)
    assert all(c.graceful == [True] for c in slow)
    closers = [t for t in threading.enumerate() if t.name.startswith("gpu-admission-close-")]
    assert closers and all(t.daemon for t in closers)  # an exiting worker does not wait for them


def test_the_published_count_follows_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    table = balance.ConnectionTable(4)
    monkeypatch.setattr(balance, "TABLE", table)
    slot = table.claim(os.getpid())
    other = table.claim(os.getppid())
    worker = bare_worker(0, table, slot)
    worker._max_connections = 1000
    for _ in range(3):
        worker.nr_conns += 1
    for _ in range(3):
        worker.finish_request(FakeConn(close_raises=True), done(False))
    assert worker.nr_conns == 0 and table._read(slot)[1] == 0
    # the rule: hold more than the least loaded other worker -> stop accepting; a tie accepts
    table.update(other, os.getppid(), 0)
    worker.nr_conns = 1
    assert not worker.nr_conns < worker.worker_connections
    worker.nr_conns = 0
    assert worker.nr_conns < worker.worker_connections


# ----------------------------------------------------------------------------- live


def established_per_worker(port: int, pids: set[int]) -> dict[int, int]:
    """ESTABLISHED server-side sockets on ``port`` held by each worker (Linux /proc)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "01":
                inodes.add(f[9])
    held: dict[int, int] = {}
    for pid in pids:
        n = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                n += 1
        held[pid] = n
    return held


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc to see which worker holds a socket")
def test_clients_hanging_up_abruptly_do_not_unbalance_the_workers(start_server: StartServer) -> None:
    """Regression: 30 clients that hang up in the middle of a review, as kube-apiserver does when a
    call times out (and wrk at the end of a run): half of them after half the request, half after the
    whole request but before the answer. gthread 27 counted each such connection twice, a worker's
    count went negative, the other worker stopped accepting, and every later connection went to one
    worker. Now 8 new keep-alive connections still split between the two workers."""
    server = start_server()  # 2 workers x 4 threads
    pids = wait_workers(server, 2)
    body = encode(review(vllm_pod("--tensor-parallel-size", "4"), uid="uid-abrupt"))
    request = (b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    for i in range(30):
        sock = server.tls_socket()
        sock.sendall(request[: len(request) // 2] if i % 2 else request)
        socket.socket(fileno=sock.detach()).close()  # gone, without a TLS close_notify
    time.sleep(1.5)  # the workers see the hang-ups and finish those connections
    kept = [server.connection() for _ in range(8)]
    try:
        for conn in kept:
            status, _doc, _ = request_json(conn, "POST", "/validate", body)
            assert status == 200
        time.sleep(0.3)
        held = established_per_worker(server.port, pids | live_workers(server))
        assert sum(held.values()) == 8, held
        assert min(held.values()) >= 2, f"connections per worker after abrupt hang-ups: {held}"
    finally:
        for conn in kept:
            conn.close()


def test_silent_clients_do_not_stall_the_worker(start_server: StartServer) -> None:
    """Regression: a connection the server closes (here: the client asked for ``Connection: close``)
    whose client stays connected without reading was closed by gthread on the worker's main thread
    with a 2 s linger each, and nothing else happened on that worker meanwhile (measured after an
    overload: 11.8 s without accepting or serving). One worker, 4 such clients: a new review is
    still answered at once."""
    server = start_server("--workers", "1", wait=False)
    wait_ready(server)
    wait_workers(server, 1)
    body = encode(review(vllm_pod("--tensor-parallel-size", "4"), uid="uid-silent"))
    request = (b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    silent = []
    try:
        for _ in range(4):
            sock = server.tls_socket()
            sock.sendall(request)  # and never read, never close (until the end of the test)
            silent.append(sock)
        time.sleep(0.3)  # the worker answers them and starts closing
        started = time.monotonic()
        conn = server.connection()
        try:
            status, _doc, _ = request_json(conn, "POST", "/validate", body)
        finally:
            conn.close()
        assert status == 200
        assert time.monotonic() - started < 1.0, "the worker was stalled by the silent clients' closes"
    finally:
        for sock in silent:
            sock.close()
