"""The procedures the docs print, run exactly as printed against a real kube-apiserver (issue 26).

Each procedure is a fenced ``sh`` block in the docs behind a marker comment
``<!-- procedure: NAME ... -->``; :func:`procedure` takes the block as it is in the file and runs it
with bash (``-euo pipefail``), the control plane's kubeconfig and this suite's kubectl on the PATH.
So the docs cannot drift from what works: change the text and this test runs the new text.

- ``emergency-fail-open`` (docs/install.md, "Failure policy"): with the webhook server down, the
  enforce entries refuse GPU objects (``failed calling webhook``); after the documented step, a GPU
  pod and an operator kind (a PyTorchJob: the ``validate-operators`` entry, the fifth, which the
  earlier four-entry loop missed) are admitted, and every entry reads ``Ignore``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from control_plane import ROOT, ControlPlane, Installed, free_port, register
from objects import stand_in_crd, vllm_pod
from operators_plane import wait_established
from test_operators_e2e import pytorchjob

pytestmark = pytest.mark.e2e

_MARKER = re.compile(r"<!-- procedure: (?P<name>[\w-]+)[^>]*-->\s*```sh\n(?P<body>.*?)```", re.S)


def procedure(doc: str, name: str) -> str:
    """The ``sh`` block behind ``<!-- procedure: NAME -->`` in ``doc`` (a path under the repository)."""
    found = {m["name"]: m["body"] for m in _MARKER.finditer((ROOT / doc).read_text())}
    assert name in found, f"{doc} has no procedure {name!r} (has {sorted(found)})"
    return found[name]


def run_procedure(cp: ControlPlane, script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig),
               PATH=f"{Path(cp.kubectl).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)


def dry_run(cp: ControlPlane, obj: dict) -> subprocess.CompletedProcess:
    return cp.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(obj), check=False)


def until(what: str, check, timeout: float = 60) -> None:
    """The apiserver picks changed webhook configurations up asynchronously."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def test_the_emergency_fail_open_admits_every_kind_with_the_server_down(installed: Installed) -> None:
    cp = installed.cp
    namespace = "e2e-emergency"
    cp.namespace(namespace)
    crd = stand_in_crd("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    cp.apply([crd])
    wait_established(cp, (crd["metadata"]["name"],))
    pod = vllm_pod("emergency", namespace)
    job = pytorchjob(None)
    job["metadata"]["namespace"] = namespace
    try:
        register(cp, installed.docs, free_port())  # the shipped entries, pointed where nothing listens
        until("the webhook down refuses a GPU pod",
              lambda: "failed calling webhook" in dry_run(cp, pod).stderr)
        refused = dry_run(cp, job)
        assert refused.returncode != 0 and "failed calling webhook" in refused.stderr, refused.stderr
        assert "validate-operators.gpu-admission.io" in refused.stderr, refused.stderr

        done = run_procedure(cp, procedure("docs/install.md", "emergency-fail-open"))
        assert done.returncode == 0, f"the documented step failed:\n{done.stdout}\n{done.stderr}"
        # the listing: "<entry> <policy>" per entry (after kubectl's "... patched" lines)
        listed = [line.split() for line in done.stdout.splitlines() if line.split()[:1]
                  and line.split()[0].endswith(".gpu-admission.io")]
        names = {d["metadata"]["name"] for d in installed.docs if d.get("kind", "").endswith("WebhookConfiguration")}
        want = sum(len(d["webhooks"]) for d in installed.docs if d.get("kind", "").endswith("WebhookConfiguration"))
        assert names == {"gpu-admission"}, names
        assert len(listed) == want and all(policy == "Ignore" for _, policy in listed), done.stdout

        until("a GPU pod admitted after the emergency step", lambda: dry_run(cp, pod).returncode == 0)
        admitted = dry_run(cp, job)
        assert admitted.returncode == 0, f"the PyTorchJob is still refused:\n{admitted.stderr}"
    finally:
        installed.reinstall()  # the shipped policies again, pointed at the session's webhook
