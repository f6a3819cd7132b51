"""1. Engine: per-object time of the pure pipeline against the JSON floor of the same review.

For every AdmissionReview of the mix (``bench.corpus``), interleaved in one loop so drift hits all
three equally, with the garbage collector off while timing:

- floor: ``json.dumps(json.loads(body))``: the least any Python webhook does with the review;
- engine: ``engine.judge(engine.Request(obj), settings)``: workloads -> inference -> policy -> patches on the decoded
  object (what the issue calls the pure pipeline);
- admission: ``review.parse(body)`` + ``admission.mutate/validate`` + ``json.dumps`` of the response:
  everything the server does for a review except HTTP, TLS, logging and metrics.

Each object is timed ``iterations`` times (after ``warmup`` untimed calls); per object we keep the
median and p99 of each, and the ratio engine/floor and admission/floor of the medians.

Cold containers: the memo of ``webhook.core.launchers.parse_container`` is emptied (untimed) before every
engine and admission call, so each call reads its command lines as if no pod with those containers
had been seen before. In a cluster the memo answers the ``/validate`` call that follows ``/mutate``
and the replicas of one template; timing repeated bodies with it would measure the memo. The server's
verdict memo (a ``VerdictCache``, as the app owns one, keyed by the object without its per-copy fields) is emptied
with it, for the same reason. The sizing memo (``sizing.fit_options``) stays: its key is the model
configuration, of which a cluster runs a handful.

Realistic traffic (:func:`run_realistic`, the ``realistic`` field of the result, apart from the
per-object groups): the controller-shaped sequence of the server benchmark
(``corpus.controller_traffic``), every review in order, ``passes`` times (each pass with its own uids
and unique pods, as wrk sends them), memos kept as a server keeps them: floor and admission per
review, interleaved.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from bench import common, corpus
from webhook.core import engine
from webhook.core.launchers import container as launch_memo
from webhook.core.settings import Settings, default as default_settings
from webhook.server import admission, review
from webhook.server.verdict_cache import VerdictCache


def _decide(item: corpus.Item, settings: Settings, memo: VerdictCache):
    if item.endpoint == "mutate":
        return lambda req: admission.mutate(req, settings, memo=memo)
    return lambda req: admission.validate(req, settings, mode=settings.mode, memo=memo)


def run(iterations: int | None = None, warmup: int = 5, variants: int | None = None,
        settings: Settings | None = None, realistic_passes: int | None = None) -> dict[str, Any]:
    iterations = iterations or int(common.scaled(300, 30))
    variants = int(common.scaled(60, 20)) if variants is None else variants
    settings = settings or default_settings()
    items = corpus.items(variants=variants)
    loads, dumps, judge, parse, ask = json.loads, json.dumps, engine.judge, review.parse, engine.Request
    ns = time.perf_counter_ns
    verdicts = VerdictCache()  # the server's memo, as an app owns one

    def forget() -> None:
        launch_memo.LAUNCHES.clear()
        verdicts.clear()

    rows: list[dict[str, Any]] = []
    gc_was_enabled = gc.isenabled()
    try:
        for item in items:
            body, obj = item.body, item.obj
            decide = _decide(item, settings, verdicts)
            for _ in range(warmup):
                dumps(loads(body))
                judge(ask(obj), settings)
                dumps(decide(parse(body, "application/json")).review)
            floor_t, engine_t, adm_t = [], [], []
            gc.collect()
            gc.disable()
            for _ in range(iterations):
                t0 = ns()
                dumps(loads(body))
                t1 = ns()
                forget()
                t1b = ns()
                judge(ask(obj), settings)
                t2 = ns()
                forget()
                t2b = ns()
                dumps(decide(parse(body, "application/json")).review)
                t3 = ns()
                floor_t.append(t1 - t0)
                engine_t.append(t2 - t1b)
                adm_t.append(t3 - t2b)
            gc.enable()
            f_med, e_med, a_med = common.median(floor_t), common.median(engine_t), common.median(adm_t)
            rows.append({
                "name": item.name, "kind": item.kind, "endpoint": item.endpoint, "bytes": len(body),
                "floor_median_us": f_med / 1e3, "floor_p99_us": common.percentile(floor_t, 99) / 1e3,
                "engine_median_us": e_med / 1e3, "engine_p99_us": common.percentile(engine_t, 99) / 1e3,
                "admission_median_us": a_med / 1e3, "admission_p99_us": common.percentile(adm_t, 99) / 1e3,
                "engine_ratio": e_med / f_med if f_med else None,
                "admission_ratio": a_med / f_med if f_med else None,
            })
    finally:
        if gc_was_enabled:
            gc.enable()
    return {"iterations": iterations, "objects": len(rows), "rows": rows, "summary": summarize(rows),
            "realistic": run_realistic(realistic_passes, settings)}


def run_realistic(passes: int | None = None, settings: Settings | None = None, seed: int = 17,
                  traffic: list[corpus.TrafficItem] | None = None) -> dict[str, Any]:
    """Floor and admission per review of the controller traffic, in order, memos kept (the memos start
    empty: the first pass pays for each template once, as a server that just started would)."""
    passes = passes or int(common.scaled(5, 2))
    settings = settings or default_settings()
    traffic = traffic if traffic is not None else corpus.controller_traffic(seed=seed, settings=settings)
    loads, dumps, parse = json.loads, json.dumps, review.parse
    ns = time.perf_counter_ns
    launch_memo.LAUNCHES.clear()
    verdicts = VerdictCache()
    hits0, misses0 = verdicts.hits, verdicts.misses
    floor_t: list[int] = []
    adm_t: list[int] = []
    by_source: dict[str, tuple[list[int], list[int]]] = {}
    decide = {item.endpoint: _decide(item, settings, verdicts) for item in traffic}
    gc_was_enabled = gc.isenabled()
    try:
        for p in range(passes):
            bodies = [corpus.fill(item.body.decode(), p).encode() for item in traffic]  # untimed
            gc.collect()
            gc.disable()
            for item, body in zip(traffic, bodies):
                t0 = ns()
                dumps(loads(body))
                t1 = ns()
                dumps(decide[item.endpoint](parse(body, "application/json")).review)
                t2 = ns()
                floor_t.append(t1 - t0)
                adm_t.append(t2 - t1)
                f, a = by_source.setdefault(item.source, ([], []))
                f.append(t1 - t0)
                a.append(t2 - t1)
            gc.enable()
    finally:
        if gc_was_enabled:
            gc.enable()

    def stats(floor: list[int], adm: list[int]) -> dict[str, Any]:
        f_med, a_med = common.median(floor), common.median(adm)
        return {"reviews": len(adm), "floor_median_us": f_med / 1e3, "floor_p99_us": common.percentile(floor, 99) / 1e3,
                "floor_mean_us": sum(floor) / len(floor) / 1e3, "admission_median_us": a_med / 1e3,
                "admission_p99_us": common.percentile(adm, 99) / 1e3, "admission_mean_us": sum(adm) / len(adm) / 1e3,
                "admission_ratio_median": a_med / f_med if f_med else None,
                "admission_ratio_mean": sum(adm) / sum(floor) if sum(floor) else None}

    out = stats(floor_t, adm_t)
    out.update(passes=passes, reviews_per_pass=len(traffic),
               verdict_hits=verdicts.hits - hits0, verdict_misses=verdicts.misses - misses0,
               by_source={k: stats(*v) for k, v in sorted(by_source.items())})
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per group (pod objects once, as /mutate sees them; workloads; all reviews)."""
    groups = {
        "pods": [r for r in rows if r["kind"] == "Pod" and r["endpoint"] == "mutate"],
        "workloads": [r for r in rows if r["kind"] != "Pod"],
        "all reviews": rows,
    }
    out: dict[str, Any] = {}
    for name, rs in groups.items():
        if not rs:
            continue
        out[name] = {
            "objects": len(rs),
            "median_bytes": common.median(r["bytes"] for r in rs),
            "floor_median_us": common.median(r["floor_median_us"] for r in rs),
            "floor_p99_us": common.percentile([r["floor_p99_us"] for r in rs], 50),
            "engine_median_us": common.median(r["engine_median_us"] for r in rs),
            "engine_p99_us": common.percentile([r["engine_p99_us"] for r in rs], 50),
            "engine_p99_worst_us": max(r["engine_p99_us"] for r in rs),
            "admission_median_us": common.median(r["admission_median_us"] for r in rs),
            "admission_p99_us": common.percentile([r["admission_p99_us"] for r in rs], 50),
            "engine_ratio_median": common.median(r["engine_ratio"] for r in rs),
            "engine_ratio_worst": max(r["engine_ratio"] for r in rs),
            "engine_ratio_worst_object": max(rs, key=lambda r: r["engine_ratio"])["name"],
            "admission_ratio_median": common.median(r["admission_ratio"] for r in rs),
            "admission_ratio_worst": max(r["admission_ratio"] for r in rs),
        }
    return out


if __name__ == "__main__":  # pragma: no cover
    result = run()
    print(json.dumps(result["summary"], indent=2))
    print(json.dumps({k: v for k, v in result["realistic"].items() if k != "by_source"}, indent=2))
