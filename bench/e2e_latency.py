"""5. End to end: pod creation latency through a real kube-apiserver (the e2e suite's control plane,
``tests/e2e/control_plane.py``), with the official ``kubernetes`` Python client.

Three configurations, live at the same time and told apart by namespace, so that their runs can be
interleaved round by round (a b c a b c ...) and the noise of a shared machine hits all of them alike:

(a) ``bench-none``: no admission policy applies (labelled ``gpu-admission.io/mode=off``, which every
    gpu-admission webhook excludes, and not selected by the CEL binding);
(b) ``bench-cel``: an in-apiserver CEL ValidatingAdmissionPolicy with the simplest form of the rule
    (a pod with a container asking for more than one GPU must pin ``nvidia.com/gpu.product`` in its
    nodeSelector): the floor for any admission check (also ``mode=off`` for gpu-admission);
(c) ``bench-webhook``: gpu-admission's webhooks as installed from ``manifests/overlays/generated-certs``
    (the real ``gpu-admission serve`` on loopback, the rendered configurations pointed at it):
    ``/mutate`` then ``/validate`` for every pod.

The pod is the same in all three: a 4-GPU vLLM Llama-3.1-70B TP4 pod pinned to A100 (admitted by
every configuration, unchanged by the mutating webhook). ``webhook-pins`` additionally sends the
unpinned pod through gpu-admission, which patches it (node affinity to the tier). No scheduler runs:
pods stay Pending. Sequential: one client thread; concurrent: 8 threads sharing one client.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench import common

E2E = common.ROOT / "tests" / "e2e"
PRODUCT = "nvidia.com/gpu.product"
OFF = {"gpu-admission.io/mode": "off"}
NAMESPACES = {"none": ("bench-none", OFF),
              "cel": ("bench-cel", {**OFF, "bench.gpu-admission.io/cel": "true"}),
              "webhook": ("bench-webhook", {}),
              "webhook-pins": ("bench-webhook-pins", {})}

CEL_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "bench-multi-gpu-pins-product"},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["pods"]}]},
        "validations": [{
            "expression": (
                "!object.spec.containers.exists(c, has(c.resources) && has(c.resources.limits) && "
                "'nvidia.com/gpu' in c.resources.limits && "
                "quantity(string(c.resources.limits['nvidia.com/gpu'])).isGreaterThan(quantity('1'))) || "
                "(has(object.spec.nodeSelector) && 'nvidia.com/gpu.product' in object.spec.nodeSelector)"),
            "message": "a multi-GPU pod must pin nvidia.com/gpu.product"}],
    },
}
CEL_BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "bench-multi-gpu-pins-product"},
    "spec": {"policyName": "bench-multi-gpu-pins-product", "validationActions": ["Deny"],
             "matchResources": {"namespaceSelector": {"matchLabels": {"bench.gpu-admission.io/cel": "true"}}}},
}


def pod(name: str, pinned: bool = True) -> dict[str, Any]:
    """The benchmark pod. Its container carries its own name in ``BENCH_NONCE``: every pod is new to
    gpu-admission's memo of command lines, which then only serves the pod's own ``/validate`` call
    after its ``/mutate``, not the other pods of the run (as with the replicas of a Deployment)."""
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
        "env": [{"name": "BENCH_NONCE", "value": name}],
        "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    if pinned:
        spec["nodeSelector"] = {PRODUCT: "NVIDIA-A100-SXM4-80GB"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _bin_dir() -> Path:
    done = subprocess.run(["bash", str(E2E / "build-control-plane.sh")], capture_output=True, text=True,
                          timeout=3600, cwd=common.ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"build-control-plane.sh failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def _client(kubeconfig: Path):
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 16
    return client.CoreV1Api(client.ApiClient(configuration))


def _wait(what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
    if not common.wait_until(predicate, timeout, 0.5):
        raise RuntimeError(f"{what}: not in effect after {timeout:.0f} s")


def _creates(api, namespace: str, names: list[str], pinned: bool) -> list[float]:
    out = []
    for name in names:
        body = pod(name, pinned)
        t0 = time.perf_counter()
        api.create_namespaced_pod(namespace, body)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _concurrent(api, namespace: str, names: list[str], pinned: bool, threads: int) -> tuple[list[float], float]:
    chunks = [names[i::threads] for i in range(threads)]
    results: list[list[float]] = [[] for _ in chunks]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = _creates(api, namespace, chunks[i], pinned)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return [x for r in results for x in r], wall


def run(sequential: int | None = None, concurrent: int | None = None, threads: int = 8,
        rounds: int | None = None, log=print) -> dict[str, Any]:
    sequential = sequential or int(common.scaled(200, 40))
    concurrent = concurrent or int(common.scaled(200, 40))
    rounds = rounds or int(common.scaled(10, 2))
    sys.path.insert(0, str(E2E))
    import control_plane as cpl  # tests/e2e: the e2e suite's own control plane library

    from webhook.cli import certs
    from webhook.cli import install as webhook_install

    bin_dir = _bin_dir()
    work = Path(tempfile.mkdtemp(prefix="gpu-admission-e2e-bench-"))
    configs = list(NAMESPACES)
    samples: dict[str, dict[str, list[float]]] = {c: {"sequential": [], "concurrent": []} for c in configs}
    walls: dict[str, float] = {c: 0.0 for c in configs}
    try:
        with cpl.running_control_plane(bin_dir, work / "control-plane") as cp:
            log(f"  control plane up: {cp.url}")
            certs_dir = work / "certs"
            certs.write(certs.issue(service=webhook_install.SERVICE, namespace=webhook_install.NAMESPACE,
                                    ips=["127.0.0.1"]), certs_dir)
            tree = cpl.ManifestTree.prepare(work, certs_dir, cp.kubectl)
            docs = tree.render("overlays/generated-certs")
            with cpl.running_webhook(docs, certs_dir, work / "webhook") as hook:
                cpl.install(cp, hook, docs, certs_dir)
                for name, labels in NAMESPACES.values():
                    cp.namespace(name, labels)
                cp.apply([CEL_POLICY, CEL_BINDING])
                api = _client(cp.kubeconfig)
                probe = pod("probe", pinned=False)
                _wait("CEL policy", lambda: cp.run("create", "--dry-run=server", "-n", "bench-cel", "-f", "-",
                                                  stdin=_dump(probe), check=False).returncode != 0)
                _wait("webhook on bench-webhook", lambda: "affinity" in cp.run(
                    "create", "--dry-run=server", "-n", "bench-webhook-pins", "-o", "json", "-f", "-",
                    stdin=_dump(probe), check=False).stdout)
                log("  CEL policy and webhooks in effect")
                counter = iter(range(10**9))

                def names(n: int, tag: str) -> list[str]:
                    return [f"{tag}-{next(counter)}" for _ in range(n)]

                for c in configs:  # warm-up: connections, caches, the webhook's workers
                    ns = NAMESPACES[c][0]
                    _creates(api, ns, names(10, "warm"), c != "webhook-pins")
                    _concurrent(api, ns, names(16, "warm"), c != "webhook-pins", threads)
                before = hook.requests_total()
                per_round_seq = max(1, sequential // rounds)
                per_round_con = max(threads, concurrent // rounds)
                for r in range(rounds):
                    for c in configs:
                        ns = NAMESPACES[c][0]
                        samples[c]["sequential"] += _creates(api, ns, names(per_round_seq, "seq"), c != "webhook-pins")
                    for c in configs:
                        ns = NAMESPACES[c][0]
                        lat, wall = _concurrent(api, ns, names(per_round_con, "con"), c != "webhook-pins", threads)
                        samples[c]["concurrent"] += lat
                        walls[c] += wall
                    log(f"  round {r + 1}/{rounds}: " + ", ".join(
                        f"{c} seq p50 {common.median(samples[c]['sequential']):.1f} ms" for c in configs))
                reviews = hook.requests_total() - before
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    out: dict[str, Any] = {"description": __doc__.split("\n\n", 1)[1].strip().replace("\n", " "),
                           "threads": threads, "rounds": rounds, "reviews_answered_by_webhook": reviews,
                           "configs": {}}
    for c in configs:
        out["configs"][c] = {}
        for mode in ("sequential", "concurrent"):
            xs = samples[c][mode]
            out["configs"][c][mode] = {"creates": len(xs), "p50_ms": common.median(xs),
                                       "p90_ms": common.percentile(xs, 90), "p99_ms": common.percentile(xs, 99),
                                       "cdf_ms": common.cdf_points(xs)}
        out["configs"][c]["concurrent"]["rate_per_s"] = len(samples[c]["concurrent"]) / walls[c] if walls[c] else None
    summary: dict[str, dict[str, float]] = {}
    for mode in ("sequential", "concurrent"):
        p = {c: out["configs"][c][mode]["p50_ms"] for c in configs}
        summary[mode] = {"cel_over_none_p50_ms": p["cel"] - p["none"],
                         "webhook_over_none_p50_ms": p["webhook"] - p["none"],
                         "webhook_over_cel_p50_ms": p["webhook"] - p["cel"],
                         "webhook_pins_over_cel_p50_ms": p["webhook-pins"] - p["cel"]}
    out["summary"] = summary
    log(f"  added p50 over CEL: sequential {summary['sequential']['webhook_over_cel_p50_ms']:.2f} ms, "
        f"8 concurrent {summary['concurrent']['webhook_over_cel_p50_ms']:.2f} ms")
    return out


def _dump(obj: dict[str, Any]) -> str:
    import json

    return json.dumps(copy.deepcopy(obj))


if __name__ == "__main__":  # pragma: no cover
    import json

    res = run()
    print(json.dumps({k: v for k, v in res.items() if k != "configs"}, indent=1))
