"""The GPU inventory through the server: the NodeWatch and the verdict memo (moved from tests/core: core
tests import no server)."""

from __future__ import annotations

from webhook.server.node_watch import NodeWatch
from tests.core.test_inventory import A100, L40S, FakeApi, S, labelled, node, vllm_pod  # the core tests' builders


def test_node_watch_index_follows_events() -> None:
    watch = NodeWatch(FakeApi([node("a", A100)]), lambda: S)
    assert watch.current() is None
    assert watch.relist() == "42" and watch.synced.is_set()
    assert set(watch.current().nodes) == {"a"}
    watch.apply_event("ADDED", {**node("l", L40S), "metadata": {**node("l", L40S)["metadata"], "resourceVersion": "43"}})
    assert set(watch.current().nodes) == {"a", "l"} and watch.current().resource_version == "43"
    watch.apply_event("DELETED", {"metadata": {"name": "a", "resourceVersion": "44"}})
    assert set(watch.current().nodes) == {"l"}
    watch.apply_event("BOOKMARK", {"metadata": {"resourceVersion": "45"}})
    assert set(watch.current().nodes) == {"l"}


def test_a_label_change_is_a_new_inventory_for_the_verdict_memo() -> None:
    """The memo answers only for the very inventory object a verdict was computed with, and the
    watch builds a new one on every node event: a label-only change cannot serve a stale verdict."""
    from webhook.server.verdict_cache import VerdictCache

    watch = NodeWatch(FakeApi([labelled("a", "1", pool="p1")]), lambda: S)
    watch.relist()
    before = watch.current()
    assert before is not None and before.nodes["a"].labels["pool"] == "p1"
    watch.apply_event("MODIFIED", labelled("a", "2", pool="p2"))
    after = watch.current()
    assert after is not before and after.nodes["a"].labels["pool"] == "p2"
    assert before.products_for({"nodeSelector": {"pool": "p2"}}).nodes == ()
    assert after.products_for({"nodeSelector": {"pool": "p2"}}).nodes == ("a",)
    memo, calls = VerdictCache(), []
    pod = {**vllm_pod("Qwen/Qwen2.5-7B-Instruct", 1, nodeSelector={"pool": "p2"}),
           "metadata": {"generateName": "p-", "ownerReferences": [{"controller": True, "kind": "ReplicaSet"}]}}
    for inventory in (before, before, after):
        memo.lookup(pod, S, inventory, (), lambda: calls.append(1) or len(calls)).value
    assert len(calls) == 2  # computed for `before`, answered from the memo once, computed again for `after`


def heartbeat(n: dict, at: str, rv: str) -> dict:
    """``n`` as a kubelet's status update rewrites it: new heartbeat times, images and resourceVersion."""
    return {**n, "metadata": {**n["metadata"], "resourceVersion": rv, "managedFields": [{"time": at}]},
            "status": {**n.get("status", {}), "images": [{"names": [f"img@{at}"], "sizeBytes": 1}],
                       "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": at}]}}


def test_a_heartbeat_keeps_the_inventory_and_the_memo() -> None:
    """1,000 kubelet status updates that change no GPU fact rebuild nothing: the snapshot is the same
    object, so the verdict memo keyed by it keeps answering; a change of capacity is a new one."""
    from webhook.server.verdict_cache import VerdictCache

    watch = NodeWatch(FakeApi([node("a", A100), node("l", L40S)]), lambda: S)
    watch.relist()
    first = watch.current()
    memo, calls = VerdictCache(), []
    pod = {**vllm_pod("Qwen/Qwen2.5-7B-Instruct", 1),
           "metadata": {"generateName": "p-", "ownerReferences": [{"controller": True, "kind": "ReplicaSet"}]}}
    for i in range(1000):
        watch.apply_event("MODIFIED", heartbeat(node("a" if i % 2 else "l", A100 if i % 2 else L40S), f"t{i}", str(100 + i)))
        memo.lookup(pod, S, watch.current(), (), lambda: calls.append(1) or len(calls)).value
    assert watch.current() is first and watch.unchanged == 1000
    assert (memo.hits, memo.misses) == (999, 1)
    grown = node("a", A100)
    grown["status"] = {**grown["status"], "allocatable": {**grown["status"]["allocatable"], "nvidia.com/gpu": "2"}}
    watch.apply_event("MODIFIED", grown)
    assert watch.current() is not first and watch.current().nodes["a"].allocatable == 2
