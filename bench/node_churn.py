"""The verdict memo under a cluster's node traffic: realistic reviews while 1,000 nodes send updates.

The server's verdict memo answers a controller's copies of a pod only for the very inventory object
the first verdict was computed with, so how often the node watch builds a new inventory decides its
hit rate. A kubelet updates its Node's status every few seconds (heartbeat times, conditions,
images), which places no GPU pod; the watch keeps only each node's GPU facts and builds nothing new
for such an event (:mod:`webhook.server.node_watch`).

Three runs of the controller traffic of the server benchmark (``corpus.controller_traffic``, filled
per pass as wrk sends it), in order, through ``admission.mutate/validate`` with the app's memo and
``inventory=watch.current()`` of a real :class:`~webhook.server.node_watch.NodeWatch`:

- ``still``: the inventory of 1,000 GPU nodes, no events;
- ``heartbeats``: before every review, ``--events-per-review`` status updates of the next nodes
  (new resourceVersion, heartbeat times, images: what a kubelet sends);
- ``gpu-changes``: the same number of events, each one changing a GPU fact (the node's allocatable
  GPUs alternate), which must be a new inventory: the control that shows the memo is keyed by it.

The watch is fed its events directly (``apply_event``), as its watch loop does with what the API
streams; no API server runs here (bench/e2e_latency.py has the real one). Printed: reviews, memo
hits and misses, hit rate, and the inventories built, per run.

``python -m bench.node_churn [--nodes 1000] [--passes 3] [--events-per-review 1] [--json]``
"""

from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace
from typing import Any

from bench import corpus
from webhook.core.settings import Settings, default as default_settings
from webhook.server import admission, review
from webhook.server.node_watch import NodeWatch
from webhook.server.verdict_cache import VerdictCache

PRODUCTS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S", "NVIDIA-L4")


def gpu_node(i: int, *, allocatable: int = 8, beat: int = 0) -> dict[str, Any]:
    """A Node as the API serialises it, GFD-labelled, with what a kubelet's status update changes."""
    product = PRODUCTS[i % len(PRODUCTS)]
    name = f"gpu-{i:04d}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": str(1000 + beat * 10_000 + i),
                         "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
                                    "nvidia.com/gpu.count": "8"}},
            "status": {"capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "94", "memory": "1000Gi", "nvidia.com/gpu": str(allocatable)},
                       "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": f"t{beat}"}],
                       "images": [{"names": [f"registry/img@{beat}"], "sizeBytes": 1}]}}


class _Api:
    """What ``node_watch.list_nodes`` reads of a CoreV1Api: ``list_node().items`` and its resourceVersion."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self._nodes = nodes

    def list_node(self) -> Any:
        return SimpleNamespace(items=self._nodes, metadata=SimpleNamespace(resource_version="1"))


def run(churn: str, *, nodes: int, passes: int, events_per_review: int, settings: Settings,
        traffic: list[corpus.TrafficItem]) -> dict[str, Any]:
    watch = NodeWatch(_Api([gpu_node(i) for i in range(nodes)]), lambda: settings)
    watch.relist()
    memo = VerdictCache()
    built = {id(watch.current())}
    sent, beat = 0, 0
    for p in range(passes):
        for item in traffic:
            for _ in range(events_per_review if churn != "still" else 0):
                i, visit = beat % nodes, beat // nodes
                beat += 1
                # gpu-changes: each visit of a node flips its allocatable GPUs (8 -> 7 -> 8 ...)
                alloc = 7 if churn == "gpu-changes" and visit % 2 == 0 else 8
                watch.apply_event("MODIFIED", gpu_node(i, allocatable=alloc, beat=beat))
            inventory = watch.current()
            built.add(id(inventory))
            req = review.parse(corpus.fill(item.body.decode(), p).encode(), "application/json")
            if item.endpoint == "mutate":
                admission.mutate(req, settings, inventory, memo=memo)
            else:
                admission.validate(req, settings, mode=settings.mode, inventory=inventory, memo=memo)
            sent += 1
    looked = memo.hits + memo.misses
    return {"churn": churn, "nodes": nodes, "reviews": sent, "events": beat, "memo_hits": memo.hits,
            "memo_misses": memo.misses, "hit_rate": round(memo.hits / looked, 3) if looked else None,
            "inventories_built": len(built), "events_that_changed_nothing": watch.unchanged}


CHURNS = ("still", "heartbeats", "gpu-changes")


def runs(*, nodes: int = 1000, passes: int = 2, events_per_review: int = 1,
         settings: Settings | None = None) -> list[dict[str, Any]]:
    """The three runs (:data:`CHURNS`) over the same traffic."""
    settings = settings or default_settings()
    traffic = corpus.controller_traffic(settings=settings)
    return [run(churn, nodes=nodes, passes=passes, events_per_review=events_per_review, settings=settings,
                traffic=traffic) for churn in CHURNS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--events-per-review", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = parser.parse_args(argv)
    results = runs(nodes=args.nodes, passes=args.passes, events_per_review=args.events_per_review)
    for r in results:
        print(f"{r['churn']:>12}: {r['reviews']} reviews, {r['events']} node events "
              f"({r['events_that_changed_nothing']} changed no GPU fact), {r['inventories_built']} inventories, "
              f"memo {r['memo_hits']} hits / {r['memo_misses']} misses: hit rate {r['hit_rate']}")
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
