"""Overload: 3x the measured maximum throughput for 60 s, open loop, against ``gpu-admission serve``
(2 workers x 8 threads, as the Deployment runs it), with a kube-apiserver-like client (3 s deadline,
keep-alive connections, a new one when none is idle).

Phases: capacity (closed loop, 32 in flight, 15 s) -> baseline (0.3x, 10 s) -> overload (3x, 60 s)
-> recovery (0.3x, 30 s). What is measured:
- client side: per second, answered / shed (503) / timed out, and p50/p99 of the answers;
- server side (its decision log): requests judged although they had waited longer than the webhook
  timeout before being handled ("answered as if fresh" after the apiserver gave up), and the largest
  queue wait of a judged request;
- memory (RSS of master + workers) every second;
- recovery: seconds after the overload until the p99 of each second is back under 2x the baseline p99.

``python -m bench.reliability.overload [--seconds 60] [--factor 3]``; results in
``bench/reliability/results/overload.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
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


async def run(seconds: float, factor: float, work: Path, extra: list[str]) -> dict[str, Any]:
    server = common.start_server(work, *extra)
    try:
        load = common.Load([server.port], server.ca)
        await load.closed_loop(8, 5)  # warm-up: imports, caches, connections
        t0 = time.monotonic()
        cap = await load.closed_loop(32, 15)
        capacity = sum(1 for r in cap if r.outcome == "ok") / (time.monotonic() - t0)
        load.close()

        base_rate, over_rate = 0.3 * capacity, factor * capacity
        sampler = common.MemorySampler(server)
        stop = asyncio.Event()
        start = time.monotonic()
        mem_task = asyncio.create_task(sampler.run(start, stop))
        baseline = await load.open_loop(base_rate, 10, start)
        over_start = start + 10
        overload = await load.open_loop(over_rate, seconds, over_start)
        rec_start = time.monotonic()
        recovery = await load.open_loop(base_rate, 30, rec_start)
        stop.set()
        await mem_task
        load.close()
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
    mem = sampler.samples
    mem_over = [m for t, m in mem if 10 <= t < 10 + seconds]
    return {
        "capacity_req_s": round(capacity, 1),
        "offered_req_s": {"baseline": round(base_rate, 1), "overload": round(over_rate, 1)},
        "overload_seconds": seconds,
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
        "memory_mib": {"before": mem[0][1] if mem else None,
                       "overload_first_10s_max": max(mem_over[:10]) if mem_over else None,
                       "overload_last_10s_max": max(mem_over[-10:]) if mem_over else None,
                       "max": max(m for _, m in mem) if mem else None,
                       "after": mem[-1][1] if mem else None},
        "overload_per_second": over_rows,
        "recovery_per_second": rec_rows,
        "memory_samples": mem,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--factor", type=float, default=3)
    parser.add_argument("--label", default="overload")
    parser.add_argument("server_args", nargs="*", help="extra `serve` arguments")
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-overload-") as tmp:
        result = asyncio.run(run(args.seconds, args.factor, Path(tmp), args.server_args))
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
