"""5. End to end: pod creation latency through a real kube-apiserver (the e2e suite's control plane,
``tests/e2e/control_plane.py``), with the official ``kubernetes`` Python client.

Six configurations, live at the same time and told apart by namespace, so that their runs can be
interleaved round by round (a b c d e a b c d e ...) and the noise of a shared machine hits all of
them alike:

(a) ``bench-none``: no admission policy applies (labelled ``gpu-admission.io/mode=off``, which every
    gpu-admission webhook excludes, and selected by no other webhook or binding);
(b) ``bench-cel``: an in-apiserver CEL ValidatingAdmissionPolicy with the simplest form of the rule
    (a pod with a container asking for more than one GPU must pin ``nvidia.com/gpu.product`` in its
    nodeSelector): the floor for any admission check (also ``mode=off`` for gpu-admission);
(c) ``bench-webhook``: gpu-admission's webhooks as installed from ``manifests/overlays/generated-certs``
    (the real ``gpu-admission serve`` on loopback, the rendered configurations pointed at it):
    ``/mutate`` then ``/validate`` for every pod;
(d) ``bench-floor``: the floor app (``bench/floor_app.py``: the same gunicorn/TLS configuration and
    worker/thread counts as the Deployment's ``gpu-admission serve``; it only parses the review and
    answers allowed) registered as the same two webhooks (copies of the rendered pod webhooks: same
    rules, matchConditions, timeouts, failurePolicy, namespaceSelector shape, selecting only
    namespaces labelled ``bench.gpu-admission.io/floor=true``): what being a Python webhook at all costs;
(e) ``bench-kyverno``: Kyverno's admission controller (built from its Go module by
    ``bench/peers/build-kyverno.sh``, run out of cluster with ``--serverIP``, its resource webhooks
    narrowed to namespaces labelled ``bench.gpu-admission.io/kyverno=true``) with the equivalent
    ClusterPolicy ``bench/peers/kyverno-policy.yaml`` (mutate the tier affinity, validate the product
    pin). If Kyverno cannot be built or started, this configuration records ``{"error": ...}``.

With ``before`` (``bench.run --before-tree REV``), two more: ``bench-before``, REV's ``gpu-admission
serve`` (its ``webhook`` package, the Deployment's args and the rendered policy) registered as the same
two webhooks as the floor app (selecting namespaces labelled ``bench.gpu-admission.io/before=true``),
and ``bench-copies``, this tree's server of (c) registered the same way (label
``bench.gpu-admission.io/copies=true``): the two trees behind identical registrations, a change of the
serving layer against the tree before it, end to end, in the same rounds.

The pod is the same in all of them: a 4-GPU vLLM Llama-3.1-70B TP4 pod pinned to A100 (admitted by
every configuration, unchanged by the mutating webhooks). ``webhook-pins`` additionally sends the
unpinned pod through gpu-admission, which patches it (node affinity to the tier). No scheduler runs:
pods stay Pending. Sequential: one client thread; concurrent: 8 threads sharing one client.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench import common
from bench.peers import kyverno_admission

E2E = common.ROOT / "tests" / "e2e"
PRODUCT = "nvidia.com/gpu.product"
OFF = {"gpu-admission.io/mode": "off"}
FLOOR_LABEL = "bench.gpu-admission.io/floor"
KYVERNO_LABEL = "bench.gpu-admission.io/kyverno"
NAMESPACES = {"none": ("bench-none", OFF),
              "cel": ("bench-cel", {**OFF, "bench.gpu-admission.io/cel": "true"}),
              "webhook": ("bench-webhook", {}),
              "webhook-pins": ("bench-webhook-pins", {}),
              "floor": ("bench-floor", {**OFF, FLOOR_LABEL: "true"}),
              "kyverno": ("bench-kyverno", {**OFF, KYVERNO_LABEL: "true"})}
PINS = {"webhook-pins"}
"""Configurations sent the unpinned pod (patched by the mutating webhook); the others get the pinned one."""
FLOOR_NAME = "bench-floor"
BEFORE_LABEL = "bench.gpu-admission.io/before"
BEFORE_NAME = "bench-before"
BEFORE = ("bench-before", {**OFF, BEFORE_LABEL: "true"})
COPIES_LABEL = "bench.gpu-admission.io/copies"
COPIES_NAME = "bench-copies"
COPIES = ("bench-copies", {**OFF, COPIES_LABEL: "true"})
"""The namespaces of the optional ``before`` and ``copies`` configurations (only with ``run(before=...)``)."""

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


def floor_configurations(docs: list[dict[str, Any]], port: int, name: str = FLOOR_NAME,
                         label: str = FLOOR_LABEL) -> list[dict[str, Any]]:
    """gpu-admission's rendered pod webhooks (the mutating one and the validating one that an enforcing
    namespace's Pods are sent to), copied field for field (rules, matchConditions, timeoutSeconds,
    failurePolicy, matchPolicy, reinvocationPolicy, sideEffects, caBundle) under the name
    ``name`` (``bench-floor``), pointed at the floor app (or another server) on ``port``, and selecting
    namespaces labelled ``label=true`` (``FLOOR_LABEL``) instead of the mode label (the same
    namespaceSelector shape: the system-namespace exclusion plus one expression)."""
    out = []
    for doc in docs:
        if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        # the enforce entries for Pods (mutate-pods, validate-pods): what an enforcing namespace calls
        # (the audit-* entries select mode=audit namespaces only)
        webhooks = [w for w in doc["webhooks"]
                    if any("pods" in r.get("resources", []) and "" in r.get("apiGroups", []) for r in w["rules"])
                    and any(e["key"] == "gpu-admission.io/mode" and e["operator"] == "NotIn"
                            for e in w["namespaceSelector"].get("matchExpressions", []))]
        if len(webhooks) != 1:
            raise RuntimeError(f"{doc['kind']} {doc['metadata']['name']}: {len(webhooks)} enforcing pod webhooks, "
                               "expected 1")
        w = copy.deepcopy(webhooks[0])
        path = w["clientConfig"].pop("service")["path"]
        w["clientConfig"]["url"] = f"https://127.0.0.1:{port}{path}"
        w["name"] = w["name"].replace(".gpu-admission.io", f".{name}.gpu-admission.io")
        expressions = w["namespaceSelector"]["matchExpressions"]
        modes = [e for e in expressions if e["key"] == "gpu-admission.io/mode"]
        if len(modes) != 1:
            raise RuntimeError(f"{w['name']}: the namespaceSelector has no gpu-admission.io/mode expression")
        expressions[expressions.index(modes[0])] = {"key": label, "operator": "In", "values": ["true"]}
        out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"],
                    "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "gpu-admission-bench"}},
                    "webhooks": [w]})
    if len(out) != 2:
        raise RuntimeError(f"expected a mutating and a validating configuration, found {len(out)}")
    return out


@contextlib.contextmanager
def running_floor(docs: list[dict[str, Any]], certs_dir: Path, workdir: Path):
    """``python -m bench.floor_app`` with the serving pair of gpu-admission (IP SAN 127.0.0.1) and the
    rendered Deployment's --workers/--threads; yields its port once ``/readyz`` answers."""
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    sizing = [a for flag in ("--workers", "--threads") if flag in args for a in (flag, args[args.index(flag) + 1])]
    port = common.free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "bench.floor_app", "--cert", str(certs_dir / "tls.crt"),
            "--key", str(certs_dir / "tls.key"), "--bind", f"127.0.0.1:{port}", *sizing]
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(TMPDIR=str(workdir), PYTHONUNBUFFERED="1")
    log = workdir / "floor.log"
    proc = subprocess.Popen(argv, cwd=common.ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), start_new_session=True)

    try:
        if not common.wait_until(lambda: proc.poll() is not None or common.https_ready(port, certs_dir / "ca.crt"),
                                 60, 0.2) or proc.poll() is not None:
            raise RuntimeError(f"the floor app did not start:\n{log.read_text(errors='replace')[-3000:]}")
        yield port
    finally:
        common.stop_process(proc)


def webhook_calls(cp) -> dict[str, float]:
    """kube-apiserver's own count of the admission webhook calls it made, by webhook name
    (``apiserver_admission_webhook_request_total``, every label summed): proof of who answered."""
    done = cp.run("get", "--raw", "/metrics", timeout=60)
    out: dict[str, float] = {}
    for line in done.stdout.splitlines():
        if line.startswith("apiserver_admission_webhook_request_total{"):
            labels, value = line.rsplit(" ", 1)
            name = labels.split('name="', 1)[1].split('"', 1)[0]
            out[name] = out.get(name, 0.0) + float(value)
    return out


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


def _kyverno_build(log) -> tuple[Path | None, dict[str, Any]]:
    """Build (or find cached) Kyverno; (bin dir, facts) or (None, {"error": why})."""
    t0 = time.monotonic()
    try:
        bin_dir = kyverno_admission.build()
    except kyverno_admission.KyvernoError as exc:
        log(f"  kyverno: not measured: {str(exc).strip().splitlines()[-1]}")
        return None, {"error": f"Kyverno could not be built: {exc}"}
    info = kyverno_admission.module_info(bin_dir)
    stats = kyverno_admission.build_stats(bin_dir)
    seconds = (stats.get("build seconds") or "").split(" ", 1)[0]
    facts = {"version": info["Version"], "binary_mib": round((bin_dir / "kyverno").stat().st_size / 2**20, 1),
             "build_seconds": int(seconds) if seconds.isdigit() else None, "built": stats.get("built"),
             "found_or_built_in_s": round(time.monotonic() - t0, 1)}
    log(f"  kyverno {facts['version']}: {bin_dir} ({facts['binary_mib']} MiB; build: {facts['build_seconds']} s)")
    return bin_dir, facts


@contextlib.contextmanager
def running_before(docs: list[dict[str, Any]], certs_dir: Path, workdir: Path, tree: Path):
    """Another tree's ``gpu-admission serve`` (``tree`` holds its ``webhook`` package) as the rendered
    Deployment runs it: its args, the rendered policy, the serving pair; ``--probe-bind`` is dropped
    when that tree has no such flag. Yields its port once ``/readyz`` (or ``/healthz``) answers."""
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    args = list(deploy["spec"]["template"]["spec"]["containers"][0]["args"])
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "policy.yaml").write_text(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["policy.yaml"])
    port = common.free_port()
    paths = {"/etc/gpu-admission/policy.yaml": str(workdir / "policy.yaml"),
             "/etc/gpu-admission/tls/tls.crt": str(certs_dir / "tls.crt"),
             "/etc/gpu-admission/tls/tls.key": str(certs_dir / "tls.key"),
             "0.0.0.0:8443": f"127.0.0.1:{port}", "0.0.0.0:8081": f"127.0.0.1:{common.free_port()}"}
    if "--probe-bind" in args and "--probe-bind" not in (tree / "webhook/cli/main.py").read_text():
        i = args.index("--probe-bind")
        del args[i:i + 2]
    argv = [sys.executable, "-m", "webhook", *(paths.get(a, a) for a in args)]
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(TMPDIR=str(workdir), PYTHONUNBUFFERED="1", PYTHONPATH=str(tree),
               PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics"))
    log = workdir / "server.log"
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb"), start_new_session=True)
    try:
        if not common.wait_until(lambda: proc.poll() is not None or common.https_ready(port, certs_dir / "ca.crt"),
                                 60, 0.2) or proc.poll() is not None:
            raise RuntimeError(f"the tree before did not start:\n{log.read_text(errors='replace')[-3000:]}")
        yield port
    finally:
        common.stop_process(proc)


def run(sequential: int | None = None, concurrent: int | None = None, threads: int = 8,
        rounds: int | None = None, log=print, before: tuple[str, Path] | None = None) -> dict[str, Any]:
    """``before``: (label, directory holding another tree's ``webhook`` package), measured as the
    ``before`` configuration in the same rounds (module docstring)."""
    sequential = sequential or int(common.scaled(200, 40))
    concurrent = concurrent or int(common.scaled(200, 40))
    rounds = rounds or int(common.scaled(10, 2))
    sys.path.insert(0, str(E2E))
    import control_plane as cpl  # tests/e2e: the e2e suite's own control plane library

    from webhook.cli import certs
    from webhook.cli import install as webhook_install

    bin_dir = _bin_dir()
    kyverno_bin, kyverno_facts = _kyverno_build(log)
    kyverno_error: str | None = kyverno_facts.get("error")
    work = Path(tempfile.mkdtemp(prefix="gpu-admission-e2e-bench-"))
    namespaces = {**NAMESPACES, **({"copies": COPIES, "before": BEFORE} if before else {})}
    configs = list(namespaces)
    samples: dict[str, dict[str, list[float]]] = {c: {"sequential": [], "concurrent": []} for c in configs}
    walls: dict[str, dict[str, float]] = {c: {"sequential": 0.0, "concurrent": 0.0} for c in configs}
    calls: dict[str, float] = {}
    reviews = None
    try:
        with cpl.running_control_plane(bin_dir, work / "control-plane") as cp:
            log(f"  control plane up: {cp.url}")
            certs_dir = work / "certs"
            certs.write(certs.issue(service=webhook_install.SERVICE, namespace=webhook_install.NAMESPACE,
                                    ips=["127.0.0.1"]), certs_dir)
            tree = cpl.ManifestTree.prepare(work, certs_dir, cp.kubectl)
            docs = tree.render("overlays/generated-certs")
            with cpl.running_webhook(docs, certs_dir, work / "webhook") as hook, \
                    running_floor(docs, certs_dir, work / "floor") as floor_port, \
                    contextlib.ExitStack() as kyverno_stack, contextlib.ExitStack() as before_stack:
                before_port = (before_stack.enter_context(running_before(docs, certs_dir, work / "before", before[1]))
                               if before else None)
                cpl.install(cp, hook, docs, certs_dir)
                for name, labels in namespaces.values():
                    cp.namespace(name, labels)
                cp.apply([CEL_POLICY, CEL_BINDING])
                cp.apply(floor_configurations(docs, floor_port))
                extra = ({COPIES[0]: floor_configurations(docs, hook.port, COPIES_NAME, COPIES_LABEL),
                          BEFORE[0]: floor_configurations(docs, before_port, BEFORE_NAME, BEFORE_LABEL)}
                         if before_port is not None else {})
                for configurations in extra.values():
                    cp.apply(configurations)
                api = _client(cp.kubeconfig)
                probe = pod("probe", pinned=False)
                nothing = pod("probe-nothing", pinned=False)
                nothing["spec"]["nodeSelector"] = {PRODUCT: ""}

                def dry_run(namespace: str, body: dict[str, Any]) -> subprocess.CompletedProcess:
                    return cp.run("create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-",
                                  stdin=_dump(body), check=False)

                kyverno = None
                if kyverno_bin is not None:
                    try:
                        t0 = time.monotonic()
                        kyverno = kyverno_stack.enter_context(kyverno_admission.running_kyverno(
                            kyverno_bin, cp, work / "kyverno", namespace_labels={KYVERNO_LABEL: "true"}))
                        kyverno_admission.install_policy(cp, kyverno)

                        def kyverno_in_effect() -> bool:
                            mutated = dry_run("bench-kyverno", probe)
                            denied = dry_run("bench-kyverno", nothing)
                            return (mutated.returncode == 0 and PRODUCT in mutated.stdout
                                    and "affinity" in mutated.stdout
                                    and denied.returncode != 0 and "must pin" in denied.stderr)

                        _wait("Kyverno policy on bench-kyverno", kyverno_in_effect, 120)
                        kyverno_facts["ready_in_s"] = round(time.monotonic() - t0, 1)
                        log(f"  kyverno up and its policy in effect in {kyverno_facts['ready_in_s']} s")
                    except (kyverno_admission.KyvernoError, RuntimeError, AssertionError, OSError,
                            subprocess.SubprocessError) as exc:
                        kyverno_error = f"Kyverno did not start or its policy did not take effect: {exc}"
                        log(f"  kyverno: not measured: {str(exc).splitlines()[0]}")
                        kyverno_stack.close()
                        kyverno = None
                if kyverno_error:
                    configs.remove("kyverno")
                _wait("CEL policy", lambda: dry_run("bench-cel", probe).returncode != 0)
                _wait("webhook on bench-webhook", lambda: "affinity" in dry_run("bench-webhook-pins", probe).stdout)

                floor_names = [w["name"] for d in floor_configurations(docs, floor_port) for w in d["webhooks"]]

                def floor_in_effect() -> bool:
                    before = webhook_calls(cp)
                    if dry_run("bench-floor", probe).returncode != 0:
                        return False
                    after = webhook_calls(cp)
                    return all(after.get(n, 0) > before.get(n, 0) for n in floor_names)

                _wait("floor webhooks on bench-floor", floor_in_effect)
                for namespace, configurations in extra.items():
                    registered = [w["name"] for d in configurations for w in d["webhooks"]]

                    def in_effect(namespace: str = namespace, registered: list[str] = registered) -> bool:
                        was = webhook_calls(cp)
                        if dry_run(namespace, probe).returncode != 0:
                            return False
                        now = webhook_calls(cp)
                        return all(now.get(n, 0) > was.get(n, 0) for n in registered)

                    _wait(f"the copied webhooks on {namespace}", in_effect)
                log("  CEL policy, webhooks, floor" + (", kyverno" if kyverno else "")
                    + " in effect")
                counter = iter(range(10**9))

                def names(n: int, tag: str) -> list[str]:
                    return [f"{tag}-{next(counter)}" for _ in range(n)]

                def measure(c: str, mode: str, n: int) -> None:
                    """One batch of creates for ``c``; a Kyverno failure drops Kyverno, not the phase."""
                    nonlocal kyverno_error
                    ns, pinned = namespaces[c][0], c not in PINS
                    try:
                        if kyverno is not None and c == "kyverno" and not kyverno.alive():
                            raise RuntimeError(f"kyverno exited ({kyverno.process.returncode}):\n{kyverno.tail()}")
                        if mode == "sequential":
                            t0 = time.perf_counter()
                            samples[c][mode] += _creates(api, ns, names(n, "seq"), pinned)
                            walls[c][mode] += time.perf_counter() - t0
                        elif mode == "concurrent":
                            lat, wall = _concurrent(api, ns, names(n, "con"), pinned, threads)
                            samples[c][mode] += lat
                            walls[c][mode] += wall
                        else:  # warm-up: connections, caches, the webhooks' workers
                            _creates(api, ns, names(10, "warm"), pinned)
                            _concurrent(api, ns, names(16, "warm"), pinned, threads)
                    except Exception as exc:  # noqa: BLE001 - only Kyverno's failures are absorbed
                        if c != "kyverno":
                            raise
                        kyverno_error = f"Kyverno failed during the run ({mode}): {type(exc).__name__}: {exc}"
                        log(f"  kyverno: dropped: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
                        configs.remove("kyverno")

                for c in list(configs):
                    measure(c, "warm-up", 0)
                requests_before = hook.requests_total()
                calls_before = webhook_calls(cp)
                per_round_seq = max(1, sequential // rounds)
                per_round_con = max(threads, concurrent // rounds)
                for r in range(rounds):
                    for c in list(configs):
                        measure(c, "sequential", per_round_seq)
                    for c in list(configs):
                        measure(c, "concurrent", per_round_con)
                    log(f"  round {r + 1}/{rounds}: " + ", ".join(
                        f"{c} seq p50 {common.median(samples[c]['sequential']):.1f} ms" for c in configs))
                reviews = hook.requests_total() - requests_before
                calls_after = webhook_calls(cp)
                calls = {n: calls_after[n] - calls_before.get(n, 0.0) for n in sorted(calls_after)
                         if calls_after[n] - calls_before.get(n, 0.0)}
                if kyverno is not None:
                    kyverno_facts["rss_mib_at_end"] = kyverno.rss_mib()
    finally:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    out: dict[str, Any] = {"description": __doc__.split("\n\n", 1)[1].strip().replace("\n", " "),
                           "threads": threads, "rounds": rounds, "reviews_answered_by_webhook": reviews,
                           "webhook_calls_during_timing": calls,
                           "kyverno": {**kyverno_facts, **({"error": kyverno_error} if kyverno_error else {})},
                           "configs": {}}
    if before:
        out["before"] = {"label": before[0]}
    for c in namespaces:
        if c not in configs:
            out["configs"][c] = {"error": kyverno_error or "not measured"}
            continue
        out["configs"][c] = {}
        for mode in ("sequential", "concurrent"):
            xs = samples[c][mode]
            out["configs"][c][mode] = {"creates": len(xs), "p50_ms": common.median(xs),
                                       "p90_ms": common.percentile(xs, 90), "p99_ms": common.percentile(xs, 99),
                                       "cdf_ms": common.cdf_points(xs),
                                       "rate_per_s": len(xs) / walls[c][mode] if walls[c][mode] else None}
    out["summary"] = summarize(out["configs"])
    su = out["summary"]
    log(f"  added p50 over none: gpu-admission {su['sequential']['webhook_over_none_p50_ms']:.2f} ms, "
        f"floor {su['sequential']['floor_over_none_p50_ms']:.2f} ms, kyverno "
        f"{_fmt(su['sequential']['kyverno_over_none_p50_ms'])} ms (sequential); gpu-admission over floor "
        f"{su['sequential']['webhook_over_floor_p50_ms']:.2f} ms sequential, "
        f"{su['concurrent']['webhook_over_floor_p50_ms']:.2f} ms 8 concurrent; creates/s vs floor "
        f"{_fmt(su['concurrent']['webhook_rate_over_floor_rate'])}")
    return out


def summarize(configs: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per mode (sequential, concurrent): added p50 latencies (ms) and the ratios the targets read.
    A configuration that was not measured (``{"error": ...}``) makes its keys None."""
    def p50(c: str, mode: str) -> float | None:
        return configs.get(c, {}).get(mode, {}).get("p50_ms")

    def rate(c: str, mode: str) -> float | None:
        return configs.get(c, {}).get(mode, {}).get("rate_per_s")

    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or b <= 0 else a / b

    summary: dict[str, dict[str, float | None]] = {}
    for mode in ("sequential", "concurrent"):
        none, cel, hook = p50("none", mode), p50("cel", mode), p50("webhook", mode)
        floor, kyverno = p50("floor", mode), p50("kyverno", mode)
        summary[mode] = {
            "cel_over_none_p50_ms": diff(cel, none),
            "webhook_over_none_p50_ms": diff(hook, none),
            "webhook_over_cel_p50_ms": diff(hook, cel),
            "webhook_pins_over_cel_p50_ms": diff(p50("webhook-pins", mode), cel),
            "floor_over_none_p50_ms": diff(floor, none),
            "webhook_over_floor_p50_ms": diff(hook, floor),
            "kyverno_over_none_p50_ms": diff(kyverno, none),
            # (webhook - none) / (kyverno - none): gpu-admission's added latency as a share of Kyverno's
            # (None when Kyverno was not measured or added nothing measurable)
            "webhook_added_over_kyverno_added": ratio(diff(hook, none), diff(kyverno, none)),
            "webhook_rate_over_floor_rate": ratio(rate("webhook", mode), rate("floor", mode)),
            "webhook_rate_over_kyverno_rate": ratio(rate("webhook", mode), rate("kyverno", mode)),
        }
        if "before" in configs:  # both trees behind the floor's registration (run(before=...))
            copies, was = p50("copies", mode), p50("before", mode)
            summary[mode].update({
                "copies_over_floor_p50_ms": diff(copies, floor),
                "before_over_floor_p50_ms": diff(was, floor),
                "copies_over_before_p50_ms": diff(copies, was),
                "copies_rate_over_floor_rate": ratio(rate("copies", mode), rate("floor", mode)),
                "before_rate_over_floor_rate": ratio(rate("before", mode), rate("floor", mode)),
                "copies_rate_over_before_rate": ratio(rate("copies", mode), rate("before", mode)),
            })
    return summary


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(copy.deepcopy(obj))


if __name__ == "__main__":  # pragma: no cover
    res = run()
    print(json.dumps({k: v for k, v in res.items() if k != "configs"}, indent=1))
