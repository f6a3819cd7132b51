"""The server's TLS context: TLS 1.2+, modern ciphers, and certificate rotation without restart.

cert-manager or a Secret update replaces ``tls.crt``/``tls.key`` on disk. Each worker keeps one
``SSLContext`` and, at most once per interval, checks whether the files changed; a changed pair is
loaded into a NEW context that replaces the old one only when the pair loads and matches. A
half-written rotation (new cert, old key) therefore keeps serving the old pair instead of failing
handshakes, and connections already open keep the context they started with.
"""

from __future__ import annotations

import logging
import ssl
import threading
from pathlib import Path

from webhook.server.filewatch import FileWatch

log = logging.getLogger("gpu_admission.tls")

# ECDHE only (forward secrecy), AEAD only; TLS 1.3 suites are always on and not configurable here.
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS:!RC4:!3DES:!SHA1"


def build_context(cert: str | Path, key: str | Path, client_ca: str | Path | None = None, *,
                  verify_mode: ssl.VerifyMode = ssl.CERT_REQUIRED) -> ssl.SSLContext:
    """A server context with the project's TLS floor; raises ``ssl.SSLError``/``OSError`` on a bad pair.

    With ``client_ca``, clients are asked for a certificate signed by it (and issued for client
    authentication): ``CERT_REQUIRED`` refuses the handshake without one (the admission port's
    ``--client-ca``); ``CERT_OPTIONAL`` refuses a certificate that does not verify but lets a client
    without one through, for the application to answer 401 (the extender port, which also takes a
    bearer token)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    ctx.load_cert_chain(certfile=str(cert), keyfile=str(key))
    if client_ca is not None:
        ctx.load_verify_locations(cafile=str(client_ca))
        ctx.verify_mode = verify_mode
    return ctx


class RotatingContext:
    """Serves the newest valid certificate pair; call :meth:`context` per new connection."""

    def __init__(self, cert: str | Path, key: str | Path, client_ca: str | Path | None = None,
                 *, interval: float = 1.0, verify_mode: ssl.VerifyMode = ssl.CERT_REQUIRED) -> None:
        self.cert, self.key, self.client_ca = Path(cert), Path(key), client_ca
        self.verify_mode = verify_mode
        self._watch = FileWatch([self.cert, self.key] + ([Path(client_ca)] if client_ca else []),
                                interval=interval)
        self._lock = threading.Lock()
        self._ctx = build_context(self.cert, self.key, client_ca, verify_mode=verify_mode)
        self.rotations = 0

    def context(self) -> ssl.SSLContext:
        signature = self._watch.changed()
        if signature is not None:
            with self._lock:
                try:
                    fresh = build_context(self.cert, self.key, self.client_ca, verify_mode=self.verify_mode)
                except (ssl.SSLError, OSError, ValueError) as exc:
                    # mid-rotation (cert and key from different pairs) or unreadable: keep serving the
                    # old pair and look again at the next interval
                    log.warning("certificate files changed but do not load yet (%s); keeping the current pair",
                                exc, extra={"event": "cert_reload", "result": "deferred"})
                else:
                    self._ctx = fresh
                    self._watch.accept(signature)
                    self.rotations += 1
                    log.info("serving certificate reloaded from %s", self.cert,
                             extra={"event": "cert_reload", "result": "success"})
        return self._ctx
