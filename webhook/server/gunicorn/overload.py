"""Overload protection of the gthread workers: load shedding, and no thread held by an idle connection.

1. A review that has waited longer than kube-apiserver waits is not judged (below).
2. A new connection that has finished its TLS handshake but sent no request yet waits in the poller,
   not in a thread (``_handshake_then_wait``): Go's HTTP client, kube-apiserver's, keeps connections
   it dialed but did not need idle for up to 90 s, and gthread held a thread on each, so a handful of
   them stopped the server.

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
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from typing import Any, Callable

QUEUED_AT = "gpu_admission.queued_at"
"""WSGI environ key: ``time.monotonic()`` minus the time the request waited for a thread."""

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


def _request_waiting(sock: Any, timeout: float = 0.05) -> bool:
    """Bytes of a request are buffered (decrypted, or on the socket) or arrive within ``timeout``."""
    try:
        if sock.pending():
            return True
        return bool(select.select([sock], [], [], timeout)[0])
    except (OSError, ValueError):
        return True  # let gthread's own handling meet the problem


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

    try:  # gthread internals the deferral below builds on (gunicorn 27); without them it only stamps
        from gunicorn.workers.gthread import _DEFER, DEFAULT_WORKER_DATA_TIMEOUT as _DATA_TIMEOUT
    except ImportError:  # pragma: no cover
        _DEFER, _DATA_TIMEOUT = None, 5.0
    base_class = load_class(base) if isinstance(base, str) else base

    class QueueAgeWorker(base_class):  # type: ignore[valid-type,misc]
        _stale_connections = 0
        _stale_logged = 0.0

        def enqueue_req(self, conn: Any) -> None:
            conn.gpu_admission_queued_at = time.monotonic()
            super().enqueue_req(conn)

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
            if _DEFER is not None and not conn.initialized and not conn.data_ready:
                deferred = self._handshake_then_wait(conn)
                if deferred is not None:
                    return deferred
            return super().handle(conn)

        def _handshake_then_wait(self, conn: Any) -> Any:
            """The TLS handshake of a new connection, then back to the poller if no request follows.

            gthread blocks a thread on a new connection until its first request arrives, after the
            handshake. Go's HTTP client (kube-apiserver's) dials a connection when it has no idle one
            and, if another becomes idle first, sends the request there and keeps the new one idle
            for up to 90 s: with 8 threads a worker, 8 such connections stop it (measured: 24 answers
            a second instead of 700 under a closed loop of 32 Go clients). A handshaken connection
            without a request waits in the poller instead, as a keep-alive connection does."""
            if not conn.wait_for_data(_DATA_TIMEOUT):
                return _DEFER  # not even a ClientHello yet: gthread's own deferral
            try:
                conn.sock.setblocking(True)
                conn.init()  # the handshake (gthread's handle() would do it next)
            except OSError as exc:  # ssl.SSLError included: refused (TLS floor, mutual TLS) or gone
                self.log.debug("TLS handshake failed: %r", exc)
                return False
            if _request_waiting(conn.sock):
                return None  # the usual case: the request came with the handshake; handle it now
            conn.data_ready = False
            return _DEFER

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
