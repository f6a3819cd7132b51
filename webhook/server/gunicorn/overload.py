"""Overload protection of the gthread workers: load shedding, and no thread held by an idle connection.

1. A review that has waited longer than kube-apiserver waits is not judged (below).
2. (A connection that has sent nothing, or only part of a request, waits in the poller, not in a
   thread: :mod:`webhook.server.gunicorn.reading`.)
3. A new connection waits behind the work already queued, and is closed before its handshake once it
   has waited too long (below, "Accepting").

kube-apiserver gives a webhook ``timeoutSeconds`` (3 s in the manifests) and then applies the
failurePolicy. gunicorn's gthread worker queues requests in its thread pool without a bound in time:
under overload a request can wait there for seconds, be judged after the apiserver has given up, and
so spend CPU on an answer nobody reads while fresher requests queue behind it, which makes the
backlog grow for as long as the overload lasts and keeps latency high after it ends.

:func:`stamped_worker` makes the worker measure how long each request waited before a thread took it
up: in the thread pool's queue (from its connection being accepted, or its keep-alive connection
becoming readable) and, from the kernel's ``TCP_INFO``, in the listen backlog or the socket buffer
before that. It hands the WSGI app ``environ["gpu_admission.queued_at"]``, a ``time.monotonic()``
instant that far in the past (plus the little time since the thread took it). The app (``webhook.server.app``) answers
a review that waited longer than ``max_queue_age`` with HTTP 503 at once (microseconds, no parsing),
so kube-apiserver applies the failurePolicy, which is the correct outcome for a request it has
abandoned or is about to, and the worker gets to the fresh requests behind it.

The default, 1 s, is measured (RELIABILITY.md, "Overload"): when the CPU is saturated a review that
leaves the queue still needs up to a second or two to be judged and answered (16 threads share two
workers' GILs) and the client has spent part of its 3 s on the connection, so with a 2.5 s limit most
judged reviews arrived after kube-apiserver had given up; with 1 s they arrive in time. An unloaded
server queues reviews for milliseconds, so the limit only ever acts under overload.

Accepting. A new connection is work before it is a request: its TLS handshake is the dearest step a
connection costs. While threads blocked on a connection until its request came, they bounded that
work by themselves (16 at a time), and a connection that waited longer than ``max_queue_age`` for a
thread was closed before its handshake, at no cost. Since handshakes advance without a thread
waiting (:mod:`~webhook.server.gunicorn.reading`), nothing bounded them: at 3x the measured capacity
the workers handshook every connection Go's client dialled, the callers waited out their 3 s instead
of being refused, and the connections held memory (RELIABILITY.md, "Overload", 4 Dec). So a new
connection goes to the threads only while fewer than :data:`TASKS_PER_THREAD` tasks per thread are
queued or running; otherwise it waits, oldest first, behind that work (requests on established
connections, and handshakes already begun, go first), and one that has waited past
``max_queue_age`` is closed before its handshake: the fast failure kube-apiserver acts on. A slow
or stalled client takes no task: its bytes are read in the poller.
"""

from __future__ import annotations

import collections
import socket
import struct
import threading
import time
from typing import Any, Callable

QUEUED_AT = "gpu_admission.queued_at"
"""WSGI environ key: ``time.monotonic()`` minus the time the request waited for a thread."""

TASKS_PER_THREAD = 2
"""A new connection goes to the threads only while fewer than this many tasks per thread are queued or
running (module docstring, "Accepting"): one running and one waiting each, a few milliseconds of work."""

_current = threading.local()
_TCP_INFO = getattr(socket, "TCP_INFO", None)
_LAST_DATA_RECV = struct.Struct("=I")
_LAST_DATA_RECV_OFFSET = 52
"""``tcpi_last_data_recv`` (milliseconds since the last data arrived) in Linux's ``struct tcp_info``."""


def kernel_wait(sock: Any) -> float | None:
    """Seconds since data last arrived on ``sock``, from the kernel (Linux ``TCP_INFO``), or None.

    For a connection taken from the listen backlog that is the time since its TLS ClientHello came,
    so it counts the wait in the kernel's accept queue, which no stamp taken in the worker can see;
    for a keep-alive connection, the time since its request's bytes came."""
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 104)
    except (OSError, ValueError, AttributeError):
        return None
    if len(info) < _LAST_DATA_RECV_OFFSET + 4:
        return None
    return _LAST_DATA_RECV.unpack_from(info, _LAST_DATA_RECV_OFFSET)[0] / 1000.0


def _stamp(app: Callable[..., Any]) -> Callable[..., Any]:
    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        queued_at = getattr(_current, "queued_at", None)
        if queued_at is not None:
            environ[QUEUED_AT] = queued_at
        return app(environ, start_response)

    return wsgi


def stamped_worker(base: Any, max_queue_age: float | None = None) -> type:
    """A subclass of gunicorn worker class ``base`` (a class or gunicorn's dotted name of a gthread
    worker) that stamps every request with the time it waited in the queue for a thread.

    With ``max_queue_age``, a *new* connection that waited longer than that is closed before its TLS
    handshake: its client has given up or is about to, and the handshake (the dearest part of a new
    connection) would be spent for nothing, which under overload is what keeps a server from catching
    up. (A request on an established connection is refused by the app with a 503 instead.)"""
    from gunicorn.util import load_class

    base_class = load_class(base) if isinstance(base, str) else base

    class QueueAgeWorker(base_class):  # type: ignore[valid-type,misc]
        _stale_connections = 0
        _stale_logged = 0.0

        _tasks = 0
        _new: collections.deque[Any]

        def init_process(self) -> None:
            self._new = collections.deque()
            super().init_process()

        def enqueue_req(self, conn: Any) -> None:
            conn.gpu_admission_queued_at = time.monotonic()
            if (not conn.initialized and not getattr(conn, "gpu_admission_started", False)
                    and self._tasks >= TASKS_PER_THREAD * self.cfg.threads):
                self._new.append(conn)  # behind the work already queued (module docstring, "Accepting")
                return
            self._submit(conn)

        def _submit(self, conn: Any) -> None:
            conn.gpu_admission_started = True
            self._tasks += 1  # enqueue_req and finish_request both run on the worker's main loop
            super().enqueue_req(conn)

        def finish_request(self, conn: Any, fs: Any) -> None:
            self._tasks -= 1
            super().finish_request(conn, fs)
            self._admit_new()

        def _admit_new(self) -> None:
            """New connections, oldest first, to the threads while they have room; one that has waited
            past ``max_queue_age`` is closed before its handshake (its caller is about to give up)."""
            if not self._new:
                return
            # a stopping worker hands every waiting connection to its threads: gthread lets the tasks
            # it has submitted finish within graceful_timeout, and a connection left here would be
            # dropped unanswered at exit (kube-apiserver does not retry a fresh connection)
            limit = TASKS_PER_THREAD * self.cfg.threads if self.alive else float("inf")
            now = time.monotonic()
            while self._new:
                conn = self._new[0]
                waited = now - conn.gpu_admission_queued_at
                in_kernel = kernel_wait(conn.sock)
                if in_kernel is not None and in_kernel > waited:
                    waited = in_kernel
                if max_queue_age and waited > max_queue_age:
                    self._new.popleft()
                    self.nr_conns -= 1
                    self._close_stale(conn, waited)
                elif self._tasks < limit:
                    self._new.popleft()
                    self._submit(conn)
                else:
                    return

        def wait_for_and_dispatch_events(self, timeout: Any) -> None:
            if self._new:  # wake up to close the ones that waited too long
                timeout = min(timeout, 0.1)
            super().wait_for_and_dispatch_events(timeout)
            self._admit_new()

        def handle(self, conn: Any) -> Any:
            now = time.monotonic()
            queued = getattr(conn, "gpu_admission_queued_at", None)
            waited = now - queued if queued is not None else 0.0
            in_kernel = kernel_wait(conn.sock)
            if in_kernel is not None and in_kernel > waited:
                waited = in_kernel  # the accept queue (or the socket buffer) held it before we saw it
            conn.gpu_admission_waited = waited
            if max_queue_age and not conn.initialized and waited > max_queue_age:
                self._close_stale(conn, waited)
                return False  # gthread forgets the connection (counted once: balance.finish_request)
            return super().handle(conn)

        def _close_stale(self, conn: Any, waited: float) -> None:
            try:
                conn.sock.close()
            except OSError:
                pass
            self._stale_connections += 1
            now = time.monotonic()
            if now - self._stale_logged >= 1.0:  # one line a second at most
                self.log.warning("overloaded: %d new connections closed before their TLS handshake "
                                 "(waited %.1f s for a thread, limit %g s)", self._stale_connections, waited,
                                 max_queue_age)
                self._stale_connections, self._stale_logged = 0, now

        def handle_request(self, req: Any, conn: Any) -> Any:
            # The wait is the time in the thread pool's queue only: a new connection's TLS handshake and
            # the client's pause before it writes its request (Go's transport may dial a connection it
            # then keeps idle) are not waiting behind other reviews
            waited = getattr(conn, "gpu_admission_waited", None)
            _current.queued_at = time.monotonic() - waited if waited is not None else None
            try:
                return super().handle_request(req, conn)
            finally:
                _current.queued_at = None

        def load_wsgi(self) -> None:
            super().load_wsgi()
            self.wsgi = _stamp(self.wsgi)

    QueueAgeWorker.__name__ = QueueAgeWorker.__qualname__ = f"QueueAge{base_class.__name__}"
    return QueueAgeWorker
