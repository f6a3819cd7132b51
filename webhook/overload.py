"""Load shedding: a review that has waited longer than kube-apiserver waits is not judged.

kube-apiserver gives a webhook ``timeoutSeconds`` (3 s in the manifests) and then applies the
failurePolicy. gunicorn's gthread worker queues requests in its thread pool without a bound in time:
under overload a request can wait there for seconds, be judged after the apiserver has given up, and
so spend CPU on an answer nobody reads while fresher requests queue behind it, which makes the
backlog grow for as long as the overload lasts and keeps latency high after it ends.

:func:`stamped_worker` makes the worker measure how long each request waited in the thread pool's
queue (from its connection being accepted, or its keep-alive connection becoming readable, to a thread
taking it up) and hands the WSGI app ``environ["gpu_admission.queued_at"]``, a ``time.monotonic()``
instant that far in the past (plus the little time since the thread took it). The app (``webhook.app``) answers
a review that waited longer than ``max_queue_age`` with HTTP 503 at once (microseconds, no parsing),
so kube-apiserver applies the failurePolicy, which is the correct outcome for a request it has
abandoned or is about to, and the worker gets to the fresh requests behind it. The default, 2.5 s,
leaves half a second of the 3 s for judging and the way back.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

QUEUED_AT = "gpu_admission.queued_at"
"""WSGI environ key: ``time.monotonic()`` minus the time the request waited for a thread."""
DEFAULT_MAX_QUEUE_AGE = 2.5
"""Seconds; kube-apiserver's timeoutSeconds for this webhook is 3."""

_current = threading.local()


def _stamp(app: Callable[..., Any]) -> Callable[..., Any]:
    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        queued_at = getattr(_current, "queued_at", None)
        if queued_at is not None:
            environ[QUEUED_AT] = queued_at
        return app(environ, start_response)

    return wsgi


def stamped_worker(base: Any) -> type:
    """A subclass of gunicorn worker class ``base`` (a class or gunicorn's dotted name of a gthread
    worker) that stamps every request with the moment it was queued for a thread."""
    from gunicorn.util import load_class

    base_class = load_class(base) if isinstance(base, str) else base

    class QueueAgeWorker(base_class):  # type: ignore[valid-type,misc]
        def enqueue_req(self, conn: Any) -> None:
            conn.gpu_admission_queued_at = time.monotonic()
            super().enqueue_req(conn)

        def handle(self, conn: Any) -> Any:
            conn.gpu_admission_dequeued_at = time.monotonic()
            return super().handle(conn)

        def handle_request(self, req: Any, conn: Any) -> Any:
            # The wait is the time in the thread pool's queue only: a new connection's TLS handshake and
            # the client's pause before it writes its request (Go's transport may dial a connection it
            # then keeps idle) are not waiting behind other reviews
            queued = getattr(conn, "gpu_admission_queued_at", None)
            dequeued = getattr(conn, "gpu_admission_dequeued_at", None)
            waited = dequeued - queued if queued is not None and dequeued is not None else None
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
