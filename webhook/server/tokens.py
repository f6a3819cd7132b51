"""Bearer tokens read from a file: the scheduler extender's ``--extender-token-file``.

The file is a mounted Secret: Kubernetes replaces it in place when the Secret changes, so
:class:`TokenFile` re-reads it when its ``stat`` signature changes (at most once per interval) and
keeps the last good token when the new file is unreadable or empty. A presented token is compared in
constant time (``hmac.compare_digest``).

No Flask, no Prometheus: ``gpu-admission serve`` checks the file with :func:`read_token` before the
metrics directory is set, and prometheus_client must not be imported before that.
"""

from __future__ import annotations

import hmac
import logging
import threading
from pathlib import Path

from webhook.server.filewatch import FileWatch

log = logging.getLogger("gpu_admission.extender")


class TokenError(ValueError):
    """The token file cannot be used (unreadable or empty)."""


def read_token(path: str | Path) -> bytes:
    """The bearer token in ``path``: its bytes without surrounding whitespace (a Secret written with
    ``echo`` ends in a newline); :class:`TokenError` when it cannot be read or is empty."""
    try:
        token = Path(path).read_bytes().strip()
    except OSError as exc:
        raise TokenError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not token:
        raise TokenError(f"{path} is empty")
    return token


class TokenFile:
    """The token of a file, re-read when the file changes (at most once per ``interval``); a change
    that leaves it unreadable or empty keeps the last good token, so a half-written Secret update
    does not lock every caller out."""

    def __init__(self, path: str | Path, *, interval: float = 1.0) -> None:
        self.path = Path(path)
        self._watch = FileWatch([self.path], interval=interval)
        self._token = read_token(self.path)
        self._lock = threading.Lock()

    def token(self) -> bytes:
        signature = self._watch.changed()
        if signature is not None:
            with self._lock:
                try:
                    self._token = read_token(self.path)
                except TokenError as exc:
                    log.warning("extender token file changed but cannot be used (%s); keeping the current token",
                                exc, extra={"event": "token_reload", "result": "deferred"})
                else:
                    self._watch.accept(signature)
                    log.info("extender token reloaded from %s", self.path,
                             extra={"event": "token_reload", "result": "success"})
        return self._token

    def matches(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value is ``Bearer <this token>`` (constant time)."""
        scheme, _, presented = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        try:
            given = presented.strip().encode("latin-1")  # werkzeug decodes header bytes as latin-1
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(given, self.token())
