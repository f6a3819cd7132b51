"""Keep the GPU inventory current with a watch on Nodes and on Karpenter NodePools (the only I/O the
inventory needs).

NodePools (``karpenter.sh/v1``) are watched the same way in a thread of their own, when the CRD is
served: a 404 means Karpenter is not installed, and the list is retried every ``CRD_RETRY`` seconds
in case it is installed later; a 403 turns only the NodePool part off (the RBAC of manifests/ grants
both). The products a NodePool may launch count as present (:mod:`webhook.core.nodepools`).

list + watch from the list's resourceVersion, reconnect with exponential backoff, relist on
``410 Gone`` (the watch fell behind etcd's compaction). The index is rebuilt off the request path
and swapped atomically, so a review never waits for the API: it reads the last snapshot, or none
while the first list is still running (then decisions simply do not filter by inventory).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from webhook.core import nodepools
from webhook.core.inventory import Inventory, from_nodes, node_facts
from webhook.core.settings import Settings

log = logging.getLogger("gpu_admission.inventory")

MAX_BACKOFF = 30.0
CRD_RETRY = 60.0
"""Seconds between lists of NodePools while the CRD is not served (Karpenter not installed yet)."""
WATCH_TIMEOUT = 300
"""Seconds a single watch request lasts before it is renewed (the server may end it sooner)."""


class Forbidden(Exception):
    """RBAC does not allow listing nodes: the inventory stays off."""


def load_client(kubeconfig: str | None = None) -> Any:
    """A CoreV1Api from the in-cluster service account, else the kubeconfig (``None`` = default)."""
    from kubernetes import client, config

    if kubeconfig is None:
        try:
            config.load_incluster_config()
            return client.CoreV1Api()
        except config.ConfigException:
            pass
    config.load_kube_config(config_file=kubeconfig)
    return client.CoreV1Api()


def list_nodes(api: Any) -> tuple[list[dict[str, Any]], str | None]:
    """All Node objects as plain dicts (as the API serialises them), and the list's resourceVersion."""
    from kubernetes.client import ApiClient
    from kubernetes.client.exceptions import ApiException

    try:
        result = api.list_node()
    except ApiException as exc:
        if exc.status == 403:
            raise Forbidden(str(exc.reason)) from exc
        raise
    serialise = ApiClient().sanitize_for_serialization
    return [serialise(n) for n in result.items], result.metadata.resource_version


class NodeWatch:
    """Background list+watch of Nodes feeding an :class:`Inventory` snapshot."""

    def __init__(self, api: Any, settings: Callable[[], Settings], *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._api = api
        self._settings = settings
        self._sleep = sleep
        self._nodes: dict[str, dict[str, Any]] = {}
        self._nodepools: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        """Nodes and NodePools are folded in by two threads: one index rebuild at a time."""
        self._snapshot: Inventory | None = None
        self.synced = threading.Event()
        self.stopped = threading.Event()
        self.relists = 0
        self.unchanged = 0
        """Node events that changed no GPU fact, so rebuilt nothing."""

    def current(self) -> Inventory | None:
        """The last snapshot (re-indexed if the policy's label key changed since)."""
        snap = self._snapshot
        s = self._settings()
        if snap is not None and snap.label_key != s.label_key:
            snap = self._rebuild(snap.resource_version)
        return snap

    def _rebuild(self, resource_version: str | None) -> Inventory:
        s = self._settings()
        with self._lock:
            snap = from_nodes(list(self._nodes.values()), label_key=s.label_key, scheme=s.label_scheme,
                              catalog=s.catalog, gpu_resources=s.gpu_resources, resource_version=resource_version,
                              nodepools=list(self._nodepools.values()))
            self._snapshot = snap
        return snap

    def _refold(self) -> None:
        """Rebuild after a NodePool change, once the nodes are listed: before that there is no
        snapshot, and reviews are not filtered by inventory at all (a snapshot of NodePools alone
        would say the cluster has no GPU node)."""
        if self.synced.is_set():
            self._rebuild(self._snapshot.resource_version if self._snapshot else None)

    def relist(self) -> str | None:
        nodes, rv = list_nodes(self._api)
        with self._lock:
            self._nodes = {f["metadata"]["name"]: f for f in map(node_facts, nodes) if f is not None}
            self._rebuild(rv)
        self.relists += 1
        self.synced.set()
        log.info("node inventory listed: %s", self._snapshot.describe() if self._snapshot else "-",
                 extra={"event": "inventory_list", "nodes": len(self._nodes)})
        return rv

    def apply_event(self, kind: str, node: dict[str, Any]) -> str | None:
        """Fold one watch event into the index; returns the event's resourceVersion. Only the
        node's GPU facts are kept (:func:`webhook.core.inventory.node_facts`), and an event that
        changes none of them (a kubelet's heartbeat) leaves the snapshot, and so the verdict memo
        keyed by it, as it was."""
        meta = node.get("metadata") if isinstance(node, dict) else None
        if not isinstance(meta, dict):
            return None
        rv = meta.get("resourceVersion")
        if kind == "BOOKMARK":
            return rv
        name = meta.get("name")
        with self._lock:
            if kind == "DELETED":
                if self._nodes.pop(name, None) is None:
                    return rv
            elif kind in ("ADDED", "MODIFIED"):
                facts = node_facts(node)
                if facts is None or self._nodes.get(name) == facts:
                    self.unchanged += 1
                    return rv
                self._nodes[name] = facts
            else:
                return rv
            self._rebuild(rv)
        return rv

    def _watch_once(self, rv: str | None) -> str | None:
        from kubernetes import watch

        w = watch.Watch()
        stream = w.stream(self._api.list_node, resource_version=rv, timeout_seconds=WATCH_TIMEOUT,
                          allow_watch_bookmarks=True, _request_timeout=WATCH_TIMEOUT + 30)
        for event in stream:
            if self.stopped.is_set():
                w.stop()
                break
            raw = event.get("raw_object") or {}
            rv = self.apply_event(event.get("type", ""), raw) or rv
        return rv

    def run(self) -> None:
        """List, then watch forever; relist on 410 Gone, back off on errors. Stops on Forbidden."""
        from kubernetes.client.exceptions import ApiException

        backoff = 1.0
        rv: str | None = None
        while not self.stopped.is_set():
            try:
                if rv is None:
                    rv = self.relist()
                rv = self._watch_once(rv)
                backoff = 1.0
            except Forbidden as exc:
                log.warning("node inventory off: RBAC does not allow listing nodes (%s)", exc,
                            extra={"event": "inventory_off"})
                return
            except ApiException as exc:
                if exc.status == 410:
                    rv = None  # compacted: start again from a fresh list
                    continue
                rv = None
                backoff = self._back_off("node watch", f"{exc.status} {exc.reason}", backoff)
            except Exception as exc:  # noqa: BLE001 - network errors of every kind: retry
                rv = None
                backoff = self._back_off("node watch", type(exc).__name__, backoff)

    def _back_off(self, what: str, detail: str, backoff: float) -> float:
        """Log, wait ``backoff`` seconds, and return the next (doubled, capped) wait."""
        log.warning("%s failed (%s); retrying in %.0f s", what, detail, backoff, extra={"event": "inventory_retry"})
        self._sleep(backoff)
        return min(backoff * 2, MAX_BACKOFF)

    # --- NodePools ---------------------------------------------------------------------------------

    def _custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(getattr(self._api, "api_client", None))

    def relist_nodepools(self, custom: Any) -> str | None:
        result = custom.list_cluster_custom_object(nodepools.GROUP, nodepools.VERSION, nodepools.PLURAL)
        items = result.get("items") if isinstance(result, dict) else None
        with self._lock:
            self._nodepools = {i["metadata"]["name"]: i for i in items or []
                               if isinstance(i, dict) and isinstance(i.get("metadata"), dict)}
            self._refold()
        log.info("nodepools listed: %d", len(self._nodepools), extra={"event": "inventory_nodepools"})
        meta = result.get("metadata") if isinstance(result, dict) else None
        return meta.get("resourceVersion") if isinstance(meta, dict) else None

    def apply_nodepool_event(self, kind: str, pool: dict[str, Any]) -> str | None:
        meta = pool.get("metadata") if isinstance(pool, dict) else None
        if not isinstance(meta, dict):
            return None
        if kind not in ("DELETED", "ADDED", "MODIFIED"):
            return meta.get("resourceVersion")
        with self._lock:
            if kind == "DELETED":
                self._nodepools.pop(meta.get("name"), None)
            else:
                self._nodepools[meta.get("name")] = pool
            self._refold()
        return meta.get("resourceVersion")

    def run_nodepools(self) -> None:
        """List, then watch NodePools; wait for the CRD while it is not served; off on 403."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        custom = self._custom()
        backoff = 1.0
        rv: str | None = None
        while not self.stopped.is_set():
            try:
                if rv is None:
                    rv = self.relist_nodepools(custom)
                w = watch.Watch()
                for event in w.stream(custom.list_cluster_custom_object, nodepools.GROUP, nodepools.VERSION,
                                      nodepools.PLURAL, resource_version=rv, timeout_seconds=WATCH_TIMEOUT,
                                      _request_timeout=WATCH_TIMEOUT + 30):
                    if self.stopped.is_set():
                        w.stop()
                        break
                    rv = self.apply_nodepool_event(event.get("type", ""), event.get("raw_object") or {}) or rv
                backoff = 1.0
            except ApiException as exc:
                rv = None
                if exc.status == 404:
                    with self._lock:
                        if self._nodepools:
                            self._nodepools = {}
                            self._refold()
                    self._sleep(CRD_RETRY)  # no NodePool CRD (yet): Karpenter is not installed
                    continue
                if exc.status == 403:
                    log.warning("nodepools off: RBAC does not allow listing nodepools.karpenter.sh",
                                extra={"event": "inventory_nodepools_off"})
                    return
                if exc.status != 410:  # 410: compacted, relist at once
                    backoff = self._back_off("nodepool watch", f"{exc.status} {exc.reason}", backoff)
            except Exception as exc:  # noqa: BLE001 - network errors of every kind: retry
                rv = None
                backoff = self._back_off("nodepool watch", type(exc).__name__, backoff)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="gpu-admission-node-watch", daemon=True)
        thread.start()
        threading.Thread(target=self.run_nodepools, name="gpu-admission-nodepool-watch", daemon=True).start()
        return thread
