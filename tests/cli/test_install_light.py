"""The two installs (issue 16, point 3), each into a fresh virtual environment, and run from there.

- ``pip install gpu-admission``: ``check``, ``explain`` and ``policy check`` for CI, with PyYAML, jsonschema and jsonpatch only;
  none of the server's libraries is importable, and ``serve``, ``certs`` and ``inventory`` exit 2
  with one line naming the extra to install (never a traceback).
- ``pip install 'gpu-admission[server]'``: the admission server, started from that venv.

Marked ``install`` (slow: ~20-30 s with a warm pip cache, longer on a cold one): the wheel is built
once from the working tree (so what is tested is what is edited, committed or not) and both venvs
install it; their dependencies come from PyPI through pip's cache. ``make test`` runs them.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import webhook

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-llama-70b-tp4.yaml"
SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "webhook")
"""What the build reads (setup.cfg: metadata, long description, packages and their data)."""
SERVER_LIBRARIES = ("flask", "werkzeug", "gunicorn", "cryptography", "kubernetes", "prometheus_client")
INSTALL_TIMEOUT = 600
"""Seconds for one pip run: dependencies may come from PyPI on a cold cache."""


def _run(cmd: list[str], *, cwd: Path, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def copy_tree_files(names: tuple[str, ...], dest: Path) -> None:
    """Copy files and folders of the checkout (by name, without bytecode) into ``dest``: the package
    as it is in the working tree, for an install or a hook repository."""
    for name in names:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, dest / name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of the working tree (a build in place would leave
    build/ behind in the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    copy_tree_files(SOURCES, src)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(base / "dist"), str(src)],
         cwd=base, timeout=INSTALL_TIMEOUT, check=True)
    (built,) = (base / "dist").glob("gpu_admission-*.whl")
    return built


def _venv(where: Path, requirement: str) -> Path:
    """A fresh venv (no system site-packages) with ``requirement`` installed; its bin directory."""
    _run([sys.executable, "-m", "venv", str(where)], cwd=where.parent, timeout=INSTALL_TIMEOUT, check=True)
    bin_dir = where / "bin"
    _run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", requirement],
         cwd=where.parent, timeout=INSTALL_TIMEOUT, check=True)
    return bin_dir


def _site_packages_mb(venv: Path) -> float:
    (site,) = (venv / "lib").glob("python3*/site-packages")
    skip = ("pip", "setuptools", "_distutils_hack")
    total = sum(f.stat().st_size for f in site.rglob("*")
                if f.is_file() and f.relative_to(site).parts[0].split("-")[0] not in skip)
    return total / 1e6


@pytest.fixture(scope="module")
def light(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _venv(tmp_path_factory.mktemp("light") / "venv", str(wheel))


@pytest.fixture(scope="module")
def server(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _venv(tmp_path_factory.mktemp("server") / "venv", f"{wheel}[server]")


# --- pip install gpu-admission -----------------------------------------------------------------------


def test_light_install_checks_a_manifest(light: Path, tmp_path: Path) -> None:
    done = _run([str(light / "gpu-admission"), "check", str(EXAMPLE)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 checked, 1 allowed, 0 denied" in done.stdout
    bad = tmp_path / "l40s.yaml"  # the 70B TP4 pinned to L4 (33 GiB of weights per 24 GB GPU): the deny CI exists for
    bad.write_text(EXAMPLE.read_text().replace(
        "    spec:\n      containers:", "    spec:\n      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}\n"
        "      containers:", 1))
    done = _run([str(light / "gpu-admission"), "check", "--output", "junit", str(bad)], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "model-does-not-fit" in done.stdout
    done = _run([str(light / "gpu-admission"), "explain", str(EXAMPLE)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_light_install_checks_a_policy_file(light: Path, tmp_path: Path) -> None:
    """`policy check` is a CI command too: it needs the core only."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\nmode: audit\n")
    done = _run([str(light / "gpu-admission"), "policy", "check", str(policy)], cwd=tmp_path)
    assert done.returncode == 0 and "mode audit" in done.stdout, done.stderr
    policy.write_text("mode: audit\n")
    done = _run([str(light / "gpu-admission"), "policy", "check", str(policy)], cwd=tmp_path)
    assert done.returncode == 1 and "apiVersion: missing" in done.stderr and "Traceback" not in done.stderr


def test_light_install_runs_the_installed_copy_without_the_server_libraries(light: Path, tmp_path: Path) -> None:
    probe = ("import importlib.util, webhook; print(webhook.__file__); "
             f"print(','.join(m for m in {SERVER_LIBRARIES!r} if importlib.util.find_spec(m)))")
    done = _run([str(light / "python"), "-c", probe], cwd=tmp_path, check=True)
    location, present = done.stdout.splitlines()
    assert Path(location).is_relative_to(light.parent), location  # not the checkout's webhook/
    assert present == "", f"the light install brings server libraries: {present}"
    size = _site_packages_mb(light.parent)
    print(f"light install: {size:.1f} MB in site-packages (pip and setuptools excluded)")
    assert size < 25, f"the light install grew to {size:.1f} MB"


def test_light_install_prints_its_version(light: Path, tmp_path: Path) -> None:
    for cmd in ([str(light / "gpu-admission"), "--version"], [str(light / "python"), "-m", "webhook", "--version"]):
        done = _run(cmd, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (0, f"gpu-admission {webhook.__version__}\n"), done.stderr
    done = _run([str(light / "gpu-admission"), "--help"], cwd=tmp_path)  # the parser builds without certs' flags
    assert done.returncode == 0 and "serve" in done.stdout, done.stderr


@pytest.mark.parametrize(("argv", "extra"), [
    (["serve"], "server"),
    (["serve", "--help"], "server"),
    (["certs", "--service", "s", "--namespace", "n"], "server"),
    (["inventory"], "inventory"),
])
def test_light_install_names_the_extra_a_command_needs(light: Path, tmp_path: Path, argv: list[str], extra: str) -> None:
    done = _run([str(light / "gpu-admission"), *argv], cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"pip install 'gpu-admission[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


# --- pip install 'gpu-admission[server]' -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_install_makes_certificates_and_serves(server: Path, tmp_path: Path) -> None:
    gpu_admission = str(server / "gpu-admission")
    done = _run([gpu_admission, "certs", "--service", "gpu-admission", "--namespace", "gpu-admission",
                 "--ip", "127.0.0.1", "--out", str(tmp_path / "certs")], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen([gpu_admission, "serve", "--cert", str(tmp_path / "certs/tls.crt"),
                             "--key", str(tmp_path / "certs/tls.key"), "--bind", f"127.0.0.1:{port}",
                             "--workers", "1", "--threads", "2", "--inventory", "off",
                             "--probe-bind", f"127.0.0.1:{_free_port()}"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    context = ssl.create_default_context(cafile=str(tmp_path / "certs/ca.crt"))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"the server from the [server] install did not answer:\n{proc.communicate()[0][-3000:]}")
                time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print(f"server install: {_site_packages_mb(server.parent):.1f} MB in site-packages (pip and setuptools excluded)")
