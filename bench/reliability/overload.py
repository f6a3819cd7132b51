"""Overload: 3x the measured maximum throughput for 60 s, open loop, against ``gpu-admission serve``
(2 workers x 8 threads, as the Deployment runs it). The client is Go's net/http
(``bench/reliability/loadgen``), as kube-apiserver's: keep-alive HTTP/1.1, 25 idle connections per
host, a new connection when none is idle, a 3 s deadline per call after which the call is abandoned
and its connection closed; calls are made on schedule whatever the answers.

Phases: capacity (closed loop, 32 in flight, 15 s) -> baseline (0.3x, 10 s) -> overload (3x, 60 s)
-> recovery (0.3x, 30 s). What is measured:
- client side: per second, answered / shed (503) / timed out, and p50/p99 of the answers; the
  client's own lag (how late it made its calls) tells whether the generator kept up;
- server side (its decision log): requests judged although they had waited longer than the webhook
  timeout for a thread ("answered as if fresh" after the apiserver gave up), the longest such wait,
  and every judged review;
- memory (RSS of master + workers) every second;
- recovery: seconds after the overload until the p99 of each second stays under 2x the baseline p99.

``python -m bench.reliability.overload [--seconds 60] [--factor 3] [--label NAME] [-- SERVE ARGS]``;
results in ``bench/reliability/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.reliability import common


def decisions(stderr: str) -> list[dict[str, Any]]:
    out = []
    for line in stderr.splitlines():
        if '"event":"decision"' in line:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run(seconds: float, factor: float, work: Path, extra: list[str], source: Path | None = None) -> dict[str, Any]:
    server = common.start_server(work, *extra, source=source)
    try:
        common.go_closed_loop(server.port, server.ca, 8, 5, work=work)  # warm-up: imports, caches
        capacity = common.go_closed_loop(server.port, server.ca, 32, 15, work=work)

        base_rate, over_rate = 0.3 * capacity, factor * capacity
        memory: list[tuple[float, float]] = []
        stop = threading.Event()
        start = time.monotonic() + 1.0

        def sample() -> None:
            while not stop.is_set():
                memory.append((round(time.monotonic() - start, 1), round(sum(server.rss_mib().values()), 1)))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        baseline = common.go_open_loop([server.port], server.ca, base_rate, 10, start, work=work)
        over_start = time.monotonic() + 0.5
        overload = common.go_open_loop([server.port], server.ca, over_rate, seconds, over_start, work=work)
        rec_start = time.monotonic() + 0.5
        recovery = common.go_open_loop([server.port], server.ca, base_rate, 30, rec_start, work=work)
        stop.set()
        sampler.join()
    finally:
        server.stop()

    base_summary = common.summarize(baseline, 10)
    base_p99 = base_summary["ok_p99_ms"] or 1.0
    rec_rows = common.per_second(recovery, rec_start, 30)
    threshold = max(2 * base_p99, 20.0)
    recovered_after = None
    for i in range(len(rec_rows)):
        if all(r["p99_ms"] is not None and r["p99_ms"] <= threshold for r in rec_rows[i:i + 5] if r["sent"]):
            recovered_after = rec_rows[i]["t"]
            break
    judged = decisions(server.stderr())
    waits = [d.get("queued_ms") for d in judged if isinstance(d.get("queued_ms"), (int, float))]
    over_rows = common.per_second(overload, over_start, int(seconds))
    over_from, over_to = over_start - start, over_start - start + seconds
    mem_over = [m for t, m in memory if over_from <= t < over_to]
    return {
        "capacity_req_s": round(capacity, 1),
        "offered_req_s": {"baseline": round(base_rate, 1), "overload": round(over_rate, 1)},
        "overload_seconds": seconds,
        "client": "Go net/http (bench/reliability/loadgen): 25 idle connections per host, 3 s deadline per call",
        "baseline": base_summary,
        "overload": common.summarize(overload, seconds),
        "recovery": common.summarize(recovery, 30),
        "recovery_p99_threshold_ms": threshold,
        "recovered_after_s": recovered_after,
        "server_judged": len(judged),
        "server_judged_after_waiting_over_timeout": sum(1 for w in waits if w > common.TIMEOUT * 1000),
        "server_max_queue_wait_ms_of_judged": max(waits) if waits else None,
        "server_logs_queue_wait": bool(waits),
        "shed_logged": server.stderr().count('"event":"shed"'),
        "memory_mib": {"before": memory[0][1] if memory else None,
                       "overload_first_10s_max": max(mem_over[:10]) if mem_over else None,
                       "overload_last_10s_max": max(mem_over[-10:]) if mem_over else None,
                       "max": max(m for _, m in memory) if memory else None,
                       "after": memory[-1][1] if memory else None},
        "overload_per_second": over_rows,
        "recovery_per_second": rec_rows,
        "memory_samples": memory,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--factor", type=float, default=3)
    parser.add_argument("--label", default="overload")
    parser.add_argument("--source", type=Path, default=None,
                        help="serve the webhook package of another tree (git archive REV webhook | tar -x -C DIR)")
    parser.add_argument("server_args", nargs="*", help="extra `serve` arguments")
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-overload-") as tmp:
        result = run(args.seconds, args.factor, Path(tmp), args.server_args, args.source)
    result["server"] = {"source": str(args.source) if args.source else "this tree", "args": args.server_args}
    result["machine"] = quiet
    path = common.save(args.label, result)
    o = result["overload"]
    print(f"capacity {result['capacity_req_s']} req/s; overload {result['offered_req_s']['overload']} req/s for "
          f"{args.seconds:.0f} s: {o['outcomes']}, ok p50 {o['ok_p50_ms']} ms p99 {o['ok_p99_ms']} ms max "
          f"{o['ok_max_ms']} ms; judged after waiting > {common.TIMEOUT} s: "
          f"{result['server_judged_after_waiting_over_timeout']}; recovered after {result['recovered_after_s']} s; "
          f"memory {result['memory_mib']}; -> {path}")


if __name__ == "__main__":
    main()
