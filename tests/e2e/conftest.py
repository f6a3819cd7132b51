"""One real control plane per session for every end-to-end module: etcd, kube-apiserver,
kube-scheduler and kube-controller-manager built from source (build-control-plane.sh, via
``control_plane_bin`` of tests/conftest.py), and kwok as the kubelets of the fake nodes, on free
loopback ports, with a client-certificate admin kubeconfig; and the real `gpu-admission serve`
installed from the rendered manifests. The implementation is the library in control_plane.py,
which `make cluster` (cluster.py) runs too.

The controller-manager reconciles what the tests create: a Deployment makes a ReplicaSet and its
pods, each one a request to the webhook, and rollouts run for real. The scheduler has no node to use
until a module creates its nodes, and each module's nodes carry a taint that only its own pods
tolerate, so pods left by other modules are never bound to them; kwok makes bound pods Running and
Ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from control_plane import ControlPlane, Installed, ManifestTree, install, running_control_plane, running_webhook

OVERLAY = "overlays/generated-certs"


@pytest.fixture(scope="session")
def control_plane(control_plane_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running_control_plane(control_plane_bin, tmp_path_factory.mktemp("control-plane"), scheduler=True,
                               controllers=True) as cp:
        yield cp


@pytest.fixture(scope="session")
def installed(control_plane: ControlPlane, manifest_tree: ManifestTree,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The webhook installed from the generated-certs overlay; the server runs here with the
    Deployment's command and the ConfigMap's policy, and clientConfig is a loopback URL instead of
    the Service. A test that re-points the configurations calls ``installed.reinstall()`` after."""
    docs = manifest_tree.render(OVERLAY)
    with running_webhook(docs, manifest_tree.certs_dir, tmp_path_factory.mktemp("webhook")) as hook:
        yield install(control_plane, hook, docs, manifest_tree.certs_dir)
