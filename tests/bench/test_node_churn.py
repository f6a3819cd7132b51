"""bench/node_churn.py, small: the verdict memo keeps its hit rate while nodes send status updates,
and loses it when each event changes a GPU fact (the control that shows the memo is keyed by the
inventory). Counts, not times."""

from __future__ import annotations

from bench import corpus, node_churn
from webhook.core.settings import default as default_settings


def test_heartbeats_keep_the_memo_and_gpu_changes_do_not() -> None:
    settings = default_settings()
    traffic = corpus.controller_traffic(settings=settings, deployment_replicas=10, job_completions=20)
    runs = {churn: node_churn.run(churn, nodes=40, passes=1, events_per_review=1, settings=settings, traffic=traffic)
            for churn in ("still", "heartbeats", "gpu-changes")}
    still, beats, changes = runs["still"], runs["heartbeats"], runs["gpu-changes"]
    assert still["hit_rate"] > 0.5, still
    assert (beats["memo_hits"], beats["memo_misses"]) == (still["memo_hits"], still["memo_misses"]), beats
    assert beats["inventories_built"] == 1 and beats["events_that_changed_nothing"] == beats["events"] > 0
    assert changes["memo_hits"] == 0 and changes["inventories_built"] == changes["events"] + 1, changes


def test_the_report_prints_the_hit_rates() -> None:
    from bench import report

    churn = [{"churn": c, "nodes": 1000, "hit_rate": h, "inventories_built": b, "events": e}
             for c, h, b, e in (("still", 0.892, 1, 0), ("heartbeats", 0.892, 1, 1180), ("gpu-changes", 0.0, 1181, 1180))]
    engine = {"objects": 0, "iterations": 0, "summary": {}, "node_churn": churn}
    md = report.markdown({"meta": {"stamp": "s", "started": "x", "phases": ["engine"], "machine": {}}, "engine": engine,
                          "targets": []},
                         "png")
    assert "heartbeats 0.892 (1 inventories for 1,180 events)" in md and "gpu-changes 0.0 (1,181 inventories" in md
