"""The benchmark suite (bench/, `make bench`) is not part of the test run, but its engine benchmark
must keep working against the engine's interface: run it once with tiny counts (no timing asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import corpus, engine_bench, report  # noqa: E402


def test_engine_bench_runs_on_the_review_mix() -> None:
    result = engine_bench.run(iterations=2, warmup=1, variants=3)
    assert result["objects"] == len(result["rows"]) > 0
    kinds = {r["kind"] for r in result["rows"]}
    assert "Pod" in kinds and "Deployment" in kinds
    pods = result["summary"]["pods"]
    assert pods["objects"] > 0 and pods["engine_median_us"] > 0 and pods["floor_median_us"] > 0
    targets = report.targets({"engine": result})
    assert [t["status"] for t in targets] in (["PASS"], ["FAIL"])


def test_corpus_reviews_are_admission_reviews() -> None:
    items = corpus.items(variants=2)
    assert {i.endpoint for i in items} == {"mutate", "validate"}
    for item in items:
        assert item.review["apiVersion"] == "admission.k8s.io/v1" and item.review["request"]["uid"]
    assert corpus.manifest_stream(3).count("\n---\n") == 2


def test_server_bench_bodies_make_every_container_new() -> None:
    """Each request of the server benchmark carries a counter in every container (filled in by wrk), so
    gpu-admission's memo of command lines cannot answer for it: the benchmark measures reading them."""
    from bench import server_bench
    from webhook.core.launchers import container as memo

    item = next(i for i in corpus.items(variants=2) if i.kind == "Deployment")
    doc = server_bench.with_nonce(item.review)
    containers = doc["request"]["object"]["spec"]["template"]["spec"]["containers"]
    assert all({"name": "BENCH_NONCE", "value": server_bench.NONCE} in c["env"] for c in containers)
    assert item.review != doc  # the corpus itself is untouched
    first = dict(containers[0], env=[{**e, "value": "1"} if e["name"] == "BENCH_NONCE" else e for e in containers[0]["env"]])
    second = dict(containers[0], env=[{**e, "value": "2"} if e["name"] == "BENCH_NONCE" else e for e in containers[0]["env"]])
    assert memo._memo_key(first) != memo._memo_key(second)


def _small_traffic(seed: int = 3) -> list:
    return corpus.controller_traffic(seed=seed, deployment_replicas=5, job_completions=7, jobset_jobs=2,
                                     jobset_pods_per_job=2, unique_every=4, variants=2)


def test_controller_traffic_is_deterministic_and_counted_per_controller() -> None:
    from bench import server_bench

    traffic = _small_traffic()
    again = _small_traffic()
    assert [i.body for i in traffic] == [i.body for i in again]
    assert [i.body for i in _small_traffic(seed=4)] != [i.body for i in traffic]
    pods = [(i.source, i.pod) for i in traffic if i.endpoint == "mutate"]
    counts: dict[str, int] = {}
    for source, _ in pods:
        counts[source] = counts.get(source, 0) + 1
    controllers = 5 + 7 + 2 * 2
    assert counts == {"Deployment": 5, "Job": 7, "JobSet": 4, "unique": controllers // 3}
    # each pod to /mutate then /validate, in that order
    assert [i.endpoint for i in traffic] == ["mutate", "validate"] * len(pods)
    assert all(a.pod == b.pod for a, b in zip(traffic[::2], traffic[1::2]))
    # the full-size mix of the server benchmark: 50 + 200 + 16 controller pods, one unique in 10
    full = corpus.controller_traffic()
    sources = [i.source for i in full if i.endpoint == "mutate"]
    assert (sources.count("Deployment"), sources.count("Job"), sources.count("JobSet")) == (50, 200, 16)
    assert sources.count("unique") == 266 // 9
    # wrk's file: valid JSON on every line once filled, the nonce placeholder in none
    for n, line in enumerate(server_bench.realistic_lines(traffic).splitlines()):
        path, body = line.split("\t", 1)
        assert path == "/" + traffic[n].endpoint and server_bench.NONCE not in body
        doc = json.loads(corpus.fill(body, 12345))
        assert doc["request"]["operation"] == "CREATE" and doc["request"]["object"]["kind"] == "Pod"


def test_controller_pods_differ_where_real_ones_do() -> None:
    """Per-copy fields differ per pod and per pass; what a controller shares (its template, the
    ReplicaSet hash and uid, a Job's uid) is shared; an Indexed Job's pods carry their index."""
    traffic = _small_traffic()
    stored = [json.loads(corpus.fill(i.body.decode(), 0))["request"]["object"] for i in traffic if i.endpoint == "validate"]
    again = [json.loads(corpus.fill(i.body.decode(), 1))["request"]["object"] for i in traffic if i.endpoint == "validate"]
    names = [p["metadata"]["name"] for p in stored]
    uids = [p["metadata"]["uid"] for p in stored]
    assert len(set(names)) == len(names) and len(set(uids)) == len(uids)
    assert not set(uids) & {p["metadata"]["uid"] for p in again}
    assert not set(names) & {p["metadata"]["name"] for p in again}
    tokens = [v["name"] for p in stored for v in p["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    assert len(tokens) == len(stored) == len(set(tokens)) and all(len(t) == len("kube-api-access-") + 5 for t in tokens)
    deploy = [p for i, p in zip(traffic[1::2], stored) if i.source == "Deployment"]
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in deploy}
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in deploy}
    assert len(hashes) == len(owners) == 1  # one ReplicaSet
    rs = deploy[0]["metadata"]["ownerReferences"][0]["name"]
    assert all(p["metadata"]["name"].startswith(rs + "-") and len(p["metadata"]["name"]) == len(rs) + 6 for p in deploy)
    same = [{k: v for k, v in c.items() if k != "volumeMounts"} for p in deploy for c in p["spec"]["containers"]]
    assert all(c == same[0] for c in same)  # one template (the token volume mount aside)
    jobs = [p for i, p in zip(traffic[1::2], stored) if i.source == "Job"]
    index = "batch.kubernetes.io/job-completion-index"
    assert [p["metadata"]["annotations"][index] for p in jobs] == [str(n) for n in range(7)]
    assert [p["spec"]["hostname"] for p in jobs] == [f"llama-8b-finetune-{n}" for n in range(7)]
    assert len({p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] for p in jobs}) == 1
    jobset = [p for i, p in zip(traffic[1::2], stored) if i.source == "JobSet"]
    assert all(p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "llama-8b-pretrain" for p in jobset)
    assert [p["metadata"]["annotations"]["jobset.sigs.k8s.io/job-index"] for p in jobset] == ["0", "0", "1", "1"]
    assert all(p["spec"]["subdomain"] == "llama-8b-pretrain" and index in p["metadata"]["labels"] for p in jobset)
    # the unique pods: new containers on every pass, the same in the /mutate and /validate of one pod
    unique = [i for i in traffic if i.source == "unique"]
    nonces = [[e["value"] for c in json.loads(corpus.fill(i.body.decode(), 5))["request"]["object"]["spec"]["containers"]
               for e in c["env"] if e["name"] == "BENCH_NONCE"] for i in unique]
    assert all(n for n in nonces) and nonces[0::2] == nonces[1::2]
    assert len({tuple(n) for n in nonces[0::2]}) == len(nonces[0::2])


def test_controller_traffic_validate_bodies_are_mutate_bodies_patched() -> None:
    """The /validate object is the /mutate object with gpu-admission's own patch applied (asked afresh
    here, memos emptied), plus what kube-apiserver sets between the two webhooks."""
    import base64

    import jsonpatch

    from webhook.core.launchers import container as memo
    from webhook.core.settings import default
    from webhook.server import admission, review

    settings = default()
    traffic = _small_traffic()
    patched_any = False
    for m, v in zip(traffic[0::2], traffic[1::2]):
        memo.LAUNCHES.clear()
        body = corpus.fill(m.body.decode(), 7).encode()
        reply = admission.mutate(review.parse(body, "application/json"), settings).review["response"]  # no verdict memo
        patch = json.loads(base64.b64decode(reply["patch"])) if reply.get("patch") else []
        patched_any = patched_any or bool(patch)
        created = json.loads(body)["request"]["object"]
        stored = json.loads(corpus.fill(v.body.decode(), 7))["request"]["object"]
        assert "name" not in created["metadata"] and "uid" not in created["metadata"] and created["status"] == {}
        assert stored["metadata"]["name"].startswith(created["metadata"]["generateName"])
        assert stored["status"]["phase"] == "Pending"
        expected = jsonpatch.apply_patch(created, patch)
        for field in ("name", "uid", "creationTimestamp"):
            expected["metadata"][field] = stored["metadata"][field]
        expected["status"] = stored["status"]
        assert stored == expected
    assert patched_any


def test_engine_bench_realistic_keeps_memos() -> None:
    result = engine_bench.run_realistic(passes=2, traffic=_small_traffic())
    assert result["reviews"] == 2 * len(_small_traffic()) and result["admission_median_us"] > 0
    assert result["verdict_hits"] > 0 and result["verdict_misses"] > 0
    assert set(result["by_source"]) == {"Deployment", "Job", "JobSet", "unique"}


def test_server_bench_summary_rows_are_keyed_by_traffic() -> None:
    from bench import server_bench

    def run(server: str, traffic: str | None, endpoint: str, rps: float) -> dict:
        r = {"server": server, "endpoint": endpoint, "connections": 1, "rps": rps, "p50_ms": 1000 / rps,
             "p99_ms": 3000 / rps, "errors": 0, "percentiles_ms": {"50": 1000 / rps}}
        if traffic:
            r["traffic"] = traffic
        return r

    rows = server_bench.summarize([run("gpu-admission", None, "mutate", 500), run("floor", None, "mutate", 1000),
                                   run("gpu-admission", "realistic", "mixed", 800),
                                   run("floor", "realistic", "mixed", 1000)])
    assert [(r["traffic"], r["endpoint"]) for r in rows] == [("cold", "mutate"), ("realistic", "mixed")]
    assert rows[0]["rps_ratio"] == 0.5 and rows[1]["rps_ratio"] == 0.8 and rows[1]["p50_ratio"] == 1.25


def test_wrk_sends_the_lines_in_order_filled_per_pass(tmp_path: Path) -> None:
    """What wrk sends is ``corpus.fill`` of each line for its pass, in file order. ``make test``
    installs wrk (Debian's package) when it is missing, so a machine without it fails here: a skip
    would read as a pass."""
    import http.server
    import os
    import shutil
    import subprocess
    import threading

    import pytest

    from bench import server_bench

    if shutil.which("wrk") is None:
        pytest.fail("wrk is not installed: `make test` installs it (apt-get install wrk)")
    traffic = _small_traffic()[:6]
    requests = tmp_path / "requests.tsv"
    requests.write_text(server_bench.realistic_lines(traffic) + "/mutate\t{\"n\":@NONCE@}\n")
    got: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            got.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = dict(os.environ, BENCH_REQUESTS=str(requests), BENCH_OUT=str(tmp_path / "out.json"),
                   BENCH_PASS0="4242", BENCH_NONCE0="7000000000")
        subprocess.run(["wrk", "-t1", "-c1", "-d1s", "-s", str(server_bench.LUA), f"http://127.0.0.1:{server.server_port}/"],
                       env=env, capture_output=True, timeout=30, check=True)
    finally:
        server.shutdown()
    lines = requests.read_text().splitlines()
    assert len(got) > len(lines)
    nonces = []
    for k, (path, body) in enumerate(got):
        j = k + 1  # wrk calls request() once to check the script: the first line of pass 0 is not sent
        want_path, text = lines[j % len(lines)].split("\t", 1)
        assert path == want_path
        if "@NONCE@" in text:
            nonces.append(json.loads(body)["n"])
        else:
            assert body.decode() == corpus.fill(text, 4242 + j // len(lines))
    assert nonces and all(n > 7_000_000_000 for n in nonces) and nonces == sorted(set(nonces))


def test_server_bench_summary_compares_a_tree_before_against_the_same_floor() -> None:
    """`bench.run --before-tree REV` serves REV's package as a third server in the same rounds; each
    row then carries its ratios to the floor next to this tree's (absent without it)."""
    from bench import report, server_bench

    def run(server: str, rps: float) -> dict:
        return {"server": server, "endpoint": "validate", "connections": 8, "traffic": "cold", "rps": rps,
                "p50_ms": 1000 / rps, "p99_ms": 4000 / rps, "errors": 0, "percentiles_ms": {"50": 1000 / rps}}

    (row,) = server_bench.summarize([run("gpu-admission", 600), run("floor", 1000), run("before", 500)])
    assert row["rps_ratio"] == 0.6 and row["before_rps_ratio"] == 0.5
    assert row["before_p50_ratio"] == 2.0 and row["p50_ratio"] == 1000 / 600 / 1.0
    (plain,) = server_bench.summarize([run("gpu-admission", 600), run("floor", 1000)])
    assert "before" not in plain and "before_rps_ratio" not in plain
    server = {"summary": [row], "before": {"label": "003b03b"}, "connections": [8], "rounds": 1, "workers": 2,
              "threads": 8, "wrk_threads": 1,
              "seconds_per_run": 1, "memory": {}}
    md = report.markdown({"meta": {"stamp": "s", "started": "x", "phases": ["server"], "machine": {}}, "server": server,
                          "targets": []},
                         "bench/results/x", None)
    assert "`003b03b`" in md and "| cold | 8 | /validate | 0.60 / 0.50 |" in md


def test_e2e_summary_compares_a_tree_before_against_the_same_floor() -> None:
    """With `--before-tree REV` the e2e phase measures REV's server as configuration `before`, registered
    as the floor app's webhooks are; the summary and the report carry it beside this tree (absent
    without it)."""
    from bench import e2e_latency, report

    def config(p50: float, rate: float) -> dict:
        return {mode: {"creates": 10, "p50_ms": p50, "p99_ms": p50 * 2, "rate_per_s": rate, "cdf_ms": []}
                for mode in ("sequential", "concurrent")}

    configs = {"none": config(4.0, 200), "cel": config(4.5, 190), "webhook": config(9.0, 100),
               "webhook-pins": config(9.5, 95), "floor": config(7.0, 125), "kyverno": {"error": "not built"},
               "copies": config(8.5, 100), "before": config(10.0, 80)}
    su = e2e_latency.summarize(configs)["concurrent"]
    assert su["before_over_floor_p50_ms"] == 3.0 and su["copies_over_before_p50_ms"] == -1.5
    assert su["before_rate_over_floor_rate"] == 80 / 125 and su["copies_rate_over_before_rate"] == 100 / 80
    plain = {k: v for k, v in configs.items() if k not in ("copies", "before")}
    assert "copies_rate_over_before_rate" not in e2e_latency.summarize(plain)["concurrent"]
    e2e = {"configs": configs, "summary": e2e_latency.summarize(configs), "before": {"label": "003b03b"},
           "description": "d", "kyverno": {}}
    md = report.markdown({"meta": {"stamp": "s", "started": "x", "phases": ["e2e"], "machine": {}}, "e2e": e2e,
                          "targets": []}, "bench/results/x", None)
    assert "`003b03b`" in md and "| this tree's creates/s / the tree before's | 1.25x | 1.25x |" in md


def test_each_server_starts_a_round_as_often_as_the_others() -> None:
    """A drift of the VM's speed within a round must not always fall on the same server."""
    from bench import server_bench

    names = ("gpu-admission", "floor", "before")
    orders = [server_bench.rotated(names, r) for r in range(6)]
    assert all(sorted(o) == sorted(names) for o in orders)
    assert sorted(o[0] for o in orders) == sorted(names * 2)


@pytest.mark.parametrize(("now", "before", "worse"), [
    pytest.param([90, 95, 80, 99, 70], [100] * 5, True, id="slower-in-every-round"),
    pytest.param([90, 95, 80, 101, 70], [100] * 5, False, id="one-round-faster"),
    pytest.param([50, 50, 50, 50], [100] * 4, None, id="too-few-rounds-to-tell"),
    pytest.param([90, 95, 80, 101, 70, 90, 95, 80, 99], [100] * 9, True, id="eight-of-nine-slower"),
    pytest.param([90, 95, 80, 101, 70, 90, 95, 101, 99], [100] * 9, False, id="seven-of-nine-slower"),
])
def test_the_tree_before_is_compared_round_by_round_with_a_sign_test(now, before, worse) -> None:
    """A ratio of medians over a few rounds moves with this VM's speed (the floor's own req/s moves by
    up to 40% between rounds); the rows also carry each round's ratio and a sign test on them."""
    from bench import server_bench

    floor = [1000, 600, 800, 900, 700, 650, 950, 850, 750][:len(now)]
    runs = [{"server": server, "endpoint": "mixed", "connections": 8, "traffic": "realistic", "round": r,
             "rps": rps, "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0, "percentiles_ms": {"50": 1.0}}
            for r in range(len(now))
            for server, rps in (("gpu-admission", now[r]), ("floor", floor[r]), ("before", before[r]))]
    (row,) = server_bench.summarize(runs)
    assert row["before_round_ratios"] == [n / b for n, b in zip(now, before)]
    assert row["before_beyond_noise"] is worse
    assert row["floor_round_spread"] == min(floor) / max(floor)
