"""`make cluster`: a local Kubernetes control plane with gpu-admission installed, to try by hand.

Builds the control plane once if needed (build-control-plane.sh), makes a CA and serving
certificate with `gpu-admission certs --ip 127.0.0.1`, then starts etcd, kube-apiserver,
kube-scheduler and `gpu-admission serve` (the Deployment's command) with the same library as the
end-to-end tests (control_plane.py), registers the webhook configurations from manifests/, creates
fake GPU nodes, a few namespaces and a stand-in CRD for every example kind no running operator
serves (so `kubectl apply -f examples/` works), writes kube-apiserver's audit log, prints how to use
it, and runs in the foreground (restarting `gpu-admission serve` on its ports if it dies) until
Ctrl-C or SIGTERM, when it stops everything and removes its work directory (unless --workdir was
given). tests/e2e/test_cluster_e2e.py holds what it prints.

    .venv/bin/python tests/e2e/cluster.py [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from control_plane import (ROOT, ControlPlane, ControlPlaneError, ManifestTree, Webhook, create_nodes, fleet, install,
                           kubeconfig_env, running_control_plane, running_webhook)
from objects import stand_in_crd
from operators_plane import running_operators, wait_established

OVERLAY = "overlays/generated-certs"
NAMESPACES = {"demo": {}, "demo-audit": {"gpu-admission.io/mode": "audit"}}
CLUSTER_FLEET = (("a100", "NVIDIA-A100-SXM4-80GB", 8), ("l40s", "NVIDIA-L40S", 4), ("h100", "NVIDIA-H100-80GB-HBM3", 8))
"""`make cluster`'s nodes: room for every example at once on its tier, the training Jobs' pods Running
(:data:`JOB_PODS_RUN_MS`) beside the serving pods, and a JobSet of 4 x 8 GPUs on one product."""
JOB_PODS_RUN_MS = 3_600_000
"""kwok keeps a Job's pods Running an hour before they succeed, as training pods run: a pod that has
succeeded leaves kube-scheduler's cache, and a group's later pods would no longer be held to its
product by the pod affinity."""


def build() -> Path:
    """The bin directory of build-control-plane.sh (its progress goes to our stderr)."""
    done = subprocess.run(["bash", str(ROOT / "tests/e2e/build-control-plane.sh")], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, timeout=3600)
    if done.returncode != 0 or not done.stdout.strip():
        raise ControlPlaneError(f"build-control-plane.sh failed ({done.returncode})")
    return Path(done.stdout.strip().splitlines()[-1])


def example_namespaces() -> set[str]:
    """Namespaces the bundled examples name, so `kubectl apply -f examples/...` works as is."""
    found = set()
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("metadata", {}).get("namespace"):
                found.add(doc["metadata"]["namespace"])
    return found


CLUSTER_SCOPED = frozenset({"ClusterTrainingRuntime", "ClusterBaseModel", "ClusterServingRuntime"})
"""Example kinds whose objects have no namespace."""


def example_kinds() -> dict[tuple[str, str], tuple[str, ...]]:
    """(group, kind) -> the versions of every custom kind the bundled examples use (not the built-in
    groups), so that each of their files applies; the most stable version first (``v1`` before
    ``v1alpha1``), the one a stand-in stores."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or not isinstance(doc.get("apiVersion"), str):
                continue
            group, _, version = doc["apiVersion"].rpartition("/")
            if "." in group:  # apps, batch and the core group are built in
                found.setdefault((group, doc["kind"]), set()).add(version)
    return {key: tuple(sorted(versions, key=_stability)) for key, versions in found.items()}


def _stability(version: str) -> tuple[int, str]:
    """GA versions before beta before alpha (Kubernetes' own version priority, coarsely)."""
    return ("alpha" in version) * 2 + ("beta" in version), version


def install_stand_ins(cp: ControlPlane) -> list[str]:
    """A stand-in CRD (:func:`objects.stand_in_crd`: any spec kept, no controller) for each example
    kind no running operator serves yet; the names installed. The kinds' objects are then stored and
    judged by the webhook as in a cluster that runs the operator, but nothing makes their pods."""
    made = []
    for (group, kind), versions in sorted(example_kinds().items()):
        plural = f"{kind.lower()}s"
        name = f"{plural}.{group}"
        if cp.get("crd", name):
            continue  # the JobSet and LWS controllers installed their own
        scope = "Cluster" if kind in CLUSTER_SCOPED else "Namespaced"
        cp.apply([stand_in_crd(group, versions, kind, plural, scope)])
        made.append(name)
    if made:
        wait_established(cp, tuple(made))
    return made


def restart_webhook(stack: contextlib.ExitStack, dead: Webhook, docs: list[dict], certs: Path, workdir: Path,
                    why: Exception) -> Webhook:
    """Start ``gpu-admission serve`` again on the dead one's ports (the webhook configurations and the
    printed hints stay right), in a new log directory (the old log keeps why it died)."""
    first_line = str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__
    print(f"gpu-admission serve exited ({first_line}; log {dead.log}); restarting it on port {dead.port}, "
          f"log {workdir / 'server.log'}", flush=True)
    stack.close()
    hook = stack.enter_context(running_webhook(docs, certs, workdir, port=dead.port, probe_port=dead.probe_port))
    print(f"gpu-admission serve is back on https://127.0.0.1:{hook.port}", flush=True)
    return hook


def _interrupt(signum: int, _frame) -> None:
    # the first Ctrl-C or SIGTERM unwinds the context managers (teardown); later ones are ignored
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="keep logs, certificates and the kubeconfig here "
                                                     "(default: a temporary directory, removed on exit)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="gpu-admission-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        bin_dir = build()
        certs = work / "certs"
        made = subprocess.run([str(Path(sys.executable).parent / "gpu-admission"), "certs", "--service",
                               "gpu-admission", "--namespace", "gpu-admission", "--ip", "127.0.0.1",
                               "--out", str(certs), "--force"], capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            raise ControlPlaneError(f"gpu-admission certs failed ({made.returncode}):\n{made.stderr}")
        docs = ManifestTree.prepare(work, certs, bin_dir / "kubectl").render(OVERLAY)
        with running_control_plane(bin_dir, work / "control-plane", scheduler=True, controllers=True,
                                   audit_log=True, job_pods_run_ms=JOB_PODS_RUN_MS) as cp, \
                kubeconfig_env(cp.kubeconfig), contextlib.ExitStack() as webhook_stack, \
                running_operators(cp, bin_dir, work / "operators") as ops:
            hook = webhook_stack.enter_context(running_webhook(docs, certs, work / "webhook"))
            install(cp, hook, docs, certs)
            for name, labels in {**{ns: {} for ns in sorted(example_namespaces())}, **NAMESPACES}.items():
                cp.namespace(name, labels)
            stand_ins = install_stand_ins(cp)
            nodes = fleet(counts=CLUSTER_FLEET)
            create_nodes(cp, nodes)
            env = f"KUBECONFIG={cp.kubeconfig}"
            kubectl = cp.kubectl
            print(f"""
gpu-admission cluster up in {time.monotonic() - started:.0f} s: kube-apiserver {cp.url}, kube-scheduler,
kube-controller-manager, kwok (the fake nodes' kubelets: bound pods become Running; a Job's pods succeed
after {JOB_PODS_RUN_MS // 60_000} minutes), the JobSet and
LeaderWorkerSet controllers (with their own webhooks),
gpu-admission serve on https://127.0.0.1:{hook.port} (policy and command from manifests/; the GPU inventory
watches this cluster's nodes; restarted on the same ports if it dies), {len(nodes)} fake GPU nodes.
Namespaces: demo (enforce), demo-audit (audit), {", ".join(sorted(example_namespaces()))} (enforce).
Stand-in CRDs (objects stored and judged, no operator makes their pods): {", ".join(stand_ins) or "none"}.
kube-apiserver audit log (the webhooks' auditAnnotations, e.g. validate-pods.gpu-admission.io/message):
  {cp.audit_log}

  {env} {kubectl} get nodes -L nvidia.com/gpu.product

Then, with `export {env}` and `alias kubectl={kubectl}` (the kubectl built with the control plane;
from the repository root):
  kubectl -n demo apply -f tests/e2e/demo/llama-70b.yaml          # pinned to HBM/NVLink, bound to an A100 or H100 node
  kubectl -n demo apply -f tests/e2e/demo/mistral-7b.yaml         # pinned to the cost tier, bound to an L40S node
  kubectl -n demo apply -f tests/e2e/demo/llama-70b-on-l40s.yaml  # denied, with the webhook's message
  kubectl -n demo-audit apply -f tests/e2e/demo/llama-70b-on-l40s.yaml   # admitted, with Warning: lines
  kubectl apply -f examples/vllm-llama-70b-tp4.yaml                # a Deployment, judged at apply time
  kubectl get pods -A -o wide
  curl -s http://127.0.0.1:{hook.probe_port}/metrics | grep ^gpu_admission_requests_total   # the probe port
  kubectl -n ai-serving get deploy,rs,pods -o wide                 # its pods: made by the controllers, mutated, Running
  kubectl apply -f examples/jobset-torchrun.yaml                   # 4 GPU pods made by the JobSet and Job controllers,
  kubectl -n training get pods -o wide -L gpu-admission.io/gpu-group   #   one group label, and their nodes:
  kubectl get nodes -L nvidia.com/gpu.product                      #   all of one GPU product (pods carry no product label)
  kubectl apply -f examples/                                       # every example applies (operator kinds: stand-ins)
  grep -o '"[a-z-]*.gpu-admission.io/message":"[^"]*"' {cp.audit_log} | tail -3
Logs: {work}. Ctrl-C stops everything.""", flush=True)
            restarts = 0
            while True:
                cp.check()
                ops.check()
                try:
                    hook.check()
                except ControlPlaneError as exc:
                    restarts += 1
                    hook = restart_webhook(webhook_stack, hook, docs, certs, work / f"webhook-{restarts}", exc)
                time.sleep(1)
    except KeyboardInterrupt:
        print("\nstopped: the operators, kwok, kube-controller-manager, kube-scheduler, kube-apiserver, etcd "
              "and the webhook are down", flush=True)
        return 0
    except (ControlPlaneError, AssertionError, subprocess.SubprocessError) as exc:  # AssertionError: kubectl failed
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
