"""The server's own check of its TLS key pair: readable, matching, valid now; and its expiry.

Split from the ``certs`` command (webhook/cli/certs.py) because the running server needs it and the
command line needs it too: ``/readyz`` and the expiry metric read the pair on every scrape,
``serve`` refuses to start on a bad pair, and ``certs`` uses the same check before it overwrites
one. ``cryptography`` only: no Flask, no gunicorn, so the command line can import it cheaply.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Union

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

PrivateKey = Union[ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]


def utc(now: datetime.datetime | None) -> datetime.datetime:
    """Aware UTC, to the whole second. X.509 times have no fractions, so Issued.not_after equals the cert's."""
    moment = now if now is not None else datetime.datetime.now(datetime.timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).replace(microsecond=0)


def public_der(key: PrivateKey | x509.Certificate) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def read_certificate(path: str | Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(Path(path).read_bytes())
    except (OSError, ValueError):
        return None


def certificate_expiry(path: str | Path) -> float | None:
    """notAfter of the (first) certificate in a PEM file, as a unix timestamp.

    Returns None when the file is unreadable or invalid. /readyz and the expiry metric call this
    on every scrape, so it never raises.
    """
    cert = read_certificate(path)
    return cert.not_valid_after_utc.timestamp() if cert is not None else None


def pair_problem(cert_path: str | Path, key_path: str | Path,
                 now: datetime.datetime | None = None) -> str | None:
    """Return None when cert and key are a readable, matching pair that is valid at ``now``.

    Otherwise return the first problem, as a sentence that names the file. "Valid" means
    notBefore <= now < notAfter with no margin: a pair still serves until its last second.
    """
    moment = utc(now)
    try:
        cert_bytes = Path(cert_path).read_bytes()
        key_bytes = Path(key_path).read_bytes()
    except OSError as exc:
        return f"cannot read {exc.filename}: {exc.strerror or exc}"
    try:
        cert = x509.load_pem_x509_certificate(cert_bytes)
    except ValueError:
        return f"{cert_path} is not a PEM certificate"
    try:
        key = serialization.load_pem_private_key(key_bytes, password=None)
    except TypeError:
        return f"{key_path} is encrypted; the webhook needs an unencrypted key"
    except (ValueError, UnsupportedAlgorithm):
        return f"{key_path} is not a PEM private key"
    if public_der(key) != public_der(cert):  # type: ignore[arg-type]
        return f"{key_path} does not match {cert_path}"
    if moment >= cert.not_valid_after_utc:
        return f"{cert_path} expired at {stamp(cert.not_valid_after_utc)}"
    if moment < cert.not_valid_before_utc:
        return f"{cert_path} is not valid before {stamp(cert.not_valid_before_utc)}"
    return None


def stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
