"""The HTTP front door: the admission server kube-apiserver calls.

Owns: the Flask application (``app``: routes, error mapping), the AdmissionReview v1 wire types
(``review``: parse, and the one place a response is completed), the admission outcome of each
endpoint (``admission``), Prometheus metrics, JSON logs, the live policy reload (``live_settings``,
``filewatch``), the Node watch that keeps the GPU inventory current (``node_watch``), the
kube-scheduler extender's app (``extender``, opt-in on its own port, with its bearer token read by
``tokens``) and the check of its own TLS key pair (``keypair``).
The process machinery, gunicorn's arbiter application, the balanced gthread worker, graceful
closing, overload shedding and the rotating TLS context, lives in the ``gunicorn`` sub-folder.

Imports: the core only through the public modules listed in :data:`webhook.core.PUBLIC`; never
anything from :mod:`webhook.cli`. tests/test_architecture.py holds both rules.

The names below are the server's public surface, the only ones the command line may use
(``gpu-admission serve`` hands off to :func:`run`; ``inventory`` reads Nodes with the same client;
``certs`` and ``serve`` check a key pair the way the server does; ``serve`` reads the extender's token
file the way the server does; ``serve --probe-bind`` defaults to the probe port and reports its bind
failure). They are imported lazily, so
``gpu-admission check`` never pays for Flask, gunicorn or the Kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC: dict[str, tuple[str, str | None]] = {
    "run": ("webhook.server.gunicorn.application", "run"),
    "ServeOptions": ("webhook.server.gunicorn.application", "ServeOptions"),
    "list_nodes": ("webhook.server.node_watch", "list_nodes"),
    "load_client": ("webhook.server.node_watch", "load_client"),
    "keypair": ("webhook.server.keypair", None),
    "read_token": ("webhook.server.tokens", "read_token"),
    "TokenError": ("webhook.server.tokens", "TokenError"),
    "ProbeBindError": ("webhook.server.probes", "ProbeBindError"),
    "DEFAULT_PROBE_PORT": ("webhook.server.probes", "DEFAULT_PORT"),
}

DEFAULT_MAX_QUEUE_AGE = 1.0
"""Seconds a review may wait for a worker thread before it is refused with 503
(``webhook.server.gunicorn.overload``); kube-apiserver's timeoutSeconds for this webhook is 3.
Defined here, not in ``overload``, so that building the command line (``serve --max-queue-age``)
does not import the socket machinery every ``gpu-admission check`` would then pay for."""

__all__ = sorted([*_PUBLIC, "DEFAULT_MAX_QUEUE_AGE"])


def __getattr__(name: str) -> Any:
    """PEP 562: resolve a public name on first use (an unknown name is an AttributeError, so
    ``from webhook.server import app`` still imports the submodule as usual)."""
    try:
        module_name, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'webhook.server' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
