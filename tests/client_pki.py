"""Client certificates for the tests of mutual TLS: a CA, and leaf certificates it signs (for client
authentication by default; expired, or for serving, on request). Shared by tests/server (the admission
port's ``--client-ca``, the extender port's ``--extender-client-ca``) and tests/e2e (the client
certificate kube-scheduler presents to the extender)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(name: str) -> CA:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_client(ca: CA, out: Path, *, usage: Any = ExtendedKeyUsageOID.CLIENT_AUTH, days: float = 1,
                name: str = "kube-apiserver-webhook-client") -> tuple[Path, Path]:
    """``out``/client.crt and client.key: a leaf certificate signed by ``ca`` for ``usage``."""
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    end = now + datetime.timedelta(days=days)
    start = min(now - datetime.timedelta(minutes=5), end - datetime.timedelta(minutes=1))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out.mkdir(parents=True, exist_ok=True)
    (out / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "client.key").write_bytes(key_pem(key))
    (out / "client.key").chmod(0o600)
    return out / "client.crt", out / "client.key"


def write_ca(ca: tuple[x509.Certificate, Any], path: Path) -> Path:
    path.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    return path
