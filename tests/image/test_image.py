"""The container image, built and run here (issue 16, point 1).

``build-image.sh`` builds the Dockerfile as it is with buildah (Debian's package, installed by the
script) on a locally bootstrapped stand-in for its FROM, since no container registry answers here;
the release image is built on the registry's python:3.11-slim-bookworm. The image is cached by the
hash of what goes into it, so only a change rebuilds it (~35 s; the base ~40 s once per machine).

Run with ``buildah run --isolation chroot`` as UID 65532 with the certificates mounted read-only,
sharing the host network (the server binds 127.0.0.1 on a free port: test traffic stays on
loopback). What this cannot show: a read-only root filesystem (``buildah run`` has no such option,
and podman needs machine-wide workarounds here); the manifests' readOnlyRootFilesystem is checked
by tests/cli/test_manifests.py, and the server writes nothing outside /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "image" / "build-image.sh"
UID = 65532


def _buildah_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "building images here needs root for buildah's chroot isolation (this process is not root)"
    if shutil.which("apt-get") is None and shutil.which("buildah") is None:
        return "neither buildah nor apt-get (to install it from Debian's packages) is on this machine"
    return None


@pytest.fixture(scope="module")
def image() -> str:
    reason = _buildah_unavailable()
    if reason:
        pytest.skip(reason)
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    ctr = subprocess.run(["buildah", "from", image], capture_output=True, text=True, check=True).stdout.strip()
    try:
        yield ctr
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)


def run_in(ctr: str, *cmd: str, user: str | None = None) -> subprocess.CompletedProcess:
    args = ["buildah", "run", "--isolation", "chroot", *(["--user", user] if user else []), ctr, "--", *cmd]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(container: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    certs = tmp_path_factory.mktemp("image-certs")
    made = subprocess.run([str(Path(sys.executable).parent / "gpu-admission"), "certs", "--service", "gpu-admission",
                           "--namespace", "gpu-admission", "--ip", "127.0.0.1", "--out", str(certs), "--force"],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    for f in certs.iterdir():  # UID 65532 reads them through the mount, as from a Secret volume
        f.chmod(0o644)
    for d in (certs, *certs.parents):  # and pytest's tmp directories are 0700
        if d == Path(d.anchor) or str(d) in ("/tmp",):
            break
        d.chmod(d.stat().st_mode | 0o055)
    port = free_port()
    proc = subprocess.Popen(
        ["buildah", "run", "--isolation", "chroot", "--user", f"{UID}:{UID}", "-v", f"{certs}:/etc/gpu-admission/tls:ro",
         container, "--", "gpu-admission", "serve", "--cert", "/etc/gpu-admission/tls/tls.crt",
         "--key", "/etc/gpu-admission/tls/tls.key", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--threads", "2", "--inventory", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"the image's server exited {proc.returncode}: "
                                     f"{proc.stdout.read().decode()[-2000:] if proc.stdout else ''}")
            try:
                get(port, certs, "/readyz")
                break
            except OSError:
                time.sleep(0.3)
        else:
            raise AssertionError("the image's server was not ready within 60 s")
        yield port, certs
    finally:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
                break
            except ProcessLookupError:  # the whole group is gone already
                break
            except subprocess.TimeoutExpired:
                continue


def get(port: int, certs: Path, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=body,
                                     headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(request, context=context, timeout=5) as resp:
        return resp.status, resp.read()


def test_the_image_serves_as_its_non_root_user(served: tuple[int, Path], container: str) -> None:
    port, certs = served
    status, body = get(port, certs, "/readyz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    review = (ROOT / "examples" / "reviews" / "validate-llama-70b-on-l40s.json").read_bytes()
    status, body = get(port, certs, "/validate", review)
    answer = json.loads(body)["response"]
    assert status == 200 and answer["allowed"] is False and "tier-mismatch" in answer["status"]["message"]
    status, body = get(port, certs, "/metrics")
    assert status == 200 and b"gpu_admission_requests_total" in body
    assert run_in(container, "id", "-u", user=f"{UID}:{UID}").stdout.strip() == str(UID)


def test_the_image_runs_as_uid_65532_by_default(image: str) -> None:
    user = subprocess.run(["buildah", "inspect", "--format", "{{.OCIv1.Config.User}}", image],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert user == f"{UID}:{UID}"


@pytest.mark.parametrize(("what", "command"), [
    pytest.param("no compiler", "! command -v gcc && ! command -v cc && ! command -v g++", id="no-compilers"),
    pytest.param("no pip", "! command -v pip && ! python -c 'import pip'", id="no-pip"),
    pytest.param("no shell history", "! ls /root/.bash_history /root/.python_history 2>/dev/null | grep -q .",
                 id="no-shell-history"),
    pytest.param("no virtualenv, git or keys copied in",
                 "! find / -xdev \\( -name .venv -o -name .git -o -name '*.key' -o -name 'tls.crt' \\) "
                 "-not -path '/proc/*' 2>/dev/null | grep -q .", id="no-venv-git-keys"),
    pytest.param("no wheels left", "! ls /wheels 2>/dev/null | grep -q .", id="no-wheels"),
])
def test_the_image_holds_only_what_runs(container: str, what: str, command: str) -> None:
    done = run_in(container, "sh", "-c", command)
    assert done.returncode == 0, (what, done.stdout, done.stderr)


def test_the_entrypoint_answers_version(container: str) -> None:
    import webhook

    done = run_in(container, "gpu-admission", "--version", user=f"{UID}:{UID}")
    assert done.returncode == 0 and done.stdout.strip() == f"gpu-admission {webhook.__version__}", \
        done.stdout + done.stderr
