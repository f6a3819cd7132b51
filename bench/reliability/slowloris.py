"""1,000 slowloris TLS connections against one instance while a keep-alive client sends reviews.

The attack of issue 25: half the connections send a request one byte a second, half stop after two
bytes (``PO``); a connection the server closes is opened again at once, so the attack keeps its size
(tests/server/slowloris.py, its own process: it must not share the client's interpreter). The server
is ``gpu-admission serve`` with the Deployment's 2 workers x 8 threads. The client is one keep-alive
HTTPS connection, as kube-apiserver keeps them, sending a review every 10 ms after the previous
answer, each with the webhooks' 3 s timeoutSeconds (past it the call counts as timed out and the
connection is dialled anew).

Phases: 50 warm-up reviews; ``--seconds`` unloaded; the attack opened (measurement starts once 90% of
its connections are open, and 6 s later, past the first read deadline, so that the server is closing
and the attacker re-opening throughout); ``--seconds`` under the attack. Reported: p50/p99/max of each
phase and their ratio, timeouts, what the attacker saw (open, re-opened, failed handshakes).

``python -m bench.reliability.slowloris [--connections 1000] [--seconds 20] [--label slowloris]
[--source TREE]``: ``--source`` serves another tree's ``webhook`` package (``make slowloris-compare``
runs the tree before issue 25 this way).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.reliability import common

ATTACKER = common.ROOT / "tests" / "server" / "slowloris.py"


def reviews(server: common.Server, seconds: float, count: int | None, tag: str) -> dict[str, Any]:
    """Reviews back to back (10 ms apart) for ``seconds`` (or ``count`` reviews) on one keep-alive
    connection; latencies of the answered ones, and how many timed out or failed."""
    body_of = json.dumps(common.review(common.vllm_pod("llama", pin="NVIDIA-L4", tp=4), "UID"),
                         separators=(",", ":")).encode()
    ctx = common.client_context(server.ca)

    def dial() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=common.TIMEOUT)

    conn, latencies, timeouts, failed, i = dial(), [], 0, 0, 0
    end = time.monotonic() + seconds
    while (count is None and time.monotonic() < end) or (count is not None and i < count):
        uid = f"{tag}-{i}"
        i += 1
        started = time.monotonic()
        try:
            conn.request("POST", "/validate", body=body_of.replace(b'"uid":"UID"', f'"uid":"{uid}"'.encode()),
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            payload = response.read()
            if response.status != 200 or uid.encode() not in payload:
                failed += 1
            else:
                latencies.append(time.monotonic() - started)
        except TimeoutError:
            timeouts += 1
            conn.close()
            conn = dial()
        except (OSError, http.client.HTTPException):
            failed += 1
            conn.close()
            conn = dial()
        time.sleep(0.01)
    conn.close()
    ms = [x * 1000 for x in latencies]
    return {"calls": i, "answered": len(ms), "timed_out": timeouts, "failed": failed,
            "p50_ms": round(common.percentile(ms, 50), 1) if ms else None,
            "p99_ms": round(common.percentile(ms, 99), 1) if ms else None,
            "max_ms": round(max(ms), 1) if ms else None}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(work: Path, connections: int, seconds: float, source: Path | None) -> dict[str, Any]:
    server = common.start_server(work, source=source)
    lines: list[dict[str, int]] = []
    try:
        reviews(server, 0, 50, "warm")
        unloaded = reviews(server, seconds, None, "quiet")
        attacker = subprocess.Popen([sys.executable, str(ATTACKER), str(server.port), str(server.ca),
                                     str(connections)], stdout=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in attacker.stdout),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 120
            while not (lines and lines[-1]["open"] >= 0.9 * connections) and time.monotonic() < deadline:
                time.sleep(0.2)
            in_place_after = len(lines)
            time.sleep(6.0)
            before = dict(lines[-1]) if lines else {}
            first_line = len(lines)
            cpu_before, wall_before = _cpu_seconds(attacker.pid), time.monotonic()
            attacked = reviews(server, seconds, None, "attack")
            attacker_cores = (_cpu_seconds(attacker.pid) - cpu_before) / (time.monotonic() - wall_before)
            after = dict(lines[-1]) if lines else {}
            open_counts = [x["open"] for x in lines[first_line:]]
        finally:
            attacker.terminate()
            attacker.wait(timeout=20)
        recovered = reviews(server, 0, 100, "after")
    finally:
        server.stop()
    return {"connections": connections, "seconds_per_phase": seconds,
            "server": {"source": str(source) if source else "this tree"},
            "unloaded": unloaded, "under_attack": attacked, "after_attack": recovered,
            "p99_ratio": round(attacked["p99_ms"] / unloaded["p99_ms"], 2)
            if attacked["p99_ms"] and unloaded["p99_ms"] else None,
            "attack": {"seconds_to_open": in_place_after, "open_when_measured": before.get("open"),
                       # the attacker runs on the same 2 cores as the server and the client here (in a
                       # cluster it is another pod, with its own CPU): the share of a core it took
                       "attacker_cores_while_measured": round(attacker_cores, 2),
                       "reopened_while_measured": after.get("reopened", 0) - before.get("reopened", 0),
                       "handshakes_failed_while_measured": after.get("failed", 0) - before.get("failed", 0),
                       "open_at_end": after.get("open"),
                       # connections opened together expire together (the read deadline) and are
                       # re-opened one handshake at a time: the count swings within each 5 s
                       "open_while_measured": {"min": min(open_counts), "max": max(open_counts),
                                               "mean": round(sum(open_counts) / len(open_counts))}
                       if open_counts else None}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--label", default="slowloris", help="results file name (default: slowloris)")
    parser.add_argument("--source", type=Path, help="serve this tree's webhook package instead")
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-slowloris-") as tmp:
        result = run(Path(tmp), args.connections, args.seconds, args.source)
    result["machine"] = quiet
    path = common.save(args.label, result)
    u, a = result["unloaded"], result["under_attack"]
    print(f"{args.connections} slowloris connections: p99 {u['p99_ms']} ms unloaded, {a['p99_ms']} ms under "
          f"attack (x{result['p99_ratio']}), max {a['max_ms']} ms; {a['answered']}/{a['calls']} answered, "
          f"{a['timed_out']} timed out; attacker re-opened {result['attack']['reopened_while_measured']}, "
          f"took {result['attack']['attacker_cores_while_measured']} of the 2 cores -> {path}")


if __name__ == "__main__":
    main()
