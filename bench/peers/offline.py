"""The offline peers of ``gpu-admission check`` (issue 17, point 3), for ``bench/check_bench.py``:

- ``kyverno apply`` (the Kyverno CLI) with the ClusterPolicy of ``bench/peers/kyverno-policy.yaml``
  (mutate + validate), in an offline copy that matches the benchmark's objects (see
  :func:`kyverno_offline_policy`);
- Gatekeeper's ``gator test`` with the ConstraintTemplate + Constraint of ``bench/peers/gator/``
  (validate only: gator does not mutate).

Both are built from their Go modules by ``bench/peers/build-offline-peers.sh`` (cached outside the
checkout; only ``make bench`` calls it). A peer that cannot be built, or that judged none of the
objects it was given, is recorded with ``error`` (not timed as fast).

Every peer's verdicts are checked against :func:`reference`, the same rule written in Python over
the same documents: how many objects the rule applies to (a pod spec with a container asking for
more than one ``nvidia.com/gpu``), how many of them do not pin ``nvidia.com/gpu.product`` (gator
must deny exactly those), how many of those Kyverno's mutate rule pins (no required node affinity
terms) and how many it must still deny.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import yaml

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "bench" / "peers"
BUILD_SCRIPT = PEERS / "build-offline-peers.sh"
KYVERNO_POLICY = PEERS / "kyverno-policy.yaml"
KYVERNO_FALLBACK_POLICY = PEERS / "kyverno-offline-policy.yaml"
GATOR_POLICY_DIR = PEERS / "gator"

GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
# the pod controllers Kyverno's autogen writes rules for (pkg/autogen: PodControllers), and where each
# keeps its pod spec; gator's Rego reads the same places
TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}


# ----------------------------------------------------------------------------- build


def build(timeout: float = 3600.0) -> dict[str, dict[str, Any]]:
    """Run the build script; per peer ``{"path", "version", "build_stats"}`` or ``{"error", "version"}``."""
    peers: dict[str, dict[str, Any]] = {}
    try:
        done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"build-offline-peers.sh: {type(exc).__name__}: {exc}"
        return {"kyverno": {"error": why}, "gator": {"error": why}}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not Path(lines[-1]).is_dir():
        why = f"build-offline-peers.sh exited {done.returncode}: {done.stderr.strip()[-600:]}"
        return {"kyverno": {"error": why}, "gator": {"error": why}}
    bin_dir = Path(lines[-1])
    for name in ("kyverno", "gator"):
        version_file = bin_dir / f"{name}.version"
        version = version_file.read_text().strip() if version_file.exists() else "unknown"
        error = bin_dir / f"{name}.error"
        exe = bin_dir / name
        if error.exists() or not exe.exists():
            peers[name] = {"version": version,
                           "error": error.read_text().strip() if error.exists() else f"{exe} missing after the build"}
            continue
        stats = bin_dir / f"{name}.build-stats"
        peers[name] = {"version": version, "path": str(exe.resolve()),
                       "build_stats": _build_stats(stats.read_text() if stats.exists() else "")}
    return peers


def _build_stats(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"text": text.strip()}
    m = re.search(r"build seconds: (\d+) \(go build alone: (\d+)\)", text)
    if m:
        out["build_s"], out["go_build_s"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"\((\d+) bytes\)", text)
    if m:
        out["binary_mib"] = round(int(m.group(1)) / 2**20, 1)
    return out


# ----------------------------------------------------------------------------- policies


def wait_for(path: Path, timeout: float, interval: float = 10.0) -> bool:
    """Poll for a file another engineer is writing (it must also parse as YAML)."""
    deadline = time.monotonic() + timeout
    while True:
        if path.exists():
            try:
                if any(isinstance(d, dict) for d in yaml.safe_load_all(path.read_text())):
                    return True
            except yaml.YAMLError:
                pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def kyverno_offline_policy(source: Path, out_dir: Path) -> tuple[Path, list[str]]:
    """A copy of the ClusterPolicy that ``kyverno apply`` sees as applying to the benchmark's objects.

    The e2e policy is scoped to the namespace ``bench-kyverno`` (so the other configurations of the e2e
    run are untouched); the objects carry ``ai-serving``. The copy drops every ``namespaces`` and
    ``namespaceSelector`` of the rules' match/exclude blocks, and nothing else: same rules, same
    kinds (Pod, with Kyverno's autogen covering the pod controllers), same preconditions, patterns and
    patch. Returns the copy and what was changed (empty: the source was used as is)."""
    docs = list(yaml.safe_load_all(source.read_text()))
    changes: list[str] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in ("ClusterPolicy", "Policy"):
            continue
        if doc.get("kind") == "Policy":
            # a namespaced Policy only applies to resources of its own namespace: make it cluster-wide
            doc["kind"] = "ClusterPolicy"
            doc.get("metadata", {}).pop("namespace", None)
            changes.append("Policy made a ClusterPolicy")
        for rule in (doc.get("spec") or {}).get("rules") or []:
            for block_name in ("match", "exclude"):
                block = rule.get(block_name)
                if not isinstance(block, dict):
                    continue
                filters = [block] + list(block.get("any") or []) + list(block.get("all") or [])
                for f in filters:
                    res = f.get("resources") if isinstance(f, dict) else None
                    if not isinstance(res, dict):
                        continue
                    for key in ("namespaces", "namespaceSelector"):
                        if key in res:
                            changes.append(f"rule {rule.get('name')}: {block_name} {key} {res[key]!r} dropped")
                            del res[key]
    if not changes:
        return source, []
    out = out_dir / "kyverno-policy.offline.yaml"
    out.write_text(f"# derived from {source.relative_to(ROOT)} by bench/peers/offline.py: "
                   + "; ".join(changes) + "\n---\n" + yaml.safe_dump_all(docs, sort_keys=False))
    return out, changes


def kyverno_policy_kinds(policy: Path) -> list[str]:
    kinds: list[str] = []
    for doc in yaml.safe_load_all(policy.read_text()):
        if not isinstance(doc, dict):
            continue
        for rule in (doc.get("spec") or {}).get("rules") or []:
            match = rule.get("match") or {}
            for f in [match] + list(match.get("any") or []) + list(match.get("all") or []):
                kinds += list(((f or {}).get("resources") or {}).get("kinds") or [])
    return sorted(set(kinds))


# ----------------------------------------------------------------------------- the rule, in Python


def pod_spec(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    kind, spec = obj.get("kind"), obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if kind == "Pod":
        return spec
    if kind in TEMPLATE_KINDS:
        template = spec.get("template")
    elif kind == "CronJob":
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
    else:
        return None
    inner = template.get("spec") if isinstance(template, dict) else None
    return inner if isinstance(inner, dict) else None


def _gpus(container: Any) -> float:
    try:
        return float(((container.get("resources") or {}).get("limits") or {}).get(GPU, 0))
    except (TypeError, ValueError, AttributeError):
        return 0.0


def _terms(spec: dict[str, Any]) -> list[Any]:
    return list(((((spec.get("affinity") or {}).get("nodeAffinity") or {})
                  .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []))


def _pinned(spec: dict[str, Any]) -> bool:
    if (spec.get("nodeSelector") or {}).get(PRODUCT):
        return True
    terms = _terms(spec)
    return bool(terms) and all(any(isinstance(e, dict) and e.get("key") == PRODUCT
                                   for e in (t or {}).get("matchExpressions") or []) for t in terms)


def reference(docs: Iterable[Any]) -> dict[str, int]:
    """What a peer must report on these documents, counted in Python with the same rule."""
    counts = {"objects": 0, "multi_gpu": 0, "unpinned": 0, "mutated": 0, "denied_after_mutate": 0,
              "product_key_after_mutate": 0}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        counts["objects"] += 1
        spec = pod_spec(doc)
        mentions = _mentions_product_key(doc)
        counts["product_key_after_mutate"] += mentions
        if spec is None or not any(_gpus(c) > 1 for c in spec.get("containers") or []):
            continue
        counts["multi_gpu"] += 1
        if _pinned(spec):
            continue
        counts["unpinned"] += 1
        if _terms(spec):
            counts["denied_after_mutate"] += 1  # terms present: not mutated, still unpinned
        else:
            counts["mutated"] += 1
            counts["product_key_after_mutate"] += not mentions
    # kyverno apply counts one result per rule and resource: the mutate rule passes for each object it
    # pins, the validate rule passes or fails for each multi-GPU object (after the mutation)
    counts["kyverno_pass"] = counts["mutated"] + counts["multi_gpu"] - counts["denied_after_mutate"]
    return counts


def _mentions_product_key(node: Any) -> bool:
    """A node selector requirement on the product label anywhere in the object (what the printed,
    mutated object of a pinned pod shows as ``key: nvidia.com/gpu.product``)."""
    if isinstance(node, dict):
        return node.get("key") == PRODUCT or any(_mentions_product_key(v) for v in node.values())
    if isinstance(node, list):
        return any(_mentions_product_key(v) for v in node)
    return False


def load_documents(path: Path) -> list[Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(path.read_text(), Loader=loader) if d is not None]


# ----------------------------------------------------------------------------- running


def _tree_rss_kib(pid: int) -> int:
    """VmRSS of a process and all its descendants, summed (from /proc)."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                ppid = vm = 0
                for line in f:
                    if line.startswith("PPid:"):
                        ppid = int(line.split()[1])
                    elif line.startswith("VmRSS:"):
                        vm = int(line.split()[1])
                        break
        except (OSError, ValueError):
            continue
        parents[int(entry.name)], rss[int(entry.name)] = ppid, vm
    tree, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in tree:
                tree.add(child)
                todo.append(child)
    return sum(rss.get(p, 0) for p in tree)


TIME = Path("/usr/bin/time")  # Debian's time: -f %M is the peak RSS of the command, in KiB
# without it, a small interpreter forks and execs the command and reports wait4's ru_maxrss
_RSS_HELPER = """\
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _rss_argv(argv: list[str], rss_file: str) -> list[str]:
    """``argv`` run under a wrapper that reports its peak RSS into ``rss_file``.

    Not ``wait4`` on the command itself: Python starts children with vfork, and Linux keeps the
    parent's high-water RSS as the child's ``ru_maxrss`` across the exec, so a 10 MB Go command run
    from a benchmark process holding 200 MB of parsed objects would report 200 MB. A wrapper that forks
    the command from its own small address space reports the command's own peak."""
    if TIME.exists():
        return [str(TIME), "-f", "%M", "-o", rss_file, *argv]
    import sys
    return [sys.executable, "-c", _RSS_HELPER, rss_file, *argv]


def measure(argv: list[str], runs: int, warmup: int = 0, timeout: float = 1800.0,
            env: dict[str, str] | None = None, tree_rss: bool = False) -> dict[str, Any]:
    """Wall time and peak RSS of each run (the largest single process, as ``wait4`` counts it: a worker
    pool's processes are not added up), measured by /usr/bin/time (or a small fork/exec helper); with
    ``tree_rss`` also the peak of the process tree's summed RSS, sampled from /proc every 20 ms (costs
    CPU: for untimed runs). stdout and stderr of the last run kept (in a temporary file, not a pipe: a
    peer's output is tens of MB on 10,000 objects). Wall times include the wrapper's start (~1 ms
    with /usr/bin/time): used for runs of seconds to minutes."""
    times: list[float] = []
    rss: list[int] = []
    tree_peak = 0
    codes: list[int] = []
    stdout = stderr = ""
    for i in range(warmup + runs):
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
                tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
            t0 = time.perf_counter()
            proc = subprocess.Popen(_rss_argv(argv, rss_file.name), stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=env)
            try:
                while True:
                    try:
                        code = proc.wait(timeout=0.02 if tree_rss else 1.0)
                        break
                    except subprocess.TimeoutExpired:
                        if time.perf_counter() - t0 > timeout:
                            proc.kill()
                            proc.wait()
                            raise RuntimeError(f"{argv[0]}: no exit after {timeout:.0f} s") from None
                        if tree_rss:
                            tree_peak = max(tree_peak, _tree_rss_kib(proc.pid))
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            elapsed = time.perf_counter() - t0
            report = [line for line in Path(rss_file.name).read_text().splitlines() if line.strip()]
            if i >= warmup:
                times.append(elapsed)
                if report and report[-1].strip().isdigit():
                    rss.append(int(report[-1]))
                codes.append(code)
            if i == warmup + runs - 1:
                out.seek(0)
                err.seek(0)
                stdout = out.read().decode(errors="replace")
                stderr = err.read().decode(errors="replace")
    return {"times_s": times, "peak_rss_kib": max(rss) if rss else None, "exit_codes": codes,
            "tree_peak_rss_kib": tree_peak or None, "rss_by": str(TIME) if TIME.exists() else "fork/exec helper",
            "stdout": stdout, "stderr": stderr}


def median(values: list[float]) -> float:
    data = sorted(values)
    n = len(data)
    return (data[n // 2] if n % 2 else (data[n // 2 - 1] + data[n // 2]) / 2) if n else float("nan")


# ----------------------------------------------------------------------------- reading their verdicts


_KYVERNO_SUMMARY = re.compile(r"pass: (\d+), fail: (\d+), warn: (\d+), error: (\d+), skip: (\d+)")
_KYVERNO_APPLYING = re.compile(r"Applying (\d+) policy rule\(s\) to (\d+) resource\(s\)")


def parse_kyverno(stdout: str, stderr: str) -> dict[str, Any]:
    """``kyverno apply`` (v1.19, cmd/cli/kubectl-kyverno/commands/apply) prints ``Applying R policy rule(s)
    to N resource(s)...``, each mutated resource after a ``policy NAME applied to NS/KIND/NAME:`` line,
    ``policy NAME -> resource NS/KIND/NAME failed:`` for a denial, and a summary ``pass: P, fail: F,
    warn: W, error: E, skip: S`` (counted per rule and resource)."""
    text = stdout + "\n" + stderr
    out: dict[str, Any] = {}
    m = _KYVERNO_APPLYING.search(text)
    if m:
        out["rules"], out["resources"] = (int(g) for g in m.groups())
    m = None
    for m in _KYVERNO_SUMMARY.finditer(text):
        pass
    if m:
        out.update(zip(("pass", "fail", "warn", "error", "skip"), (int(g) for g in m.groups())))
    # every matched resource is printed after "policy NAME applied to NS/KIND/NAME:" (mutated or not):
    # the pinned ones are those whose printed object holds the product label's node selector requirement
    blocks = re.split(r"^policy \S+ applied to \S+:$", stdout, flags=re.M)[1:]
    out["printed"] = len(blocks)
    out["product_key_printed"] = sum(f"key: {PRODUCT}" in b for b in blocks)
    failed = set(re.findall(r"^policy \S+ -> resource (\S+) failed:", text, flags=re.M))
    out["failed_resources"] = len(failed)
    return out


def parse_gator(stdout: str) -> dict[str, Any]:
    """``gator test -o json``: a list of results, one per violation, each with the violating object."""
    start = stdout.find("[")
    if stdout.strip() in ("", "null"):
        results: list[Any] = []
    else:
        try:
            results = json.loads(stdout[start:]) if start >= 0 else []
        except json.JSONDecodeError as exc:
            return {"parse_error": f"{exc}: {stdout[:300]!r}"}
    objects = set()
    for r in results or []:
        obj = r.get("violatingObject") or {}
        meta = obj.get("metadata") or {}
        objects.add((obj.get("kind"), meta.get("namespace"), meta.get("name")))
    return {"violations": len(results or []), "denied_objects": len(objects)}


_CHECK_SUMMARY = re.compile(r"(\d+) checked, (\d+) allowed, (\d+) denied, (\d+) warned")


def parse_check(stdout: str) -> dict[str, int]:
    m = None
    for m in _CHECK_SUMMARY.finditer(stdout):
        pass
    return dict(zip(("checked", "allowed", "denied", "warned"), (int(g) for g in m.groups()))) if m else {}


def judge_kyverno(parsed: dict[str, Any], ref: dict[str, int]) -> dict[str, Any]:
    """Did ``kyverno apply`` judge the objects? One result per rule and resource: the mutate rule
    passes for each object it pins (``mutated``), the validate rule passes or fails for each
    multi-GPU object after that; the printed objects with the product key are the pinned ones (plus
    any that had it already). Every count must be the one :func:`reference` expects."""
    judged = {"pass": parsed.get("pass", 0), "fail": parsed.get("fail", 0), "error": parsed.get("error", 0),
              "skip": parsed.get("skip", 0), "resources": parsed.get("resources", 0),
              "pinned_printed": parsed.get("product_key_printed", 0),
              "expected": {"pass": ref["kyverno_pass"], "fail": ref["denied_after_mutate"], "error": 0,
                           "resources": ref["objects"], "pinned_printed": ref["product_key_after_mutate"]}}
    judged["denied"] = judged["fail"]
    judged["mutated"] = judged["pinned_printed"] - (ref["product_key_after_mutate"] - ref["mutated"])
    problems = []
    if judged["pass"] + judged["fail"] + judged["error"] == 0:
        problems.append("kyverno apply matched none of the objects (no pass, fail or error)")
    for key, want in judged["expected"].items():
        if judged[key] != want:
            problems.append(f"{key} {judged[key]} != expected {want}")
    judged["ok"] = not problems
    if problems:
        judged["problems"] = problems
    return judged


def judge_gator(parsed: dict[str, Any], ref: dict[str, int]) -> dict[str, Any]:
    judged = {"denied": parsed.get("denied_objects", 0), "violations": parsed.get("violations", 0),
              "expected": {"denied": ref["unpinned"]}}
    problems = []
    if "parse_error" in parsed:
        problems.append("output not JSON: " + parsed["parse_error"])
    if judged["denied"] == 0 and ref["unpinned"]:
        problems.append("gator test denied none of the objects")
    if judged["denied"] != ref["unpinned"]:
        problems.append(f"denied {judged['denied']} != expected {ref['unpinned']}")
    judged["ok"] = not problems
    if problems:
        judged["problems"] = problems
    return judged


def kyverno_argv(exe: str, policy: Path, resources: Path) -> list[str]:
    return [exe, "apply", str(policy), "--resource", str(resources)]


def gator_argv(exe: str, resources: Path) -> list[str]:
    return [exe, "test", "--filename", str(resources), "--filename", str(GATOR_POLICY_DIR), "--output", "json"]

