"""Shared fixtures: the external tools some tests need, obtained the way a fresh machine would.

Each comes from a script that returns at once when its cached copy is complete and builds or
installs it otherwise (the fresh-machine path, hence the long timeouts):
- kubectl, kube-apiserver, kube-scheduler and etcd: tests/e2e/build-control-plane.sh (Go modules);
- checkov: tests/tools/install-checkov.sh (its own virtualenv: its pins clash with .venv's).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.properties import SCALE
from webhook.cli import certs
from webhook.cli import install

ROOT = Path(__file__).resolve().parent.parent
# the control-plane library (tests/e2e/control_plane.py) is shared with `make cluster`, which runs
# it as a script; tests/ has no packages, so make it importable here as pytest does for e2e/
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from control_plane import ManifestTree  # noqa: E402

# Property tests assert behaviour, not speed: a per-example deadline only makes them flaky on a
# loaded 2-core CI machine (speed is measured in bench/). HYPOTHESIS_PROFILE picks how many examples
# each property draws: "gpu-admission" (Hypothesis' 100, what `make test` and CI run), "quick" (20,
# the edit loop of `make test-core`), "thorough" (1,000, before a release).
# Tests that draw more than the default scale with the profile too (tests/properties.py).
for _name, _scale in SCALE.items():
    settings.register_profile(_name, deadline=None, max_examples=round(100 * _scale),
                              suppress_health_check=[HealthCheck.too_slow])
_profile = os.environ.get("HYPOTHESIS_PROFILE", "gpu-admission")
if _profile not in SCALE:
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE={_profile!r}: use one of {', '.join(SCALE)}")
settings.load_profile(_profile)

BUILD_TIMEOUT = 3600
"""Seconds: building kube-apiserver, kubectl and etcd from source on a 2-core machine."""

GO_TOOL_FIXTURES = frozenset({"control_plane_bin", "kubectl", "manifest_tree", "installed", "control_plane",
                              "helm", "helm_bin", "promtool", "operator_crds"})
"""Fixtures that need a tool built from Go modules (the control plane and its kubectl, helm,
promtool when Debian's package is missing) or stand on one. A test that uses any of them, directly
or through another fixture (``item.fixturenames`` is the closure), is marked
``e2e`` at collection, so ``-m "not e2e"`` runs without Go and without those builds
(tests/test_markers.py finds every fixture that runs a build script and requires it here)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if GO_TOOL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def _script_bin_dir(script: Path, timeout: int) -> Path:
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        pytest.fail(f"{script.relative_to(ROOT)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        pytest.fail(f"{script.relative_to(ROOT)} printed no bin directory")
    return Path(lines[-1])


@pytest.fixture(scope="session")
def control_plane_bin() -> Path:
    """Directory with kube-apiserver, kube-scheduler, kubectl and etcd."""
    return _script_bin_dir(ROOT / "tests/e2e/build-control-plane.sh", BUILD_TIMEOUT)


@pytest.fixture(scope="session")
def kubectl(control_plane_bin: Path) -> Path:
    return control_plane_bin / "kubectl"


@pytest.fixture(scope="session")
def checkov_bin() -> Path:
    return _script_bin_dir(ROOT / "tests/tools/install-checkov.sh", 1800)


@pytest.fixture(scope="session")
def manifest_tree(tmp_path_factory: pytest.TempPathFactory, kubectl: Path) -> ManifestTree:
    """A copy of manifests/ whose generated-certs overlay holds a pair for the Service name and for
    127.0.0.1 (so e2e can serve it locally), as `make manifests` fills it in."""
    work = tmp_path_factory.mktemp("manifests")
    certs_dir = work / "certs"
    certs.write(certs.issue(service=install.SERVICE, namespace=install.NAMESPACE, ips=["127.0.0.1"]), certs_dir)
    return ManifestTree.prepare(work, certs_dir, kubectl)
