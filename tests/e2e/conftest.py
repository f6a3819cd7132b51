"""A real control plane for end-to-end tests: etcd and kube-apiserver built from source
(build-control-plane.sh, via the session fixture ``control_plane_bin`` of tests/conftest.py),
running on loopback ports picked at random, with a static admin token. No controller-manager and no
scheduler: objects are admitted and stored, nothing reconciles or schedules them, so every request
the webhook sees is one the test made.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from control_plane import ControlPlane, free_port, stop

STARTUP_TIMEOUT = 120.0


@pytest.fixture(scope="session")
def control_plane(control_plane_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    work = tmp_path_factory.mktemp("control-plane")
    procs: list[subprocess.Popen] = []
    try:
        etcd_client, etcd_peer = free_port(), free_port()
        etcd_log = work / "etcd.log"
        procs.append(subprocess.Popen(
            [str(control_plane_bin / "etcd"), "--name", "e2e", "--data-dir", str(work / "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_client}",
             "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
             "--initial-cluster", f"e2e=http://127.0.0.1:{etcd_peer}",
             "--unsafe-no-fsync", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=etcd_log.open("w")))

        sa_key = ec.generate_private_key(ec.SECP256R1())
        (work / "sa.key").write_bytes(sa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        (work / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        token = secrets.token_hex(16)
        (work / "tokens.csv").write_text(f'{token},e2e-admin,e2e-admin,"system:masters"\n')
        port = free_port()
        api_log = work / "kube-apiserver.log"
        procs.append(subprocess.Popen(
            [str(control_plane_bin / "kube-apiserver"),
             "--etcd-servers", f"http://127.0.0.1:{etcd_client}",
             "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(port),
             "--cert-dir", str(work / "apiserver-certs"),
             "--token-auth-file", str(work / "tokens.csv"), "--authorization-mode", "RBAC",
             "--service-account-issuer", "https://kubernetes.default.svc",
             "--service-account-key-file", str(work / "sa.pub"),
             "--service-account-signing-key-file", str(work / "sa.key"),
             "--service-cluster-ip-range", "10.96.0.0/16",
             # no controller-manager creates `default` ServiceAccounts here
             "--disable-admission-plugins", "ServiceAccount",
             "--enable-priority-and-fairness=false", "--profiling=false"],
            stdout=subprocess.DEVNULL, stderr=api_log.open("w")))

        url = f"https://127.0.0.1:{port}"
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "e2e", "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}]}))
        os.chmod(kubeconfig, 0o600)
        cp = ControlPlane(control_plane_bin / "kubectl", kubeconfig, url, api_log)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            for proc, log in zip(procs, (etcd_log, api_log)):
                if proc.poll() is not None:
                    pytest.fail(f"{log.stem} exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            done = cp.run("get", "--raw", "/readyz", check=False, timeout=10)
            # the default namespace and the system priority classes exist once bootstrap is done
            if done.returncode == 0 and cp.run("get", "namespace", "default", check=False).returncode == 0 \
                    and cp.run("get", "priorityclass", "system-cluster-critical", check=False).returncode == 0:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"kube-apiserver not ready after {STARTUP_TIMEOUT} s:\n{api_log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield cp
    finally:
        for proc in reversed(procs):
            stop(proc)
