"""Where a request's CPU goes: the whole server path of ``gpu-admission serve`` and of the floor app,
sampled with py-spy under wrk, and each sample put in one bucket (engine, redaction, decision log,
metrics, parse, response, Flask/werkzeug, gunicorn, TLS, ...).

    python -m bench.profile_server [--seconds 15] [--traffic cold|warm] [--connections 1] [--out FILE]

Both servers run with ONE worker (so one py-spy follows all of its threads) under the same gunicorn
configuration as the benchmark; wrk sends the server benchmark's /validate review mix (``cold``: a
fresh nonce in every container, as ``bench.server_bench``; ``warm``: the same bodies again and
again; ``realistic``: the server benchmark's controller-shaped traffic). py-spy samples at 2,000 Hz without ``--idle``, so a sample is a thread on the CPU (or
holding the GIL in C code, e.g. OpenSSL); ``us/request`` of a bucket = its share of the samples x the
worker's CPU time (from /proc) / requests served. The bucket of a sample is the innermost frame that
belongs to a known part (project modules first, then libraries), read from the leaf up.

Why py-spy and not cProfile: it samples the real worker from outside, under real load, with no
instrumentation overhead that would inflate the many small calls of the engine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common, corpus, server_bench

PY_SPY = Path(sys.executable).with_name("py-spy")
"""Installed into the virtualenv by ``bench/requirements.txt``."""

# innermost matching frame decides; project parts are tried before libraries
PROJECT_PARTS: tuple[tuple[str, str], ...] = (
    ("webhook/core/redaction.py", "redaction"),
    ("webhook/server/logs.py", "decision log"),
    ("webhook/server/metrics.py", "metrics"),
    ("webhook/server/review.py:parse", "parse (review)"),
    ("webhook/server/review.py:_decode", "parse (review)"),
    ("webhook/server/review.py", "response (review.respond)"),
    ("webhook/server/admission.py", "admission glue"),
    ("webhook/core/", "engine"),
    ("webhook/server/gunicorn/balance.py", "serving layer (balance)"),
    ("webhook/server/gunicorn/overload.py", "serving layer (overload)"),
    ("webhook/server/gunicorn/closing.py", "serving layer (closing)"),
    ("webhook/server/gunicorn/", "serving layer (other)"),
    ("webhook/server/app.py", "route (app.handle)"),
    ("bench/floor_app.py", "route (floor)"),
)
LIBRARY_PARTS: tuple[tuple[str, str], ...] = (
    ("prometheus_client", "metrics"),
    ("logging/", "decision log"),
    ("json/", "json"),
    ("flask/", "flask/werkzeug"),
    ("werkzeug/", "flask/werkzeug"),
    ("ssl.py", "tls"),
    ("gunicorn/", "gunicorn"),
    ("selectors.py", "gunicorn"),
    ("socket.py", "gunicorn"),
    ("threading.py", "threads"),
    ("concurrent/", "threads"),
)


def bucket(stack: list[str]) -> str:
    """The part a sample belongs to; ``stack`` is root first, each frame ``func (file:line)``."""
    def where(frame: str) -> tuple[str, str]:
        func, _, rest = frame.partition(" (")
        return func, rest.rsplit(":", 1)[0]

    for frame in reversed(stack):
        func, path = where(frame)
        for needle, name in PROJECT_PARTS:
            file_part, _, func_part = needle.partition(":")
            if file_part in path and (not func_part or func == func_part):
                return name
        for needle, name in LIBRARY_PARTS:
            if needle in path:
                return name
    return "other"


def parse_raw(text: str) -> collections.Counter[str]:
    """py-spy ``--format raw`` (collapsed stacks ``a;b;c N``) -> samples per bucket."""
    out: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith("process ") and not f.startswith("thread ")]
        out[bucket(frames)] += int(count)
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile_one(name: str, certs: Path, work: Path, requests: Path, seconds: float,
                connections: int, source: Path | None = None) -> dict[str, Any]:
    # one worker, so one py-spy sees every thread that serves
    server = server_bench.start(name, certs, work, workers=1, source=source)
    try:
        server_bench.wrk(server, requests, connections, 3, work / "warm.json")  # warm-up
        worker = server.workers()[0]
        raw = work / f"{name}.raw"
        spy = subprocess.Popen([str(PY_SPY), "record", "--pid", str(worker),
                                "--rate", "2000", "--format", "raw", "--gil", "--nonblocking", "--duration",
                                str(int(seconds) + 1), "--output", str(raw)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        cpu0 = cpu_seconds(worker)
        load = server_bench.wrk(server, requests, connections, seconds, work / "run.json")
        cpu1 = cpu_seconds(worker)
        spy.wait(timeout=seconds + 60)
        samples = parse_raw(raw.read_text()) if raw.exists() else collections.Counter()
        keep = os.environ.get("PROFILE_KEEP")
        if keep and raw.exists():
            shutil.copy(raw, Path(keep) / raw.name)
    finally:
        common.stop_process(server.proc)
    total = sum(samples.values()) or 1
    cpu_per_request_us = (cpu1 - cpu0) / max(load["requests"], 1) * 1e6
    return {"requests": load["requests"], "rps": load["rps"], "p50_ms": load["p50_ms"],
            "cpu_us_per_request": cpu_per_request_us, "samples": total,
            "buckets_us": {k: v / total * cpu_per_request_us for k, v in samples.most_common()}}


def request_file(work: Path, traffic: str) -> Path:
    if traffic == "realistic":  # pods as controllers make them, /mutate then /validate (bench.corpus)
        path = work / "requests-realistic.tsv"
        path.write_text(server_bench.realistic_lines(corpus.controller_traffic()))
        return path
    items = [i for i in corpus.items(variants=60) if i.endpoint == "validate"]
    body = server_bench.with_nonce if traffic == "cold" else (lambda review: review)
    path = work / f"requests-{traffic}.tsv"
    path.write_text("".join(f"/{i.endpoint}\t{corpus.encode(body(i.review)).decode()}\n" for i in items))
    return path


def table(result: dict[str, Any]) -> str:
    ours, floor = result["gpu-admission"], result["floor"]
    names = sorted(set(ours["buckets_us"]) | set(floor["buckets_us"]),
                   key=lambda k: -(ours["buckets_us"].get(k, 0) - floor["buckets_us"].get(k, 0)))
    lines = [f"traffic {result['traffic']}, c={result['connections']}: CPU per request "
             f"{ours['cpu_us_per_request']:.0f} us vs floor {floor['cpu_us_per_request']:.0f} us "
             f"(gap {ours['cpu_us_per_request'] - floor['cpu_us_per_request']:.0f} us); p50 "
             f"{ours['p50_ms']:.2f} vs {floor['p50_ms']:.2f} ms",
             "| part | gpu-admission us/req | floor us/req | gap us |", "|---|---|---|---|"]
    for k in names:
        a, b = ours["buckets_us"].get(k, 0.0), floor["buckets_us"].get(k, 0.0)
        lines.append(f"| {k} | {a:.0f} | {b:.0f} | {a - b:+.0f} |")
    return "\n".join(lines)


def run(seconds: float = 15, traffic: str = "cold", connections: int = 1,
        source: Path | None = None) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="gpu-admission-profile-"))
    try:
        certs = server_bench._certs(work)
        requests = request_file(work, traffic)
        out: dict[str, Any] = {"traffic": traffic, "connections": connections, "seconds": seconds}
        for name in ("gpu-admission", "floor"):
            out[name] = profile_one(name, certs, work, requests, seconds, connections, source)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.profile_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--traffic", choices=("cold", "warm", "realistic"), default="cold")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    parser.add_argument("--source", type=Path, default=None,
                        help="a directory holding another version's webhook/ package to profile instead "
                             "(e.g. git archive OLD webhook | tar -x -C DIR): before/after tables")
    args = parser.parse_args(argv)
    if not PY_SPY.exists():
        parser.error("py-spy is not installed: pip install -r bench/requirements.txt (make bench does)")
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed: apt-get install wrk (make bench does)")
    result = run(args.seconds, args.traffic, args.connections, args.source)
    print(table(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
