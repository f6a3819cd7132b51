"""Targets (PASS/FAIL with the measured ratio), latency CDF plots and BENCHMARKS.md."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

MIB = 1.0

# ----------------------------------------------------------------------------- targets


def _t(name: str, measured: float | None, limit: float, op: str, unit: str, detail: str = "") -> dict[str, Any]:
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        return {"target": name, "measured": None, "limit": limit, "op": op, "unit": unit, "status": "n/a",
                "detail": detail}
    ok = measured <= limit if op == "<=" else measured >= limit if op == ">=" else measured < limit
    return {"target": name, "measured": measured, "limit": limit, "op": op, "unit": unit,
            "status": "PASS" if ok else "FAIL", "detail": detail}


def _server_targets(server: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 17's server targets, by traffic: realistic (pods as controllers make them, interleaved
    with unique ones) p50 <= 1.2x and throughput >= 0.8x the floor; cold (every container new)
    p50 <= 1.5x and throughput >= 0.65x; at 1 and 8 connections."""
    limits = {"realistic": (1.2, 0.8), "cold": (1.5, 0.65)}
    out = []
    for row in server["summary"]:
        traffic = row.get("traffic", "cold")
        c, ep = row["connections"], row["endpoint"]
        if c not in (1, 8) or traffic not in limits:
            continue
        p50_limit, rps_limit = limits[traffic]
        a, b = row["gpu-admission"], row["floor"]
        where = f"{traffic} /{ep} c={c}"
        out.append(_t(f"server p50 {where} <= {p50_limit:g}x floor", row["p50_ratio"], p50_limit, "<=", "x",
                      f"{a['p50_ms']:.2f} ms vs {b['p50_ms']:.2f} ms"))
        out.append(_t(f"server throughput {where} >= {rps_limit:g}x floor", row["rps_ratio"], rps_limit, ">=", "x",
                      f"{a['rps']:.0f} vs {b['rps']:.0f} req/s"))
    return out


def _e2e_targets(e2e: dict[str, Any]) -> list[dict[str, Any]]:
    seq, con = e2e["summary"].get("sequential", {}), e2e["summary"].get("concurrent", {})
    configs = e2e.get("configs", {})
    rate = {k: (v.get("concurrent") or {}).get("rate_per_s") for k, v in configs.items() if isinstance(v, dict)}
    out = [
        _t("e2e: gpu-admission adds <= 1.0 ms p50 over the floor-app webhooks (sequential)",
           seq.get("webhook_over_floor_p50_ms"), 1.0, "<=", "ms",
           f"floor {_f(seq.get('floor_over_none_p50_ms'))} ms over none, gpu-admission "
           f"{_f(seq.get('webhook_over_none_p50_ms'))} ms"),
        _t("e2e: 8-concurrent creates/s >= 0.8x the floor-app webhooks'", con.get("webhook_rate_over_floor_rate"),
           0.8, ">=", "x", f"{_f(rate.get('webhook'), '.0f')} vs {_f(rate.get('floor'), '.0f')} creates/s"),
    ]
    for mode, label in (("sequential", "sequential"), ("concurrent", "8 concurrent")):
        su = e2e["summary"].get(mode, {})
        out.append(_t(f"e2e: gpu-admission's added p50 over none <= 1/3 of Kyverno's ({label})",
                      su.get("webhook_added_over_kyverno_added"), 1 / 3, "<=", "x",
                      f"{_f(su.get('webhook_over_none_p50_ms'))} ms vs Kyverno {_f(su.get('kyverno_over_none_p50_ms'))} ms"
                      if su.get("kyverno_over_none_p50_ms") is not None
                      else f"Kyverno not measured: {(configs.get('kyverno') or {}).get('error', 'no result')}"[:200]))
    return out


def _check_targets(check: dict[str, Any]) -> list[dict[str, Any]]:
    peers = check.get("peers") or {}
    kyverno, gator = peers.get("kyverno") or {}, peers.get("gator") or {}

    def why(peer: dict[str, Any], name: str) -> str:
        return f"{name} not measured: {peer.get('error')}"[:200] if peer.get("error") else ""

    many = check["many"]
    return [
        _t(f"check {many['objects']:,} objects >= 20x kyverno apply's objects/s",
           check.get("check_over_kyverno_objects_per_s"), 20.0, ">=", "x",
           why(kyverno, "kyverno") or f"{many['objects_per_s']:,.0f} vs "
           f"{_f((kyverno.get('many') or {}).get('objects_per_s'), ',.0f')} obj/s"),
        _t(f"check {many['objects']:,} objects >= 2x gator test's objects/s",
           check.get("check_over_gator_objects_per_s"), 2.0, ">=", "x",
           why(gator, "gator") or f"{many['objects_per_s']:,.0f} vs "
           f"{_f((gator.get('many') or {}).get('objects_per_s'), ',.0f')} obj/s"),
        _t("check one file <= 1.2x gator test's wall time", check.get("check_one_file_over_gator_one_file"), 1.2,
           "<=", "x", why(gator, "gator") or f"{check['one_file']['median_s'] * 1000:.0f} ms vs "
           f"{_f(((gator.get('one_file') or {}).get('median_s') or math.nan) * 1000, '.0f')} ms"),
        _t("check one file, installed (bytecode cached, as pip installs it) <= 1.2x gator test's wall time",
           check.get("check_one_file_bytecode_over_gator_one_file"), 1.2, "<=", "x",
           why(gator, "gator") or f"{_f((check['one_file'].get('bytecode_cached_median_s') or math.nan) * 1000, '.0f')}"
           f" ms vs {_f(((gator.get('one_file') or {}).get('median_s') or math.nan) * 1000, '.0f')} ms"),
        _t("check one file <= 0.6 s wall", check["one_file"]["median_s"], 0.6, "<=", "s",
           f"median of {check['one_file']['runs']} runs"),
        _t(f"check {many['objects']:,} objects >= 2,000 objects/s", many["objects_per_s"], 2000.0, ">=", "obj/s",
           f"{many['median_s']:.2f} s"),
    ]


def legacy_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets issue 17 replaced, computed the old way from this run (for the before/after table:
    the history stays comparable): server p50 <= 1.25x and throughput >= 0.8x the floor on cold
    traffic, and e2e <= 3 ms over the CEL policy."""
    out: list[dict[str, Any]] = []
    server = results.get("server")
    for row in (server or {}).get("summary", []):
        if row.get("traffic", "cold") != "cold":
            continue
        c, ep = row["connections"], row["endpoint"]
        a, b = row["gpu-admission"], row["floor"]
        if c in (1, 8):
            out.append(_t(f"server p50 /{ep} c={c} <= 1.25x floor", row["p50_ratio"], 1.25, "<=", "x",
                          f"{a['p50_ms']:.2f} ms vs {b['p50_ms']:.2f} ms"))
        out.append(_t(f"server throughput /{ep} c={c} >= 0.8x floor", row["rps_ratio"], 0.8, ">=", "x",
                      f"{a['rps']:.0f} vs {b['rps']:.0f} req/s"))
    e2e = results.get("e2e")
    if e2e and e2e.get("summary"):
        added = e2e["summary"].get("sequential", {}).get("webhook_over_cel_p50_ms")
        out.append(_t("e2e: webhook adds <= 3 ms p50 over CEL policy (sequential)", added, 3.0, "<=", "ms"))
    return out


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    server = results.get("server")
    if server:
        out += _server_targets(server)
        mem = server.get("memory", {}).get("gpu-admission", {})
        warm, after = mem.get("after_warmup_mib", {}), mem.get("after_requests_mib", {})
        if after:
            worst = max(after.values())
            out.append(_t("RSS per worker <= 80 MiB", worst, 80.0, "<=", "MiB",
                          "workers: " + ", ".join(f"{v:.1f}" for v in after.values())))
            growth = max((after[p] - warm[p]) / warm[p] * 100 for p in after if p in warm) if warm else None
            out.append(_t("RSS growth over 100k requests < 5%", growth, 5.0, "<", "%",
                          f"{mem.get('requests', 0):,} requests; per worker: " + ", ".join(f"{warm.get(p, math.nan):.1f} -> {after[p]:.1f} MiB"
                                                     for p in after)))
    engine = results.get("engine")
    if engine:
        pods = engine["summary"].get("pods", {})
        out.append(_t("engine median per pod object <= 15x JSON floor (worst pod)", pods.get("engine_ratio_worst"),
                      15.0, "<=", "x", f"median over pods {pods.get('engine_ratio_median', math.nan):.1f}x; "
                      f"{pods.get('engine_median_us', math.nan):.0f} us vs {pods.get('floor_median_us', math.nan):.0f} us"))
    check = results.get("check")
    if check:
        out += _check_targets(check)
    e2e = results.get("e2e")
    if e2e and e2e.get("summary"):
        out += _e2e_targets(e2e)
    return out


def format_target(t: dict[str, Any]) -> str:
    if t["measured"] is None:
        return f"n/a   {t['target']}"
    unit = t["unit"]
    value = f"{t['measured']:.2f}{'' if unit == 'x' else ' '}{unit}" if unit != "obj/s" else f"{t['measured']:,.0f} obj/s"
    return f"{t['status']:<4}  {t['target']}: measured {value}" + (f" ({t['detail']})" if t["detail"] else "")


# ----------------------------------------------------------------------------- plots


def plots(results: dict[str, Any], out_dir: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: dict[str, str] = {}

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=72)
        plt.close(fig)
        made[name] = name

    server = results.get("server")
    if server:
        for c in server["connections"]:
            rows = [r for r in server["summary"] if r["connections"] == c]
            fig, ax = plt.subplots(figsize=(7, 4))
            for row in rows:
                for name, style in (("gpu-admission", "-"), ("floor", "--")):
                    pts = [p for p in row[name]["cdf_ms"] if p[0] > 0]
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                            label=f"{name} {row.get('traffic', 'cold')} /{row['endpoint']} "
                                  f"(p50 {row[name]['p50_ms']:.2f} ms)")
            ax.set_xscale("log")
            ax.set_xlabel("request latency (ms, log)")
            ax.set_ylabel("fraction of requests")
            ax.set_title(f"Server latency CDF, {c} keep-alive connection{'s' if c > 1 else ''} (wrk, TLS)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
            save(fig, f"server-cdf-c{c}.png")
    engine = results.get("engine")
    if engine:
        fig, ax = plt.subplots(figsize=(7, 4))
        rows = engine["rows"]
        for key, label in (("floor_median_us", "json.loads+dumps floor"), ("engine_median_us", "engine.judge"),
                           ("admission_median_us", "parse+admission+dumps")):
            vals = sorted(r[key] for r in rows)
            ax.plot(vals, [(i + 1) / len(vals) for i in range(len(vals))], label=label)
        ax.set_xscale("log")
        ax.set_xlabel("median time per review (us, log)")
        ax.set_ylabel("fraction of reviews")
        ax.set_title(f"Engine: per-object median time over {len(rows)} reviews")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        save(fig, "engine-cdf.png")
    e2e = results.get("e2e")
    if e2e and e2e.get("configs"):
        fig, ax = plt.subplots(figsize=(7, 4))
        for config, data in e2e["configs"].items():
            for mode, style in (("sequential", "-"), ("concurrent", "--")):
                pts = data.get(mode, {}).get("cdf_ms")
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                            label=f"{config} {mode} (p50 {data[mode]['p50_ms']:.1f} ms)")
        ax.set_xscale("log")
        ax.set_xlabel("pod create latency through kube-apiserver (ms, log)")
        ax.set_ylabel("fraction of creates")
        ax.set_title("End to end: pod creation latency")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        save(fig, "e2e-cdf.png")
    return made


# ----------------------------------------------------------------------------- BENCHMARKS.md


def _f(x: Any, fmt: str = ".2f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, fmt)


def markdown(results: dict[str, Any], png_dir: str, baseline: dict[str, Any] | None = None) -> str:
    lines: list[str] = []
    add = lines.append
    meta = results["meta"]
    add("# gpu-admission benchmarks")
    add("")
    add("Generated by `make bench` (`bench/run.py`); do not edit by hand. Raw numbers: "
        f"`bench/results/{meta['stamp']}/results.json` (a copy in `bench/results/latest/`).")
    add("These machines are shared and noisy (other jobs run beside the benchmark), so every result is set "
        "against a floor measured in the same run, interleaved or alternated with it, and the targets are "
        "ratios; absolute times drift between runs.")
    merged = meta.get("merged")
    if merged and merged.get("phases"):
        add(f"Phases {', '.join(merged['phases'])} are from run {merged['from']} (`bench.run --with`), the others "
            "from this one; each phase measures its floors and peers side by side within itself.")
    if meta.get("quick"):
        add("")
        add("**BENCH_QUICK=1 smoke run: counts and durations scaled down, numbers not comparable.**")
    add("")
    add("## Targets")
    add("")
    add("| status | target | measured | detail |")
    add("|---|---|---|---|")
    for t in results["targets"]:
        unit = t["unit"]
        m = "n/a" if t["measured"] is None else (f"{t['measured']:,.0f} {unit}" if unit == "obj/s"
                                                 else f"{t['measured']:.2f}{'x' if unit == 'x' else ' ' + unit}")
        add(f"| **{t['status']}** | {t['target']} | {m} | {t['detail']} |")
    add("")
    if baseline:
        add("## Before and after the performance fixes")
        add("")
        add(f"Before: run {baseline['meta']['stamp']} (`--baseline`). After: this run. Targets that issue 17 "
            "replaced are marked *(replaced)*, their *after* measured the old way in this run. What changed is in "
            "*Profiling findings and fixes* below.")
        add("")
        add("| target | before | after |")
        add("|---|---|---|")
        # the baseline's own targets, and this run's rules applied to the baseline where it has the data
        before = {**{t["target"]: t for t in targets(baseline)}, **{t["target"]: t for t in baseline.get("targets", [])}}
        for t in results["targets"]:
            b = before.get(t["target"])
            add(f"| {t['target']} | {_fmt_t(b)} | {_fmt_t(t)} |")
        current = {t["target"] for t in results["targets"]}
        legacy = {t["target"]: t for t in legacy_targets(results)}
        for name, b in before.items():  # targets since replaced: measured the old way in this run
            if name not in current:
                after = legacy.get(name)
                add(f"| {name} (replaced) | {_fmt_t(b)} | {_fmt_t(after)} |")
        add("")
    add("## Machine")
    add("")
    add("| fact | value |")
    add("|---|---|")
    for k, v in meta["machine"].items():
        add(f"| {k} | {v} |")
    add(f"| started | {meta['started']} |")
    add(f"| duration | {meta.get('duration_s', 0):.0f} s |")
    add("")
    engine = results.get("engine")
    if engine:
        add("## 1. Engine: per-object time against the JSON floor")
        add("")
        add(f"{engine['objects']} AdmissionReviews (the `examples/` manifests, the pods their controllers create, "
            f"and generated variants; pods carry the fields kube-apiserver defaults before webhooks run), "
            f"{engine['iterations']} timed iterations each, GC off, floor/engine/admission interleaved. "
            "Floor: `json.dumps(json.loads(review))`. Engine: `engine.judge(object)` (workloads -> inference -> "
            "policy -> patches). Admission: `review.parse` + `admission.mutate/validate` + `json.dumps` of the "
            "response (the whole server-side work but HTTP, TLS, logging and metrics). Times are medians over "
            "objects of each object's median (p99: median over objects of each object's p99).")
        add("")
        add("| group | objects | median bytes | floor median | floor p99 | engine median | engine p99 | "
            "engine / floor (median, worst) | admission median | admission / floor (median, worst) |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for name, s in engine["summary"].items():
            add(f"| {name} | {s['objects']} | {s['median_bytes']:.0f} | {s['floor_median_us']:.0f} us | "
                f"{s['floor_p99_us']:.0f} us | {s['engine_median_us']:.0f} us | {s['engine_p99_us']:.0f} us | "
                f"{s['engine_ratio_median']:.1f}x, {s['engine_ratio_worst']:.1f}x | {s['admission_median_us']:.0f} us | "
                f"{s['admission_ratio_median']:.1f}x, {s['admission_ratio_worst']:.1f}x |")
        rl = engine.get("realistic")
        if rl:
            add("")
            add(f"Realistic sequence (the server benchmark's controller traffic, {rl['reviews']} reviews in "
                f"{rl['passes']} passes, memos kept as a server keeps them): admission median "
                f"{rl['admission_median_us']:.0f} us against a JSON floor of {rl['floor_median_us']:.0f} us "
                f"({rl['admission_ratio_median']:.2f}x; mean {rl['admission_ratio_mean']:.2f}x); verdict memo "
                f"{rl['verdict_hits']} hits, {rl['verdict_misses']} misses. By source: " + ", ".join(
                    f"{k} {v.get('admission_ratio_median', math.nan):.2f}x" for k, v in (rl.get("by_source") or {}).items()
                    if isinstance(v, dict)) + ".")
        churn = engine.get("node_churn")
        if churn:
            add("")
            add(f"Node updates (`bench/node_churn.py`: the same traffic through a real NodeWatch of "
                f"{churn[0]['nodes']:,} GPU nodes fed one event before every review): verdict memo hit rate " + "; ".join(
                    f"{r['churn']} {r['hit_rate']} ({r['inventories_built']:,} inventories for {r['events']:,} events)"
                    for r in churn) + ". A status update that changes no GPU fact builds no inventory, so the "
                "memo keyed by it keeps answering; one that changes a GPU fact must be a new inventory.")
        add("")
        add(f"![engine CDF]({png_dir}/engine-cdf.png)")
        add("")
    server = results.get("server")
    if server:
        add("## 2. Server: `gpu-admission serve` against the floor app")
        add("")
        add(f"Both under the same gunicorn configuration (`webhook.server.gunicorn.application.AdmissionServer`: gthread, "
            f"{server['workers']} workers x {server['threads']} threads, TLS, keep-alive 75 s); the floor app "
            "(`bench/floor_app.py`) only parses the review and answers allowed. Load: `wrk` with one thread, "
            "keep-alive HTTPS, POSTing the review mix in turn (`bench/wrk_reviews.lua`); "
            f"{server['rounds']} alternating A/B runs of {server['seconds_per_run']:.0f} s per cell, medians across runs.")
        add("")
        mix = (server.get("traffic_mix") or {}).get("realistic") or {}
        if mix:
            sources = ", ".join(f"{k} {v}" for k, v in (mix.get("by_source") or {}).items())
            add("Two kinds of traffic. *cold*: every container is new to the server (a fresh nonce in every "
                "request: the worst case, what the old targets were judged on). *realistic*: pods as "
                "controllers make them (`bench.corpus.controller_traffic`: a Deployment of 50 through one "
                "ReplicaSet, an Indexed Job of 200, a JobSet of 4 x 4, one unique pod in 10), each sent to "
                "/mutate then /validate with the patch applied, names, uids, token volumes and timestamps "
                f"differing per pod and per pass (reviews per pass: {sources}).")
            add("")
        add("| traffic | connections | endpoint | gpu-admission req/s | floor req/s | throughput ratio | gpu-admission p50 | "
            "floor p50 | p50 ratio | gpu-admission p99 | floor p99 | p99 ratio | errors |")
        add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for row in server["summary"]:
            a, b = row["gpu-admission"], row["floor"]
            add(f"| {row.get('traffic', 'cold')} | {row['connections']} | /{row['endpoint']} | {a['rps']:.0f} | {b['rps']:.0f} | {_f(row['rps_ratio'])} | "
                f"{a['p50_ms']:.2f} ms | {b['p50_ms']:.2f} ms | {_f(row['p50_ratio'])} | {a['p99_ms']:.2f} ms | "
                f"{b['p99_ms']:.2f} ms | {_f(row['p99_ratio'])} | {a['errors']} / {b['errors']} |")
        add("")
        if server.get("before"):
            add(f"The tree before, `{server['before']['label']}`, served in the same rounds (A B C: this tree, "
                "the floor, the tree before), each against the same floor:")
            add("")
            add("| traffic | connections | endpoint | throughput ratio now / before | p50 ratio now / before | "
                "p99 ratio now / before | req/s now / before | now / before, round by round | floor's spread | "
                "worse beyond noise | errors before |")
            add("|---|---|---|---|---|---|---|---|---|---|---|")
            for row in server["summary"]:
                if "before" not in row:
                    continue
                a, c = row["gpu-admission"], row["before"]
                rounds = ", ".join(f"{x:.2f}" for x in row.get("before_round_ratios", []))
                worse = {True: "**yes**", False: "no"}.get(row.get("before_beyond_noise"), "too few rounds")
                add(f"| {row.get('traffic', 'cold')} | {row['connections']} | /{row['endpoint']} | "
                    f"{_f(row['rps_ratio'])} / {_f(row['before_rps_ratio'])} | {_f(row['p50_ratio'])} / "
                    f"{_f(row['before_p50_ratio'])} | {_f(row['p99_ratio'])} / {_f(row['before_p99_ratio'])} | "
                    f"{a['rps']:.0f} / {c['rps']:.0f} | {rounds} (median {_f(row.get('before_paired_ratio'))}) | "
                    f"{_f(row.get('floor_round_spread'))} | {worse} | {c['errors']} |")
            add("")
            add("*Round by round*: this tree's req/s over the tree before's in each round (the two ran seconds "
                "apart). *Floor's spread*: the floor's slowest round over its fastest in the same cell, the "
                "noise a ratio of medians carries on this VM. *Worse beyond noise*: a sign test on the round "
                "ratios, every one of at least 5 rounds has this tree slower (1 in 32 by chance).")
            add("")
        for c in server["connections"]:
            add(f"![server CDF, {c} connections]({png_dir}/server-cdf-c{c}.png)")
        add("")
        mem = server.get("memory", {})
        add("## 3. Memory: RSS per worker")
        add("")
        add("| server | after warm-up (MiB per worker) | after more requests (MiB per worker) | requests | growth |")
        add("|---|---|---|---|---|")
        for name, m in mem.items():
            warm, after = m.get("after_warmup_mib", {}), m.get("after_requests_mib", {})
            growth = ", ".join(f"{(after[p] - warm[p]) / warm[p] * 100:+.1f}%" for p in after if p in warm) or "-"
            add(f"| {name} | {', '.join(f'{v:.1f}' for v in warm.values())} | "
                f"{', '.join(f'{v:.1f}' for v in after.values()) or '-'} | {m.get('requests', '-')} | {growth} |")
        add("")
        warmed = mem.get("gpu-admission", {}).get("warmup_requests")
        if warmed:
            add(f"Warm-up: 4 s of the cold mix at 8 connections to every server, then {warmed:,} more requests to "
                "gpu-admission (and to the tree before, when one is served: both trees go into the rounds with the "
                "same history), counted (its bounded memos, 512 verdicts and 2,048 launcher entries a worker, "
                "are full by then); the growth is measured from there, where a leak would show. Runs before 3 Dec "
                "used the 4-second warm-up alone, which left part of the memos' filling in the measured phase.")
            add("")
    check = results.get("check")
    if check:
        o, m = check["one_file"], check["many"]
        add("## 4. CI use: `gpu-admission check`")
        add("")
        add(f"Process start to exit, timed with {check['tool']}.")
        add("")
        add("| run | median wall | objects/s | floors for context |")
        add("|---|---|---|---|")
        add(f"| `check {o['file']}` ({o['runs']} runs) | {o['median_s']:.3f} s | - | python startup "
            f"{o['python_startup_median_s']:.3f} s; python + PyYAML C loader of the file {o['yaml_read_median_s']:.3f} s |")
        add(f"| `check` on {m['objects']:,} generated objects ({m['runs']} runs) | {m['median_s']:.2f} s | "
            f"{m['objects_per_s']:,.0f} | reading the same YAML with PyYAML's C loader {m['yaml_read_median_s']:.2f} s |")
        add("")
        peers = check.get("peers") or {}
        if peers:
            add("The offline peers, same run, same inputs (each checked to have judged every object as "
                "expected; peak RSS from `/usr/bin/time`):")
            add("")
            add("| tool | mode | one file (median) | 10,000 objects (median) | objects/s | peak RSS (10,000) | runs |")
            add("|---|---|---|---|---|---|---|")
            add(f"| gpu-admission check | mutate+validate | {o['median_s'] * 1000:.0f} ms "
                f"({_f((o.get('bytecode_cached_median_s') or math.nan) * 1000, '.0f')} ms with bytecode cached) | "
                f"{m['median_s']:.2f} s | {m['objects_per_s']:,.0f} | {_f(m.get('peak_rss_mib'), '.0f')} MiB | {m['runs']} |")
            for name in ("kyverno", "gator"):
                p = peers.get(name) or {}
                if p.get("error"):
                    add(f"| {name} {p.get('version', '')} | {p.get('mode', '')} | not measured: {p['error'][:120]} | | | | |")
                    continue
                po, pm = p.get("one_file") or {}, p.get("many") or {}
                add(f"| {name} {p.get('version', '')} | {p.get('mode', '')} | {_f((po.get('median_s') or math.nan) * 1000, '.0f')} ms | "
                    f"{_f(pm.get('median_s'))} s | {_f(pm.get('objects_per_s'), ',.0f')} | {_f(pm.get('peak_rss_mib'), '.0f')} MiB | "
                    f"{pm.get('runs', '-')} |")
            add("")
    e2e = results.get("e2e")
    if e2e:
        add("## 5. End to end: pod creation through kube-apiserver")
        add("")
        if e2e.get("error"):
            add(f"Not run: {e2e['error']}")
        else:
            add(" ".join(e2e.get("description", "").split()))
            add("")
            add("| configuration | sequential p50 | sequential p99 | 8 concurrent p50 | 8 concurrent p99 | "
                "8 concurrent creates/s |")
            add("|---|---|---|---|---|---|")
            for config, d in e2e["configs"].items():
                s, c = d.get("sequential", {}), d.get("concurrent", {})
                add(f"| {config} | {_f(s.get('p50_ms'))} ms | {_f(s.get('p99_ms'))} ms | {_f(c.get('p50_ms'))} ms | "
                    f"{_f(c.get('p99_ms'))} ms | {_f(c.get('rate_per_s'), '.0f')} |")
            add("")
            add("| added latency (p50) | sequential | 8 concurrent |")
            add("|---|---|---|")
            su = e2e["summary"]
            for key, label in (("cel_over_none_p50_ms", "(b) CEL policy over (a) none"),
                               ("webhook_over_none_p50_ms", "(c) gpu-admission over (a) none"),
                               ("webhook_over_cel_p50_ms", "(c) gpu-admission over (b) CEL"),
                               ("floor_over_none_p50_ms", "(d) floor-app webhooks over (a) none"),
                               ("webhook_over_floor_p50_ms", "(c) gpu-admission over (d) floor-app webhooks"),
                               ("kyverno_over_none_p50_ms", "(e) Kyverno over (a) none")):
                add(f"| {label} | {_f(su['sequential'].get(key))} ms | {_f(su['concurrent'].get(key))} ms |")
            for key, label in (("webhook_added_over_kyverno_added", "gpu-admission's added p50 / Kyverno's"),
                               ("webhook_rate_over_floor_rate", "gpu-admission creates/s / floor-app webhooks'"),
                               ("webhook_rate_over_kyverno_rate", "gpu-admission creates/s / Kyverno's")):
                add(f"| {label} | {_f(su['sequential'].get(key))}x | {_f(su['concurrent'].get(key))}x |")
            if e2e.get("before"):
                add("")
                add(f"The tree before, `{e2e['before']['label']}`, against this tree, both behind the floor app's "
                    "registration (configurations `before` and `copies`: the same two webhooks), in the same rounds:")
                add("")
                add("| this tree / the tree before | sequential | 8 concurrent |")
                add("|---|---|---|")
                for key, label, unit in (
                        ("copies_over_floor_p50_ms", "this tree over the floor (p50)", " ms"),
                        ("before_over_floor_p50_ms", "the tree before over the floor (p50)", " ms"),
                        ("copies_over_before_p50_ms", "this tree over the tree before (p50)", " ms"),
                        ("copies_rate_over_floor_rate", "this tree's creates/s / the floor's", "x"),
                        ("before_rate_over_floor_rate", "the tree before's creates/s / the floor's", "x"),
                        ("copies_rate_over_before_rate", "this tree's creates/s / the tree before's", "x")):
                    add(f"| {label} | {_f(su['sequential'].get(key))}{unit} | {_f(su['concurrent'].get(key))}{unit} |")
            ky = e2e.get("kyverno") or {}
            if ky:
                add("")
                add(f"Kyverno {ky.get('version', '?')}: " + (f"not measured: {ky['error']}" if ky.get("error") else
                    f"binary {_f(ky.get('binary_mib'), '.0f')} MiB, built in {ky.get('build_seconds', '?')} s "
                    f"(cached after), ready {_f(ky.get('ready_in_s'), '.1f')} s after start, "
                    f"RSS {_f(ky.get('rss_mib_at_end'), '.0f')} MiB at the end of the run."))
            add("")
            add(f"![e2e CDF]({png_dir}/e2e-cdf.png)")
        add("")
    notes = results.get("notes")
    if notes:
        add(notes.rstrip())
        add("")
    return "\n".join(lines) + "\n"


def _fmt_t(t: dict[str, Any] | None) -> str:
    if not t or t["measured"] is None:
        return "n/a"
    unit = t["unit"]
    m = f"{t['measured']:,.0f} {unit}" if unit == "obj/s" else f"{t['measured']:.2f}{'x' if unit == 'x' else ' ' + unit}"
    return f"{m} {t['status']}"
