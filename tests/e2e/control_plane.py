"""Helpers for the end-to-end tests: a kubectl wrapper for the control plane of conftest.py,
free loopback ports, stopping processes."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class ControlPlane:
    kubectl: Path
    kubeconfig: Path
    url: str
    log: Path

    def run(self, *args: str, stdin: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
        """kubectl against this control plane; stdout and stderr as text."""
        done = subprocess.run([str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def apply(self, docs: list[dict], *extra: str, check: bool = True) -> subprocess.CompletedProcess:
        stream = "\n---\n".join(json.dumps(d) for d in docs)
        return self.run("apply", "-f", "-", *extra, stdin=stream, check=check)


