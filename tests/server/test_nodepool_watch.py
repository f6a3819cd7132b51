"""Karpenter NodePools through the server's watch: the NodeWatch reads them as it reads Nodes (moved
from tests/core: core tests import no server)."""

from __future__ import annotations

from tests.core.test_inventory import H100  # the core tests' builders
from webhook.core import settings as settings_mod
from tests.core.test_nodepools import FakeCustom, H100_POOL, L40S_ONLY, P5_POOL  # the core tests' builders


def test_the_node_watch_folds_nodepools_into_the_inventory() -> None:
    from tests.core.test_inventory import FakeApi
    from webhook.server.node_watch import NodeWatch

    s = settings_mod.default()
    watch = NodeWatch(FakeApi(L40S_ONLY), lambda: s)
    watch.relist()
    assert H100 not in watch.current().values_with_room(4)
    assert watch.relist_nodepools(FakeCustom([H100_POOL])) == "7"
    assert H100 in watch.current().values_with_room(4)
    watch.apply_nodepool_event("DELETED", {"metadata": {"name": "gpu-h100", "resourceVersion": "8"}})
    assert H100 not in watch.current().values_with_room(4)
    watch.apply_nodepool_event("ADDED", P5_POOL)
    assert watch.current().scalable == {H100: "NodePool p5"}


def test_nodepools_listed_before_the_nodes_make_no_snapshot() -> None:
    """Until the nodes are listed reviews are not filtered at all: NodePools alone must not make a
    snapshot that says the cluster has no GPU node."""
    from tests.core.test_inventory import FakeApi
    from webhook.server.node_watch import NodeWatch

    s = settings_mod.default()
    watch = NodeWatch(FakeApi(L40S_ONLY), lambda: s)
    watch.relist_nodepools(FakeCustom([H100_POOL]))
    assert watch.current() is None
    watch.relist()
    assert watch.current().scalable == {H100: "NodePool gpu-h100"}
