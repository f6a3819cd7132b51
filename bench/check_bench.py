"""4. CI use: ``gpu-admission check`` as a pipeline runs it, process start to exit.

- one file: ``gpu-admission check examples/vllm-llama-70b-tp4.yaml``, median wall time of N runs
  (hyperfine when installed, else repeated subprocess timing), next to two floors for context: the
  interpreter alone (``python -c pass``) and reading the same file with PyYAML's C loader;
- 10,000 objects: a generated multi-document YAML of varied Deployments, StatefulSets, Jobs and bare
  Pods (``bench.corpus.manifest_stream``); objects per second = objects / median wall time.
- the offline peers, in the same run and on the same two inputs (bench/peers/offline.py): ``kyverno
  apply`` (the Kyverno CLI, mutate + validate, the ClusterPolicy of bench/peers/kyverno-policy.yaml in
  an offline copy without its namespace scoping) and Gatekeeper's ``gator test`` (validate only, the
  ConstraintTemplate + Constraint of bench/peers/gator/), built from their Go modules by
  bench/peers/build-offline-peers.sh (cached; ``make bench`` only). Each peer's verdicts are checked
  against the same rule counted in Python: a peer that judged nothing, or not the expected objects, is
  recorded with ``error`` and left out of the ratios. Peak RSS from ``wait4``'s rusage of the child.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common, corpus
from bench.peers import offline

ONE_FILE = common.ROOT / "examples" / "vllm-llama-70b-tp4.yaml"


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("gpu-admission")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "webhook"]


def _time_runs(argv: list[str], runs: int, warmup: int = 2, env: dict[str, str] | None = None) -> list[float]:
    """Wall seconds of each run (exit codes 0 and 1 are verdicts, anything else is a failure)."""
    if shutil.which("hyperfine"):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = " ".join(_quote(a) for a in argv)
            done = subprocess.run(["hyperfine", "--style", "none", "-N", "--warmup", str(warmup), "--runs", str(runs),
                                   "-i", "--export-json", out.name, cmd], capture_output=True, text=True,
                                  timeout=3600, env=env)
            if done.returncode == 0:
                result = json.loads(Path(out.name).read_text())["results"][0]
                codes = set(result.get("exit_codes", [0]))
                if codes - {0, 1}:
                    raise RuntimeError(f"{cmd}: exit codes {codes}")
                return list(result["times"])
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600, env=env)
        elapsed = time.perf_counter() - t0
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
        if i >= warmup:
            times.append(elapsed)
    return times


def _quote(arg: str) -> str:
    return arg if all(c.isalnum() or c in "/._-=:" for c in arg) else "'" + arg.replace("'", "'\\''") + "'"


def _mib(kib: int | None) -> float | None:
    return round(kib / 1024, 1) if kib else None


def _bytecode_env(cache: Path) -> dict[str, str]:
    """The environment of an installed package: byte-compiled modules, read from a cache outside the
    checkout (pip compiles them at install; a checkout run with PYTHONDONTWRITEBYTECODE=1, as on the
    machines here, compiles every module of webhook/ from source at every start)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _timed(argv: list[str], runs: int, warmup: int) -> dict[str, Any]:
    times = _time_runs(argv, runs, warmup=warmup)
    med = common.median(times)
    return {"median_s": med, "runs": len(times), "min_s": min(times), "max_s": max(times), "times_s": times}


def _peer_kyverno(exe: str, version: str, source: Path, policy: Path, changes: list[str], one_ref: dict[str, int],
                  stream: Path, ref: dict[str, int], runs: int, kyverno_runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"version": version, "mode": "mutate+validate",
                           "command": "kyverno apply POLICY --resource FILE",
                           "policy": str(source.relative_to(common.ROOT)),
                           "policy_offline_copy": policy != source, "policy_offline_changes": changes,
                           "policy_kinds": offline.kyverno_policy_kinds(policy)}
    one_argv = offline.kyverno_argv(exe, policy, ONE_FILE)
    out["one_file"] = _timed(one_argv, runs, warmup=1)
    probe = offline.measure(one_argv, 1)
    out["one_file"]["peak_rss_mib"] = _mib(probe["peak_rss_kib"])
    out["one_file"]["judged"] = offline.judge_kyverno(offline.parse_kyverno(probe["stdout"], probe["stderr"]), one_ref)
    # minutes per run on 10,000 objects: fewer runs, no warm-up; the timed runs are the judged runs
    big = offline.measure(offline.kyverno_argv(exe, policy, stream), kyverno_runs, timeout=3600)
    _verdict_codes("kyverno apply", big)
    med = common.median(big["times_s"])
    out["many"] = {"objects": ref["objects"], "runs": len(big["times_s"]), "median_s": med,
                   "times_s": big["times_s"], "objects_per_s": ref["objects"] / med,
                   "peak_rss_mib": _mib(big["peak_rss_kib"]),
                   "judged": offline.judge_kyverno(offline.parse_kyverno(big["stdout"], big["stderr"]), ref),
                   "timer": "wait4"}
    _flag(out)
    return out


def _peer_gator(exe: str, version: str, one_ref: dict[str, int], stream: Path, ref: dict[str, int], runs: int,
                big_runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"version": version, "mode": "validate",
                           "command": "gator test --filename FILE --filename bench/peers/gator --output json",
                           "policy": str(offline.GATOR_POLICY_DIR.relative_to(common.ROOT))}
    one_argv = offline.gator_argv(exe, ONE_FILE)
    out["one_file"] = _timed(one_argv, runs, warmup=2)
    probe = offline.measure(one_argv, 1)
    _verdict_codes("gator test", probe)
    out["one_file"]["peak_rss_mib"] = _mib(probe["peak_rss_kib"])
    out["one_file"]["judged"] = offline.judge_gator(offline.parse_gator(probe["stdout"]), one_ref)
    big_argv = offline.gator_argv(exe, stream)
    timed = _timed(big_argv, big_runs, warmup=1)
    probe = offline.measure(big_argv, 1, timeout=3600)
    _verdict_codes("gator test", probe)
    out["many"] = {"objects": ref["objects"], **timed, "objects_per_s": ref["objects"] / timed["median_s"],
                   "peak_rss_mib": _mib(probe["peak_rss_kib"]),
                   "judged": offline.judge_gator(offline.parse_gator(probe["stdout"]), ref)}
    _flag(out)
    return out


def _verdict_codes(tool: str, measured: dict[str, Any]) -> None:
    bad = [c for c in measured["exit_codes"] if c not in (0, 1)]
    if bad:
        raise RuntimeError(f"{tool}: exit codes {measured['exit_codes']}: {measured['stderr'][-1500:]}")


def _flag(peer: dict[str, Any]) -> None:
    """A peer that did not judge the 10,000 objects as expected is an error (left out of the ratios),
    not a fast result; a discrepancy on the one file is kept as a warning beside its time."""
    many = peer.get("many", {}).get("judged", {}).get("problems", [])
    one = peer.get("one_file", {}).get("judged", {}).get("problems", [])
    if many:
        peer["error"] = "did not judge the objects as expected: " + "; ".join(many)
    if one:
        peer["warnings"] = [f"one_file: {p}" for p in one]


def _kyverno_policy(tmp: Path, log) -> tuple[Path, Path, list[str]]:
    """(source, the file given to kyverno apply, what was changed): the ClusterPolicy of
    bench/peers/kyverno-policy.yaml (polled for while absent, BENCH_PEER_POLICY_WAIT seconds; then
    bench/peers/kyverno-offline-policy.yaml if there is one), in an offline copy that applies to the
    benchmark's objects when its scoping would not."""
    wait = float(os.environ.get("BENCH_PEER_POLICY_WAIT", "30"))
    source = offline.KYVERNO_POLICY
    if not offline.wait_for(source, timeout=wait):
        if not offline.KYVERNO_FALLBACK_POLICY.exists():
            raise FileNotFoundError(f"{source} does not exist (waited {wait:.0f} s)")
        log(f"  {source.name} absent: using {offline.KYVERNO_FALLBACK_POLICY.name}")
        source = offline.KYVERNO_FALLBACK_POLICY
    policy, changes = offline.kyverno_offline_policy(source, tmp)
    return source, policy, changes


def run(objects: int | None = None, runs: int | None = None, peers: bool = True, log=None) -> dict[str, Any]:
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    objects = objects or int(common.scaled(10_000, 1_000))
    runs = runs or int(common.scaled(20, 5))
    big_runs = int(common.scaled(5, 2))
    kyverno_runs = int(common.scaled(2, 1))
    cli = _cli()
    # the peers are built (or found in the cache) before anything is timed: a build must not share
    # the CPUs with a measurement
    built: dict[str, dict[str, Any]] = {}
    if peers:
        t0 = time.monotonic()
        built = offline.build()
        log(f"  offline peers: " + ", ".join(f"{k} {v.get('version')}" + (f" (error: {v['error']})" if "error" in v else "")
                                             for k, v in built.items()) + f" ({time.monotonic() - t0:.0f} s)")
    one = _time_runs([*cli, "check", str(ONE_FILE)], runs)
    python_floor = _time_runs([sys.executable, "-c", "pass"], runs)
    yaml_floor = _time_runs([sys.executable, "-c", "import sys, yaml; list(yaml.load_all(open(sys.argv[1]), "
                             "Loader=yaml.CSafeLoader))", str(ONE_FILE)], runs)
    with tempfile.TemporaryDirectory(prefix="gpu-admission-check-") as tmp:
        bytecode_env = _bytecode_env(Path(tmp) / "pycache")
        subprocess.run([*cli, "check", str(ONE_FILE)], stdout=subprocess.DEVNULL, env=bytecode_env, timeout=600)
        one_pyc = _time_runs([*cli, "check", str(ONE_FILE)], runs, env=bytecode_env)
        one_probe = offline.measure([*cli, "check", str(ONE_FILE)], 1)
        stream = Path(tmp) / f"objects-{objects}.yaml"
        stream.write_text(corpus.manifest_stream(objects))
        big = _time_runs([*cli, "check", str(stream)], big_runs, warmup=1)
        big_yaml = _time_runs([sys.executable, "-c", "import sys, yaml; list(yaml.load_all(open(sys.argv[1]), "
                               "Loader=yaml.CSafeLoader))", str(stream)], big_runs, warmup=0)
        # one more run of each for its verdicts and peak RSS (not timed with the others), and the same
        # objects judged as written (--no-mutate: what a validate-only peer compares with)
        big_probe = offline.measure([*cli, "check", str(stream)], 1, tree_rss=True)
        no_mutate = offline.measure([*cli, "check", "--no-mutate", str(stream)], 1)
        ref = offline.reference(offline.load_documents(stream))
        one_ref = offline.reference(offline.load_documents(ONE_FILE))
        peer_results: dict[str, Any] = {}
        if peers:
            for name in ("gator", "kyverno"):
                info = built.get(name, {"error": "not built"})
                if "error" in info:
                    peer_results[name] = {"version": info.get("version"), "error": info["error"],
                                          "mode": "validate" if name == "gator" else "mutate+validate"}
                    continue
                log(f"  {name} {info['version']} ...")
                p0 = time.monotonic()
                try:
                    if name == "gator":
                        peer_results[name] = _peer_gator(info["path"], info["version"], one_ref, stream, ref, runs,
                                                         big_runs)
                    else:
                        source, policy, changes = _kyverno_policy(Path(tmp), log)
                        peer_results[name] = _peer_kyverno(info["path"], info["version"], source, policy, changes,
                                                           one_ref, stream, ref, runs, kyverno_runs)
                except Exception as exc:  # noqa: BLE001 - one peer failing must not lose the others
                    peer_results[name] = {"version": info["version"], "error": f"{type(exc).__name__}: {exc}",
                                          "mode": "validate" if name == "gator" else "mutate+validate"}
                peer_results[name]["build"] = info.get("build_stats", {})
                log(f"  {name}: {time.monotonic() - p0:.0f} s" + (f"; error: {peer_results[name]['error']}"
                                                                 if "error" in peer_results[name] else ""))
    one_med, big_med = common.median(one), common.median(big)
    result: dict[str, Any] = {
        "tool": "hyperfine" if shutil.which("hyperfine") else "subprocess",
        "one_file": {"file": str(ONE_FILE.relative_to(common.ROOT)), "runs": len(one), "median_s": one_med,
                     "min_s": min(one), "max_s": max(one), "times_s": one,
                     "python_startup_median_s": common.median(python_floor),
                     "yaml_read_median_s": common.median(yaml_floor),
                     "bytecode_cached_median_s": common.median(one_pyc),
                     "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
                     "peak_rss_mib": _mib(one_probe["peak_rss_kib"])},
        "many": {"objects": objects, "runs": len(big), "median_s": big_med, "times_s": big,
                 "objects_per_s": objects / big_med, "yaml_read_median_s": common.median(big_yaml),
                 "peak_rss_mib": _mib(big_probe["peak_rss_kib"]),
                 "peak_rss_tree_mib": _mib(big_probe["tree_peak_rss_kib"]),
                 "verdicts": offline.parse_check(big_probe["stdout"]),
                 "verdicts_no_mutate": offline.parse_check(no_mutate["stdout"]),
                 "reference": ref},
    }
    if peers:
        result["peers"] = peer_results
        ok = {k: v for k, v in peer_results.items() if "error" not in v}
        result["check_over_kyverno_objects_per_s"] = (result["many"]["objects_per_s"]
                                                      / ok["kyverno"]["many"]["objects_per_s"]
                                                      if "kyverno" in ok else None)
        result["check_over_gator_objects_per_s"] = (result["many"]["objects_per_s"]
                                                    / ok["gator"]["many"]["objects_per_s"] if "gator" in ok else None)
        result["check_one_file_over_gator_one_file"] = (one_med / ok["gator"]["one_file"]["median_s"]
                                                        if "gator" in ok else None)
        result["check_one_file_bytecode_over_gator_one_file"] = (common.median(one_pyc)
                                                                 / ok["gator"]["one_file"]["median_s"]
                                                                 if "gator" in ok else None)
    return result


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=2))
