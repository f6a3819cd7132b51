"""Health probes and metrics on a port and a thread of their own (``serve --probe-bind``, 8081).

On the admission port, ``/healthz``, ``/readyz`` and ``/metrics`` shared the admission threads: with
every thread judging reviews (or, before :mod:`webhook.server.gunicorn.reading`, held by slow
clients) the kubelet's probes timed out, so liveness restarted replicas and readiness emptied the
Service exactly when the webhook was busiest, and the scrape that would have shown why failed too.

So each worker also runs :class:`ProbeServer`: one thread with its own selector loop, plain HTTP,
``GET``/``HEAD`` of three paths only. It never waits for a client either: every connection is read
without blocking, must send its request head within ``deadline`` seconds, gets one answer and is
closed; past ``max_connections`` open at once the oldest is dropped, so a flood of idle connections
costs the flooder, not the kubelet. The answers come from the worker's own Flask app (the routes of
:mod:`webhook.server.app`, with ``environ[LISTENER] == PROBE``), so readiness is the worker's own
view (its policy, the certificate files), and ``/metrics`` is the multi-process sum of all workers.

The listening socket is created once in the master and inherited by every worker it forks: whichever
worker's thread accepts first answers (all of them serve the same policy, see
``webhook.server.live_settings``), the port is bound before any worker starts, and it stays bound
while a worker restarts. If every worker is wedged, nobody accepts, the probe times out and the
kubelet restarts the container, which is what liveness is for.

``/metrics`` is not served on the admission port any more: that port is open to every pod (kube-
apiserver's address cannot be selected portably), while this one is reachable only from the
monitoring namespace (the NetworkPolicy) and the node's kubelet (always allowed to reach its pods).
"""

from __future__ import annotations

import io
import logging
import selectors
import socket
import sys
import threading
import time
from typing import Any, Callable, Iterable

log = logging.getLogger("gpu_admission.server")

LISTENER = "gpu_admission.listener"
"""WSGI environ key naming the listener a request came in on (the same key as
``webhook.server.gunicorn.listeners.LISTENER``)."""
PROBE = "probe"
"""``environ[LISTENER]`` of a request on the probe port: only there does the app serve ``/metrics``."""
PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
DEFAULT_PORT = 8081

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}


class ProbeBindError(ValueError):
    """The probe port cannot be bound (in use, or not an address of this host)."""


def listen(bind: str, backlog: int = 64) -> socket.socket:
    """The probe port's listening socket (``HOST:PORT``; port 0 picks a free one), non-blocking."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ProbeBindError(f"--probe-bind {bind}: cannot listen there ({exc.strerror or exc}); pass "
                             f"--probe-bind with a free HOST:PORT, or 'off'") from exc
    except BaseException:
        sock.close()
        raise
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Conn:
    __slots__ = ("sock", "peer", "deadline", "received", "out", "sent")

    def __init__(self, sock: socket.socket, peer: Any, deadline: float) -> None:
        self.sock, self.peer, self.deadline = sock, peer, deadline
        self.received = b""
        self.out: bytes | None = None
        self.sent = 0


class ProbeServer:
    """The probe port's loop (module docstring). ``app``: the worker's WSGI app."""

    def __init__(self, sock: socket.socket, app: Callable[..., Any], *, deadline: float = 2.0,
                 max_connections: int = 64, max_head: int = 8192) -> None:
        self.sock, self.app = sock, app
        self.deadline, self.max_connections, self.max_head = deadline, max_connections, max_head
        self.port = sock.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._conns: dict[socket.socket, _Conn] = {}  # insertion order: the oldest first
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.serve_forever, name="gpu-admission-probes", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        self._selector.register(self.sock, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                try:
                    self._step()
                except Exception:  # noqa: BLE001 - the probe thread must outlive any one connection
                    log.exception("probe server: unexpected error (the loop goes on)")
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._selector.close()

    # ---- the loop ------------------------------------------------------------------------------
    def _step(self) -> None:
        now = time.monotonic()
        timeout = 0.5
        if self._conns:
            timeout = max(0.0, min(timeout, min(c.deadline for c in self._conns.values()) - now))
        for key, events in self._selector.select(timeout):
            if key.fileobj is self.sock:
                self._accept()
                continue
            conn = self._conns.get(key.fileobj)  # type: ignore[call-overload]
            if conn is None:
                continue
            if events & selectors.EVENT_READ and conn.out is None:
                self._read(conn)
            elif events & selectors.EVENT_WRITE and conn.out is not None:
                self._write(conn)
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            if conn.out is None and conn.received:
                self._answer(conn, 408, b'{"error":"request head not received in time"}')
            else:
                self._close(conn)  # silent, or an answer the client does not read

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return  # another worker's probe thread took it
            except OSError as exc:  # EMFILE and the like: say so, keep serving the open ones
                log.warning("probe server: accept failed: %s", exc)
                return
            sock.setblocking(False)
            if len(self._conns) >= self.max_connections:
                self._close(next(iter(self._conns.values())))  # the oldest goes, not the newcomer
            conn = _Conn(sock, peer, time.monotonic() + self.deadline)
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.received += data
        end = conn.received.find(b"\r\n\r\n")
        if end < 0:
            end = conn.received.find(b"\n\n")  # a bare-LF client (nc, some probes)
        if end < 0:
            if len(conn.received) > self.max_head:
                self._answer(conn, 431, b'{"error":"request head too large"}')
            return
        self._answer(conn, *self._dispatch(conn.received[:end]))

    def _write(self, conn: _Conn) -> None:
        assert conn.out is not None
        try:
            conn.sent += conn.sock.send(conn.out[conn.sent:])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if conn.sent >= len(conn.out):
            self._close(conn)

    def _answer(self, conn: _Conn, status: int, body: bytes, content_type: str = "application/json",
                head_only: bool = False) -> None:
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
        conn.out = head if head_only else head + body
        conn.deadline = time.monotonic() + self.deadline  # to be read by then
        try:
            self._selector.modify(conn.sock, selectors.EVENT_WRITE)
        except (KeyError, ValueError, OSError):
            self._close(conn)
            return
        self._write(conn)  # a probe's answer fits the socket buffer: usually sent and closed right here

    def _close(self, conn: _Conn) -> None:
        self._conns.pop(conn.sock, None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            conn.sock.close()
        except OSError:
            pass

    # ---- one request -----------------------------------------------------------------------------
    def _dispatch(self, head: bytes) -> tuple[Any, ...]:
        lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return 400, b'{"error":"not an HTTP/1.x request line"}'
        method, target, protocol = parts
        path, _, query = target.partition("?")
        if path not in PATHS:
            return 404, b'{"error":"the probe port serves /healthz, /readyz and /metrics only"}'
        if method not in ("GET", "HEAD"):
            return 405, b'{"error":"GET or HEAD only"}'
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers["HTTP_" + name.strip().upper().replace("-", "_")] = value.strip()
        environ = {
            "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query, "SCRIPT_NAME": "",
            "SERVER_NAME": "probes", "SERVER_PORT": str(self.port), "SERVER_PROTOCOL": protocol,
            "REMOTE_ADDR": "", "CONTENT_LENGTH": "", "CONTENT_TYPE": "",
            "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": True,
            "wsgi.run_once": False, LISTENER: PROBE, **headers}
        status, body, content_type = self._call(environ)
        return status, body, content_type, method == "HEAD"

    def _call(self, environ: dict[str, Any]) -> tuple[int, bytes, str]:
        started: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], _exc_info: Any = None) -> Any:
            started["status"], started["headers"] = status, headers
            return lambda _data: None

        try:
            result: Iterable[bytes] = self.app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception as exc:  # noqa: BLE001 - a probe gets a 500, the loop goes on
            log.exception("probe server: %s failed", environ["PATH_INFO"])
            return 500, f'{{"error":"internal error: {type(exc).__name__}"}}'.encode(), "application/json"
        status = int(str(started.get("status", "500")).split(" ", 1)[0])
        content_type = next((v for k, v in started.get("headers", []) if k.lower() == "content-type"),
                            "application/octet-stream")
        return status, body, content_type
