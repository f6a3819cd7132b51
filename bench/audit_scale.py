"""`gpu-admission audit` on a generated cluster: 1,000 GPU nodes and 5,000 workloads (issue 29).

A real etcd and kube-apiserver (built from their Go modules, as the e2e tests build them), and the
objects created directly: the nodes (as GPU Feature Discovery labels them), 5,000 paused
Deployments, one ReplicaSet each owned by its Deployment, and two pods each owned by its ReplicaSet
and bound to a node (``spec.nodeName``), 21,000 objects in all. The workloads mix what the public
manifests run: vLLM at TP 1, 2, 4 and 8 of models from 1.5B to 70B, some pinned to a product.

``--kwok`` also runs kube-controller-manager and kwok (heartbeats, bound pods Running). The objects
then change while they are listed: the Deployment controller adds ``pod-template-hash`` to the
ReplicaSets' selectors, the ReplicaSet controller releases the pods made here (they lack the label)
and makes its own, so each run reports a few hundred more top owners (orphaned pods) than 5,000. The
time and memory are about the same (bench/NOTES.md has both).

Measured: the wall time of `gpu-admission audit --output json` against the API server (every list
in pages of 500), its peak RSS (``/usr/bin/time -f %M``), and the size of what it listed. Run:

    .venv/bin/python -m bench.audit_scale [--workloads 5000] [--nodes 1000]

The result is printed as JSON and written to bench/results/audit-scale.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests"))

PRODUCTS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S", "NVIDIA-L4")
MODELS = (("Qwen/Qwen2.5-1.5B-Instruct", 1), ("meta-llama/Llama-3.1-8B-Instruct", 1),
          ("Qwen/Qwen2.5-32B-Instruct", 2), ("meta-llama/Llama-3.1-70B-Instruct", 4),
          ("meta-llama/Llama-3.1-70B-Instruct", 8), ("mistralai/Mistral-7B-Instruct-v0.3", 1))
BATCH = 500


def _create(cp: Any, docs: list[dict]) -> list[dict]:
    """Create ``docs`` in batches (one kubectl call each); the created objects, uids included."""
    out: list[dict] = []
    for i in range(0, len(docs), BATCH):
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs[i:i + BATCH]})
        done = cp.run("create", "-o", "json", "-f", "-", stdin=body)
        out.extend(_objects(done.stdout))
    return out


def _objects(text: str) -> list[dict]:
    """The objects ``kubectl create -o json`` printed: one JSON document per object, one after another
    (or a List)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        obj, at = decoder.raw_decode(text, at)
        out.extend(obj.get("items", []) if obj.get("kind") == "List" else [obj])


def _spec(model: str, tp: int, pin: str | None) -> dict:
    resources = {"cpu": str(4 * tp), "memory": f"{32 * tp}Gi"}
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", model, "--tensor-parallel-size", str(tp)],
        "resources": {"requests": resources, "limits": {"nvidia.com/gpu": str(tp), **resources}}}]}
    if pin:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": pin}
    return spec


def generate(cp: Any, workloads: int, nodes: int) -> dict[str, int]:
    from control_plane import gpu_node

    fleet = [gpu_node(f"gpu-{i:04d}", PRODUCTS[i % len(PRODUCTS)]) for i in range(nodes)]
    _create(cp, fleet)
    namespaces = [f"team-{i:02d}" for i in range(20)]
    _create(cp, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces])
    deployments = []
    for i in range(workloads):
        model, tp = MODELS[i % len(MODELS)]
        pin = PRODUCTS[i % 3] if i % 5 == 0 else None
        deployments.append({"apiVersion": "apps/v1", "kind": "Deployment",
                            "metadata": {"name": f"llm-{i:05d}", "namespace": namespaces[i % len(namespaces)]},
                            "spec": {"replicas": 2, "paused": True, "selector": {"matchLabels": {"app": f"llm-{i:05d}"}},
                                     "template": {"metadata": {"labels": {"app": f"llm-{i:05d}"}},
                                                  "spec": _spec(model, tp, pin)}}})
    created = _create(cp, deployments)
    sets = []
    for d in created:
        meta = d["metadata"]
        sets.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                     "metadata": {"name": f"{meta['name']}-5d8f", "namespace": meta["namespace"],
                                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                                       "uid": meta["uid"], "controller": True}]},
                     "spec": {"replicas": 2, "selector": d["spec"]["selector"], "template": d["spec"]["template"]}})
    created_sets = _create(cp, sets)
    pods = []
    for i, rs in enumerate(created_sets):
        meta = rs["metadata"]
        for r in range(2):
            node = fleet[(2 * i + r) % nodes]["metadata"]["name"]
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{meta['name']}-{r}", "namespace": meta["namespace"],
                                      "labels": rs["spec"]["template"]["metadata"]["labels"],
                                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                           "name": meta["name"], "uid": meta["uid"],
                                                           "controller": True}]},
                         "spec": {**rs["spec"]["template"]["spec"], "nodeName": node}})
    _create(cp, pods)
    return {"nodes": len(fleet), "workloads": len(created), "replicasets": len(created_sets), "pods": len(pods)}


def measure(kubeconfig: Path, runs: int) -> list[dict[str, float]]:
    out = []
    for _ in range(runs):
        t0 = time.monotonic()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "webhook", "audit", "--kubeconfig",
                               str(kubeconfig), "--output", "json"], capture_output=True, text=True, cwd=ROOT,
                              timeout=1800)
        wall = time.monotonic() - t0
        peak_kib = int(done.stderr.strip().splitlines()[-1])
        data = json.loads(done.stdout)
        out.append({"seconds": round(wall, 2), "peak_rss_mib": round(peak_kib / 1024, 1),
                    "workloads_reported": data["summary"]["workloads"], "exit": done.returncode,
                    "progress_lines": sum(1 for line in done.stderr.splitlines() if "objects read" in line)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kwok", action="store_true",
                        help="also run kube-controller-manager and kwok's kubelets (the objects then change while "
                             "they are listed: see the module's docstring)")
    args = parser.parse_args(argv)
    from control_plane import running_control_plane

    # the e2e suite's build (cached outside the checkout, keyed by version): prints its bin directory
    bin_dir = Path(subprocess.run(["bash", str(ROOT / "tests/e2e/build-control-plane.sh")], capture_output=True,
                                  text=True, check=True, cwd=ROOT).stdout.strip().splitlines()[-1])
    with tempfile.TemporaryDirectory(prefix="gpu-admission-audit-scale-") as tmp, \
            running_control_plane(bin_dir, Path(tmp), controllers=args.kwok) as cp:
        t0 = time.monotonic()
        made = generate(cp, args.workloads, args.nodes)
        made["seconds_to_create"] = round(time.monotonic() - t0, 1)
        runs = measure(cp.kubeconfig, args.runs)
    result = {"generated": made, "kwok": args.kwok, "runs": runs,
              "median_seconds": sorted(r["seconds"] for r in runs)[len(runs) // 2],
              "max_peak_rss_mib": max(r["peak_rss_mib"] for r in runs)}
    print(json.dumps(result, indent=2))
    (ROOT / "bench/results/audit-scale.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
