"""Every piece of gunicorn's gthread worker that this package builds on, in one place.

The workers in this sub-package (``balance``, ``reading``, ``overload``, ``listeners``) extend
gunicorn's ``gthread`` worker, whose internals are not a public API. What they use is named here, and
:func:`check` says whether the installed gunicorn still has it (``tests/server/test_gunicorn_compat.py``
runs it against the installed version, so an upgrade that moves a piece fails one test with its
name, not a live server in odd ways). setup.cfg pins the major version for the same reason.

Used, by whom:
- ``DEFER``: gthread's "no request yet, back to the poller" result of ``handle`` (reading, balance);
- ``ThreadWorker`` methods overridden: ``handle``, ``handle_request``, ``finish_request``,
  ``enqueue_req``, ``murder_pending``, ``wait_for_and_dispatch_events``, ``init_process``,
  ``load_wsgi``, ``on_pending_socket_readable`` (the poller's callback of a deferred connection:
  reading reads a started request there, and registers it for a connection a stopping worker
  keeps); attributes read or set: ``nr_conns``,
  ``worker_connections``, ``pending_conns``, ``poller``, ``sockets``, ``_accepting``, ``alive``;
- ``STOP_KEEPALIVE_LINGER``: how long a stopping worker keeps an idle connection (reading);
- ``ThreadWorker.handle`` makes the connection's socket blocking before it parses and answers (reading
  hands it a non-blocking socket with the request already buffered, and does not pay that call twice);
- ``TConn`` attributes: ``sock``, ``cfg``, ``client``, ``server``, ``parser``, ``initialized``,
  ``data_ready``, ``timeout``; the parser's ``unreader.buf`` and ``unreader.take_buffered``;
- ``gunicorn.sock.ssl_wrap_socket`` (the listener's context through the ``ssl_context`` hook) and
  ``gunicorn.http.get_parser``.
"""

from __future__ import annotations

import inspect
import select
import selectors
import ssl
from typing import Any

from gunicorn import http as _http
from gunicorn import sock as _sock
from gunicorn.workers import gthread as _gthread

DEFER: Any = getattr(_gthread, "_DEFER", None)
STOP_LINGER: float = getattr(_gthread, "STOP_KEEPALIVE_LINGER", 2.0)
"""Seconds a stopping gthread worker keeps an idle connection (gthread 27's ``STOP_KEEPALIVE_LINGER``)."""
EVENT_READ = selectors.EVENT_READ
ThreadWorker = _gthread.ThreadWorker
ssl_wrap_socket = _sock.ssl_wrap_socket

OVERRIDDEN = ("handle", "handle_request", "finish_request", "enqueue_req", "murder_pending",
              "wait_for_and_dispatch_events", "init_process", "load_wsgi", "murder_keepalived",
              "on_pending_socket_readable")
TCONN_ATTRIBUTES = ("sock", "cfg", "client", "server", "parser", "initialized", "data_ready", "timeout")


def readable_now(sock: Any) -> bool:
    """Bytes are waiting on ``sock`` (never blocks)."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True  # let the read meet the problem


def is_open(sock: Any) -> bool:
    try:
        return sock.fileno() != -1
    except (OSError, ValueError):
        return False


def start_http1(conn: Any) -> None:
    """What gthread's ``TConn.init`` does after a TLS handshake, for a handshake done without blocking:
    an HTTP/1.1 parser over the TLS socket. HTTP/2 is not offered (``http_protocols`` is gunicorn's
    default, ``h1``), so a peer that negotiated it anyway is refused."""
    if _sock.is_http2_negotiated(conn.sock):
        raise ssl.SSLError("HTTP/2 is not served")
    conn.initialized = True
    conn.parser = _http.get_parser(conn.cfg, conn.sock, conn.client)


def check() -> list[str]:
    """What this package needs from gthread and the installed gunicorn lacks (empty: all there)."""
    missing = []
    if DEFER is None:
        missing.append("gunicorn.workers.gthread._DEFER")
    if not isinstance(getattr(_gthread, "STOP_KEEPALIVE_LINGER", None), (int, float)):
        missing.append("gunicorn.workers.gthread.STOP_KEEPALIVE_LINGER")
    if "setblocking(True)" not in _source(ThreadWorker.handle):
        missing.append("ThreadWorker.handle: conn.sock.setblocking(True) before parsing")
    for name in OVERRIDDEN:
        if not callable(getattr(ThreadWorker, name, None)):
            missing.append(f"ThreadWorker.{name}")
    conn = _gthread.TConn.__new__(_gthread.TConn)
    try:
        _gthread.TConn.__init__(conn, _Cfg(), _FakeSock(), ("127.0.0.1", 1), ("127.0.0.1", 2))
    except Exception as exc:  # noqa: BLE001 - reported as missing
        missing.append(f"TConn(cfg, sock, client, server): {exc!r}")
    else:
        missing += [f"TConn.{a}" for a in TCONN_ATTRIBUTES if not hasattr(conn, a)]
    for name, owner in (("get_parser", _http), ("ssl_wrap_socket", _sock), ("is_http2_negotiated", _sock)):
        if not callable(getattr(owner, name, None)):
            missing.append(f"{owner.__name__}.{name}")
    from gunicorn.http.unreader import Unreader

    if not callable(getattr(Unreader, "take_buffered", None)):
        missing.append("Unreader.take_buffered")
    return missing


def _source(func: Any) -> str:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return ""


class _Cfg:
    keepalive = 2


class _FakeSock:
    def setblocking(self, _flag: bool) -> None:
        pass
