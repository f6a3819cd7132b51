"""Issue 24 against a real kube-apiserver: the seed's trap is denied only where the cluster offers
the way out, and a deliberate cost-tier pin of small work is admitted without a word.

Its own control plane and its own `gpu-admission serve` (the default policy, started as the
Deployment runs it, with a kubeconfig for this control plane so its node watch sees the fleet):
- fleet of L40S and L4 nodes only: Llama-3.1-70B bf16 at TP4 pinned to L40S is admitted, with the
  "needs NVLink" warning kubectl prints; Google's Gemma-7B at TP2 pinned to 2x L4 is admitted with no
  misplacement warning, and so is it offline (`gpu-admission check`, no inventory);
- an A100 SXM node joins: the watch sees it and the same L40S pod is now refused, with the A100 in
  the fix, and nothing is stored.
One test function, because the steps share the fleet in order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane import ManifestTree, apply_object as apply, create_nodes, gpu_node, install, \
    kubeconfig_env, running_control_plane, running_webhook, wait_for
from objects import PRODUCT_LABEL, vllm_pod

pytestmark = pytest.mark.e2e

NS = "verdicts"
A100, L40S, L4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-L4"


def gemma_tp2_on_l4(name: str) -> dict:
    pod = vllm_pod(name, NS, gpus=2, pin=L4)
    pod["spec"]["containers"][0]["command"] = ["vllm", "serve", "google/gemma-7b-it", "--tensor-parallel-size", "2"]
    return pod




def test_the_trap_is_denied_only_where_the_cluster_offers_nvlink(control_plane_bin: Path, manifest_tree: ManifestTree,
                                                                  tmp_path: Path) -> None:
    with running_control_plane(control_plane_bin, tmp_path / "cp", scheduler=False) as cp:
        create_nodes(cp, [gpu_node("l40s-0", L40S), gpu_node("l4-0", L4)])
        docs = manifest_tree.render("overlays/generated-certs")
        with kubeconfig_env(cp.kubeconfig), running_webhook(docs, manifest_tree.certs_dir, tmp_path / "hook") as hook:
            install(cp, hook, docs, manifest_tree.certs_dir)
            cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
            trap = vllm_pod("llama-70b-l40s", NS, pin=L40S)

            # L40S and L4 only: nothing offers NVLink, so the pin is the only way it runs
            wait_for("the node inventory", lambda: "no node of the cluster offers" in apply(
                cp, trap, "--dry-run=server").stderr)
            done = apply(cp, trap)
            assert done.returncode == 0, done.stderr
            assert "needs NVLink" in done.stderr and "(misplaced)" in done.stderr, done.stderr
            assert cp.get("pod", "llama-70b-l40s", NS)["spec"]["nodeSelector"] == {PRODUCT_LABEL: L40S}

            small = apply(cp, gemma_tp2_on_l4("gemma-7b-l4"))
            assert small.returncode == 0, small.stderr
            assert "misplaced" not in small.stderr and "tier-mismatch" not in small.stderr, small.stderr
            offline = subprocess.run([sys.executable, "-m", "webhook.cli.main", "check", "-", "--output", "json"],
                                     input=json.dumps(gemma_tp2_on_l4("gemma-7b-l4")), capture_output=True, text=True)
            assert offline.returncode == 0, offline.stderr
            (row,) = json.loads(offline.stdout)["results"]
            assert row["allowed"] and not row["violations"] and not row["misplaced"] and row["tier"] == "cost"

            # an A100 SXM node joins: the cluster now offers the way out, and the trap is refused
            create_nodes(cp, [gpu_node("a100-0", A100)])
            denied_trap = vllm_pod("llama-70b-l40s-2", NS, pin=L40S)
            wait_for("the A100 in the inventory", lambda: apply(cp, denied_trap, "--dry-run=server").returncode != 0)
            done = apply(cp, denied_trap)
            assert done.returncode != 0
            assert "tier-mismatch" in done.stderr and "needs NVLink" in done.stderr and A100 in done.stderr, done.stderr
            assert cp.get("pod", "llama-70b-l40s-2", NS) is None
            assert apply(cp, gemma_tp2_on_l4("gemma-7b-l4-2")).returncode == 0  # small work still admitted
