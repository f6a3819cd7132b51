"""A request is read whole by the worker's poller, within a deadline, before a thread takes it up.

gthread gives a connection to one of its threads as soon as the connection is readable, and the
thread then blocks until the whole request has come: the TLS handshake, the header block, the body.
Sixteen connections that each sent two bytes (``PO``) therefore held every thread of a two-worker
pod, and every review, probe and scrape timed out for as long as they were held; slowloris at one
byte a second did the same. A read timeout per ``recv`` does not help against one byte a second, and
a deadline enforced *inside* the thread still lets 16 attackers in 5 s take the threads for 5 s each.

So no thread waits for a client at all. :func:`reading_worker` makes the thread that takes a readable
connection do only what needs no waiting: advance the TLS handshake without blocking, read what has
arrived, and check whether a whole request is now buffered (the header block and, by its
``Content-Length``, the body). If not, the connection goes back to the poller (gthread's own
"deferred" state, ``compat.DEFER``) and the thread is free again within microseconds. From then on
the bytes of that connection are read where they arrive, in the poller's callback on the worker's
main loop (:meth:`on_pending_socket_readable`), and a thread is given the connection again only once
its request is whole: a slow client costs the threads nothing after its handshake. A request
starts its clock at its first byte (for a new connection, the first byte of its ClientHello); a
connection whose request is not whole ``read_deadline`` seconds later is closed. Idle connections
(nothing sent yet, or kept alive between requests) wait in the poller with gthread's keep-alive
timeout, as before, and hold no thread.

Buffered partial requests of a worker are bounded in total (``budget``): a connection whose bytes
would pass it is closed, so 1,000 connections that each send most of a 4 MiB body cannot take the
worker's memory.

What is handed to gthread afterwards is unchanged: the bytes go into the connection's parser
buffer, and gthread's ``handle`` parses and answers the request from memory. A body larger than the
app's limit is not waited for: its headers suffice for the app's 413.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import re
import ssl
import threading
import time
from typing import Any

from webhook.server.gunicorn import compat

log = logging.getLogger("gpu_admission.server")

DEFAULT_READ_DEADLINE = 5.0
"""Seconds from a request's first byte until it must be whole (headers and body)."""
HEADER_LIMIT = 64 * 1024
"""A header block still open after this many bytes is handed to gunicorn's parser, which refuses it
(its own limits: 4,094-byte request line, 100 fields of 8,190 bytes)."""

_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*([0-9]+)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
_CHUNKED = re.compile(rb"^transfer-encoding:[^\r\n]*chunked", re.IGNORECASE | re.MULTILINE)
_EXPECT_CONTINUE = re.compile(rb"^expect:[ \t]*100-continue", re.IGNORECASE | re.MULTILINE)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

READY, WAIT, CLOSED = "ready", "wait", "closed"


class _Pending:
    """What the poller holds of a connection's request so far (an attribute of the gthread TConn)."""

    __slots__ = ("started", "chunks", "size", "header_end", "need", "continued")

    def __init__(self, started: float) -> None:
        self.started = started
        self.chunks: list[bytes] = []
        self.size = 0
        self.header_end: int | None = None
        self.need: int | None = None  # total bytes of a whole request (None: not known yet)
        self.continued = False


def request_complete(data: bytes, max_body: int) -> tuple[bool, int | None, bool]:
    """(whole, bytes a whole request needs, client waits for 100 Continue) for a request's first bytes.

    Whole also means "hand it to gunicorn now" when waiting cannot help: a header block past
    :data:`HEADER_LIMIT` (gunicorn refuses it) or a declared body past ``max_body`` (the app answers
    413 from the headers)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return len(data) > HEADER_LIMIT, None, False
    head = data[:end + 2]
    body_start = end + 4
    length = _CONTENT_LENGTH.search(head)
    if length is not None:
        declared = int(length.group(1))
        if declared > max_body:
            return True, body_start, False
        need = body_start + declared
        return len(data) >= need, need, _EXPECT_CONTINUE.search(head) is not None
    if _CHUNKED.search(head):
        # the last chunk is "0" CRLF, then the (empty) trailer section's CRLF; a body past the limit
        # is handed over for the app's 413
        whole = data.endswith(b"\r\n0\r\n\r\n") or len(data) - body_start > max_body
        return whole, None, _EXPECT_CONTINUE.search(head) is not None
    return True, body_start, False


def _count(reason: str) -> None:
    from webhook.server.metrics import CONNECTIONS_CLOSED  # imported late: see application.MULTIPROC_ENV

    CONNECTIONS_CLOSED.labels(reason=reason).inc()


def reading_worker(base: type, *, read_deadline: float = DEFAULT_READ_DEADLINE,
                   max_body: int = 4 * 1024 * 1024, budget: int | None = None) -> type:
    """A subclass of gthread worker class ``base`` that reads requests whole in its poller (module
    docstring). ``budget``: bytes of partial requests the worker buffers at most (default: 16 bodies
    of ``max_body``)."""
    limit = budget if budget is not None else 16 * max_body

    class ReadingWorker(base):  # type: ignore[valid-type,misc]
        def init_process(self) -> None:
            self._buffered = 0
            self._buffer_lock = threading.Lock()
            self._holding: set[Any] = set()
            self._deadlines: list[tuple[float, int, Any]] = []
            self._order = itertools.count()
            self._expired = 0
            self._expired_logged = 0.0
            super().init_process()

        # ---- on a request thread: never waits -------------------------------------------------
        def handle(self, conn: Any) -> Any:
            if getattr(conn, "gpu_admission_ready", False):  # read whole in the poller's callback
                conn.gpu_admission_ready = False
                self._release(conn)
                return super().handle(conn)
            pending: _Pending | None = getattr(conn, "gpu_admission_pending", None)
            if pending is not None and time.monotonic() - pending.started > read_deadline:
                self._release(conn)
                self._note_expired(conn, pending)
                return False
            try:
                state = self._advance(conn)
            except (OSError, ValueError) as exc:  # ssl.SSLError included: refused handshake, reset, ...
                log.debug("connection closed while reading a request: %r", exc)
                state = CLOSED
            if state == WAIT:
                conn.data_ready = False
                return compat.DEFER
            self._release(conn)
            if state == CLOSED:
                return False
            return super().handle(conn)  # gthread's handle makes the socket blocking again (compat.check)

        def _advance(self, conn: Any) -> str:
            if not conn.initialized:
                if not self._handshake(conn):
                    return WAIT
            pending: _Pending | None = getattr(conn, "gpu_admission_pending", None)
            if pending is None:
                leftover = conn.parser.unreader.take_buffered()  # read ahead behind the last request
                pending = _Pending(time.monotonic())
                if leftover:
                    pending.chunks.append(leftover)
                    pending.size = len(leftover)
            eof, whole, expects = self._read_available(conn, pending)
            if pending.size == 0:
                # idle: kept alive, or handshaken and silent (Go's transport may keep a connection it
                # dialed unused for 90 s): no request has started, the poller's keep-alive timeout applies
                conn.gpu_admission_pending = None
                return CLOSED if eof else WAIT
            conn.gpu_admission_pending = pending
            if whole:
                return self._hand_over(conn, pending)
            if expects and not pending.continued:
                pending.continued = True
                conn.sock.sendall(_CONTINUE)  # 25 bytes into an empty send buffer: no wait
            if eof:
                return CLOSED  # the client hung up mid-request
            self._remember_deadline(conn, pending)
            return WAIT

        def _handshake(self, conn: Any) -> bool:
            """Advance a new connection's TLS handshake without blocking; True once it is done."""
            cfg = conn.cfg
            if cfg.is_ssl and not getattr(conn, "gpu_admission_tls", False):
                if not compat.readable_now(conn.sock):
                    return False  # nothing sent yet: an idle connection, no clock started
                conn.gpu_admission_pending = _Pending(time.monotonic())
                conn.sock = compat.ssl_wrap_socket(conn.sock, cfg)  # the listener's context (the ssl hook)
                conn.gpu_admission_tls = True
            if cfg.is_ssl:
                conn.sock.setblocking(False)
                try:
                    conn.sock.do_handshake()
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    self._remember_deadline(conn, conn.gpu_admission_pending)
                    return False
                compat.start_http1(conn)
                return True
            conn.init()  # plain HTTP: no handshake to wait for
            conn.sock.setblocking(False)
            return True

        def _read_available(self, conn: Any, pending: _Pending) -> tuple[bool, bool, bool]:
            """Read what has arrived, and stop as soon as the request is whole: (the client closed its
            side, the request is whole, the client waits for 100 Continue).

            Never read past what decides the request: its declared end, or for a chunked body or an
            unfinished header block the point where it is handed over anyway (a fast client sending
            64 MiB would otherwise be read whole into the worker's partial-request budget). A request
            that came whole in one read costs one ``recv``: the read that would only learn "nothing
            more" is skipped, and under load every call that releases the GIL can leave this thread
            waiting for it behind a review being judged (bench/NOTES.md, 4 Dec)."""
            whole = expects = False
            if pending.size and pending.need is None:  # read ahead behind the last request: whole already?
                whole, pending.need, expects = request_complete(pending.chunks[0], max_body)
                if whole:
                    return False, True, expects
            while True:
                cap = pending.need if pending.need is not None else HEADER_LIMIT + max_body + 1
                if pending.size >= cap:
                    return False, whole, expects
                try:
                    chunk = conn.sock.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                    return False, whole, expects
                if not chunk:
                    return True, whole, expects
                with self._buffer_lock:
                    if self._buffered + len(chunk) > limit:
                        self._reconcile()
                    if self._buffered + len(chunk) > limit:
                        _count("read_budget")
                        raise OSError(f"partial requests past the worker's budget of {limit} bytes")
                    self._buffered += len(chunk)
                    self._holding.add(conn)
                pending.chunks.append(chunk)
                pending.size += len(chunk)
                conn.gpu_admission_counted = getattr(conn, "gpu_admission_counted", 0) + len(chunk)
                if pending.need is None or pending.size >= pending.need:
                    data = b"".join(pending.chunks) if len(pending.chunks) > 1 else pending.chunks[0]
                    pending.chunks = [data]
                    whole, pending.need, expects = request_complete(data, max_body)
                    if whole:
                        return False, True, expects

        def _hand_over(self, conn: Any, pending: _Pending) -> str:
            buf = conn.parser.unreader.buf
            buf.seek(0, 2)
            buf.write(b"".join(pending.chunks))
            conn.gpu_admission_pending = None
            return READY

        def _release(self, conn: Any) -> None:
            counted = getattr(conn, "gpu_admission_counted", 0)
            if counted:
                with self._buffer_lock:
                    self._buffered -= counted
                    self._holding.discard(conn)
                conn.gpu_admission_counted = 0

        def _reconcile(self) -> None:
            """Recount the bytes held (under the lock): a connection gthread closed itself (its keep-alive
            sweep runs beside :meth:`murder_pending`) never came back to be released."""
            live = {c for c in self._holding if compat.is_open(c.sock)}
            self._holding = live
            self._buffered = sum(getattr(c, "gpu_admission_counted", 0) for c in live)

        def _remember_deadline(self, conn: Any, pending: _Pending | None) -> None:
            if pending is not None:
                conn.gpu_admission_deadline = pending.started + read_deadline

        def _note_expired(self, conn: Any, pending: _Pending) -> None:
            self._expired += 1
            now = time.monotonic()
            if now - self._expired_logged >= 1.0:  # one line a second at most
                log.warning("closed %d connections whose request was not whole within %g s (slow or "
                            "stalled clients)", self._expired, read_deadline,
                            extra={"event": "read_deadline", "connections": self._expired})
                self._expired, self._expired_logged = 0, now
            _count("read_deadline")

        # ---- on the main loop --------------------------------------------------------------------
        def finish_request(self, conn: Any, fs: Any) -> None:
            if not self.alive and not fs.cancelled() and fs.exception() is None and fs.result() is compat.DEFER:
                self._keep_while_stopping(conn)
                return
            super().finish_request(conn, fs)
            deadline = getattr(conn, "gpu_admission_deadline", None)
            if deadline is None:
                return
            conn.gpu_admission_deadline = None
            if not fs.cancelled() and fs.exception() is None and fs.result() is compat.DEFER:
                conn.timeout = min(conn.timeout, deadline)
                heapq.heappush(self._deadlines, (deadline, next(self._order), conn))

        def on_pending_socket_readable(self, conn: Any, client: Any) -> None:
            """Bytes of a request that has started (or of the first request of a handshaken connection)
            are read here, on the main loop, where they arrive: a thread is given the connection only
            once its request is whole.

            Reading a few bytes that have arrived takes microseconds; handing them to a thread took a
            queued task, a futures callback through gthread's method queue, and the connection out of
            and back into the poller (a scan of the pending list each time). Under 1,000 slowloris
            connections that was 500 such round trips a second in the queue the reviews wait in.
            A connection whose TLS handshake is not done yet still goes to a thread (the handshake's
            crypto is the dearest step of a connection, not a few bytes)."""
            if not conn.initialized:
                super().on_pending_socket_readable(conn, client)
                return
            pending: _Pending | None = getattr(conn, "gpu_admission_pending", None)
            if pending is not None and time.monotonic() - pending.started > read_deadline:
                self._drop_pending(conn, pending)
                return
            try:
                state = self._advance(conn)
            except (OSError, ValueError) as exc:  # ssl.SSLError included: reset, bad record, ...
                log.debug("connection closed while reading a request: %r", exc)
                state = CLOSED
            if state == WAIT:
                self._push_deadline(conn)
                return
            if state == CLOSED:
                self._drop_pending(conn, None)
                return
            conn.gpu_admission_ready = True
            super().on_pending_socket_readable(conn, client)  # out of the poller, to a thread

        def _drop_pending(self, conn: Any, expired: _Pending | None) -> None:
            """Close a connection that waits in the poller (gthread's pending list)."""
            try:
                self.pending_conns.remove(conn)
            except ValueError:
                pass
            try:
                self.poller.unregister(conn.sock)
            except (OSError, KeyError, ValueError):
                pass
            self.nr_conns -= 1
            self._release(conn)
            if expired is not None:
                self._note_expired(conn, expired)
            conn.close()

        def _push_deadline(self, conn: Any) -> None:
            """A request that started in the poller's callback gets its read deadline on the heap."""
            deadline = getattr(conn, "gpu_admission_deadline", None)
            if deadline is None:
                return
            conn.gpu_admission_deadline = None
            if deadline < conn.timeout:
                conn.timeout = deadline
                heapq.heappush(self._deadlines, (deadline, next(self._order), conn))

        def _keep_while_stopping(self, conn: Any) -> None:
            """A deferred connection of a stopping worker goes back to the poller, as while running.

            gthread (27) puts a deferred connection back only while the worker is alive; once SIGTERM
            came it treats the result as a finished request: a connection without a parser yet (its
            TLS handshake not finished) is closed, one with a parser kept for the 2 s stop linger
            whatever its read deadline. A connection accepted before the signal whose handshake was in
            its last flight (the client's Finished: the client already counts itself connected and
            writes its request) was thus dropped unanswered at each rollout, which kube-apiserver does
            not retry on a fresh connection. Kept, it is answered (with "Connection: close") inside
            the graceful timeout: within its read deadline if a request has started, else within
            gthread's stop linger. Both go on the deadline heap: gthread's own sweep stops at the
            first pending connection not yet due, and the others wait for their 75 s keep-alive."""
            now = time.monotonic()
            deadline = getattr(conn, "gpu_admission_deadline", None)
            conn.gpu_admission_deadline = None
            started = getattr(conn, "gpu_admission_pending", None) is not None
            conn.sock.setblocking(False)
            conn.timeout = deadline if started and deadline is not None else now + compat.STOP_LINGER
            heapq.heappush(self._deadlines, (conn.timeout, next(self._order), conn))
            self.pending_conns.append(conn)
            self.poller.register(conn.sock, compat.EVENT_READ, functools.partial(self.on_pending_socket_readable, conn))

        def murder_pending(self) -> None:
            """gthread's sweep stops at the first pending connection not yet due (its list is in keep-
            alive order); requests in progress have shorter deadlines, kept in a heap of their own."""
            now = time.monotonic()
            while self._deadlines and self._deadlines[0][0] <= now:
                _, _, conn = heapq.heappop(self._deadlines)
                if conn.timeout > now:
                    continue  # it came back from the poller since, with a newer clock
                try:
                    self.pending_conns.remove(conn)
                except ValueError:
                    continue  # on a thread right now: handle() checks the deadline itself
                try:
                    self.poller.unregister(conn.sock)
                except (OSError, KeyError, ValueError):
                    pass
                self.nr_conns -= 1
                pending = getattr(conn, "gpu_admission_pending", None)
                self._release(conn)
                if pending is not None:
                    self._note_expired(conn, pending)
                conn.close()
            super().murder_pending()

        def wait_for_and_dispatch_events(self, timeout: Any) -> None:
            if self._deadlines:  # wake up for the first deadline
                timeout = max(0.0, min(timeout, self._deadlines[0][0] - time.monotonic()))
            super().wait_for_and_dispatch_events(timeout)

    ReadingWorker.__name__ = ReadingWorker.__qualname__ = f"Reading{base.__name__}"
    return ReadingWorker
