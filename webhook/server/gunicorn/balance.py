"""Keep-alive connections spread evenly over gunicorn's gthread workers.

kube-apiserver keeps its connections to a webhook open (HTTP/1.1 keep-alive) and reuses them for
minutes. gunicorn's gthread workers all poll the one listening socket and a connection stays with the
worker that accepted it, so when a burst of connections opens, one worker can take all of them and
serve every review on one core while the other workers sit idle (measured: 7 s of CPU against 0 s
over 10 s at 8 connections; throughput no higher than at 1 connection). The admission work is
CPU-bound Python, so that halves the capacity of a 2-worker pod exactly when it is busy.

:class:`BalancedThreadWorker` is gthread with one rule: a worker does not accept while it holds more
connections than the least loaded live worker (ties accept, so some worker always accepts). The
counts live in a small table of shared memory created in the master before it forks
(:func:`install`), one slot per worker: pid, open connections, heartbeat. A slot whose worker died
(released by the master's ``child_exit`` hook, or gone stale) never holds the others back. A worker
that is not accepting re-reads the table every ``RECHECK`` seconds, so a connection never waits for
long in the backlog. Without a table (one worker, or a worker built outside ``serve``) it is plain
gthread.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import struct
import time
from typing import Any

from webhook.server.gunicorn import compat
from webhook.server.gunicorn.closing import GracefulCloser

ThreadWorker = compat.ThreadWorker

_DEFER = compat.DEFER  # gthread's "no request yet, back to the poller" result

_SLOT = struct.Struct("=qqd")  # pid, open connections, heartbeat (time.monotonic, system-wide)
STALE = 3.0
"""Seconds without a heartbeat after which a slot no longer counts (a worker's loop beats every <= 1 s)."""
RECHECK = 0.05
"""Poll timeout of a worker that is not accepting, so it resumes as soon as the others catch up."""


class ConnectionTable:
    """Per-worker open-connection counts in anonymous shared memory (inherited through fork)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._mem = mmap.mmap(-1, _SLOT.size * slots)  # MAP_SHARED | MAP_ANONYMOUS
        self._claim = multiprocessing.Lock()

    def _read(self, i: int) -> tuple[int, int, float]:
        return _SLOT.unpack_from(self._mem, i * _SLOT.size)

    def _write(self, i: int, pid: int, conns: int, beat: float) -> None:
        _SLOT.pack_into(self._mem, i * _SLOT.size, pid, conns, beat)

    def claim(self, pid: int) -> int | None:
        """A free slot for worker ``pid`` (None when the table is full: that worker is unbalanced)."""
        with self._claim:
            now = time.monotonic()
            for i in range(self.slots):
                owner, _, beat = self._read(i)
                if owner == 0 or now - beat > STALE or not _alive(owner):
                    self._write(i, pid, 0, now)
                    return i
        return None

    def update(self, slot: int, pid: int, conns: int) -> None:
        self._write(slot, pid, conns, time.monotonic())

    def release(self, pid: int) -> None:
        """Master side (``child_exit``): forget a worker that has exited."""
        for i in range(self.slots):
            if self._read(i)[0] == pid:
                self._write(i, 0, 0, 0.0)

    def fewest_elsewhere(self, slot: int) -> int | None:
        """The fewest connections any other live worker holds (None: no other live worker)."""
        now = time.monotonic()
        fewest = None
        for i in range(self.slots):
            if i == slot:
                continue
            owner, conns, beat = self._read(i)
            if owner and now - beat <= STALE and _alive(owner):
                fewest = conns if fewest is None else min(fewest, conns)
        return fewest


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


TABLE: ConnectionTable | None = None
"""Set in the master by :func:`install` before workers are forked."""


def install(workers: int) -> None:
    """Create the shared table in the master (room for replacement workers while old ones exit)."""
    global TABLE
    TABLE = ConnectionTable(2 * workers + 2) if workers > 1 else None


def child_exit(pid: int) -> None:
    if TABLE is not None:
        TABLE.release(pid)


class BalancedThreadWorker(ThreadWorker):
    """gthread that leaves new connections to a less loaded worker (see the module docstring)."""

    _slot: int | None = None
    _graceful_closer: GracefulCloser
    _nr_conns: int = 0
    _max_connections: int = 1000

    def init_process(self) -> None:
        self._graceful_closer = GracefulCloser()  # in the forked worker: its threads are this worker's
        if TABLE is not None:
            self._slot = TABLE.claim(os.getpid())
        super().init_process()

    # gthread keeps its count in ``nr_conns`` and decides whether to accept on every turn of its
    # loop with ``nr_conns < worker_connections``: publish the one, make the other the balance rule
    @property  # type: ignore[override]
    def nr_conns(self) -> int:
        return self._nr_conns

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        self._nr_conns = value
        if self._slot is not None and TABLE is not None:
            TABLE.update(self._slot, os.getpid(), value)

    @property  # type: ignore[override]
    def worker_connections(self) -> int:
        limit = self._max_connections
        if self._slot is None or TABLE is None:
            return limit
        TABLE.update(self._slot, os.getpid(), self._nr_conns)  # heartbeat, every turn of the loop
        fewest = TABLE.fewest_elsewhere(self._slot)
        if fewest is not None and self._nr_conns > fewest:
            return self._nr_conns  # -> nr_conns < worker_connections is False: stop accepting
        return limit

    @worker_connections.setter
    def worker_connections(self, value: int) -> None:
        self._max_connections = value

    def finish_request(self, conn: Any, fs: Any) -> None:
        """gthread's, except that a connection to close is counted once and closed off the main loop.

        A connection ``handle`` is done with (a falsy result, or a cancelled call) is what gthread
        would close. gthread (27.0) lowers ``nr_conns`` and then closes it gracefully on this thread;
        when that close raises because the socket is already closed, its ``except`` branch lowers the
        count a second time. Clients that hung up mid-request (kube-apiserver at its timeout, wrk at
        the end of a run) then drove the count negative, the other worker held "more than the fewest"
        forever and stopped accepting, and one worker served everything (measured: after five 10 s
        wrk runs at 8 connections, 500 instead of 1,000 req/s). Here the count is lowered once and
        :class:`webhook.server.gunicorn.closing.GracefulCloser` closes the connection, without lingering up to 2 s on
        this thread (see that module). Keep-alive, deferral and a crashed handler stay gthread's."""
        cancelled = fs.cancelled()
        if cancelled or fs.exception() is None:
            result = False if cancelled else fs.result()
            if not result and result is not _DEFER:
                self.nr_conns -= 1
                self._graceful_closer.close(conn)
                return
        super().finish_request(conn, fs)

    def wait_for_and_dispatch_events(self, timeout: Any) -> None:
        if not self._accepting and self._slot is not None:
            timeout = min(timeout, RECHECK)
        super().wait_for_and_dispatch_events(timeout)
