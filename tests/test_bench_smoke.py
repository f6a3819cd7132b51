"""The benchmark suite (bench/, `make bench`) is not part of the test run, but its engine benchmark
must keep working against the engine's interface: run it once with tiny counts (no timing asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
