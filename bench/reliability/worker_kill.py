"""A worker killed (SIGKILL, what the OOM killer does) under load.

1. One instance (2 workers x 8 threads), open loop at ``--rate`` (200/s; a third of the reviews are of
   60-container pods, ~8 ms each, so reviews are in flight at any moment) for 24 s, a worker killed at
   6, 12 and 18 s (each time the oldest: the other original, then a replacement). The client behaves like kube-apiserver's
   (Go's transport): it sends again only a request that found its idle keep-alive connection closed;
   a written request whose connection dies is a failed call (the apiserver then
   applies the failurePolicy). Counted: failed calls, and how many of them were in flight at a kill
   (the target: only those); when gunicorn's replacement worker was up.
2. Two instances behind one client (a new connection goes to either, as through a Service), the client
   retrying a call that failed at the connection level before any byte of an answer once, on a new
   connection (what a webhook client that treats admission reviews as the side-effect-free calls they
   are, ``sideEffects: None``, can do). Five kills, alternating instances. Target: zero failed
   admissions.

``python -m bench.reliability.worker_kill [--rate 200]``; results in
``bench/reliability/results/worker_kill.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.reliability import common


def failures_vs_kills(results: list[common.Result], kills: list[dict[str, Any]]) -> dict[str, Any]:
    failed = [r for r in results if r.outcome != "ok"]
    in_flight = [r for r in results if any(r.sent <= k["t"] <= r.done for k in kills)]
    failed_in_flight = [r for r in failed if any(r.sent <= k["t"] <= r.done + 0.05 for k in kills)]
    return {"failed": len(failed), "failed_outcomes": {o: sum(1 for r in failed if r.outcome == o)
                                                       for o in {r.outcome for r in failed}},
            "in_flight_at_a_kill": len(in_flight), "failed_that_were_in_flight": len(failed_in_flight),
            "failed_not_in_flight": len(failed) - len(failed_in_flight),
            "retried": sum(1 for r in results if r.retried),
            "retried_and_ok": sum(1 for r in results if r.retried and r.outcome == "ok")}


async def single(rate: float, work: Path) -> dict[str, Any]:
    server = common.start_server(work / "one")
    try:
        load = common.Load([server.port], server.ca, common.Mix.heavy(), retry=False)
        await load.open_loop(rate, 3)  # warm-up
        start = time.monotonic()
        kills: list[dict[str, Any]] = []
        killers = [asyncio.create_task(common.kill_worker_at(server, start + at, kills, 0)) for at in (6, 12, 18)]
        results = await load.open_loop(rate, 24, start)
        await asyncio.gather(*killers)
        load.close()
        alive = server.proc.poll() is None and len(server.workers()) == 2
        idle_closed = load.idle_closed_by_server
    finally:
        server.stop()
    for k in kills:
        k["t_s"] = round(k.pop("t") - start, 2) if "t" in k else None
    kill_times = [{"t": start + k["t_s"]} for k in kills]
    return {"rate": rate, "seconds": 24, "kills": kills, "server_alive_with_2_workers_after": alive,
            "idle_connections_found_closed_and_redialled": idle_closed,
            "summary": common.summarize(results, 24), **failures_vs_kills(results, kill_times)}


async def pair(rate: float, work: Path) -> dict[str, Any]:
    certs = work / "certs"
    common.make_certs(certs)
    a = common.start_server(work / "a", certs_dir=certs)
    b = common.start_server(work / "b", certs_dir=certs)
    try:
        load = common.Load([a.port, b.port], a.ca, common.Mix.heavy(), retry=True)
        await load.open_loop(rate, 3)
        start = time.monotonic()
        kills: list[dict[str, Any]] = []
        killers = [asyncio.create_task(common.kill_worker_at(server, start + at, kills, 0))
                   for server, at in ((a, 5), (b, 9), (a, 13), (b, 17), (a, 21))]
        results = await load.open_loop(rate, 26, start)
        await asyncio.gather(*killers)
        load.close()
    finally:
        a.stop()
        b.stop()
    for k in kills:
        k["t_s"] = round(k.pop("t") - start, 2)
    kill_times = [{"t": start + k["t_s"]} for k in kills]
    per_instance = {str(p): sum(1 for r in results if r.server == p) for p in (a.port, b.port)}
    return {"rate": rate, "seconds": 26, "kills": kills, "answered_per_instance": per_instance,
            "summary": common.summarize(results, 26), **failures_vs_kills(results, kill_times)}


async def run(rate: float, work: Path) -> dict[str, Any]:
    return {"single_instance": await single(rate, work), "two_instances_retrying_client": await pair(rate, work)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200)
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-kill-") as tmp:
        result = asyncio.run(run(args.rate, Path(tmp)))
    result["machine"] = quiet
    path = common.save("worker_kill", result)
    one, two = result["single_instance"], result["two_instances_retrying_client"]
    print(f"one instance: {one['summary']['requests']} calls, {one['failed']} failed "
          f"({one['failed_that_were_in_flight']} in flight at a kill, {one['failed_not_in_flight']} not), "
          f"kills {one['kills']}\ntwo instances + retrying client: {two['summary']['requests']} calls, "
          f"{two['failed']} failed, {two['retried_and_ok']} saved by a retry -> {path}")


if __name__ == "__main__":
    main()
