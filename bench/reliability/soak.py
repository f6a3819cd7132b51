"""Soak: 50% of the measured maximum throughput for 10 minutes; memory and p99 must stay flat.

One instance (2 workers x 8 threads), capacity measured first (closed loop, 32 in flight, 15 s), then
an open loop at ``--fraction`` of it for ``--minutes``, both with Go's net/http client
(``bench/reliability/loadgen``, as kube-apiserver's: 25 idle connections per host, 3 s deadline). Per minute: answers per second, p50/p99/max,
failures, and the RSS of the master and of each worker (sampled every second, the minute's maximum).
The first and the last minute are compared.

``python -m bench.reliability.soak [--minutes 10] [--fraction 0.5]``; ``make soak``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.reliability import common


def run(minutes: float, fraction: float, work: Path) -> dict[str, Any]:
    server = common.start_server(work)
    try:
        common.go_closed_loop(server.port, server.ca, 8, 5, work=work)  # warm-up
        capacity = common.go_closed_loop(server.port, server.ca, 32, 15, work=work)
        rate = fraction * capacity
        seconds = minutes * 60
        per_worker: list[tuple[float, dict[int, float]]] = []
        stop = threading.Event()
        start = time.monotonic() + 1.0

        def sample() -> None:
            while not stop.is_set():
                per_worker.append((time.monotonic() - start, server.rss_mib()))
                stop.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        results = common.go_open_loop([server.port], server.ca, rate, seconds, start, work=work)
        stop.set()
        sampler.join()
        workers_at_end = server.workers()
    finally:
        server.stop()

    rows = []
    for m in range(int(minutes)):
        window = [r for r in results if start + 60 * m <= r.sent < start + 60 * (m + 1)]
        ok = [r.latency for r in window if r.outcome == "ok"]
        mem = [s for t, s in per_worker if 60 * m <= t < 60 * (m + 1)]
        rss_total = max((sum(s.values()) for s in mem), default=None)
        rss_workers = {str(pid): round(max(s.get(pid, 0.0) for s in mem), 1) for pid in workers_at_end} if mem else {}
        rows.append({"minute": m + 1, "calls": len(window), "ok_per_s": round(len(ok) / 60, 1),
                     "failed": sum(1 for r in window if r.outcome != "ok"),
                     "p50_ms": round(common.percentile(ok, 50) * 1000, 1) if ok else None,
                     "p99_ms": round(common.percentile(ok, 99) * 1000, 1) if ok else None,
                     "max_ms": round(max(ok) * 1000, 1) if ok else None,
                     "rss_total_mib": round(rss_total, 1) if rss_total else None, "rss_workers_mib": rss_workers})
    first, last = rows[0], rows[-1]
    return {"capacity_req_s": round(capacity, 1), "rate_req_s": round(rate, 1), "minutes": minutes,
            "fraction": fraction, "summary": common.summarize(results, seconds), "per_minute": rows,
            "first_minute": first, "last_minute": last,
            "rss_growth_mib": round((last["rss_total_mib"] or 0) - (first["rss_total_mib"] or 0), 1),
            "p99_ratio_last_to_first": round(last["p99_ms"] / first["p99_ms"], 2)
            if first["p99_ms"] and last["p99_ms"] else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--fraction", type=float, default=0.5)
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-soak-") as tmp:
        result = run(args.minutes, args.fraction, Path(tmp))
    result["machine"] = quiet
    path = common.save("soak", result)
    f, lm = result["first_minute"], result["last_minute"]
    print(f"{args.minutes:g} min at {result['rate_req_s']} req/s ({args.fraction:g} x {result['capacity_req_s']}): "
          f"first minute p99 {f['p99_ms']} ms RSS {f['rss_total_mib']} MiB; last minute p99 {lm['p99_ms']} ms RSS "
          f"{lm['rss_total_mib']} MiB; calls {result['summary']['outcomes']} -> {path}")


if __name__ == "__main__":
    main()
