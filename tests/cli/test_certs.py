"""``gpu-admission certs``: what kube-apiserver requires of the certificates, a real TLS handshake,
file modes and atomicity, overwrite protection, and CA reuse that keeps the caBundle stable."""

from __future__ import annotations

import argparse
import base64
import datetime
import io
import ipaddress
import os
import re
import socket
import ssl
import stat
import threading
from pathlib import Path
from typing import Callable, Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from webhook.cli import certs
from webhook.cli.certs import CertError, Issued, issue
from webhook.server import keypair

SVC, NS = "gpu-admission", "gpu-system"
UTC = datetime.timezone.utc
NOW = datetime.datetime(2030, 1, 15, 12, 0, 0, tzinfo=UTC)
DAY = datetime.timedelta(days=1)
KEY_TYPES = [pytest.param("ecdsa", id="ecdsa"), pytest.param("rsa", id="rsa")]


@pytest.fixture(scope="module", params=["ecdsa", "rsa"])
def issued(request: pytest.FixtureRequest) -> Issued:
    """One issue per key type for the read-only checks (RSA keys are slow to generate)."""
    return issue(service=SVC, namespace=NS, ips=["127.0.0.1"], key_type=request.param, now=NOW)


def load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def ext(cert: x509.Certificate, cls: type) -> x509.Extension:  # type: ignore[type-arg]
    return cert.extensions.get_extension_for_class(cls)


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="gpu-admission certs")
    certs.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = certs.run(parser.parse_args(["--service", SVC, "--namespace", NS, *argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# --- names --------------------------------------------------------------------------------------

def test_dns_names_exact() -> None:
    assert certs.dns_names("web", "ns") == ["web", "web.ns", "web.ns.svc", "web.ns.svc.cluster.local"]


@pytest.mark.parametrize("key_type", KEY_TYPES)
def test_sans_exact(key_type: str) -> None:
    cert = load(issue(service=SVC, namespace=NS, key_type=key_type, now=NOW).cert_pem)
    sans = ext(cert, x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == certs.dns_names(SVC, NS)
    assert sans.get_values_for_type(x509.IPAddress) == []


@pytest.mark.parametrize("ips, expected", [
    pytest.param(["127.0.0.1"], [ipaddress.ip_address("127.0.0.1")], id="v4"),
    pytest.param(["::1"], [ipaddress.ip_address("::1")], id="v6"),
    pytest.param(["10.0.0.1", "::1", "10.0.0.1"],
                 [ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("::1")], id="several-deduplicated"),
    pytest.param([" 192.168.1.5 "], [ipaddress.ip_address("192.168.1.5")], id="whitespace"),
])
def test_ip_sans(ips: list[str], expected: list[object]) -> None:
    cert = load(issue(service=SVC, namespace=NS, ips=ips, now=NOW).cert_pem)
    sans = ext(cert, x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == expected
    assert sans.get_values_for_type(x509.DNSName) == certs.dns_names(SVC, NS)


def test_longest_names_fit() -> None:
    """63-character names make a CN longer than X.520's 64. The CN falls back; the SANs stay complete."""
    service, namespace = "s" * 63, "n" * 63
    cert = load(issue(service=service, namespace=namespace, now=NOW).cert_pem)
    names = ext(cert, x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == certs.dns_names(service, namespace)


# --- what kube-apiserver requires ---------------------------------------------------------------

def test_leaf_extensions(issued: Issued) -> None:
    leaf, ca = load(issued.cert_pem), load(issued.ca_pem)
    is_rsa = isinstance(leaf.public_key(), rsa.RSAPublicKey)
    bc = ext(leaf, x509.BasicConstraints)
    assert bc.critical and bc.value.ca is False
    ku = ext(leaf, x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature
    assert ku.value.key_encipherment is is_rsa
    assert not ku.value.key_cert_sign and not ku.value.crl_sign
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ext(leaf, x509.SubjectKeyIdentifier).value == \
        x509.SubjectKeyIdentifier.from_public_key(leaf.public_key())
    aki = ext(leaf, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ext(ca, x509.SubjectKeyIdentifier).value.digest


def test_ca_extensions(issued: Issued) -> None:
    ca = load(issued.ca_pem)
    bc = ext(ca, x509.BasicConstraints)
    assert bc.critical and bc.value.ca is True and bc.value.path_length == 0
    ku = ext(ca, x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign and ku.value.crl_sign
    assert not ku.value.digital_signature
    assert ext(ca, x509.SubjectKeyIdentifier).value == x509.SubjectKeyIdentifier.from_public_key(ca.public_key())
    assert ca.issuer == ca.subject
    ca.verify_directly_issued_by(ca)


def test_leaf_verifies_against_ca(issued: Issued) -> None:
    leaf, ca = load(issued.cert_pem), load(issued.ca_pem)
    leaf.verify_directly_issued_by(ca)
    assert leaf.issuer == ca.subject
    assert leaf.serial_number != ca.serial_number


@pytest.mark.parametrize("key_type, key_class, size", [
    pytest.param("ecdsa", ec.EllipticCurvePublicKey, 256, id="ecdsa-p256"),
    pytest.param("rsa", rsa.RSAPublicKey, 2048, id="rsa-2048"),
])
def test_key_types_and_sha256(key_type: str, key_class: type, size: int) -> None:
    result = issue(service=SVC, namespace=NS, key_type=key_type, now=NOW)
    for cert in (load(result.cert_pem), load(result.ca_pem)):
        assert isinstance(cert.public_key(), key_class)
        assert cert.public_key().key_size == size  # type: ignore[union-attr]
        assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
    key = serialization.load_pem_private_key(result.key_pem, password=None)
    assert key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) \
        == load(result.cert_pem).public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        assert isinstance(key.curve, ec.SECP256R1)


@pytest.mark.parametrize("days", [pytest.param(1, id="1d"), pytest.param(365, id="default"),
                                  pytest.param(3650, id="max")])
def test_validity(days: int) -> None:
    result = issue(service=SVC, namespace=NS, days=days, now=NOW)
    leaf, ca = load(result.cert_pem), load(result.ca_pem)
    assert leaf.not_valid_before_utc == NOW - datetime.timedelta(minutes=5)
    assert leaf.not_valid_after_utc == NOW + days * DAY == result.not_after
    assert ca.not_valid_before_utc == NOW - datetime.timedelta(minutes=5)
    assert ca.not_valid_after_utc == NOW + 3650 * DAY


def test_now_fractions_and_naive() -> None:
    """X.509 has whole seconds; Issued.not_after must still equal the certificate's notAfter."""
    result = issue(service=SVC, namespace=NS, now=datetime.datetime(2030, 1, 15, 12, 0, 0, 987654))
    assert result.not_after == load(result.cert_pem).not_valid_after_utc == NOW + 365 * DAY


def test_serials_random() -> None:
    a, b = (issue(service=SVC, namespace=NS, now=NOW) for _ in range(2))
    assert load(a.cert_pem).serial_number != load(b.cert_pem).serial_number
    assert load(a.ca_pem).serial_number != load(b.ca_pem).serial_number


def test_ca_bundle_is_one_line_base64_of_ca_pem(issued: Issued) -> None:
    assert "\n" not in issued.ca_bundle
    assert base64.b64decode(issued.ca_bundle, validate=True) == issued.ca_pem


# --- CA reuse in issue() ------------------------------------------------------------------------

@pytest.mark.parametrize("key_type", KEY_TYPES)
def test_reused_ca_is_byte_identical(key_type: str) -> None:
    first = issue(service=SVC, namespace=NS, now=NOW)
    second = issue(service=SVC, namespace=NS, key_type=key_type, ca=(first.ca_pem, first.ca_key_pem),
                   now=NOW + DAY)
    assert (second.ca_pem, second.ca_key_pem, second.ca_bundle) == (first.ca_pem, first.ca_key_pem, first.ca_bundle)
    assert second.cert_pem != first.cert_pem and second.key_pem != first.key_pem
    load(second.cert_pem).verify_directly_issued_by(load(first.ca_pem))


def test_leaf_never_outlives_reused_ca() -> None:
    first = issue(service=SVC, namespace=NS, now=NOW)
    ca_end = load(first.ca_pem).not_valid_after_utc
    later = ca_end - 30 * DAY
    second = issue(service=SVC, namespace=NS, days=365, ca=(first.ca_pem, first.ca_key_pem), now=later)
    assert second.not_after == ca_end == load(second.cert_pem).not_valid_after_utc


def _other_ca() -> Issued:
    return issue(service=SVC, namespace=NS, now=NOW)


@pytest.mark.parametrize("make_ca, now, message", [
    pytest.param(lambda a, b: (a.ca_pem, b.ca_key_pem), NOW, "does not match", id="mismatched-key"),
    pytest.param(lambda a, b: (a.cert_pem, a.key_pem), NOW, "not a CA", id="leaf-as-ca"),
    pytest.param(lambda a, b: (b"garbage", a.ca_key_pem), NOW, "not a PEM certificate", id="garbage-cert"),
    pytest.param(lambda a, b: (a.ca_pem, b"garbage"), NOW, "not a PEM private key", id="garbage-key"),
    pytest.param(lambda a, b: (a.ca_pem, a.ca_key_pem), NOW + 3650 * DAY, "expires", id="expired"),
    pytest.param(lambda a, b: (a.ca_pem, a.ca_key_pem), NOW + 3650 * DAY - datetime.timedelta(hours=2),
                 "within 24 h", id="expires-within-a-day"),
])
def test_unusable_ca_rejected(make_ca: Callable[[Issued, Issued], tuple[bytes, bytes]], now: datetime.datetime,
                              message: str) -> None:
    a, b = _other_ca(), _other_ca()
    with pytest.raises(CertError, match=message):
        issue(service=SVC, namespace=NS, ca=make_ca(a, b), now=now)


@pytest.mark.parametrize("kwargs, message", [
    pytest.param({"service": "Gpu"}, "DNS-1035", id="uppercase-service"),
    pytest.param({"service": "gpu_admission"}, "DNS-1035", id="underscore-service"),
    pytest.param({"service": "1gpu"}, "DNS-1035", id="service-starts-with-digit"),
    pytest.param({"service": "gpu-"}, "DNS-1035", id="service-ends-with-dash"),
    pytest.param({"service": "a" * 64}, "at most 63", id="service-too-long"),
    pytest.param({"service": "gpu.admission"}, "DNS-1035", id="dotted-service"),
    pytest.param({"namespace": "Gpu-System"}, "DNS-1123", id="uppercase-namespace"),
    pytest.param({"namespace": ""}, "DNS-1123", id="empty-namespace"),
    pytest.param({"ips": ["localhost"]}, "not an IP address", id="hostname-as-ip"),
    pytest.param({"ips": ["10.0.0.0/8"]}, "not an IP address", id="cidr"),
    pytest.param({"ips": ["fe80::1%eth0"]}, "zone", id="ipv6-zone"),
    pytest.param({"days": 0}, "between 1 and 3650", id="zero-days"),
    pytest.param({"days": 3651}, "between 1 and 3650", id="days-beyond-ca"),
    pytest.param({"key_type": "ed25519"}, "choose one of", id="unknown-key-type"),
])
def test_issue_rejects_invalid_input(kwargs: dict[str, object], message: str) -> None:
    params: dict[str, object] = {"service": SVC, "namespace": NS, "now": NOW, **kwargs}
    with pytest.raises(CertError, match=message):
        issue(**params)  # type: ignore[arg-type]


def test_namespace_may_start_with_digit() -> None:
    assert issue(service=SVC, namespace="1team", now=NOW).not_after == NOW + 365 * DAY


# --- a real TLS handshake -----------------------------------------------------------------------

@pytest.fixture(scope="module", params=["ecdsa", "rsa"])
def tls_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[int, Path]]:
    """A loopback TLS server that serves tls.crt/tls.key, written by ``write``. Yields (port, ca.crt)."""
    directory = tmp_path_factory.mktemp(f"tls-{request.param}")
    certs.write(issue(service=SVC, namespace=NS, ips=["127.0.0.1"], key_type=request.param), directory)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass  # the client rejected us: that is what the negative cases expect

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], directory / "ca.crt"
    stop.set()
    thread.join(timeout=5)
    listener.close()


def handshake(port: int, cafile: Path, server_hostname: str) -> bytes:
    context = ssl.create_default_context(cafile=str(cafile))
    context.verify_flags |= ssl.VERIFY_X509_STRICT  # as strict as Python 3.13+ clients are by default
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=server_hostname) as tls:
            return tls.recv(2)


@pytest.mark.parametrize("hostname", [
    pytest.param(f"{SVC}.{NS}.svc", id="service-dns-as-apiserver-calls"),
    pytest.param(f"{SVC}.{NS}.svc.cluster.local", id="fqdn"),
    pytest.param(SVC, id="short-name"),
    pytest.param("127.0.0.1", id="ip-san"),
])
def test_handshake_succeeds(tls_server: tuple[int, Path], hostname: str) -> None:
    port, cafile = tls_server
    assert handshake(port, cafile, hostname) == b"ok"


@pytest.mark.parametrize("hostname", [
    pytest.param(f"other.{NS}.svc", id="wrong-service"),
    pytest.param(f"{SVC}.default.svc", id="wrong-namespace"),
    pytest.param("127.0.0.2", id="wrong-ip"),
])
def test_handshake_rejects_wrong_name(tls_server: tuple[int, Path], hostname: str) -> None:
    port, cafile = tls_server
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(port, cafile, hostname)


def test_handshake_rejects_other_ca(tls_server: tuple[int, Path], tmp_path: Path) -> None:
    port, _ = tls_server
    other = tmp_path / "other-ca.crt"
    other.write_bytes(issue(service=SVC, namespace=NS).ca_pem)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(port, other, f"{SVC}.{NS}.svc")


# --- files --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, mode", [
    pytest.param("tls.key", 0o600, id="tls.key"),
    pytest.param("ca.key", 0o600, id="ca.key"),
    pytest.param("tls.crt", 0o644, id="tls.crt"),
    pytest.param("ca.crt", 0o644, id="ca.crt"),
])
@pytest.mark.parametrize("umask", [pytest.param(0o000, id="umask-000"), pytest.param(0o077, id="umask-077")])
def test_file_modes(tmp_path: Path, name: str, mode: int, umask: int) -> None:
    old = os.umask(umask)
    try:
        certs.write(issue(service=SVC, namespace=NS, now=NOW), tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out" / name).stat().st_mode) == mode


def test_write_contents_and_no_leftovers(tmp_path: Path) -> None:
    result = issue(service=SVC, namespace=NS, now=NOW)
    certs.write(result, tmp_path)
    assert snapshot(tmp_path) == {"ca.crt": result.ca_pem, "ca.key": result.ca_key_pem,
                                  "tls.crt": result.cert_pem, "tls.key": result.key_pem}


def test_keys_are_private_before_they_get_their_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is renamed into place from a temporary file in the same directory. A key is
    already 0600 before that rename."""
    seen: list[tuple[str, str, int]] = []
    real_replace = os.replace

    def spy(src: str | Path, dst: str | Path) -> None:
        assert Path(src).parent == Path(dst).parent == tmp_path
        seen.append((Path(dst).name, Path(src).name, stat.S_IMODE(os.stat(src).st_mode)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    old = os.umask(0)
    try:
        certs.write(issue(service=SVC, namespace=NS, now=NOW), tmp_path)
    finally:
        os.umask(old)
    assert [(dst, mode) for dst, _, mode in seen] == [
        ("ca.key", 0o600), ("ca.crt", 0o644), ("tls.key", 0o600), ("tls.crt", 0o644)]
    assert all(src.startswith(f".{dst}.") for dst, src, _ in seen)


def test_failed_write_leaves_old_files_and_no_temporaries(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    certs.write(issue(service=SVC, namespace=NS, now=NOW), tmp_path)
    before = snapshot(tmp_path)
    calls = {"n": 0}
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # while staging the third of four files
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        certs.write(issue(service=SVC, namespace=NS, now=NOW), tmp_path)
    assert snapshot(tmp_path) == before


# --- certificate_expiry and pair_problem --------------------------------------------------------

@pytest.fixture()
def pair(tmp_path: Path) -> Issued:
    result = issue(service=SVC, namespace=NS, now=NOW)
    certs.write(result, tmp_path)
    return result


@pytest.mark.parametrize("content, expected", [
    pytest.param("cert", (NOW + 365 * DAY).timestamp(), id="valid"),
    pytest.param("ca", (NOW + 3650 * DAY).timestamp(), id="ca"),
    pytest.param("chain", (NOW + 365 * DAY).timestamp(), id="chain-first-cert"),
    pytest.param(None, None, id="missing"),
    pytest.param(b"", None, id="empty"),
    pytest.param(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", None, id="garbage-pem"),
    pytest.param(b"\x00\xff binary", None, id="binary"),
    pytest.param("key", None, id="a-key-not-a-cert"),
])
def test_certificate_expiry(tmp_path: Path, pair: Issued, content: object, expected: float | None) -> None:
    path = tmp_path / "subject.pem"
    files = {"cert": pair.cert_pem, "ca": pair.ca_pem, "chain": pair.cert_pem + pair.ca_pem, "key": pair.key_pem}
    if content is not None:
        path.write_bytes(files[content] if isinstance(content, str) else content)  # type: ignore[arg-type]
    assert keypair.certificate_expiry(path) == expected
    assert keypair.certificate_expiry(str(path)) == expected


def test_certificate_expiry_of_directory(tmp_path: Path) -> None:
    assert keypair.certificate_expiry(tmp_path) is None


@pytest.mark.parametrize("setup, now, reason", [
    pytest.param(None, NOW, None, id="valid"),
    pytest.param(None, NOW + 365 * DAY - datetime.timedelta(seconds=1), None, id="last-second"),
    pytest.param(None, NOW + 365 * DAY, "tls.crt expired at 2031-01-15T12:00:00Z", id="expired"),
    pytest.param(None, NOW - datetime.timedelta(minutes=6), "tls.crt is not valid before", id="not-yet-valid"),
    pytest.param({"tls.crt": None}, NOW, "cannot read .*tls.crt", id="missing-cert"),
    pytest.param({"tls.key": None}, NOW, "cannot read .*tls.key", id="missing-key"),
    pytest.param({"tls.crt": b"garbage"}, NOW, "tls.crt is not a PEM certificate", id="garbage-cert"),
    pytest.param({"tls.key": b"garbage"}, NOW, "tls.key is not a PEM private key", id="garbage-key"),
    pytest.param({"tls.key": "ca.key"}, NOW, "tls.key does not match .*tls.crt", id="mismatched-key"),
    pytest.param({"tls.key": "encrypted"}, NOW, "tls.key is encrypted", id="encrypted-key"),
])
def test_pair_problem(tmp_path: Path, pair: Issued, setup: dict[str, object] | None,
                      now: datetime.datetime, reason: str | None) -> None:
    for name, content in (setup or {}).items():
        target = tmp_path / name
        if content is None:
            target.unlink()
        elif content == "encrypted":
            key = serialization.load_pem_private_key(pair.key_pem, password=None)
            target.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.BestAvailableEncryption(b"secret")))
        elif isinstance(content, str):
            target.write_bytes((tmp_path / content).read_bytes())
        else:
            target.write_bytes(content)  # type: ignore[arg-type]
    problem = keypair.pair_problem(tmp_path / "tls.crt", tmp_path / "tls.key", now=now)
    if reason is None:
        assert problem is None
    else:
        assert problem is not None
        assert re.search(reason, problem), problem


# --- the command --------------------------------------------------------------------------------

def test_defaults_and_help() -> None:
    parser = argparse.ArgumentParser()
    certs.add_arguments(parser)
    args = parser.parse_args(["--service", SVC, "--namespace", NS])
    assert (args.out, args.ips, args.days, args.key_type, args.force, args.new_ca) == \
        ("certs", None, 365, "ecdsa", False, False)
    help_text = " ".join(parser.format_help().split())
    assert "clientConfig.url https://127.0.0.1:8443" in help_text
    assert "caBundle" in help_text


@pytest.mark.parametrize("key_type", KEY_TYPES)
def test_run_writes_and_prints_ca_bundle(tmp_path: Path, key_type: str) -> None:
    out_dir = tmp_path / "nested" / "certs"
    code, out, err = run("--out", str(out_dir), "--ip", "127.0.0.1", "--key-type", key_type)
    assert code == 0, err
    assert out.count("\n") == 1
    assert base64.b64decode(out.strip(), validate=True) == (out_dir / "ca.crt").read_bytes()
    assert sorted(p.name for p in out_dir.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert keypair.pair_problem(out_dir / "tls.crt", out_dir / "tls.key") is None
    assert "tls.crt" in err and "expires" in err and "new" in err
    leaf = load((out_dir / "tls.crt").read_bytes())
    leaf.verify_directly_issued_by(load((out_dir / "ca.crt").read_bytes()))
    assert isinstance(leaf.public_key(), rsa.RSAPublicKey if key_type == "rsa" else ec.EllipticCurvePublicKey)


def test_run_refuses_to_overwrite_a_good_pair(tmp_path: Path) -> None:
    assert run("--out", str(tmp_path))[0] == 0
    before = snapshot(tmp_path)
    code, out, err = run("--out", str(tmp_path))
    assert (code, out) == (2, "")
    expiry = datetime.datetime.fromtimestamp(keypair.certificate_expiry(tmp_path / "tls.crt") or 0, UTC)
    assert str(tmp_path / "tls.crt") in err
    assert expiry.strftime("%Y-%m-%dT%H:%M:%SZ") in err
    assert "--force" in err
    assert snapshot(tmp_path) == before


def test_refusal_mentions_other_names(tmp_path: Path) -> None:
    assert run("--out", str(tmp_path))[0] == 0
    parser = argparse.ArgumentParser()
    certs.add_arguments(parser)
    err = io.StringIO()
    code = certs.run(parser.parse_args(["--service", "other", "--namespace", NS, "--out", str(tmp_path)]),
                     io.StringIO(), err)
    assert code == 2
    assert f"It is for {SVC}" in err.getvalue()


def test_force_reissues_from_the_same_ca(tmp_path: Path) -> None:
    _, first_bundle, _ = run("--out", str(tmp_path))
    before = snapshot(tmp_path)
    code, bundle, err = run("--out", str(tmp_path), "--force", "--ip", "127.0.0.1")
    assert code == 0, err
    after = snapshot(tmp_path)
    assert bundle == first_bundle
    assert (after["ca.crt"], after["ca.key"]) == (before["ca.crt"], before["ca.key"])
    assert after["tls.crt"] != before["tls.crt"] and after["tls.key"] != before["tls.key"]
    load(after["tls.crt"]).verify_directly_issued_by(load(before["ca.crt"]))
    assert "reused" in err


def test_new_ca_replaces_the_ca(tmp_path: Path) -> None:
    _, first_bundle, _ = run("--out", str(tmp_path))
    before = snapshot(tmp_path)
    assert run("--out", str(tmp_path), "--new-ca")[0] == 2  # a good pair still needs --force
    assert snapshot(tmp_path) == before
    code, bundle, err = run("--out", str(tmp_path), "--force", "--new-ca")
    assert code == 0, err
    after = snapshot(tmp_path)
    assert bundle != first_bundle
    assert after["ca.crt"] != before["ca.crt"] and after["ca.key"] != before["ca.key"]
    load(after["tls.crt"]).verify_directly_issued_by(load(after["ca.crt"]))


@pytest.mark.parametrize("issued_at, days", [
    pytest.param(datetime.datetime.now(UTC) - 10 * DAY, 1, id="expired"),
    pytest.param(datetime.datetime.now(UTC) - 365 * DAY + datetime.timedelta(hours=1), 365,
                 id="expires-within-24h"),
])
def test_expiring_pair_replaced_without_force_keeping_ca(tmp_path: Path, issued_at: datetime.datetime,
                                                          days: int) -> None:
    old = issue(service=SVC, namespace=NS, days=days, now=issued_at)
    certs.write(old, tmp_path)
    code, bundle, err = run("--out", str(tmp_path))
    assert code == 0, err
    assert "replacing the existing pair" in err
    assert bundle.strip() == old.ca_bundle
    assert (tmp_path / "tls.crt").read_bytes() != old.cert_pem
    assert keypair.pair_problem(tmp_path / "tls.crt", tmp_path / "tls.key") is None


@pytest.mark.parametrize("damage, note", [
    pytest.param("tls.key", "does not match", id="mismatched-pair"),
    pytest.param("tls.crt", "cannot read", id="only-a-key"),
])
def test_broken_pair_replaced_without_force(tmp_path: Path, damage: str, note: str) -> None:
    certs.write(issue(service=SVC, namespace=NS), tmp_path)
    if damage == "tls.key":
        (tmp_path / "tls.key").write_bytes(issue(service=SVC, namespace=NS).key_pem)
    else:
        (tmp_path / "tls.crt").unlink()
    code, _, err = run("--out", str(tmp_path))
    assert code == 0, err
    assert note in err


@pytest.mark.parametrize("damage, reason", [
    pytest.param("missing-key", "cannot read", id="ca-key-missing"),
    pytest.param("expired", "expires at", id="ca-expired"),
    pytest.param("mismatched", "does not match", id="ca-key-mismatched"),
])
def test_unusable_ca_is_replaced_loudly(tmp_path: Path, damage: str, reason: str) -> None:
    if damage == "expired":
        old = issue(service=SVC, namespace=NS, days=1, now=datetime.datetime.now(UTC) - 3651 * DAY)
    else:
        old = issue(service=SVC, namespace=NS)
    certs.write(old, tmp_path)
    if damage == "missing-key":
        (tmp_path / "ca.key").unlink()
    elif damage == "mismatched":
        (tmp_path / "ca.key").write_bytes(issue(service=SVC, namespace=NS).ca_key_pem)
    code, bundle, err = run("--out", str(tmp_path), "--force")
    assert code == 0, err
    assert "not reusing the CA" in err and reason in err and "caBundle changes" in err
    assert bundle.strip() != old.ca_bundle


@pytest.mark.parametrize("argv, message", [
    pytest.param(["--ip", "not-an-ip"], "--ip 'not-an-ip' is not an IP address", id="invalid-ip"),
    pytest.param(["--ip", "127.0.0.1", "--ip", "300.1.1.1"], "'300.1.1.1'", id="second-ip-invalid"),
    pytest.param(["--service", "My_Webhook"], "--service 'My_Webhook'", id="invalid-service"),
    pytest.param(["--namespace", "Kube_System"], "--namespace 'Kube_System'", id="invalid-namespace"),
    pytest.param(["--days", "0"], "--days 0", id="zero-days"),
    pytest.param(["--days", "-5"], "--days -5", id="negative-days"),
])
def test_run_rejects_invalid_input(tmp_path: Path, argv: list[str], message: str) -> None:
    code, out, err = run("--out", str(tmp_path / "certs"), *argv)  # later --service/--namespace win
    assert (code, out) == (2, "")
    assert message in err
    assert not (tmp_path / "certs").exists()


def test_run_unwritable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, out, err = run("--out", str(blocker / "certs"))
    assert (code, out) == (2, "")
    assert "cannot write" in err and str(blocker) in err
