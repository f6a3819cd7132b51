"""Two listeners in one gunicorn server: the admission port and, opt-in, the scheduler extender's.

``serve --extender-bind HOST:PORT`` gives gunicorn a second bind address. Both listeners belong to
the same arbiter and the same workers, so the extender inherits everything the admission port has
(graceful shutdown, worker restarts, the balanced gthread worker, the policy and certificate reloads)
and costs no process, thread or port-juggling code of its own. Why not a separate server thread in each
worker or in the arbiter: it would need its own accept loop, TLS, keep-alive and shutdown handling, and
in the arbiter a request that blew up memory would take the whole server down, not one worker.

What differs per listener is decided here, from the listening socket a connection was accepted on
(gthread's ``TConn.server``, the listener's own address; never from anything the client sends):

- TLS: the extender port has its own context (its client CA, with certificates optional, so a caller
  without one gets an HTTP 401 rather than a failed handshake). gunicorn asks for a context through
  one ``ssl_context`` hook that does not say which listener it is for, so :func:`routed_worker` notes
  the listener of the connection its thread is handling and the hook reads :func:`current`;
- routing: every request is stamped with ``environ[LISTENER]`` and, on the extender port, whether the
  client presented a certificate the extender's CA verified (``environ[CLIENT_CERTIFICATE]``);
  :func:`dispatch` sends extender requests to the extender's Flask app and everything else to the
  admission app, so the admission port never serves ``/scheduler/*`` and the extender port serves
  nothing else.

The extender listener is the second bind address: gunicorn creates its listeners in the order of its
``bind`` list, and hands them to every worker in that order.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from webhook.server import probes

LISTENER = probes.LISTENER
"""WSGI environ key: :data:`ADMISSION` or :data:`EXTENDER` (or ``probes.PROBE``), the listener the
request came in on."""
CLIENT_CERTIFICATE = "gpu_admission.client_certificate"
"""WSGI environ key, on the extender listener: True when the client presented a certificate that the
extender's client CA verified (the handshake refuses one that does not verify)."""
ADMISSION, EXTENDER = "admission", "extender"

_current = threading.local()


def current() -> str | None:
    """The listener of the connection this thread is handling (None outside a routed worker)."""
    return getattr(_current, "listener", None)


def dispatch(admission: Callable[..., Any], extender: Callable[..., Any]) -> Callable[..., Any]:
    """One WSGI app for both listeners: extender requests to ``extender``, all others to ``admission``
    (an unstamped request is an admission request: the extender is only reachable on its own port)."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        app = extender if environ.get(LISTENER) == EXTENDER else admission
        return app(environ, start_response)

    return wsgi


def routed_worker(base: type) -> type:
    """A subclass of gthread worker class ``base`` whose second listener is the extender's."""

    class ListenerWorker(base):  # type: ignore[valid-type,misc]
        _extender_addresses: frozenset[Any] = frozenset()

        def init_process(self) -> None:
            self._extender_addresses = frozenset(s.getsockname() for s in self.sockets[1:2])
            super().init_process()

        def handle(self, conn: Any) -> Any:
            # every conn.init() (the TLS handshake) and request of this call runs on this thread
            _current.listener = EXTENDER if conn.server in self._extender_addresses else ADMISSION
            try:
                return super().handle(conn)
            finally:
                _current.listener = None

        def handle_request(self, req: Any, conn: Any) -> Any:
            if _current.listener == EXTENDER:
                peer = conn.sock.getpeercert() if hasattr(conn.sock, "getpeercert") else None
                _current.client_certificate = bool(peer)  # {} or None: none presented, or not verified
            try:
                return super().handle_request(req, conn)
            finally:
                _current.client_certificate = False

        def load_wsgi(self) -> None:
            super().load_wsgi()
            self.wsgi = _stamp(self.wsgi)

    ListenerWorker.__name__ = ListenerWorker.__qualname__ = f"Listener{base.__name__}"
    return ListenerWorker


def _stamp(app: Callable[..., Any]) -> Callable[..., Any]:
    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        listener = current() or ADMISSION
        environ[LISTENER] = listener
        if listener == EXTENDER:
            environ[CLIENT_CERTIFICATE] = getattr(_current, "client_certificate", False) is True
        return app(environ, start_response)

    return wsgi
