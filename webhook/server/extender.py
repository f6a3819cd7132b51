"""The kube-scheduler extender: ``POST /scheduler/filter`` and ``POST /scheduler/prioritize`` (rules in
:mod:`webhook.core.scheduling`), a Flask app of its own (:func:`create_app`).

Opt-in: ``serve --extender-bind HOST:PORT`` serves it on that port only, a second listener of the
same gunicorn server (:mod:`webhook.server.gunicorn.listeners`); the admission port never serves it.
Every request must authenticate before anything else happens (HTTP 401 otherwise, on every path,
with the body unread): a client certificate that the extender's client CA verified
(``--extender-client-ca``: what kube-scheduler can present, ``tlsConfig.certFile``/``keyFile``), or
``Authorization: Bearer <token>`` with the token of ``--extender-token-file`` (compared in constant
time; the file is re-read when it changes, as a mounted Secret does). kube-scheduler's extender
configuration has no way to send a token, so the token is for other callers.

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
with ``ignorable: true``, schedules without the extender). The body limit is the admission routes'
(``max_body``, 4 MiB): a larger Content-Length is refused with 413 before a byte of the body is read,
and a chunked body is read up to the limit and refused past it, so a request costs at most that much
memory before it is parsed (a larger limit lets one request take a worker's memory).
kube-scheduler sends only the nodes that passed its own filters, GPU nodes with room for the
pod; a list past the limit fails the call, which ``ignorable: true`` turns into "schedule without it".
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Mapping

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhook.core import scheduling
from webhook.core.settings import Settings, default as default_settings
from webhook.server.app import DEFAULT_MAX_BODY
from webhook.server.gunicorn.listeners import CLIENT_CERTIFICATE
from webhook.server.live_settings import LiveSettings, PolicyUnavailable
from webhook.server.tokens import TokenFile

log = logging.getLogger("gpu_admission.extender")


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


def create_app(settings: Settings | LiveSettings | None = None, *, max_body: int = DEFAULT_MAX_BODY,
               token_file: str | Path | None = None, client_ca: bool = False,
               reload_interval: float = 1.0) -> Flask:
    """The extender's app, served on its own listener. ``settings``: the admission app's LiveSettings
    (so a policy reload applies here too), fixed Settings, or None for the embedded default.
    ``client_ca``: the listener verifies client certificates against a CA, so a verified one
    (``environ[CLIENT_CERTIFICATE]``) authenticates; ``token_file``: so does its bearer token. One of
    the two is required: the extender is never served unauthenticated."""
    if token_file is None and not client_ca:
        raise ValueError("the scheduler extender needs a client CA or a token file to authenticate its callers")
    live = settings if isinstance(settings, LiveSettings) else LiveSettings.fixed(
        settings if settings is not None else default_settings())
    token = TokenFile(token_file, interval=reload_interval) if token_file is not None else None
    needed = " or ".join((["a client certificate signed by the extender's client CA"] if client_ca else [])
                         + (["an Authorization: Bearer token"] if token is not None else []))
    refused = {"count": 0, "logged": 0.0}

    app = Flask("gpu_admission_extender")
    # one byte more than allowed: see webhook.server.app (a chunked body is cut off at the limit, not refused)
    app.config["MAX_CONTENT_LENGTH"] = max_body + 1

    def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json.dumps(payload, separators=(",", ":")), status=status, mimetype="application/json",
                        headers=headers)

    @app.before_request
    def authenticate() -> Response | None:
        """Before routing, body or anything else: an unauthenticated caller learns nothing but 401."""
        if client_ca and request.environ.get(CLIENT_CERTIFICATE) is True:
            return None
        if token is not None and token.matches(request.headers.get("Authorization")):
            return None
        refused["count"] += 1
        now = time.monotonic()
        if now - refused["logged"] >= 1.0:  # one line a second at most
            log.warning("extender: %d unauthenticated requests refused (401)", refused["count"],
                        extra={"event": "extender_unauthenticated", "refused": refused["count"]})
            refused["count"], refused["logged"] = 0, now
        challenge = {"WWW-Authenticate": 'Bearer realm="gpu-admission scheduler extender"'} if token else None
        return _json({"error": f"unauthenticated: the scheduler extender needs {needed}"}, 401, challenge)

    def current() -> Settings:
        return live.current()

    def parsed() -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
        body = request.get_data(cache=False)  # 413 up front when the Content-Length is over the limit
        if len(body) > max_body:
            raise RequestEntityTooLarge()
        return parse_args(body)

    @app.post("/scheduler/filter")
    def filter_nodes() -> Response:
        try:
            pod, nodes = parsed()
        except ArgsError as exc:
            return _json({"error": str(exc)}, 400)
        result = filter_result(pod, nodes, current())
        failed = result["FailedAndUnresolvableNodes"]
        if failed:
            log.info("extender filter", extra={"event": "extender", "fields": {
                "verb": "filter", "pod": _pod_ref(pod), "nodes": len(nodes), "kept": len(nodes) - len(failed),
                "refused": sorted(failed)}})
        return _json(result)

    @app.post("/scheduler/prioritize")
    def prioritize() -> Response:
        try:
            pod, nodes = parsed()
        except ArgsError as exc:
            return _json({"error": str(exc)}, 400)
        return _json(priorities(pod, nodes, current()))

    @app.errorhandler(PolicyUnavailable)
    def no_policy(exc: PolicyUnavailable) -> Response:
        """No policy loaded yet (a broken file, no last good copy): 503, as /validate answers; the
        extender is ignorable in kube-scheduler's configuration, so the pod is scheduled without it."""
        return _json({"error": f"no policy loaded: {exc}"}, 503)

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_exc: RequestEntityTooLarge) -> Response:
        return _json({"error": f"body larger than {max_body} bytes"}, 413)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return _json({"error": exc.description or exc.name}, exc.code or 500)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        """A 500 with a message, never a dropped connection (kube-scheduler then schedules without
        the extender: ``ignorable: true``)."""
        log.exception("extender: internal error", extra={"event": "error", "endpoint": request.path})
        return _json({"error": f"internal error: {type(exc).__name__}"}, 500)

    return app
