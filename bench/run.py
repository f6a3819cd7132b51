"""``make bench``: every benchmark in one run, then targets, plots and BENCHMARKS.md.

    python -m bench.run [--phases engine,server,check,e2e] [--baseline RESULTS.json] [--before-tree REV]
                        [--no-markdown]

Writes ``bench/results/<UTC stamp>/`` (results.json + PNG CDFs), copies it to ``bench/results/latest/``
and regenerates ``BENCHMARKS.md``. ``BENCH_QUICK=1`` scales counts and durations down (smoke run).
``--baseline`` adds a before/after table against an earlier results.json. The notes of
``bench/NOTES.md`` (profiling findings and fixes) are appended to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

from bench import common, report

RESULTS = common.ROOT / "bench" / "results"
PHASES = ("engine", "server", "check", "e2e")


def log(msg: str) -> None:
    print(msg, flush=True)


@contextlib.contextmanager
def before_tree(rev: str) -> Iterator[Path]:
    """REV's ``webhook`` package in a temporary directory (``git archive``), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="gpu-admission-before-") as tmp:
        archive = subprocess.run(["git", "-C", str(common.ROOT), "archive", rev, "webhook"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.run")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier results.json for before/after")
    parser.add_argument("--label", default="", help="suffix of the results directory (e.g. before)")
    parser.add_argument("--no-markdown", action="store_true", help="do not regenerate BENCHMARKS.md")
    parser.add_argument("--with", dest="with_results", type=Path, default=None, metavar="RESULTS.json",
                        help="take the phases this run does not run from an earlier results.json (each phase "
                             "carries its floors and peers, measured side by side inside it; meta.merged says which)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds of each server cell (default 3, or %d with --before-tree); more rounds "
                             "let the sign test against the tree before allow a contrary round" % 5)
    parser.add_argument("--before-tree", metavar="REV", default=None,
                        help="also serve REV's webhook package (git archive) in the server and e2e phases, "
                             "alternated with this tree's and the floor's in the same rounds: a serving-layer "
                             "change against the tree before it, in one run")
    parser.add_argument("--render-only", action="store_true",
                        help="only rewrite BENCHMARKS.md from bench/results/latest (with bench/NOTES.md)")
    args = parser.parse_args(argv)
    if args.render_only:
        results = json.loads((RESULTS / "latest" / "results.json").read_text())
        notes = common.ROOT / "bench" / "NOTES.md"
        results["notes"] = notes.read_text() if notes.exists() else ""
        (RESULTS / "latest" / "results.json").write_text(json.dumps(results, indent=1, default=str))
        report.plots({k: v for k, v in results.items() if not (isinstance(v, dict) and "error" in v)},
                     RESULTS / "latest")
        baseline = json.loads(args.baseline.read_text()) if args.baseline else None
        (common.ROOT / "BENCHMARKS.md").write_text(report.markdown(results, "bench/results/latest", baseline))
        log("wrote BENCHMARKS.md")
        return 0
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; known: {', '.join(PHASES)}")
    missing = [m for m in ("matplotlib",) if importlib.util.find_spec(m) is None]
    if missing:  # found before the phases run, not after 25 minutes of them (the plots need it)
        parser.error(f"{', '.join(missing)} is not installed: pip install -r bench/requirements.txt "
                     "(make bench does)")
    started = datetime.datetime.now(datetime.timezone.utc)
    stamp = started.strftime("%Y%m%dT%H%M%SZ") + (f"-{args.label}" if args.label else "")
    out = RESULTS / stamp
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"meta": {"stamp": stamp, "started": started.isoformat(timespec="seconds"),
                                        "quick": common.quick(), "phases": phases,
                                        "machine": common.machine_facts()}}
    t0 = time.monotonic()
    failed: list[str] = []
    for phase in phases:
        log(f"== {phase}")
        p0 = time.monotonic()
        try:
            if phase == "engine":
                from bench import engine_bench
                results["engine"] = engine_bench.run()
                from bench import node_churn
                results["engine"]["node_churn"] = node_churn.runs(passes=int(common.scaled(2, 1)))
                for r in results["engine"]["node_churn"]:
                    log(f"  node churn {r['churn']}: verdict memo hit rate {r['hit_rate']} "
                        f"({r['inventories_built']} inventories for {r['events']} node events)")
                for name, s in results["engine"]["summary"].items():
                    log(f"  {name}: engine {s['engine_median_us']:.0f} us vs floor {s['floor_median_us']:.0f} us "
                        f"(ratio median {s['engine_ratio_median']:.1f}x, worst {s['engine_ratio_worst']:.1f}x)")
            elif phase == "server":
                from bench import server_bench
                if args.before_tree:
                    with before_tree(args.before_tree) as tree:
                        results["server"] = server_bench.run(log=log, rounds=args.rounds, before=(args.before_tree, tree))
                else:
                    results["server"] = server_bench.run(log=log, rounds=args.rounds)
            elif phase == "check":
                from bench import check_bench
                results["check"] = check_bench.run()
                log(f"  one file {results['check']['one_file']['median_s']:.3f} s; "
                    f"{results['check']['many']['objects_per_s']:.0f} objects/s")
            elif phase == "e2e":
                from bench import e2e_latency
                if args.before_tree:
                    with before_tree(args.before_tree) as tree:
                        results["e2e"] = e2e_latency.run(log=log, before=(args.before_tree, tree))
                else:
                    results["e2e"] = e2e_latency.run(log=log)
        except Exception as exc:  # noqa: BLE001 - one failed phase must not lose the others
            failed.append(phase)
            log(f"  {phase} FAILED: {exc}")
            results[phase] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        log(f"  ({time.monotonic() - p0:.0f} s)")
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    results["meta"]["duration_s"] = time.monotonic() - t0
    if args.with_results:
        earlier = json.loads(args.with_results.read_text())
        taken = [p for p in PHASES if p not in phases and p in earlier]
        for p in taken:
            results[p] = earlier[p]
        results["meta"]["merged"] = {"from": earlier.get("meta", {}).get("stamp"), "phases": taken,
                                     "duration_s": earlier.get("meta", {}).get("duration_s")}
    results["targets"] = report.targets({k: v for k, v in results.items() if not (isinstance(v, dict) and "error" in v
                                                                                   and k != "e2e")})
    results["pngs"] = report.plots({k: v for k, v in results.items() if not (isinstance(v, dict) and "error" in v)}, out)
    notes = common.ROOT / "bench" / "NOTES.md"
    if notes.exists():
        results["notes"] = notes.read_text()
    for run in results.get("server", {}).get("runs", []):
        run.pop("percentiles_ms", None)  # the summary keeps the median CDF; keeps results.json small
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    log("== targets")
    for t in results["targets"]:
        log("  " + report.format_target(t))
    latest = RESULTS / "latest"
    if not args.label:
        if latest.exists():
            shutil.rmtree(latest)
        shutil.copytree(out, latest)
    if not args.no_markdown:
        baseline = json.loads(args.baseline.read_text()) if args.baseline else None
        md = report.markdown(results, "bench/results/latest" if not args.label else f"bench/results/{stamp}",
                             baseline)
        (common.ROOT / "BENCHMARKS.md").write_text(md)
        log("wrote BENCHMARKS.md")
    log(f"results: {out.relative_to(common.ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
