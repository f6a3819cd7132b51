"""The container image, built and run here (issue 16, point 1).

``build-image.sh`` builds the Dockerfile as it is with buildah (Debian's package, installed by the
script) on a locally bootstrapped stand-in for its FROM, since no container registry answers here;
the release image is built on the registry's python:3.11-slim-bookworm. The image is cached by the
hash of what goes into it, so only a change rebuilds it (~35 s; the base ~40 s once per machine).

Run as UID 65532 with the certificates mounted read-only, sharing the host network (the server
binds 127.0.0.1 on a free port: test traffic stays on loopback), twice:

- with ``podman run --read-only`` (Debian's podman, installed by the build script), as the
  Deployment runs it: a read-only root filesystem with tmpfs at /tmp (the Deployment's emptyDir) and
  /dev/shm (gunicorn's heartbeat files). Podman here needs three settings no default gives, so the
  test writes its own containers.conf (``CONTAINERS_CONF``; nothing in /etc is touched): RLIMIT_NOFILE
  at this machine's hard limit (podman asks for more and fails), RLIMIT_NPROC at most 32768, and runc
  instead of crun (crun: "cgroups in hybrid mode not supported"), with cgroupfs and file events (no
  systemd). A write to the root filesystem is shown to fail inside that container;
- with ``buildah run --isolation chroot`` (no configuration at all), for the checks of what the
  image holds.

The build also writes the image's SBOM (build/sbom.cdx.json, CycloneDX, from requirements/image.lock:
tests/image/sbom.py); it is checked against the lock and against the distributions the built image
really has installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "image" / "build-image.sh"
SBOM = ROOT / "build" / "sbom.cdx.json"
"""What the build writes next to the image (issue 25, point 8): its CycloneDX SBOM."""
LOCK = ROOT / "requirements" / "image.lock"
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
    SBOM.unlink(missing_ok=True)  # so the SBOM checked below is this build's
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "SBOM_PYTHON": sys.executable})
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
def served_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and serving certificate (SAN 127.0.0.1), readable by UID 65532 through a mount."""
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
    return certs


@pytest.fixture(scope="module")
def served(container: str, served_certs: Path) -> Iterator[tuple[int, Path, int]]:
    certs = served_certs
    port, probe = free_port(), free_port()
    proc = subprocess.Popen(
        ["buildah", "run", "--isolation", "chroot", "--user", f"{UID}:{UID}", "-v", f"{certs}:/etc/gpu-admission/tls:ro",
         container, "--", "gpu-admission", "serve", "--cert", "/etc/gpu-admission/tls/tls.crt",
         "--key", "/etc/gpu-admission/tls/tls.key", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--threads", "2", "--inventory", "off", "--probe-bind", f"127.0.0.1:{probe}"],
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
        yield port, certs, probe
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


def podman_conf(directory: Path) -> Path:
    """A containers.conf with the three settings podman needs on this machine (see the docstring)."""
    import resource

    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
    conf = directory / "containers.conf"
    conf.write_text(f"""[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
""")
    return conf


def podman(conf: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CONTAINERS_CONF": str(conf)})


@pytest.fixture(scope="module")
def read_only_served(image: str, served_certs: Path,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path, Path, str, int]]:
    """The image under ``podman run --read-only`` as UID 65532, serving on a free loopback port."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: tests/image/build-image.sh installs it from Debian's packages")
    conf = podman_conf(tmp_path_factory.mktemp("podman"))
    port, probe = free_port(), free_port()
    name = f"gpu-admission-ro-{port}"
    started = podman(conf, "run", "--detach", "--rm", "--name", name, "--read-only", "--user", f"{UID}:{UID}",
                     "--network", "host", "-v", f"{served_certs}:/etc/gpu-admission/tls:ro", image,
                     "serve", "--cert", "/etc/gpu-admission/tls/tls.crt", "--key", "/etc/gpu-admission/tls/tls.key",
                     "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2", "--inventory", "off",
                     "--probe-bind", f"127.0.0.1:{probe}")
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, served_certs, "/readyz")
                break
            except OSError:
                if time.monotonic() > deadline:
                    logs = podman(conf, "logs", name)
                    raise AssertionError(f"not ready within 60 s under podman --read-only: "
                                         f"{(logs.stdout + logs.stderr)[-2000:]}") from None
                time.sleep(0.3)
        yield port, served_certs, conf, name, probe
    finally:
        podman(conf, "stop", "--time", "10", name, timeout=60)
        podman(conf, "rm", "--force", "--ignore", name, timeout=60)


def test_the_image_serves_with_a_read_only_root(read_only_served: tuple[int, Path, Path, str, int]) -> None:
    port, certs, conf, name, probe = read_only_served
    assert_serves(port, certs, probe)
    # the root filesystem is read-only for the server's user; /tmp is the writable tmpfs
    write = podman(conf, "exec", name, "sh", "-c", "touch /usr/local/probe 2>&1; echo rc=$?; "
                                                   "touch /tmp/probe && echo tmp-ok; id -u")
    assert "Read-only file system" in write.stdout and "tmp-ok" in write.stdout, write.stdout + write.stderr
    assert write.stdout.strip().splitlines()[-1] == str(UID)


def assert_serves(port: int, certs: Path, probe: int) -> None:
    """The served image is ready, denies a 70B TP4 pod pinned to L40S on /validate, and has metrics
    on its probe port (plain HTTP), not on the admission port."""
    status, body = get(port, certs, "/readyz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    review = (ROOT / "examples" / "reviews" / "validate-llama-70b-tp2-on-l40s.json").read_bytes()
    status, body = get(port, certs, "/validate", review)
    answer = json.loads(body)["response"]
    assert status == 200 and answer["allowed"] is False and "model-does-not-fit" in answer["status"]["message"]
    with urllib.request.urlopen(f"http://127.0.0.1:{probe}/metrics", timeout=10) as resp:
        assert resp.status == 200 and b"gpu_admission_requests_total" in resp.read()
    with urllib.request.urlopen(f"http://127.0.0.1:{probe}/readyz", timeout=10) as resp:
        assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(port, certs, "/metrics")
    assert refused.value.code == 404


def get(port: int, certs: Path, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=body,
                                     headers={"Content-Type": "application/json"} if body else {})
    with urllib.request.urlopen(request, context=context, timeout=5) as resp:
        return resp.status, resp.read()


def test_the_image_serves_as_its_non_root_user(served: tuple[int, Path, int], container: str) -> None:
    port, certs, probe = served
    assert_serves(port, certs, probe)
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


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_sbom_lists_the_locked_packages_the_image_holds(image: str, container: str) -> None:
    """build/sbom.cdx.json (written by this build: the fixture removed it first) is CycloneDX 1.6 and
    lists every pin of requirements/image.lock with its version, purl and the lock's hashes, plus the
    project's own package, the base image by the Dockerfile's digest, and the image as its subject; and
    those packages are exactly what the image has installed, version for version."""
    import webhook

    assert SBOM.is_file(), f"{SBOM} was not written by tests/image/build-image.sh"
    bom = json.loads(SBOM.read_text())
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.6")
    assert bom["metadata"]["component"]["type"] == "container"
    assert bom["metadata"]["component"]["name"] == image.rsplit(":", 1)[0].rsplit("/", 1)[-1]

    lock = LOCK.read_text()
    locked = {canonical(m.group(1)): m.group(2) for m in re.finditer(r"^([A-Za-z0-9][\w.-]*)==(\S+)", lock, re.M)}
    assert len(locked) > 30
    python = {canonical(c["name"]): c for c in bom["components"] if c["purl"].startswith("pkg:pypi/")}
    assert {name: c["version"] for name, c in python.items()} == {**locked, "gpu-admission": webhook.__version__}
    for name, version in locked.items():
        component = python[name]
        assert component["purl"] == f"pkg:pypi/{name}@{version}", component["purl"]
        hashes = {h["content"] for ref in component.get("externalReferences", []) for h in ref.get("hashes", [])}
        entry = re.search(rf"(?ms)^{re.escape(name)}==.*?(?=^\S|\Z)", lock.replace("_", "-").lower())
        assert hashes and hashes == set(re.findall(r"sha256:([0-9a-f]{64})", entry.group(0))), name

    (base,) = [c for c in bom["components"] if c["type"] == "container"]
    digest = re.search(r"^FROM python:3\.11-slim-bookworm@sha256:([0-9a-f]{64})", (ROOT / "Dockerfile").read_text(), re.M)
    assert base["hashes"] == [{"alg": "SHA-256", "content": digest.group(1)}]
    refs = {c["bom-ref"] for c in bom["components"]} | {bom["metadata"]["component"]["bom-ref"]}
    assert {d["ref"] for d in bom["dependencies"]} == refs
    assert all(set(d["dependsOn"]) <= refs for d in bom["dependencies"])

    done = run_in(container, "python", "-c", "import importlib.metadata as m, json; "
                  "print(json.dumps(sorted([d.metadata['Name'], d.version] for d in m.distributions())))")
    assert done.returncode == 0, done.stderr
    installed = {canonical(name): version for name, version in json.loads(done.stdout)}
    assert installed == {name: c["version"] for name, c in python.items()}
