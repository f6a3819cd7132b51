"""Shared fixtures: the external tools some tests need, obtained the way a fresh machine would.

Each comes from a script that returns at once when its cached copy is complete and builds or
installs it otherwise (the fresh-machine path, hence the long timeouts):
- kubectl, kube-apiserver, kube-scheduler and etcd: tests/e2e/build-control-plane.sh (Go modules);
- checkov: tests/tools/install-checkov.sh (its own virtualenv: its pins clash with .venv's).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, settings

from webhook import certs, install

# Property tests assert behaviour, not speed: a per-example deadline only makes them flaky on a
# loaded 2-core CI machine (speed is measured in bench/).
settings.register_profile("gpu-admission", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gpu-admission")

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT = 3600
"""Seconds: building kube-apiserver, kubectl and etcd from source on a 2-core machine."""


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


class ManifestTree:
    """A copy of manifests/ whose generated-certs overlay has been filled in as `make manifests`
    does, with a pair for the Service name and for 127.0.0.1 (so e2e can serve it locally)."""

    def __init__(self, root: Path, certs_dir: Path, kubectl: Path) -> None:
        self.root, self.certs_dir, self.kubectl = root, certs_dir, kubectl

    def render(self, rel: str) -> list[dict]:
        """`kubectl kustomize` of one kustomization directory (relative to manifests/)."""
        done = subprocess.run([str(self.kubectl), "kustomize", str(self.root / rel)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            pytest.fail(f"kubectl kustomize manifests/{rel} failed:\n{done.stderr}")
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

    def with_components(self, *components: str, base: str = "base") -> str:
        """A throwaway overlay of `base` with the given components; returns its relative path."""
        name = "_test-" + "-".join(Path(c).name for c in components) + "-on-" + Path(base).name
        overlay = self.root / "overlays" / name
        overlay.mkdir(parents=True, exist_ok=True)
        lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization",
                 "resources:", f"  - ../../{base}", "components:",
                 *[f"  - ../../{c}" for c in components]]
        (overlay / "kustomization.yaml").write_text("\n".join(lines) + "\n")
        return f"overlays/{name}"


@pytest.fixture(scope="session")
def manifest_tree(tmp_path_factory: pytest.TempPathFactory, kubectl: Path) -> ManifestTree:
    work = tmp_path_factory.mktemp("manifests")
    root = work / "manifests"
    shutil.copytree(ROOT / "manifests", root,
                    ignore=shutil.ignore_patterns("*.crt", "*.key", "_test-*"))
    certs_dir = work / "certs"
    certs.write(certs.issue(service=install.SERVICE, namespace=install.NAMESPACE, ips=["127.0.0.1"]), certs_dir)
    install.write_overlay_tls(certs_dir, root / "overlays/generated-certs")
    return ManifestTree(root, certs_dir, kubectl)
