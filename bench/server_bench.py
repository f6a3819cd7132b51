"""2. Server and 3. memory: the real ``gpu-admission serve`` against the floor app, both under the
same gunicorn/TLS configuration, loaded with ``wrk`` (keep-alive HTTPS, 1 thread: wrk shares the 2
cores with the servers) at 1, 8 and 32 connections, in alternating A/B runs (A B A B ...), medians
across runs, for two kinds of traffic (the ``traffic`` of every run and summary row):

- ``cold``: the review mix (``corpus.items``) with a never-seen container in every request
  (:func:`with_nonce`), on ``/mutate`` and on ``/validate`` separately: the worst case;
- ``realistic``: pods as controllers make them (``corpus.controller_traffic``: a Deployment of 50, an
  Indexed Job of 200, a JobSet of 16, one unique pod in 10), each sent to ``/mutate`` then ``/validate``
  in order (endpoint ``mixed``); every pass through the file gives each pod new uids and suffixes.

Both servers listen on random free loopback ports at the same time (the idle one costs nothing
measurable: its workers sleep in poll). Memory: VmRSS of each worker (the children of the master)
after warm-up and after 100k more requests.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common, corpus

ROOT = common.ROOT
LUA = Path(__file__).with_name("wrk_reviews.lua")
CONNECTIONS = (1, 8, 32)
REALISTIC_CONNECTIONS = (1, 8, 32)
"""Connections of the realistic cells (those of ``connections`` that are in here)."""
ENDPOINTS = ("mutate", "validate")
SERVERS = ("gpu-admission", "floor")
BEFORE = "before"
"""Name of the optional third server: another tree's gpu-admission (``run(before=...)``)."""
TRAFFIC = ("cold", "realistic")
CELLS = {"cold": ENDPOINTS, "realistic": ("mixed",)}
"""The endpoint (request file) of each kind of traffic: ``mixed`` is mutate/validate pairs in order."""


@dataclass
class Running:
    name: str
    proc: subprocess.Popen
    port: int
    stderr: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    def workers(self) -> list[int]:
        return common.children(self.proc.pid)

    def rss_mib(self) -> dict[str, float]:
        out = {}
        for pid in self.workers():
            kib = common.rss_kib(pid)
            if kib is not None:
                out[str(pid)] = kib / 1024
        return out


def _certs(work: Path) -> Path:
    from webhook.cli import certs

    out = work / "certs"
    certs.write(certs.issue(service="gpu-admission", namespace="gpu-admission", ips=["127.0.0.1"]), out)
    return out


def start(name: str, certs_dir: Path, work: Path, *, workers: int = 2, source: Path | None = None) -> Running:
    """``name`` (gpu-admission or the floor app) on a free loopback port with ``workers`` workers,
    once it is ready; ``source``: a directory holding another version's ``webhook`` package to run
    as gpu-admission instead of this tree's (``bench.profile_server --source``)."""
    port = common.free_port()
    cert, key = certs_dir / "tls.crt", certs_dir / "tls.key"
    bind = f"127.0.0.1:{port}"
    if name == "gpu-admission":
        exe = Path(sys.executable).with_name("gpu-admission")
        argv = [str(exe)] if exe.exists() and source is None else [sys.executable, "-m", "webhook"]
        argv += ["serve", "--cert", str(cert), "--key", str(key), "--bind", bind]
        if "--probe-bind" in ((source or ROOT) / "webhook/cli/main.py").read_text():  # older trees have none
            argv += ["--probe-bind", f"127.0.0.1:{common.free_port()}"]
        if workers != 2:
            argv += ["--workers", str(workers)]
    else:
        argv = [sys.executable, "-m", "bench.floor_app", "--cert", str(cert), "--key", str(key), "--bind", bind]
        if workers != 2:
            argv += ["--workers", str(workers)]
    run_dir = work / name
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(TMPDIR=str(run_dir), PYTHONUNBUFFERED="1")
    other_tree = source is not None and name == "gpu-admission"
    if other_tree:
        env["PYTHONPATH"] = str(source)
    stderr = run_dir / "stderr.log"
    proc = subprocess.Popen(argv, cwd=source if other_tree else ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=stderr.open("wb"), start_new_session=True)
    server = Running(name, proc, port, stderr)
    ok = common.wait_until(lambda: proc.poll() is not None or (common.https_ready(port, certs_dir / "ca.crt")
                                                               and len(server.workers()) >= workers), 60, 0.2)
    if not ok or proc.poll() is not None:
        common.stop_process(proc)
        raise RuntimeError(f"{name} did not start:\n{stderr.read_text()[-3000:]}")
    return server


NONCE = "@NONCE@"
"""Replaced by wrk with a counter in every request (``wrk_reviews.lua``): see :func:`with_nonce`."""


def with_nonce(doc: Any) -> Any:
    """The review with an env entry ``BENCH_NONCE=@NONCE@`` in every container of its object.

    wrk sends the mix again and again; gpu-admission remembers the command line of a container it
    has read (``webhook.core.launchers.parse_container``: it answers ``/validate`` after ``/mutate`` and
    the replicas of one template). A counter in every container makes each request's containers new,
    so the server is measured reading them, not remembering them. Both servers get the same bodies.
    ``BENCH_WARM=1`` sends the bodies as they are instead (the memo then answers most reviews, as it
    does for the replicas of a template): an informative run, not the one the targets are judged on.
    Every wrk run starts its counter where no earlier run of this process went (:func:`wrk`), so no
    body is ever sent twice to a server that lives through all the runs."""
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            containers = node.get("containers")
            if isinstance(containers, list):
                for c in containers:
                    if isinstance(c, dict):
                        c["env"] = [*(c.get("env") or []), {"name": "BENCH_NONCE", "value": NONCE}]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    doc = json.loads(json.dumps(doc))
    walk(doc["request"].get("object"))
    return doc


def request_files(work: Path, variants: int, traffic_seed: int = 17) -> dict[str, Path]:
    """The request files: ``mutate``, ``validate`` and ``mixed`` (cold: every container new) and
    ``realistic`` (the controller traffic, its placeholders filled by wrk per pass)."""
    items = corpus.items(variants=variants)
    files: dict[str, Path] = {}
    sets = {"mutate": [i for i in items if i.endpoint == "mutate"],
            "validate": [i for i in items if i.endpoint == "validate"], "mixed": items}
    warm = os.environ.get("BENCH_WARM", "") not in ("", "0")  # repeated bodies: the memo answers
    body = (lambda review: review) if warm else with_nonce
    for name, chosen in sets.items():
        path = work / f"requests-{name}.tsv"
        path.write_text("".join(f"/{i.endpoint}\t{corpus.encode(body(i.review)).decode()}\n" for i in chosen))
        files[name] = path
    path = work / "requests-realistic.tsv"
    traffic = corpus.controller_traffic(seed=traffic_seed)
    path.write_text(realistic_lines(traffic))
    files["realistic"] = path
    sources: dict[str, int] = {}
    for item in traffic:
        sources[item.source] = sources.get(item.source, 0) + 1
    path.with_suffix(".sources.json").write_text(json.dumps(sources))
    return files


def realistic_lines(traffic: list[corpus.TrafficItem]) -> str:
    """The controller traffic as wrk's request file: the bodies as generated (``@NONCE@`` appears in
    none of them: only the unique pods are new, through their ``@PASS@``)."""
    lines = []
    for item in traffic:
        text = item.body.decode()
        assert NONCE not in text and "\t" not in text and "\n" not in text
        lines.append(f"/{item.endpoint}\t{text}\n")
    return "".join(lines)


_WRK_RUNS = itertools.count(1)
NONCES_PER_RUN = 10**9
PASSES_PER_RUN = 10**4


def wrk(server: Running, requests: Path, connections: int, seconds: float, out: Path) -> dict[str, Any]:
    run_no = next(_WRK_RUNS)  # each run its own nonces and passes: nothing is sent twice to a server
    env = dict(os.environ, BENCH_REQUESTS=str(requests), BENCH_OUT=str(out),
               BENCH_NONCE0=str(run_no * NONCES_PER_RUN), BENCH_PASS0=str(run_no * PASSES_PER_RUN))
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, int(seconds))}s", "--timeout", "5s",
            "-s", str(LUA), server.url]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    data = json.loads(out.read_text())
    out.unlink()
    pct = {p: us / 1000 for p, us in data["percentiles_us"]}
    errors = sum(data["errors"].values())
    return {"rps": data["requests"] / (data["duration_us"] / 1e6), "requests": data["requests"],
            "p50_ms": pct["50"], "p90_ms": pct["90"], "p99_ms": pct["99"], "max_ms": data["latency_max_us"] / 1000,
            "errors": errors, "error_detail": data["errors"], "percentiles_ms": pct}


def run(work: Path | None = None, seconds: float | None = None, rounds: int | None = None,
        memory_requests: int | None = None, warmup_requests: int | None = None,
        connections: tuple[int, ...] = CONNECTIONS,
        realistic_connections: tuple[int, ...] = REALISTIC_CONNECTIONS, log=print,
        before: tuple[str, Path] | None = None) -> dict[str, Any]:
    """``before``: (label, directory holding another tree's ``webhook`` package), served as a third
    server ``before`` in the same rounds (A B C A B C ...): a change of the serving layer compared
    with the tree before it in one run, each against the same floor (``bench.run --before-tree``)."""
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (make bench installs it with apt-get)")
    seconds = seconds or common.scaled(10, 2)
    rounds = rounds or int(common.scaled(MIN_PAIRED_ROUNDS if before else 3, 1))
    memory_requests = memory_requests or int(common.scaled(100_000, 5_000))
    warmup_requests = warmup_requests or int(common.scaled(WARMUP_REQUESTS, 1_000))
    own_work = work is None
    work = work or Path(tempfile.mkdtemp(prefix="gpu-admission-bench-"))
    certs_dir = _certs(work)
    files = request_files(work, int(common.scaled(60, 20)))
    servers: dict[str, Running] = {}
    names = SERVERS + ((BEFORE,) if before else ())
    result: dict[str, Any] = {"seconds_per_run": seconds, "rounds": rounds, "wrk_threads": 1,
                              "workers": 2, "threads": 8, "connections": list(connections),
                              "realistic_connections": [c for c in connections if c in realistic_connections],
                              "traffic_mix": traffic_mix(files), "runs": []}
    try:
        for name in SERVERS:
            servers[name] = start(name, certs_dir, work)
        if before:
            servers[BEFORE] = start("gpu-admission", certs_dir, work / BEFORE, source=before[1])
            servers[BEFORE].name = BEFORE
            result["before"] = {"label": before[0]}
        log(f"  servers up: " + ", ".join(f"{s.name} :{s.port} workers {s.workers()}" for s in servers.values()))
        for s in servers.values():  # warm-up: imports, caches, TLS sessions, both workers
            wrk(s, files["mixed"], 8, common.scaled(4, 1), work / "warm.json")
        # then until the bounded memos are full (512 verdicts and 2,048 launcher entries a worker: on
        # this cold mix about 20,000 requests), counted, not timed: growth from there is what a
        # leak would show; before, a 4-second warm-up left more or less of the memos' filling in
        # the measured phase depending on the machine's speed that minute (bench/NOTES.md). A tree
        # before gets the same history (warm-up and memory requests), so the rounds compare two
        # servers in the same state, and its RSS is reported beside this tree's.
        memory: dict[str, Any] = {"floor": {"after_warmup_mib": servers["floor"].rss_mib()}}
        for name in (n for n in names if n != "floor"):
            memory[name] = _history(servers[name], files["mixed"], warmup_requests, memory_requests, work, log)
        result["memory"] = memory
        for conns in connections:
            for traffic in TRAFFIC:
                if traffic == "realistic" and conns not in realistic_connections:
                    continue
                for endpoint in CELLS[traffic]:
                    requests = files["realistic" if traffic == "realistic" else endpoint]
                    for r in range(rounds):
                        for name in rotated(names, r):  # A B, B A, ... (A B C, B C A, C A B ...)
                            m = wrk(servers[name], requests, conns, seconds, work / "run.json")
                            m.update(server=name, traffic=traffic, endpoint=endpoint, connections=conns, round=r)
                            result["runs"].append(m)
                            log(f"  c={conns:<2} {traffic:<9} {endpoint:<8} round {r} {name:<13} {m['rps']:7.0f} "
                                f"req/s p50 {m['p50_ms']:.2f} ms p99 {m['p99_ms']:.2f} ms errors {m['errors']}")
        for name, s in servers.items():
            if s.proc.poll() is not None:
                raise RuntimeError(f"{name} exited during the benchmark: {s.stderr.read_text()[-3000:]}")
    finally:
        for s in servers.values():
            common.stop_process(s.proc)
        tails = {name: s.stderr.read_text(errors="replace")[-2000:] for name, s in servers.items()}
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    result["stderr_tails"] = {k: [line for line in v.splitlines() if '"error"' in line or "Traceback" in line][-5:]
                              for k, v in tails.items()}
    result["summary"] = summarize(result["runs"])
    return result


def rotated(names: tuple[str, ...], r: int) -> tuple[str, ...]:
    """The servers in round ``r``'s order: each starts a round as often as the others, so a drift of
    this VM's speed within a round (the floor's req/s moves by up to 40% between rounds) does not
    always fall on the same server."""
    k = r % len(names)
    return names[k:] + names[:k]


def _history(server: Running, requests: Path, warmup: int, count: int, work: Path, log) -> dict[str, Any]:
    """Serve ``warmup`` requests (until the memos are full), then ``count`` more, counted: the RSS
    after each and the rate of the second part."""
    warm_sent, _warm_errors = _serve(server, requests, warmup, work / "warm.json")
    out: dict[str, Any] = {"after_warmup_mib": server.rss_mib(), "warmup_requests": warm_sent}
    log(f"  {server.name}: RSS after warm-up ({warm_sent} requests): {out['after_warmup_mib']}")
    t0 = time.monotonic()
    sent, errors = _serve(server, requests, count, work / "mem.json")
    elapsed = time.monotonic() - t0
    out.update(after_requests_mib=server.rss_mib(), requests=sent, seconds=round(elapsed, 1),
               rps=sent / elapsed, errors=errors)
    log(f"  {server.name}: RSS after {sent} requests: {out['after_requests_mib']}")
    return out


WARMUP_REQUESTS = 20_000
"""Requests to gpu-admission before its RSS is taken as the base of the growth target."""


def _serve(server: Running, requests: Path, count: int, out: Path) -> tuple[int, int]:
    """Send the requests of ``requests`` at 8 connections until at least ``count`` are served (wrk
    has no request count: chunks of at most 20 s); (served, errors)."""
    sent = errors = 0
    rps = 500.0
    while sent < count:
        chunk = min(20.0, max(1.0, (count - sent) / rps))
        load = wrk(server, requests, 8, chunk, out)
        sent += load["requests"]
        errors += load["errors"]
        rps = max(load["rps"], 1.0)
    return sent, errors


def traffic_mix(files: dict[str, Path]) -> dict[str, Any]:
    """What each kind of traffic sends: requests per pass through its file, by endpoint and source."""
    out: dict[str, Any] = {}
    for traffic, names in (("cold", ENDPOINTS), ("realistic", ("realistic",))):
        for name in names:
            lines = files[name].read_text().splitlines()
            row: dict[str, Any] = {"requests_per_pass": len(lines),
                                   "by_endpoint": {ep: sum(1 for ln in lines if ln.startswith(f"/{ep}\t"))
                                                   for ep in ENDPOINTS}}
            sources = files[name].with_suffix(".sources.json")
            if sources.exists():
                row["by_source"] = json.loads(sources.read_text())
            out[f"{traffic}/{name}" if traffic == "cold" else traffic] = row
    return out


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (traffic, connections, endpoint): medians across rounds of each server, and the
    ratios gpu-admission / floor (and ``before`` / floor when a tree before was served in the same
    run). Runs without ``traffic`` are cold (older results)."""
    rows = []
    order = {ep: n for n, ep in enumerate((*ENDPOINTS, "mixed"))}
    keys = sorted({(r.get("traffic", "cold"), r["connections"], r["endpoint"]) for r in runs},
                  key=lambda k: (k[1], TRAFFIC.index(k[0]) if k[0] in TRAFFIC else len(TRAFFIC), order.get(k[2], 99)))
    for traffic, conns, endpoint in keys:
        row: dict[str, Any] = {"traffic": traffic, "connections": conns, "endpoint": endpoint}
        for name in SERVERS + ((BEFORE,) if any(r["server"] == BEFORE for r in runs) else ()):
            rs = [r for r in runs if r.get("traffic", "cold") == traffic and r["connections"] == conns
                  and r["endpoint"] == endpoint and r["server"] == name]
            pcts = sorted(rs[0]["percentiles_ms"], key=float) if rs else []
            row[name] = {
                "runs": len(rs), "rps": common.median(r["rps"] for r in rs),
                "p50_ms": common.median(r["p50_ms"] for r in rs), "p99_ms": common.median(r["p99_ms"] for r in rs),
                "errors": sum(r["errors"] for r in rs),
                "cdf_ms": [(common.median(r["percentiles_ms"][p] for r in rs), float(p) / 100) for p in pcts],
            }
        a, b = row["gpu-admission"], row["floor"]
        row["p50_ratio"] = a["p50_ms"] / b["p50_ms"] if b["p50_ms"] else None
        row["p99_ratio"] = a["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None
        row["rps_ratio"] = a["rps"] / b["rps"] if b["rps"] else None
        if BEFORE in row:
            c = row[BEFORE]
            row["before_p50_ratio"] = c["p50_ms"] / b["p50_ms"] if b["p50_ms"] else None
            row["before_p99_ratio"] = c["p99_ms"] / b["p99_ms"] if b["p99_ms"] else None
            row["before_rps_ratio"] = c["rps"] / b["rps"] if b["rps"] else None
            row.update(paired_rounds([r for r in runs if r.get("traffic", "cold") == traffic
                                      and r["connections"] == conns and r["endpoint"] == endpoint]))
        rows.append(row)
    return rows


def paired_rounds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """This tree's throughput over the tree before's, round by round, and whether it is worse beyond
    noise.

    The two trees run seconds apart in each round, so a round's ratio cancels most of what this VM's
    speed does from minute to minute (the floor's own req/s moves by up to 40% between rounds of one
    cell, ``floor_round_spread``: its slowest round over its fastest), which a ratio of medians does
    not. "Worse beyond noise" is a one-sided sign test on the round ratios: the rounds with this tree
    slower are at least as many as chance alone gives with probability at most :data:`SIGN_TEST_P`
    (1 in 32): all 5 of 5, 7 of 7, 8 of 9 (with 9 rounds one contrary round is allowed); with fewer
    than :data:`MIN_PAIRED_ROUNDS` rounds it is not decided (None)."""
    by_round: dict[int, dict[str, float]] = {}
    for r in runs:
        by_round.setdefault(r.get("round", 0), {})[r["server"]] = r["rps"]
    ratios = [v["gpu-admission"] / v[BEFORE] for _, v in sorted(by_round.items())
              if v.get(BEFORE) and "gpu-admission" in v]
    floor = [v["floor"] for v in by_round.values() if v.get("floor")]
    worse = sign_test_p(sum(x < 1 for x in ratios), len(ratios)) <= SIGN_TEST_P \
        if len(ratios) >= MIN_PAIRED_ROUNDS else None
    return {"before_round_ratios": ratios, "before_paired_ratio": common.median(ratios) if ratios else None,
            "floor_round_spread": min(floor) / max(floor) if floor else None, "before_beyond_noise": worse}


def sign_test_p(slower: int, rounds: int) -> float:
    """The chance of at least ``slower`` of ``rounds`` fair coin flips coming up "slower"."""
    return sum(math.comb(rounds, k) for k in range(slower, rounds + 1)) / 2 ** rounds


SIGN_TEST_P = 1 / 32
"""The sign test's level: 5 slower rounds of 5, the rule before it allowed more rounds."""

MIN_PAIRED_ROUNDS = 5
"""Rounds a comparison with the tree before needs to be decided (``paired_rounds``); the server phase
runs this many when a tree before is served."""


if __name__ == "__main__":  # pragma: no cover
    res = run()
    for row in res["summary"]:
        print(row["traffic"], row["connections"], row["endpoint"], f"p50x {row['p50_ratio']:.2f} rpsx {row['rps_ratio']:.2f}",
              f"{row['gpu-admission']['rps']:.0f} vs {row['floor']['rps']:.0f} req/s")
    print(json.dumps(res["memory"], indent=1))
