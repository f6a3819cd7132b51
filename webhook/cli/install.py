"""TLS material for the ``manifests/overlays/generated-certs`` kustomize overlay (``make manifests``).

The overlay's kustomization.yaml is committed; it builds the Secret ``gpu-admission-tls`` from
``tls.crt``, ``tls.key`` and ``ca.crt`` next to it (git-ignored) and copies ``ca.crt`` into every
webhook's caBundle. This module checks a pair made by ``gpu-admission certs`` and copies it there:

    python -m webhook.cli.install --certs certs --overlay manifests/overlays/generated-certs

It refuses a pair that kube-apiserver would reject (expired, key not matching, not signed by the
CA, no SAN for the Service's ``.svc`` name), so a bad certificate is caught before it is applied.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence, TextIO

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from webhook.server import keypair

SERVICE = "gpu-admission"
NAMESPACE = "gpu-admission"
OVERLAY = Path("manifests/overlays/generated-certs")
FILES = {"ca.crt": 0o644, "tls.crt": 0o644, "tls.key": 0o600}
"""What the overlay's secretGenerator reads, with the modes they are written with."""


class InstallError(Exception):
    """The certificates cannot be used for the overlay; the message says why."""


def check_pair(certs_dir: Path, *, service: str = SERVICE, namespace: str = NAMESPACE,
               now: datetime.datetime | None = None) -> None:
    """Raise InstallError unless certs_dir holds a CA and a serving pair kube-apiserver accepts
    for https://SERVICE.NAMESPACE.svc."""
    ca_path, crt_path, key_path = (certs_dir / name for name in FILES)
    problem = keypair.pair_problem(crt_path, key_path, now)
    if problem:
        raise InstallError(problem)
    try:
        ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
    except OSError as exc:
        raise InstallError(f"cannot read {exc.filename}: {exc.strerror or exc}") from None
    except ValueError:
        raise InstallError(f"{ca_path} is not a PEM certificate") from None
    leaf = x509.load_pem_x509_certificate(crt_path.read_bytes())
    try:
        leaf.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise InstallError(f"{crt_path} is not signed by {ca_path}; re-issue it with "
                           f"gpu-admission certs --force") from None
    wanted = f"{service}.{namespace}.svc"
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value \
            .get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if wanted not in names:
        raise InstallError(f"{crt_path} is for {', '.join(names) or 'no DNS name'}, not {wanted} "
                           f"(kube-apiserver calls the webhook by that name); create one with "
                           f"gpu-admission certs --service {service} --namespace {namespace}")


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically, and never readable by others while a key is being written (mkstemp is 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_overlay_tls(certs_dir: Path, overlay_dir: Path = OVERLAY, *, service: str = SERVICE,
                      namespace: str = NAMESPACE, now: datetime.datetime | None = None) -> list[Path]:
    """Check the pair in certs_dir, then copy ca.crt, tls.crt and tls.key into overlay_dir
    (which must hold the overlay's kustomization.yaml). Returns the paths written."""
    certs_dir, overlay_dir = Path(certs_dir), Path(overlay_dir)
    if not (overlay_dir / "kustomization.yaml").is_file():
        raise InstallError(f"{overlay_dir} is not the generated-certs overlay (no kustomization.yaml)")
    check_pair(certs_dir, service=service, namespace=namespace, now=now)
    written = []
    for name, mode in FILES.items():
        _write(overlay_dir / name, (certs_dir / name).read_bytes(), mode)
        written.append(overlay_dir / name)
    return written


def main(argv: Sequence[str] | None = None, *, err: TextIO | None = None) -> int:
    err = err or sys.stderr
    parser = argparse.ArgumentParser(
        prog="python -m webhook.cli.install",
        description="Copy a checked CA and serving pair (from gpu-admission certs) into the "
                    "generated-certs kustomize overlay.")
    parser.add_argument("--certs", default="certs", metavar="DIR",
                        help="directory with ca.crt, tls.crt and tls.key (default: certs)")
    parser.add_argument("--overlay", default=str(OVERLAY), metavar="DIR",
                        help=f"the overlay directory (default: {OVERLAY})")
    parser.add_argument("--service", default=SERVICE, help=f"Service name (default: {SERVICE})")
    parser.add_argument("--namespace", default=NAMESPACE, help=f"its namespace (default: {NAMESPACE})")
    args = parser.parse_args(argv)
    try:
        written = write_overlay_tls(Path(args.certs), Path(args.overlay), service=args.service,
                                    namespace=args.namespace)
    except InstallError as exc:
        print(f"webhook.cli.install: {exc}", file=err)
        return 2
    except OSError as exc:
        print(f"webhook.cli.install: cannot write {exc.filename}: {exc.strerror or exc}", file=err)
        return 2
    print(f"wrote {', '.join(str(p) for p in written)}", file=err)
    print(next_steps(Path(args.overlay)), file=err)
    return 0


def next_steps(overlay: Path) -> str:
    """What to apply next, audit first as every guide says (docs/install.md, "Rollout"): the overlay's
    ``-audit`` sibling where it has one (``generated-certs-audit`` includes ``generated-certs``)."""
    audit = overlay.with_name(f"{overlay.name}-audit")
    if (audit / "kustomization.yaml").is_file():
        return (f"first rollout, audit (every namespace admitted with warnings): kubectl apply -k {audit}\n"
                f"then enforce, once the warnings are read:                    kubectl apply -k {overlay}")
    return f"install with: kubectl apply -k {overlay}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
