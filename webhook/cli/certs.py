"""Certificates for the webhook's HTTPS endpoint: ``gpu-admission certs``.

kube-apiserver calls admission webhooks only over TLS. It checks the serving certificate against
the ``caBundle`` in the webhook configuration. This module creates a small private CA and a
serving certificate that kube-apiserver accepts. That means SANs, because the CN has been ignored
since 1.19. It also means the serverAuth EKU and a CA:false leaf that names its issuer's key.

The key files are never readable by others, not even for a moment. The CA and its key are kept, so
rotating the serving certificate leaves the caBundle (and so the webhook configuration) unchanged.

The decisions are pure: ``issue`` works on bytes, and the server's ``keypair.pair_problem`` (the
same check ``serve`` and ``/readyz`` use) takes an explicit ``now``.
File I/O happens only in ``write`` and ``run``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import ipaddress
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO, Union

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.server import keypair

EXIT_OK, EXIT_USAGE = 0, 2

KEY_TYPES = ("ecdsa", "rsa")
RSA_BITS = 2048
DEFAULT_DAYS = 365
CA_DAYS = 3650
CLOCK_SKEW = datetime.timedelta(minutes=5)
"""notBefore is backdated by this much. Otherwise an apiserver whose clock is a little behind would
reject a certificate that was just issued."""
RENEW_WITHIN = datetime.timedelta(hours=24)
"""A pair that expires sooner than this is replaced without ``--force``, because it is about to break anyway."""

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
FILE_MODES = {CA_KEY: 0o600, CA_CERT: 0o644, TLS_KEY: 0o600, TLS_CERT: 0o644}
"""Modes of the written files. This is also the order in which they are replaced: tls.crt goes last,
so a new valid tls.crt means the whole set is in place. If the run is interrupted earlier, the
result is a mismatched pair, and the next run replaces it without ``--force``."""

PrivateKey = Union[ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

# Service names are DNS-1035 labels: kube-apiserver rejects a Service whose name starts with a digit.
# Namespace names are DNS-1123 labels.
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_MAX = 63
_CN_MAX = 64  # the X.520 upper bound that cryptography enforces


class CertError(ValueError):
    """A certificate cannot be issued from these inputs. The message is written for the user."""


@dataclass(frozen=True)
class Issued:
    """A CA and a serving certificate, as PEM. This is exactly what ``write`` puts on disk."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_key_pem: bytes
    not_after: datetime.datetime
    """notAfter of the serving certificate (UTC)."""

    @property
    def ca_bundle(self) -> str:
        """The value for ``clientConfig.caBundle``: base64 of the CA PEM, on one line."""
        return base64.b64encode(self.ca_pem).decode("ascii")


# --- validation -------------------------------------------------------------------------------

def _check_label(flag: str, value: str, pattern: re.Pattern[str], rule: str) -> None:
    if len(value) > _LABEL_MAX or not pattern.fullmatch(value):
        raise CertError(f"{flag} {value!r} is not a valid name: it must be a {rule}: at most "
                        f"{_LABEL_MAX} lowercase letters, digits and '-', ending with a letter or digit")


def validate_names(service: str, namespace: str) -> None:
    """Reject names that kube-apiserver would reject. A certificate for them could never be used."""
    _check_label("--service", service, _DNS1035_LABEL,
                 "DNS-1035 label like every Service name (starting with a letter)")
    _check_label("--namespace", namespace, _DNS1123_LABEL,
                 "DNS-1123 label like every namespace name (starting with a letter or digit)")


def parse_ips(ips: Sequence[str]) -> list[IPAddress]:
    """IP SANs as ipaddress objects, deduplicated in the order given."""
    parsed: list[IPAddress] = []
    for raw in ips:
        try:
            ip = ipaddress.ip_address(raw.strip())
        except ValueError:
            raise CertError(f"--ip {raw!r} is not an IP address (DNS names come from --service and "
                            f"--namespace; use --ip only for the addresses the apiserver calls)") from None
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            raise CertError(f"--ip {raw!r}: a certificate cannot name an IPv6 zone; drop the %{ip.scope_id}")
        if ip not in parsed:
            parsed.append(ip)
    return parsed


def _check_days(days: int) -> None:
    if not 1 <= days <= CA_DAYS:
        raise CertError(f"--days {days}: must be between 1 and {CA_DAYS} (the CA's lifetime)")


def _check_key_type(key_type: str) -> None:
    if key_type not in KEY_TYPES:
        raise CertError(f"--key-type {key_type!r}: choose one of {', '.join(KEY_TYPES)}")


# --- issuing (pure) ---------------------------------------------------------------------------

def dns_names(service: str, namespace: str) -> list[str]:
    """Every name a client in the cluster may use for the Service. The apiserver uses ``NAME.NS.svc``."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _new_key(key_type: str) -> PrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, fallback: str) -> x509.Name:
    """A subject with a CN. The CN is informational only, so a long one falls back to a short one."""
    cn = common_name if len(common_name) <= _CN_MAX else fallback[:_CN_MAX]
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ski(key: PrivateKey) -> x509.SubjectKeyIdentifier:
    return x509.SubjectKeyIdentifier.from_public_key(key.public_key())


def _new_ca(key: PrivateKey, service: str, namespace: str, now: datetime.datetime) -> x509.Certificate:
    """A CA that can sign leaves but no sub-CAs (path length 0)."""
    subject = _name(f"gpu-admission CA {service}.{namespace}", "gpu-admission CA")
    return (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(_ski(key), critical=False)
            .sign(key, hashes.SHA256()))


def _authority_key_id(ca_cert: x509.Certificate, ca_key: PrivateKey) -> x509.AuthorityKeyIdentifier:
    """Copy the CA's own SKI when it has one. Verifiers match AKI to SKI, and a reused CA from other
    tooling may have computed its SKI differently."""
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def _leaf(key: PrivateKey, ca_cert: x509.Certificate, ca_key: PrivateKey, names: list[str],
          ips: list[IPAddress], not_before: datetime.datetime,
          not_after: datetime.datetime) -> x509.Certificate:
    """The serving certificate. keyEncipherment only for RSA: with ECDSA the key never encrypts anything."""
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ip) for ip in ips]
    return (x509.CertificateBuilder()
            .subject_name(_name(names[2], names[0]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey), data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(_ski(key), critical=False)
            .add_extension(_authority_key_id(ca_cert, ca_key), critical=False)
            .sign(ca_key, hashes.SHA256()))


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        if not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return False
    except x509.ExtensionNotFound:
        return False
    try:
        return cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    except x509.ExtensionNotFound:
        return True


def load_ca(ca_pem: bytes, ca_key_pem: bytes, now: datetime.datetime | None = None,
            *, names: tuple[str, str] = ("ca.crt", "ca.key")) -> tuple[x509.Certificate, PrivateKey]:
    """Check a CA before reusing it. It must parse, match its key, be a CA, and not expire within a day.

    Raises CertError with the reason. ``run`` prints that reason when it has to create a new CA.
    """
    crt_name, key_name = names
    moment = keypair.utc(now)
    try:
        cert = x509.load_pem_x509_certificate(ca_pem)
    except ValueError:
        raise CertError(f"{crt_name} is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(ca_key_pem, password=None)
    except TypeError:
        raise CertError(f"{key_name} is encrypted; a CA key must be unencrypted to issue from it") from None
    except (ValueError, UnsupportedAlgorithm):
        raise CertError(f"{key_name} is not a PEM private key") from None
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise CertError(f"{key_name}: only ECDSA and RSA CA keys are supported")
    if keypair.public_der(key) != keypair.public_der(cert):
        raise CertError(f"{key_name} does not match {crt_name}")
    if not _is_ca(cert):
        raise CertError(f"{crt_name} is not a CA certificate (basicConstraints CA:true, keyCertSign)")
    if cert.not_valid_after_utc <= moment + RENEW_WITHIN:
        raise CertError(f"{crt_name} expires at {keypair.stamp(cert.not_valid_after_utc)}, within "
                        f"{_hours(RENEW_WITHIN)} h")
    return cert, key


def issue(*, service: str, namespace: str, ips: Sequence[str] = (), days: int = DEFAULT_DAYS,
          key_type: str = "ecdsa", ca: tuple[bytes, bytes] | None = None,
          now: datetime.datetime | None = None) -> Issued:
    """Issue a serving certificate. Creates a new CA, or reuses ``ca = (ca_pem, ca_key_pem)``.

    A reused CA is returned byte for byte, so the caBundle does not change. If the reused CA
    expires before ``days`` have passed, the leaf expires with it, because a leaf cannot outlive
    its issuer. Raises CertError for invalid input. Does no file I/O.
    """
    validate_names(service, namespace)
    ip_sans = parse_ips(ips)
    _check_days(days)
    _check_key_type(key_type)
    moment = keypair.utc(now)
    if ca is None:
        ca_key = _new_key(key_type)
        ca_cert = _new_ca(ca_key, service, namespace, moment)
        ca_pem, ca_key_pem = ca_cert.public_bytes(serialization.Encoding.PEM), _key_pem(ca_key)
    else:
        ca_pem, ca_key_pem = ca
        ca_cert, ca_key = load_ca(ca_pem, ca_key_pem, moment)
    not_after = min(moment + datetime.timedelta(days=days), ca_cert.not_valid_after_utc)
    key = _new_key(key_type)
    leaf = _leaf(key, ca_cert, ca_key, dns_names(service, namespace), ip_sans, moment - CLOCK_SKEW, not_after)
    return Issued(ca_pem=ca_pem, cert_pem=leaf.public_bytes(serialization.Encoding.PEM),
                  key_pem=_key_pem(key), ca_key_pem=ca_key_pem, not_after=not_after)


# --- files ------------------------------------------------------------------------------------

def _stage(out_dir: Path, name: str, data: bytes, mode: int) -> Path:
    """Write ``data`` to a temporary file next to ``name``. mkstemp creates it with mode 0600
    (O_EXCL), so a key is never readable by others, not even briefly and whatever the umask."""
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def _fsync_dir(path: Path) -> None:
    """Make the renames durable. Best effort, because some filesystems cannot fsync a directory."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write(issued: Issued, out_dir: Path) -> None:
    """Write ca.key, ca.crt, tls.key and tls.crt atomically. Keys get 0600, certificates 0644.

    All four files are staged before any is replaced. A failure while staging (disk full,
    permissions) therefore leaves the previous files untouched. Raises OSError.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    contents = {CA_KEY: issued.ca_key_pem, CA_CERT: issued.ca_pem,
                TLS_KEY: issued.key_pem, TLS_CERT: issued.cert_pem}
    staged: list[tuple[Path, Path]] = []
    try:
        for name, mode in FILE_MODES.items():
            staged.append((_stage(out_dir, name, contents[name], mode), out_dir / name))
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    _fsync_dir(out_dir)


def _hours(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() // 3600)


# --- command line -----------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``gpu-admission certs``. The lead adds them to the subcommand's parser."""
    parser.add_argument("--service", required=True, metavar="NAME",
                        help="name of the webhook's Service; the certificate is valid for NAME, NAME.NS, "
                             "NAME.NS.svc (what the apiserver calls) and NAME.NS.svc.cluster.local")
    parser.add_argument("--namespace", required=True, metavar="NS", help="namespace of the Service")
    parser.add_argument("--out", default="certs", metavar="DIR",
                        help="directory for ca.crt, ca.key, tls.crt and tls.key (default: certs)")
    parser.add_argument("--ip", dest="ips", action="append", default=None, metavar="IP",
                        help="IP SAN, needed when the apiserver calls the webhook by IP "
                             "(clientConfig.url https://127.0.0.1:8443); repeat for several")
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS, metavar="N",
                        help=f"validity of the serving certificate in days (default: {DEFAULT_DAYS}; "
                             f"the CA is valid for {CA_DAYS})")
    parser.add_argument("--key-type", choices=KEY_TYPES, default="ecdsa",
                        help="ecdsa (P-256, the default) or rsa (2048 bits) for the CA and serving keys")
    parser.add_argument("--force", action="store_true",
                        help="replace a serving certificate that is still valid; it is re-issued from the "
                             "same CA, so the caBundle in the webhook configuration stays valid")
    parser.add_argument("--new-ca", action="store_true",
                        help="create a new CA instead of reusing ca.crt/ca.key; the caBundle changes, so "
                             "the webhook configuration must be updated")


def _fail(err: TextIO, message: str) -> int:
    print(f"gpu-admission certs: {message}", file=err)
    return EXIT_USAGE


def _cert_names(cert: x509.Certificate) -> list[str]:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in sans.get_values_for_type(x509.DNSName)]


def _existing_pair(cert_path: Path, key_path: Path, wanted: list[str],
                   now: datetime.datetime) -> tuple[str | None, str | None]:
    """Return (refusal, note). The refusal is set when a good pair would be overwritten; the note
    says why an existing pair is replaced anyway."""
    if not cert_path.exists() and not key_path.exists():
        return None, None
    problem = keypair.pair_problem(cert_path, key_path, now)
    if problem is not None:
        return None, f"replacing the existing pair: {problem}"
    cert = keypair.read_certificate(cert_path)
    assert cert is not None  # pair_problem just read it
    expiry = cert.not_valid_after_utc
    if expiry - now <= RENEW_WITHIN:
        return None, f"replacing the existing pair: {cert_path} expires at {keypair.stamp(expiry)}, within " \
                     f"{_hours(RENEW_WITHIN)} h"
    names = _cert_names(cert)
    other = "" if names == wanted else f" It is for {', '.join(names) or 'no DNS names'}, not {wanted[2]}."
    return (f"{cert_path} is valid until {keypair.stamp(expiry)} and matches {key_path}; not overwriting it.{other} "
            f"Pass --force to re-issue it from the same CA (the caBundle stays the same), "
            f"add --new-ca to replace the CA as well."), None


def _reusable_ca(out_dir: Path, now: datetime.datetime) -> tuple[tuple[bytes, bytes] | None, str | None]:
    """Return (ca, note): the CA on disk if it can issue, else None with the reason, so that a caBundle
    change never happens silently."""
    crt, key = out_dir / CA_CERT, out_dir / CA_KEY
    if not crt.exists() and not key.exists():
        return None, None
    try:
        ca = (crt.read_bytes(), key.read_bytes())
        load_ca(*ca, now, names=(str(crt), str(key)))
    except OSError as exc:
        reason = f"cannot read {exc.filename}: {exc.strerror or exc}"
    except CertError as exc:
        reason = str(exc)
    else:
        return ca, None
    return None, f"not reusing the CA ({reason}); creating a new one, so the caBundle changes"


def _summary(issued: Issued, out_dir: Path, names: list[str], ips: list[str], reused: bool,
             days: int, now: datetime.datetime) -> list[str]:
    files = ", ".join(f"{out_dir / n}" + (" (0600)" if FILE_MODES[n] == 0o600 else "") for n in FILE_MODES)
    sans = ", ".join([*names, *ips])
    lines = [f"wrote {files}",
             f"serving certificate for {sans}; expires {keypair.stamp(issued.not_after)}"]
    if issued.not_after < now + datetime.timedelta(days=days):
        lines.append(f"note: it expires together with the CA, before the {days} days asked for; "
                     f"use --force --new-ca to renew the CA (the caBundle changes)")
    ca = x509.load_pem_x509_certificate(issued.ca_pem)
    ca_state = "reused; the caBundle is unchanged" if reused else \
        "new; put the caBundle printed on stdout into the webhook configuration"
    lines.append(f"CA ({out_dir / CA_CERT}) {ca_state}; it expires {keypair.stamp(ca.not_valid_after_utc)}")
    return lines


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``gpu-admission certs``. Prints the caBundle on ``out`` and a summary on ``err``.

    Returns 0 on success and 2 on invalid input, on refusing to overwrite a good pair, or when the
    files cannot be written. The caBundle is the only thing on ``out``, so
    ``CA_BUNDLE=$(gpu-admission certs ...)`` works.
    """
    ips: list[str] = list(args.ips or ())
    try:
        validate_names(args.service, args.namespace)
        ip_sans = parse_ips(ips)
        _check_days(args.days)
        _check_key_type(args.key_type)
    except CertError as exc:
        return _fail(err, str(exc))
    out_dir, now = Path(args.out), keypair.utc(None)
    names = dns_names(args.service, args.namespace)
    notes: list[str] = []
    if not args.force:
        refusal, note = _existing_pair(out_dir / TLS_CERT, out_dir / TLS_KEY, names, now)
        if refusal is not None:
            return _fail(err, refusal)
        notes += [note] if note else []
    ca, note = (None, None) if args.new_ca else _reusable_ca(out_dir, now)
    notes += [note] if note else []
    try:
        issued = issue(service=args.service, namespace=args.namespace, ips=ips, days=args.days,
                       key_type=args.key_type, ca=ca, now=now)
        write(issued, out_dir)
    except CertError as exc:
        return _fail(err, str(exc))
    except OSError as exc:
        return _fail(err, f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}")
    for line in [*notes, *_summary(issued, out_dir, names, [str(ip) for ip in ip_sans], ca is not None,
                                   args.days, now)]:
        print(line, file=err)
    out.write(issued.ca_bundle + "\n")
    return EXIT_OK
