"""Fixtures of the server tests: a test PKI and real ``gpu-admission serve`` processes, each stopped
at teardown whatever the test did (helpers in live.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from live import NAMESPACE, ROOT, SERVICE, Pki, Server, StartServer, free_port, wait_ready, wait_workers
from webhook.cli import certs


@pytest.fixture()
def pki(tmp_path: Path) -> Pki:
    issued = certs.issue(service=SERVICE, namespace=NAMESPACE, ips=["127.0.0.1"])
    certs.write(issued, tmp_path / "certs")
    return Pki(tmp_path / "certs", issued)


@pytest.fixture()
def start_server(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[StartServer]:
    """Start ``gpu-admission serve`` (2 workers x 4 threads) on a free loopback port; every server
    started is stopped at teardown, also when the test failed."""
    started: list[Server] = []
    handles: list[Any] = []

    def start(*extra: str, config: Path | None = None, wait: bool = True, tmpdir: Path | None = None) -> Server:
        # short directory: gunicorn's control socket (AF_UNIX, path length limit) is created in it,
        # instead of the developer's ~/.gunicorn; the metrics directory (TMPDIR) lands there too, and the
        # last good copy of the policy (``tmpdir``: an earlier server's, as a restarted container sees it)
        run_dir = tmpdir or tmp_path_factory.mktemp("run")
        stderr_path = tmp_path / f"server-{len(started)}.stderr"
        err = open(stderr_path, "wb")  # a file, not a pipe: a full pipe would block the server
        handles.append(err)
        port, probe_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        env.update(XDG_RUNTIME_DIR=str(run_dir), TMPDIR=str(run_dir), PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "webhook", "serve", "--cert", str(pki.cert_file), "--key", str(pki.key_file),
                "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
                "--probe-bind", f"127.0.0.1:{probe_port}"]
        if config is not None:
            argv += ["--config", str(config)]
        proc = subprocess.Popen([*argv, *extra], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        server = Server(proc, port, pki, run_dir, stderr_path, probe_port)
        started.append(server)
        if wait:
            wait_ready(server)
            wait_workers(server)
        return server

    yield start
    for server in started:
        server.stop()
    for handle in handles:
        handle.close()


@pytest.fixture()
def server(start_server: StartServer) -> Server:
    return start_server()
