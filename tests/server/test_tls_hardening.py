"""The TLS surface of a real ``gpu-admission serve``, checked with real clients: mutual TLS when a
client CA is configured, TLS 1.0 refused (1.1 and weak TLS 1.2 ciphers: tests/test_server_live.py),
no compression, only forward-secret AEAD suites, the serving certificate's names.

Mutual TLS (``serve --client-ca FILE``): kube-apiserver presents the client certificate named for the
webhook's host in the kubeconfig of its AdmissionConfiguration (README, "Mutual TLS"); the server
then refuses, at the handshake, any client without a certificate signed by that CA.
"""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from client_pki import key_pem as _key_pem, make_ca, make_client, write_ca
from live import (  # noqa: F401 - helpers; the fixtures are in conftest.py
    Pki, Server, StartServer, TP4_L4, client_context, encode, handshake_in_memory, permissive_server,
    request_json, review, wait_ready, wait_workers,
)
from webhook.server.gunicorn.tls import CIPHERS, build_context

SERVICE_NAMES = ["gpu-admission", "gpu-admission.gpu-admission", "gpu-admission.gpu-admission.svc",
                 "gpu-admission.gpu-admission.svc.cluster.local"]


# ----------------------------------------------------------------------------- client certificates
# (made by tests/client_pki.py)


def client_ctx(pki: Pki, cert: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def attempt(server: Server, ctx: ssl.SSLContext) -> tuple[int, Any] | Exception:
    """One review on a new connection; the answer, or the exception that stopped it. With TLS 1.3
    the client's side of the handshake ends before the server has checked the client certificate,
    so a refusal can surface at the first read as well as in the handshake."""
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    try:
        status, doc, _ = request_json(conn, "POST", "/validate", encode(review(TP4_L4, uid="uid-mtls")))
        return status, doc
    except (ssl.SSLError, OSError, http.client.HTTPException) as exc:
        return exc
    finally:
        conn.close()


@pytest.fixture()
def mtls(start_server: StartServer, pki: Pki, tmp_path: Path) -> dict[str, Any]:
    apiserver_ca = make_ca("kube-apiserver client CA")
    ca_file = write_ca(apiserver_ca, tmp_path / "client-ca.crt")
    good = make_client(apiserver_ca, tmp_path / "good")
    server = start_server("--client-ca", str(ca_file), wait=False)
    server.client_ctx = client_ctx(pki, good)  # the harness's own probes present the good certificate
    wait_ready(server)
    wait_workers(server)
    return {"server": server, "ca": apiserver_ca, "good": good}


def test_mtls_client_with_a_certificate_from_the_ca_is_served(mtls: dict[str, Any], pki: Pki) -> None:
    for _ in range(6):  # new connections: both workers
        result = attempt(mtls["server"], client_ctx(pki, mtls["good"]))
        assert not isinstance(result, Exception), result
        status, doc = result
        assert status == 200 and doc["response"]["uid"] == "uid-mtls" and doc["response"]["allowed"] is False


@pytest.mark.parametrize("client", ["no-certificate", "other-ca", "expired", "server-auth-only", "self-signed"])
def test_mtls_refuses_a_client_without_a_valid_certificate(mtls: dict[str, Any], pki: Pki, tmp_path: Path,
                                                           client: str) -> None:
    cert: tuple[Path, Path] | None = None
    if client == "other-ca":
        cert = make_client(make_ca("someone else's CA"), tmp_path / client)
    elif client == "expired":
        cert = make_client(mtls["ca"], tmp_path / client, days=-1)
    elif client == "server-auth-only":  # right CA, but issued for serving, not for clients
        cert = make_client(mtls["ca"], tmp_path / client, usage=ExtendedKeyUsageOID.SERVER_AUTH)
    elif client == "self-signed":
        ca_cert, ca_key = make_ca("kube-apiserver-webhook-client")
        (tmp_path / "ss.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        (tmp_path / "ss.key").write_bytes(_key_pem(ca_key))
        cert = (tmp_path / "ss.crt", tmp_path / "ss.key")
    for _ in range(4):
        result = attempt(mtls["server"], client_ctx(pki, cert))
        assert isinstance(result, Exception), f"{client}: served without a valid client certificate: {result}"
    # and the server is unharmed: a good client still gets its answer
    good = attempt(mtls["server"], client_ctx(pki, mtls["good"]))
    assert not isinstance(good, Exception) and good[0] == 200
    assert mtls["server"].alive()


def test_without_client_ca_no_certificate_is_asked_for(server: Server, pki: Pki) -> None:
    sock = server.tls_socket()
    try:
        assert sock.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        sock.close()
    assert build_context(pki.cert_file, pki.key_file).verify_mode == ssl.CERT_NONE
    assert build_context(pki.cert_file, pki.key_file, pki.ca_file).verify_mode == ssl.CERT_REQUIRED


# ----------------------------------------------------------------------------- the TLS floor


@pytest.fixture()
def server(start_server: StartServer) -> Server:
    return start_server()


def _tls10_only(ctx: ssl.SSLContext) -> None:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")


def test_tls_1_0_client_is_refused(server: Server, pki: Pki) -> None:
    try:
        ctx = client_context(pki, _tls10_only)
        capable = handshake_in_memory(permissive_server(pki), ctx) == "TLSv1"
    except (ValueError, ssl.SSLError):
        capable = False
    if not capable:
        pytest.skip("this OpenSSL cannot negotiate TLS 1.0 even with a permissive server in-process")
    with pytest.raises(ssl.SSLError):
        server.tls_socket(ctx).close()


def test_no_compression_and_only_forward_secret_aead_suites(server: Server, pki: Pki) -> None:
    ctx = build_context(pki.cert_file, pki.key_file)
    assert ctx.options & ssl.OP_NO_COMPRESSION and ctx.options & ssl.OP_NO_RENEGOTIATION
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(c["aead"] and c["kea"] == "kx-ecdhe" for c in tls12), tls12
    assert "!SHA1" in CIPHERS
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        client = ssl.create_default_context(cafile=str(pki.ca_file))
        client.maximum_version = version
        sock = server.tls_socket(client)
        try:
            assert sock.compression() is None
            name, proto, bits = sock.cipher()
            assert proto == version.name.replace("v1_", "v1.") and bits >= 128
            assert "GCM" in name or "CHACHA20" in name, name
        finally:
            sock.close()


def test_serving_certificate_names(server: Server, pki: Pki) -> None:
    """kube-apiserver verifies the Service DNS name it calls (service.namespace.svc)."""
    sock = server.tls_socket()
    try:
        der = sock.getpeercert(binary_form=True)
    finally:
        sock.close()
    cert = x509.load_der_x509_certificate(der)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(SERVICE_NAMES) <= set(sans.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    # a client that verifies the Service name accepts it; one that expects another name does not
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    import socket
    for name, ok in (("gpu-admission.gpu-admission.svc", True), ("evil.example.com", False)):
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        try:
            if ok:
                ctx.wrap_socket(raw, server_hostname=name).close()
            else:
                with pytest.raises(ssl.SSLCertVerificationError):
                    ctx.wrap_socket(raw, server_hostname=name)
        finally:
            raw.close()


def test_key_files_are_private(pki: Pki) -> None:
    """`gpu-admission certs` writes keys 0600 (and atomically: tests/test_certs.py)."""
    for key in (pki.key_file, pki.dir / "ca.key"):
        assert key.stat().st_mode & 0o777 == 0o600, key
