"""The benchmark suite (bench/, `make bench`) is not part of the test run, but its engine benchmark
must keep working against the engine's interface: run it once with tiny counts (no timing asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

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
