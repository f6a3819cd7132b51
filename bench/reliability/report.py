"""Render the figures of RELIABILITY.md from ``bench/reliability/results/*.json``.

RELIABILITY.md is prose written by people; each block of figures sits between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->`` and is rewritten here from ``NAME.json``
(a block whose results file does not exist is left as it is). ``make reliability-report``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from bench.reliability.common import RESULTS, ROOT

DOC = ROOT / "RELIABILITY.md"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:g}"


def _outcomes(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "none"


def _commit(r: dict[str, Any]) -> str:
    """The commit a figure was measured on (``common.provenance``); older results did not record it."""
    if not r.get("commit"):
        return "commit not recorded"
    dirty = r.get("uncommitted_changes") or []
    return (f"commit {r['commit']}" + (f" of {r['commit_date']}" if r.get("commit_date") else "")
            + (f" with uncommitted changes to {', '.join(dirty[:3])}" if dirty else ""))


def _when(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    load = m.get("loadavg")
    waited = f", waited {m['waited_s']} s for other benchmarks" if m.get("waited_s") else ""
    busy = f"; **others were still running: {m['still_busy']}**" if m.get("still_busy") else ""
    return (f"_Run {r['finished']} at {_commit(r)}, on {r['nproc']} cores (load average at start "
            f"{' '.join(f'{x:.2f}' for x in load) if load else '?'}{waited}{busy})._")


def fuzz(r: dict[str, Any]) -> str:
    m = r["mutation"]
    s = m["statuses"]
    lines = [f"_Last run: seed {r['seed']}, {r.get('finished', 'date not recorded')} at {_commit(r)}._", "",
             "| | count |", "|---|---|",
             f"| generated reviews | {r['total']:,} ({m['reviews']:,} mutation-fuzzed, "
             f"{r['hypothesis_examples']:,} hypothesis) |",
             f"| HTTP 200 / 400 / 413 / 5xx | {s.get('200', 0):,} / {s.get('400', 0):,} / {s.get('413', 0):,} / "
             f"{sum(v for k, v in s.items() if int(k) >= 500)} |",
             f"| verdicts (200s): allowed / denied | {m['verdicts'].get('allowed', 0):,} / "
             f"{m['verdicts'].get('denied', 0):,} |",
             f"| patches applied to their object with jsonpatch | {m['patches_applied']:,} |",
             f"| patched pods schema-checked (kubernetes_validate 1.37, strict) | {m['schema_checked']:,} |",
             f"| patched pods re-sent to /mutate (idempotence) | {m['idempotence_checked']:,} |",
             f"| slowest review (CPU) | {m['slowest_cpu_ms']} ms |",
             f"| wall time | {m['seconds']} s |", "",
             "Per policy: " + "; ".join(f"`{line}`" for line in r.get("lines", []))]
    return "\n".join(lines)


def _recovered(r: dict[str, Any]) -> str:
    s = r.get("recovered_after_s")
    return "not within the recovery phase" if s is None else f"{s} s"


def overload(r: dict[str, Any]) -> str:
    o, b, rec = r["overload"], r["baseline"], r["recovery"]
    mem = r["memory_mib"]
    server = r.get("server", {})
    what = (f"`gpu-admission serve {' '.join(server.get('args') or [])}`".replace(" `", "`")
            + (f" from `{Path(server['source']).name}`" if server.get("source") not in (None, "this tree") else ""))
    lines = [_when(r) + f" Server: {what}.", "",
             f"Capacity (closed loop, 32 in flight): **{r['capacity_req_s']} req/s**. Offered: baseline "
             f"{r['offered_req_s']['baseline']} req/s, overload **{r['offered_req_s']['overload']} req/s for "
             f"{r['overload_seconds']:g} s**, recovery at the baseline rate.", "",
             "| phase | calls | outcomes | p50 ms | p99 ms | max ms | answered after 3 s |", "|---|---|---|---|---|---|---|"]
    for name, s in (("baseline", b), ("overload", o), ("recovery", rec)):
        lines.append(f"| {name} | {s['requests']:,} | {_outcomes(s['outcomes'])} | {_ms(s['ok_p50_ms'])} | "
                     f"{_ms(s['ok_p99_ms'])} | {_ms(s['ok_max_ms'])} | {s['ok_over_timeout']} |")
    client_ok = sum(s["outcomes"].get("ok", 0) for s in (b, o, rec))
    lines += ["",
              f"- reviews the server judged: {r['server_judged']:,}; answers the client received in time: "
              f"{client_ok:,} (the difference was judged for a caller that had already given up)",
              f"- the client's own lag (how late it made its calls; it shares the 2 cores): p99 "
              f"{_ms(o.get('client_lag_p99_ms'))} ms under overload",
              f"- judged by the server after waiting longer than the 3 s timeout: "
              f"**{r['server_judged_after_waiting_over_timeout']}** of {r['server_judged']:,} judged"
              + (f" (longest wait of a judged review: {r['server_max_queue_wait_ms_of_judged']} ms)"
                 if r.get("server_logs_queue_wait") else " (this server does not log queue waits)"),
              f"- memory (RSS, master + 2 workers, MiB): before {mem['before']}, max in the first 10 s of "
              f"overload {mem['overload_first_10s_max']}, in the last 10 s {mem['overload_last_10s_max']}, "
              f"after {mem['after']}",
              f"- back to normal latency (p99 of each second under {r['recovery_p99_threshold_ms']:g} ms for 5 s): "
              f"**{_recovered(r)}** after the overload stopped"]
    rows = r["overload_per_second"]
    picks = [row for row in rows if row["t"] in (0, 1, 2, 5, 10, 20, 30, 40, 50, len(rows) - 1)]
    lines += ["", "Overload, per second (sample):", "",
              "| s | sent | answered | shed 503 | timed out | failed | p50 ms | p99 ms |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {x['t']} | {x['sent']} | {x['ok']} | {x['shed']} | {x['timeout']} | {x['failed']} | "
              f"{_ms(x['p50_ms'])} | {_ms(x['p99_ms'])} |" for x in picks]
    return "\n".join(lines)


def overload_before(r: dict[str, Any]) -> str:
    return overload(r)


def worker_kill(r: dict[str, Any]) -> str:
    one, two = r["single_instance"], r["two_instances_retrying_client"]
    lines = [_when(r), "",
             "| setup | calls | failed | failed that were in flight at a kill | failed otherwise | retried (ok) |",
             "|---|---|---|---|---|---|",
             f"| one instance, Go-like client ({one['rate']:g} req/s, {len(one['kills'])} kills) | "
             f"{one['summary']['requests']:,} | {one['failed']} | {one['failed_that_were_in_flight']} | "
             f"{one['failed_not_in_flight']} | - |",
             f"| two instances, client retrying on a new connection ({two['rate']:g} req/s, {len(two['kills'])} kills) | "
             f"{two['summary']['requests']:,} | {two['failed']} | {two['failed_that_were_in_flight']} | "
             f"{two['failed_not_in_flight']} | {two['retried']} ({two['retried_and_ok']}) |", "",
             "Replacement workers (gunicorn): " + "; ".join(
                 f"pid {k['pid']} killed at {k['t_s']} s, replacement booted after {k.get('replacement_booted_after_s')} s"
                 for k in one["kills"] + two["kills"]),
             f"; one-instance server alive with 2 workers afterwards: {one['server_alive_with_2_workers_after']}; "
             f"idle keep-alive connections of the killed workers found closed and redialled by the client: "
             f"{one.get('idle_connections_found_closed_and_redialled', '-')}."]
    return "\n".join(lines)


def rotation_load(r: dict[str, Any]) -> str:
    s = r["summary"]
    return "\n".join([_when(r), "",
                      "| rotations | kinds | handshakes | TLS failures | certificates seen by clients | calls | outcomes |",
                      "|---|---|---|---|---|---|---|",
                      f"| {r['rotations']} in {r['seconds']:g} s | {_outcomes(r['rotation_kinds'])} | "
                      f"{r['handshakes']:,} | **{r['tls_failures']}** | {r['distinct_certificates_seen']} | "
                      f"{s['requests']:,} | {_outcomes(s['outcomes'])} |", "",
                      f"Workers logged {r['worker_reloads_logged']} reloads and "
                      f"{r['half_written_pairs_deferred_logged']} deferrals of a half-written pair."])


def config_garbage(r: dict[str, Any]) -> str:
    s = r["summary"]
    versions = ", ".join(f"{e['t']} s {e['version']}" for e in r["timeline"][1:])
    return "\n".join([_when(r), "",
                      "| policy versions written | broken | answers checked | in a reload window | against the last good policy | calls | outcomes |",
                      "|---|---|---|---|---|---|---|",
                      f"| {r['file_versions_written']} in {r['seconds']:g} s | {r['broken_versions_written']} | "
                      f"{r['answers_checked']:,} | {r['answers_in_a_reload_window']:,} | "
                      f"**{r['answers_against_the_last_good_policy']}** | {s['requests']:,} | {_outcomes(s['outcomes'])} |",
                      "", "Workers killed while a broken file was in place: " + ("; ".join(
                          f"at {k['t']} s ({k['version']}), replacement booted after "
                          f"{k.get('replacement_booted_after_s')} s" for k in r["worker_restarts_while_broken"])
                          if r.get("worker_restarts_while_broken") else "none in this run")
                      + (f"; failed calls {r['failed_calls']}, of which in flight at a kill "
                         f"{r['failed_calls_in_flight_at_a_kill']}." if "failed_calls" in r else "."),
                      "", f"/readyz named the error for every broken file: {r['readyz_reported_every_broken_file']}; "
                      f"`gpu_admission_config_valid` was 0 for every broken file: "
                      f"{r['config_valid_0_for_every_broken_file']}. Timeline: {versions}."])


def soak(r: dict[str, Any]) -> str:
    label = "" if r["minutes"] >= 10 else f" **(shortened: {r['minutes']:g} minutes instead of 10)**"
    lines = [_when(r), "",
             f"{r['minutes']:g} minutes{label} at {r['rate_req_s']} req/s ({r['fraction']:g} x the measured "
             f"{r['capacity_req_s']} req/s): {r['summary']['requests']:,} calls, {_outcomes(r['summary']['outcomes'])}.",
             "", "| minute | answered/s | failed | p50 ms | p99 ms | max ms | RSS master+workers MiB |",
             "|---|---|---|---|---|---|---|"]
    for row in r["per_minute"]:
        lines.append(f"| {row['minute']} | {row['ok_per_s']} | {row['failed']} | {_ms(row['p50_ms'])} | "
                     f"{_ms(row['p99_ms'])} | {_ms(row['max_ms'])} | {_ms(row['rss_total_mib'])} |")
    lines += ["", f"First minute vs last: p99 x{r['p99_ratio_last_to_first']}, RSS {r['rss_growth_mib']:+g} MiB."]
    return "\n".join(lines)


def e2e_restart(r: dict[str, Any]) -> str:
    lines = [f"_Run {r.get('finished', '(date not recorded)')} at {_commit(r)}._", "",
             f"Phases (s from the start): {', '.join(f'{k} {v}' for k, v in r['phases_s'].items())}; "
             f"{r['attempts']} pod creations.", "",
             "| pods | phase | outcomes |", "|---|---|---|"]
    for kind, phases in r["outcomes"].items():
        for phase in ("up", "transition", "down", "back"):
            if phase in phases:
                lines.append(f"| {kind} | {phase} | {_outcomes(phases[phase])} |")
    lines += ["", f"Enforcing GPU pods stored without the tier pin: **{r['stored_enforce_gpu_pods_without_pin']}**."]
    return "\n".join(lines)


def slowloris(r: dict[str, Any]) -> str:
    u, a, after, atk = r["unloaded"], r["under_attack"], r["after_attack"], r["attack"]
    served = r.get("server", {}).get("source", "this tree")
    lines = [_when(r) + ("" if served == "this tree" else f" Served from `{Path(served).name}`."), "",
             f"{r['connections']:,} connections (half one byte a second, half stalled after `PO`), "
             f"{r['seconds_per_phase']:g} s per phase; "
             + (f"{atk['open_when_measured']} open when the measured phase began" if atk.get("open_when_measured")
                else "the attacker never reported its connections open (its handshakes waited for the server)")
             + (f" ({atk['open_while_measured']['min']}-{atk['open_while_measured']['max']}, mean "
                f"{atk['open_while_measured']['mean']}, during it)" if atk.get("open_while_measured") else "")
             + f", {atk['reopened_while_measured']:,} re-opened by the attacker during it "
             f"(closed by the server's read deadline), {atk['handshakes_failed_while_measured']} handshakes "
             "failed.", "",
             "| phase | calls | answered | timed out (3 s) | failed | p50 ms | p99 ms | max ms |",
             "|---|---|---|---|---|---|---|---|"]
    for name, s in (("unloaded", u), ("under 1,000 slowloris" if r["connections"] == 1000 else "under attack", a),
                    ("after the attack", after)):
        lines.append(f"| {name} | {s['calls']:,} | {s['answered']:,} | {s['timed_out']} | {s['failed']} | "
                     f"{_ms(s['p50_ms'])} | {_ms(s['p99_ms'])} | {_ms(s['max_ms'])} |")
    lines += ["", f"p99 under the attack / unloaded: **x{r['p99_ratio']}**" if r.get("p99_ratio") is not None
              else "p99 under the attack: no review was answered."]
    return "\n".join(lines)


OVERLOAD_RUNS = (("overload_before", "before this issue (commit 2b4717c: plain gthread)"),
                 ("overload_no_shedding", "idle connections deferred, no shedding (`--max-queue-age 0`)"),
                 ("overload_2_5", "shedding at 2.5 s (`--max-queue-age 2.5`)"),
                 ("overload_29nov", "**shedding at 1 s (the default)** (29 Nov)"),
                 ("overload_1dec", "shedding at 1 s, after the connection-count and close fixes (1 Dec)"),
                 ("overload_4dec_reading", "requests read whole in the poller, probes on their own port (4 Dec, 56dd7a5)"),
                 ("overload", "**the default at HEAD** (new connections wait behind queued work; the commit is in its run below)"))


def overload_summary(_: dict[str, Any]) -> str:
    lines = ["| server | capacity req/s | offered req/s | answered in time | shed 503 | refused at connect or "
             "closed before the handshake | timed out (3 s) | judged after waiting > 3 s (server log) | "
             "RSS MiB: before / end of overload / after | back to normal latency after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, label in OVERLOAD_RUNS:
        r = _load(name)
        if r is None:
            continue
        o, mem = r["overload"]["outcomes"], r["memory_mib"]
        stale = (str(r["server_judged_after_waiting_over_timeout"]) if r.get("server_logs_queue_wait")
                 else "not logged")
        lines.append(f"| {label} | {r['capacity_req_s']} | {r['offered_req_s']['overload']} | {o.get('ok', 0):,} | "
                     f"{o.get('shed', 0):,} | {o.get('conn', 0):,} | {o.get('timeout', 0):,} | {stale} | "
                     f"{mem['before']} / {mem['overload_last_10s_max']} / {mem['after']} | {_recovered(r)} |")
    return "\n".join(lines)


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "overload_summary": overload_summary,
    "fuzz": fuzz, "overload": overload, "overload_before": overload_before, "overload_2_5": overload_before,
    "overload_no_shedding": overload_before, "overload_1dec": overload_before, "overload_29nov": overload_before,
    "worker_kill": worker_kill,
    "rotation_load": rotation_load, "slowloris": slowloris, "slowloris_before": slowloris, "config_garbage": config_garbage, "soak": soak, "e2e_restart": e2e_restart,
}


def render(text: str) -> str:
    def block(m: re.Match[str]) -> str:
        name = m.group(1)
        data = {} if name == "overload_summary" else _load(name)
        if data is None or name not in RENDERERS:
            return m.group(0)
        return f"<!-- figures:{name} -->\n{RENDERERS[name](data)}\n<!-- /figures:{name} -->"

    return re.sub(r"<!-- figures:(\w+) -->.*?<!-- /figures:\1 -->", block, text, flags=re.S)


def main() -> None:
    DOC.write_text(render(DOC.read_text()))
    print(f"rendered {DOC}")


if __name__ == "__main__":
    main()
