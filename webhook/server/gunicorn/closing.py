"""Graceful connection closes off a gthread worker's main loop.

gthread (27.0) closes a connection it is done with (a client that hung up, a handshake that failed, a
response sent with ``Connection: close``) in ``finish_request``, on the worker's one main thread, with
``util.close_graceful``: half-close, then read until the peer closes, for up to 2 s. The linger keeps
a response from being cut off by an RST when request bytes are still unread (a 413 for an oversized
body). But the main thread is the one that accepts connections and hands ready keep-alive
connections to the request threads: while it lingers, the worker does nothing else. After an
overload (``bench/reliability/overload.py``), with many clients that stay connected but silent,
this was measured holding a worker's main loop 2 s per connection, 11.8 s in a row, while reviews
sent to that worker waited.

:class:`GracefulCloser` does the same graceful close on a couple of background threads. It is
bounded: with more than ``backlog`` closes pending (an overload of hung-up clients), a connection is
closed at once without the linger, as anything else would hold sockets open without limit.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

THREADS = 2
BACKLOG = 64


class GracefulCloser:
    """Closes gthread connections (``TConn``) gracefully on background threads, at most ``backlog``
    at a time; beyond that, immediately. The threads start on first use, so each forked worker gets
    its own, and they are daemon threads: a worker that exits does not wait for a client to hang up
    (the kernel closes what is left)."""

    def __init__(self, threads: int = THREADS, backlog: int = BACKLOG) -> None:
        self.threads = threads
        self.backlog = backlog
        self.pending = 0
        self.immediate = 0  # closes done without the linger because the backlog was full
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._started = False

    def close(self, conn: Any) -> None:
        with self._lock:
            queued = self.pending < self.backlog
            if queued:
                self.pending += 1
            else:
                self.immediate += 1
            start = queued and not self._started
            self._started = self._started or start
        if not queued:
            _close_now(conn)
            return
        if start:
            for i in range(self.threads):
                threading.Thread(target=self._run, name=f"gpu-admission-close-{i}", daemon=True).start()
        self._queue.put(conn)

    def _run(self) -> None:
        while True:
            conn = self._queue.get()
            try:
                conn.close(graceful=True)
            except Exception:  # noqa: BLE001 - e.g. already closed (a TLS EOF seen in handle(), a
                _close_now(conn)  # connection shed before its handshake); this thread must outlive it
            finally:
                with self._lock:
                    self.pending -= 1


def _close_now(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing is best effort; the kernel closes what is left at exit
        pass
