"""4. CI use: ``gpu-admission check`` as a pipeline runs it, process start to exit.

- one file: ``gpu-admission check examples/vllm-llama-70b-tp4.yaml``, median wall time of N runs
  (hyperfine when installed, else repeated subprocess timing), next to two floors for context: the
  interpreter alone (``python -c pass``) and reading the same file with PyYAML's C loader;
- 10,000 objects: a generated multi-document YAML of varied Deployments, StatefulSets, Jobs and bare
  Pods (``bench.corpus.manifest_stream``); objects per second = objects / median wall time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common, corpus

ONE_FILE = common.ROOT / "examples" / "vllm-llama-70b-tp4.yaml"


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("gpu-admission")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "webhook"]


def _time_runs(argv: list[str], runs: int, warmup: int = 2) -> list[float]:
    """Wall seconds of each run (exit codes 0 and 1 are verdicts, anything else is a failure)."""
    if shutil.which("hyperfine"):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = " ".join(_quote(a) for a in argv)
            done = subprocess.run(["hyperfine", "--style", "none", "-N", "--warmup", str(warmup), "--runs", str(runs),
                                   "-i", "--export-json", out.name, cmd], capture_output=True, text=True,
                                  timeout=600)
            if done.returncode == 0:
                result = json.loads(Path(out.name).read_text())["results"][0]
                codes = set(result.get("exit_codes", [0]))
                if codes - {0, 1}:
                    raise RuntimeError(f"{cmd}: exit codes {codes}")
                return list(result["times"])
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
        elapsed = time.perf_counter() - t0
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
        if i >= warmup:
            times.append(elapsed)
    return times


def _quote(arg: str) -> str:
    return arg if all(c.isalnum() or c in "/._-=:" for c in arg) else "'" + arg.replace("'", "'\\''") + "'"


def run(objects: int | None = None, runs: int | None = None) -> dict[str, Any]:
    objects = objects or int(common.scaled(10_000, 1_000))
    runs = runs or int(common.scaled(20, 5))
    big_runs = int(common.scaled(5, 2))
    cli = _cli()
    one = _time_runs([*cli, "check", str(ONE_FILE)], runs)
    python_floor = _time_runs([sys.executable, "-c", "pass"], runs)
    yaml_floor = _time_runs([sys.executable, "-c", "import sys, yaml; list(yaml.load_all(open(sys.argv[1]), "
                             "Loader=yaml.CSafeLoader))", str(ONE_FILE)], runs)
    with tempfile.TemporaryDirectory(prefix="gpu-admission-check-") as tmp:
        stream = Path(tmp) / f"objects-{objects}.yaml"
        stream.write_text(corpus.manifest_stream(objects))
        big = _time_runs([*cli, "check", str(stream)], big_runs, warmup=1)
        big_yaml = _time_runs([sys.executable, "-c", "import sys, yaml; list(yaml.load_all(open(sys.argv[1]), "
                               "Loader=yaml.CSafeLoader))", str(stream)], big_runs, warmup=0)
    one_med, big_med = common.median(one), common.median(big)
    return {
        "tool": "hyperfine" if shutil.which("hyperfine") else "subprocess",
        "one_file": {"file": str(ONE_FILE.relative_to(common.ROOT)), "runs": len(one), "median_s": one_med,
                     "min_s": min(one), "max_s": max(one), "times_s": one,
                     "python_startup_median_s": common.median(python_floor),
                     "yaml_read_median_s": common.median(yaml_floor)},
        "many": {"objects": objects, "runs": len(big), "median_s": big_med, "times_s": big,
                 "objects_per_s": objects / big_med, "yaml_read_median_s": common.median(big_yaml)},
    }


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(run(), indent=2))
