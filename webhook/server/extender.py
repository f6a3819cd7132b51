"""kube-scheduler extender endpoints on the admission server: ``POST /scheduler/filter`` and
``POST /scheduler/prioritize`` (rules in :mod:`webhook.core.scheduling`).

Wire types mirror ``k8s.io/kube-scheduler/extender/v1`` (types.go, v0.36.3). Those Go structs have
no json tags, so the JSON keys are the Go field names, capitalised:

* ``ExtenderArgs``: ``{"Pod": Pod, "Nodes": NodeList | null, "NodeNames": [string] | null}``.
  ``Nodes`` is sent when the extender is configured with ``nodeCacheCapable: false`` (what
  ``manifests/scheduler/kube-scheduler-config.yaml`` ships), ``NodeNames`` otherwise. The rules need
  node labels and capacity, so a request with names only is refused with a 400 that says so.
* ``ExtenderFilterResult``: ``{"Nodes": NodeList, "NodeNames": null, "FailedNodes": {name: reason},
  "FailedAndUnresolvableNodes": {name: reason}, "Error": ""}``. Without node caching the scheduler
  reads the kept nodes from ``Nodes.items`` (a missing list would drop every node). Mixed nodes go
  to ``FailedAndUnresolvableNodes``: preempting pods cannot change a node's hardware.
* ``HostPriorityList``: ``[{"Host": name, "Score": 0-10}]``.

Errors: malformed arguments are HTTP 400 with a JSON ``error`` (kube-scheduler logs the failure and,
with ``ignorable: true``, schedules without the extender). Bodies up to :data:`MAX_BODY` are read:
full Node objects are large, and the admission routes' 4 MiB limit would refuse a big cluster's list.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from webhook.core import scheduling
from webhook.core.settings import Settings

log = logging.getLogger("gpu_admission.extender")

MAX_BODY = 64 * 1024 * 1024
"""Bytes: a few thousand full Node objects (labels, capacity, images) fit."""


class ArgsError(ValueError):
    """The body is not a usable ExtenderArgs (HTTP 400)."""


def _json(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), status=status, mimetype="application/json")


def parse_args(body: bytes) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
    """ExtenderArgs -> (pod, nodes); :class:`ArgsError` naming what is wrong."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ArgsError(f"body is not JSON: {str(exc)[:120]}") from None
    if not isinstance(doc, dict):
        raise ArgsError(f"expected ExtenderArgs (a JSON object), got {type(doc).__name__}")
    pod = doc.get("Pod")
    if not isinstance(pod, dict):
        raise ArgsError("ExtenderArgs.Pod is missing or not an object")
    nodes = doc.get("Nodes")
    if nodes is None:
        if isinstance(doc.get("NodeNames"), list):
            raise ArgsError("got NodeNames without Nodes: configure this extender with nodeCacheCapable: false, "
                            "it needs the nodes' labels and capacity")
        raise ArgsError("ExtenderArgs.Nodes is missing")
    items = nodes.get("items") if isinstance(nodes, dict) else None
    if isinstance(nodes, dict) and "items" in nodes and items is None:
        items = []  # Go encodes an empty NodeList's nil slice as null
    if not isinstance(items, list):
        raise ArgsError("ExtenderArgs.Nodes.items must be a list of Node objects")
    for i, node in enumerate(items):
        if not isinstance(node, dict) or scheduling.node_name(node) is None:
            raise ArgsError(f"ExtenderArgs.Nodes.items[{i}] is not a Node with metadata.name")
    return pod, items


def filter_result(pod: Mapping[str, Any], nodes: list[Mapping[str, Any]], settings: Settings) -> dict[str, Any]:
    """ExtenderFilterResult: the nodes the pod may use, echoed as received, and why others may not."""
    need = scheduling.pod_need(pod, settings)
    kept: list[Mapping[str, Any]] = []
    failed: dict[str, str] = {}
    for node in nodes:
        reason = scheduling.refusal(need, scheduling.facts(node, settings), settings.label_key)
        if reason is None:
            kept.append(node)
        else:
            failed[str(scheduling.node_name(node))] = reason
    return {"Nodes": {"items": kept}, "NodeNames": None, "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed, "Error": ""}


def priorities(pod: Mapping[str, Any], nodes: list[Mapping[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """HostPriorityList: 0-10 per node."""
    need = scheduling.pod_need(pod, settings)
    facts = [(str(scheduling.node_name(n)), scheduling.facts(n, settings)) for n in nodes]
    return [{"Host": name, "Score": score} for name, score in scheduling.scores(need, facts)]


def _pod_ref(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or meta.get('generateName') or '?'}"


def blueprint() -> Blueprint:
    """The extender routes under ``/scheduler``; settings are the app's live policy
    (``app.extensions["gpu_admission"]["settings"]``), so a policy reload applies here too."""
    bp = Blueprint("scheduler_extender", __name__, url_prefix="/scheduler")

    @bp.before_request
    def allow_node_lists() -> None:
        request.max_content_length = MAX_BODY

    def settings() -> Settings:
        return current_app.extensions["gpu_admission"]["settings"].current()

    def parsed() -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
        return parse_args(request.get_data(cache=False))

    @bp.post("/filter")
    def filter_nodes() -> Response:
        try:
            pod, nodes = parsed()
        except ArgsError as exc:
            return _json({"error": str(exc)}, 400)
        result = filter_result(pod, nodes, settings())
        failed = result["FailedAndUnresolvableNodes"]
        if failed:
            log.info("extender filter", extra={"event": "extender", "fields": {
                "verb": "filter", "pod": _pod_ref(pod), "nodes": len(nodes), "kept": len(nodes) - len(failed),
                "refused": sorted(failed)}})
        return _json(result)

    @bp.post("/prioritize")
    def prioritize() -> Response:
        try:
            pod, nodes = parsed()
        except ArgsError as exc:
            return _json({"error": str(exc)}, 400)
        return _json(priorities(pod, nodes, settings()))

    @bp.errorhandler(RequestEntityTooLarge)
    def too_large(_exc: RequestEntityTooLarge) -> Response:
        return _json({"error": f"body larger than {MAX_BODY} bytes"}, 413)

    return bp
