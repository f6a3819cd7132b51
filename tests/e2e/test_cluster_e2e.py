"""`make cluster` rehearses the guide (issue 26, point 8): run as the Makefile runs it, in the
foreground, and driven through what it prints.

- its `get nodes -L nvidia.com/gpu.product` hint shows the product of every node;
- every file in examples/ applies (`kubectl apply -f examples/`): the operator kinds no running
  operator serves have stand-in CRDs;
- kube-apiserver writes an audit log at the printed path, and a judged request's
  `*.gpu-admission.io/message` annotation is in it;
- when `gpu-admission serve` dies it is restarted on the same port, and the cluster keeps admitting;
- SIGTERM stops everything and exits 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

READY = "Ctrl-C stops everything."
STARTUP = 900.0  # the tools are built by tests/tools/prepare.sh before pytest; this is start-up only


class Cluster:
    """cluster.py in its own process group, its stdout collected line by line."""

    def __init__(self, workdir: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests/e2e/cluster.py"), "--workdir", str(workdir)],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float, since: int = 0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(self.lines[since:], since):
                if text in line:
                    return i
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.5)
        raise AssertionError(f"cluster.py never printed {text!r}:\n" + "\n".join(self.lines[-60:]))

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                return self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                return self.proc.wait()
        return self.proc.returncode


def test_make_cluster_is_a_rehearsal(tmp_path: Path) -> None:
    work = tmp_path / "cluster"
    cluster = Cluster(work)
    try:
        cluster.wait_for(READY, STARTUP)
        text = "\n".join(cluster.lines)
        hint = re.search(r"^\s*KUBECONFIG=(\S+) (\S+) get nodes -L nvidia.com/gpu.product$", text, re.M)
        assert hint, text
        kubeconfig, kubectl = hint.group(1), hint.group(2)
        env = dict(os.environ, KUBECONFIG=kubeconfig)

        def k(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([kubectl, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert not check or done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}\n{done.stderr}"
            return done

        # the printed hint, as printed: every node shows its product in the last column
        nodes = k("get", "nodes", "-L", "nvidia.com/gpu.product")
        rows = nodes.stdout.strip().splitlines()
        assert rows[0].split()[-1] == "GPU.PRODUCT" and len(rows) > 1, nodes.stdout + nodes.stderr
        assert all(row.split()[-1].startswith("NVIDIA-") for row in rows[1:]), nodes.stdout

        # every example applies, the operator kinds included
        applied = k("apply", "-f", "examples/")
        files = sorted((ROOT / "examples").glob("*.yaml"))
        assert len(applied.stdout.strip().splitlines()) >= len(files), applied.stdout

        # the JobSet's pods (made by the JobSet and Job controllers) show their group, as the hint says,
        # and their nodes are all of one product
        assert "-n training get pods -o wide -L gpu-admission.io/gpu-group" in text
        deadline, pods = time.monotonic() + 120, []
        while time.monotonic() < deadline:
            listed = json.loads(k("-n", "training", "get", "pods", "-o", "json").stdout)["items"]
            pods = [p for p in listed if p["spec"].get("nodeName") and p["metadata"]["name"].startswith("llama-8b-pretrain")]
            if len(pods) >= 4:
                break
            time.sleep(2)
        assert len(pods) >= 4, [p["metadata"]["name"] for p in pods]
        # as training pods do, they run (kube-scheduler forgets a Succeeded pod, and the group's pod
        # affinity with it: make cluster's kwok keeps Job pods Running an hour)
        assert {p["status"].get("phase") for p in pods} <= {"Pending", "Running"}, \
            {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
        shown = k("-n", "training", "get", "pods", "-o", "wide", "-L", "gpu-admission.io/gpu-group").stdout
        groups = {row.split()[-1] for row in shown.splitlines()[1:] if row.startswith("llama-8b-pretrain")}
        assert len(groups) == 1 and groups.pop().startswith("llama-8b-pretrain-"), shown
        products = {json.loads(k("get", "node", p["spec"]["nodeName"], "-o", "json").stdout)["metadata"]["labels"]
                    ["nvidia.com/gpu.product"] for p in pods}
        assert len(products) == 1, products

        # the audit log is where the banner says, and holds the webhook's full message
        audit = Path(re.search(r"^kube-apiserver audit log.*\n\s+(\S+)$", text, re.M).group(1))
        k("-n", "demo-audit", "apply", "-f", "tests/e2e/demo/llama-70b-on-l40s.yaml")
        deadline = time.monotonic() + 30
        found: list[str] = []
        while not found and time.monotonic() < deadline:
            found = [line for line in audit.read_text().splitlines() if "gpu-admission.io/message" in line]
            time.sleep(0.5)
        assert found, f"no gpu-admission message annotation in {audit}"
        notes = json.loads(found[-1])["annotations"]
        assert any(key.endswith(".gpu-admission.io/message") and "tier-mismatch" in value
                   for key, value in notes.items()), notes

        # gpu-admission audit reads this cluster (every example applied, the audited pod on L40S): every
        # GPU workload judged once, none in error, the audited pod failing with its fix, the capacity
        # of each product the fleet has
        done = subprocess.run([sys.executable, "-m", "webhook", "audit", "--kubeconfig", kubeconfig, "--output", "json"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
        report = json.loads(done.stdout)
        rows = [w for ws in report["namespaces"].values() for w in ws]
        assert len(rows) >= 30 and not [w for w in rows if w["result"] == "error"], rows
        assert len({w["uid"] for w in rows}) == len(rows)  # each judged once (v1 and v1alpha1 are one object)
        (pod,) = [w for w in report["namespaces"]["demo-audit"] if w["name"] == "llama-70b-on-l40s"]
        assert pod["result"] == "fail" and any(f["rule"] == "tier-mismatch" for f in pod["findings"]), pod
        assert {i["value"] for i in report["idle"]} >= {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"}

        # the webhook dies: it is restarted on the same port, and admission works again
        policy = work / "webhook" / "policy.yaml"
        pids = subprocess.run(["pgrep", "-f", str(policy)], capture_output=True, text=True).stdout.split()
        assert pids, "no gpu-admission serve process found"
        before = len(cluster.lines)
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        cluster.wait_for("gpu-admission serve is back on", 120, since=before)
        pinned = k("-n", "demo", "apply", "-f", "tests/e2e/demo/llama-70b.yaml")
        assert "pinned this pod to GPU tier hbm-nvlink" in pinned.stderr, pinned.stderr
    finally:
        code = cluster.stop()
    assert code == 0, "\n".join(cluster.lines[-40:])
    assert any(line.startswith("stopped:") for line in cluster.lines), cluster.lines[-10:]
