"""The policy file replaced with garbage under load: decisions continue with the last good policy.

One instance with ``--config policy.yaml``, open loop at ``--rate`` of one review whose verdict shows
the policy in force (a 2-GPU Llama-70B pinned to L40S, which cannot work: enforce denies, audit
admits; at TP4 it is only misplaced since issue 24, admitted in both). Every 3 s the
file is replaced (atomically, as a ConfigMap update does) by the next of: enforce, garbage YAML,
audit, binary junk, an invalid policy (a schema error), enforce, a truncated file, audit, a list, an
empty file, audit, a file cut after its opening comments, one without apiVersion and kind (the last
three were valid policies, the embedded default's enforce, before issue 25), ... Expected verdict of each answer: the last *valid* policy written before the request,
except within ``WINDOW`` s after a valid change (workers reload on their next request after the 1 s
interval). Counted: answers that disagree with the last good policy outside those windows (target 0),
failed calls (target 0), and /readyz (six times: both workers) and the config_valid gauge while a
broken file is in place. While two of the broken files are in place a worker is killed (SIGKILL) and
gunicorn boots a replacement, which must serve the same last good policy as its sibling.

``python -m bench.reliability.config_garbage [--seconds 60] [--rate 150]``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.reliability import common

RESTART_DURING = frozenset({"binary junk", "empty file"})
"""Broken versions during which a worker is killed (SIGKILL) and gunicorn boots a replacement."""

WINDOW = 2.5
"""Seconds after a valid policy change during which either verdict is right (1 s reload interval,
each worker reloading on its next request after it)."""

HEADER = b"apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
"""What every policy file states: a file without it (empty, cut short) is broken, not the default."""

VERSIONS: list[tuple[str, bytes, str | None]] = [
    ("enforce", HEADER + b"mode: enforce\n", "enforce"),
    ("garbage YAML", HEADER + b"mode: [enforce\n  {{{: :\n", None),
    ("audit", HEADER + b"mode: audit\n", "audit"),
    ("binary junk", os.urandom(4096), None),
    ("schema error", HEADER + b"mode: sometimes\ntiers: 42\n", None),
    ("enforce", HEADER + b"mode: enforce\n", "enforce"),
    ("truncated mid-write", HEADER + b"mode: aud", None),
    ("audit", HEADER + b"mode: audit\n", "audit"),
    ("not a mapping", b"- just\n- a list\n", None),
    ("empty file", b"", None),
    ("audit", HEADER + b"mode: audit\n", "audit"),
    ("cut after its comments", b"# gpu-admission policy\n#\n# Copy this file\n", None),
    ("no apiVersion and kind", b"mode: enforce\n", None),
]


def replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(".policy.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def get(server: common.Server, path: str) -> tuple[int, str]:
    """GET ``path``: on the probe port when the server has one (/metrics is only served there)."""
    if server.probe_port is not None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", server.probe_port, timeout=5)
    else:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=common.client_context(server.ca),
                                           timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


async def writer(policy: Path, server: common.Server, seconds: float, log: list[dict[str, Any]],
                 restarts: list[dict[str, Any]], start: float) -> None:
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() + 3 < end:
        await asyncio.sleep(3)
        i += 1
        name, data, mode = VERSIONS[i % len(VERSIONS)]
        replace(policy, data)
        entry: dict[str, Any] = {"t": time.monotonic(), "version": name, "mode": mode}
        log.append(entry)
        if mode is None:  # broken: after the reload interval /readyz must name the error
            await asyncio.sleep(1.0)
            if name in RESTART_DURING:
                # a worker dies while the file is broken: its replacement must serve the last good
                # policy too (before issue 25 it served the start-up file's)
                kills: list[dict[str, Any]] = []
                await common.kill_worker_at(server, time.monotonic(), kills, index=len(restarts))
                restarts.extend(dict(k, version=name, t=round(k["t"] - start, 2)) for k in kills)
                entry["worker_restarted"] = bool(kills and kills[0].get("replacement_pid"))
            else:
                await asyncio.sleep(0.5)
            answers = [await asyncio.to_thread(get, server, "/readyz") for _ in range(6)]  # both workers
            entry["readyz_reports_error"] = all(s == 200 and "policy_reload_error" in b for s, b in answers)
            _, metrics = await asyncio.to_thread(get, server, "/metrics")
            entry["config_valid_gauge_0"] = "gpu_admission_config_valid 0.0" in metrics


async def run(seconds: float, rate: float, work: Path) -> dict[str, Any]:
    policy = work / "policy.yaml"
    policy.write_bytes(VERSIONS[0][1])
    server = common.start_server(work, config=policy)
    wrong = common.vllm_pod("llama", pin="NVIDIA-L40S", tp=2)  # 66 GiB of weights per 48 GB card: cannot work
    mix = common.Mix((("/validate", json.dumps(common.review(wrong, "UID"), separators=(",", ":")).encode()),))
    try:
        load = common.Load([server.port], server.ca, mix=mix)
        start = time.monotonic()
        log: list[dict[str, Any]] = [{"t": start - 10, "version": "enforce", "mode": "enforce"}]
        restarts: list[dict[str, Any]] = []
        writing = asyncio.create_task(writer(policy, server, seconds, log, restarts, start))
        results = await load.open_loop(rate, seconds, start)
        await writing
        load.close()
    finally:
        server.stop()

    def expected(sent: float) -> tuple[set[bool], bool]:
        good = [e for e in log if e["mode"] is not None and e["t"] <= sent]
        last = good[-1]
        allowed = {last["mode"] == "audit"}
        in_window = sent - last["t"] < WINDOW
        if in_window and len(good) > 1:
            allowed.add(good[-2]["mode"] == "audit")
        return allowed, in_window

    mismatched, checked, windowed = [], 0, 0
    for r in results:
        if r.outcome != "ok":
            continue
        ok, in_window = expected(r.sent)
        windowed += in_window
        checked += 1
        if r.allowed not in ok:
            mismatched.append({"t": round(r.sent - start, 2), "allowed": r.allowed})
    kill_times = [start + k["t"] for k in restarts]
    failed = [r for r in results if r.outcome != "ok"]
    failed_at_kill = [r for r in failed if any(r.sent <= k <= r.done + 0.05 for k in kill_times)]
    broken = [e for e in log if e["mode"] is None]
    for e in log:
        e["t"] = round(e["t"] - start, 2)
    return {"seconds": seconds, "rate": rate, "file_versions_written": len(log) - 1,
            "broken_versions_written": len(broken), "timeline": log,
            "answers_checked": checked, "answers_in_a_reload_window": windowed,
            "answers_against_the_last_good_policy": len(mismatched), "mismatch_samples": mismatched[:5],
            "worker_restarts_while_broken": restarts,
            "failed_calls": len(failed), "failed_calls_in_flight_at_a_kill": len(failed_at_kill),
            "every_killed_worker_replaced": all(e.get("worker_restarted") for e in log
                                                           if e["version"] in RESTART_DURING),
            "readyz_reported_every_broken_file": all(e.get("readyz_reports_error") for e in broken),
            "config_valid_0_for_every_broken_file": all(e.get("config_valid_gauge_0") for e in broken),
            "summary": common.summarize(results, seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=150)
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-config-") as tmp:
        result = asyncio.run(run(args.seconds, args.rate, Path(tmp)))
    result["machine"] = quiet
    path = common.save("config_garbage", result)
    print(f"{result['file_versions_written']} versions ({result['broken_versions_written']} broken) in "
          f"{args.seconds:.0f} s; {result['answers_checked']} answers checked, "
          f"{result['answers_against_the_last_good_policy']} against the last good policy; calls "
          f"{result['summary']['outcomes']}; readyz reported every broken file: "
          f"{result['readyz_reported_every_broken_file']} -> {path}")


if __name__ == "__main__":
    main()
