"""Graceful connection closes off a gthread worker's main loop.

gthread (27.0) closes a connection it is done with (a client that hung up, a handshake that failed, a
response sent with ``Connection: close``) in ``finish_request``, on the worker's one main thread, with
``util.close_graceful``: half-close, then read until the peer closes, for up to 2 s. The linger keeps
a response from being cut off by an RST when request bytes are still unread (a 413 for an oversized
body). But the main thread is the one that accepts connections and hands ready keep-alive
connections to the request threads: while it lingers, the worker does nothing else. After an
overload, with many clients that stay connected but silent, this was measured stopping a worker for
2 s per connection, 11.8 s in a row, and every review sent to it in that time failed (the "stall"
in the recovery phase of ``bench/reliability/overload.py``).

:class:`GracefulCloser` does the same graceful close on a couple of background threads. It is
bounded: with more than ``backlog`` closes pending (an overload of hung-up clients), a connection is
closed at once without the linger, as anything else would hold sockets open without limit.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

THREADS = 2
BACKLOG = 64


class GracefulCloser:
    """Closes gthread connections (``TConn``) gracefully on background threads, at most ``backlog``
    at a time; beyond that, immediately. Created lazily, so each forked worker gets its own threads."""

    def __init__(self, threads: int = THREADS, backlog: int = BACKLOG) -> None:
        self.threads = threads
        self.backlog = backlog
        self.pending = 0
        self.immediate = 0  # closes done without the linger because the backlog was full
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def close(self, conn: Any) -> None:
        with self._lock:
            queued = self.pending < self.backlog
            if queued:
                self.pending += 1
            else:
                self.immediate += 1
        if not queued:
            _close_now(conn)
            return
        try:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="gpu-admission-close")
            self._pool.submit(self._graceful, conn)
        except RuntimeError:  # the pool is shutting down (the worker is exiting)
            self._done()
            _close_now(conn)

    def _graceful(self, conn: Any) -> None:
        try:
            conn.close(graceful=True)
        except OSError:  # already closed (a TLS EOF seen in handle(), a connection shed before its handshake)
            _close_now(conn)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self.pending -= 1


def _close_now(conn: Any) -> None:
    try:
        conn.close()
    except OSError:
        pass
