"""The floor for the server benchmark: a Flask app that only parses the AdmissionReview and answers
``allowed: true`` with the uid echoed, the least any Python admission webhook does per request.

``python -m bench.floor_app --cert C --key K --bind HOST:PORT`` runs it under the SAME gunicorn
configuration as ``gpu-admission serve`` (``webhook.server.gunicorn.application.AdmissionServer``: gthread workers, the
same worker and thread counts, TLS context hook, keep-alive, timeouts, logging setup): only the WSGI
app each worker loads differs (``app_factory``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from flask import Flask, Response, request


def create_app() -> Flask:
    app = Flask("floor")

    @app.post("/mutate")
    @app.post("/validate")
    def admit() -> Response:
        doc = json.loads(request.get_data(cache=False))
        uid = doc["request"]["uid"]
        reply = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                 "response": {"uid": uid, "allowed": True}}
        return Response(json.dumps(reply, separators=(",", ":")), mimetype="application/json")

    @app.get("/readyz")
    def readyz() -> Response:
        return Response('{"status":"ok"}', mimetype="application/json")

    return app


def _factory(_options: Any, _settings: Any) -> Flask:
    return create_app()


def main(argv: list[str] | None = None) -> int:
    from webhook.server.gunicorn import application as server

    parser = argparse.ArgumentParser(prog="floor_app")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--workers", type=int, default=server.ServeOptions.workers)
    parser.add_argument("--threads", type=int, default=server.ServeOptions.threads)
    parser.add_argument("--log-level", default=server.ServeOptions.log_level)
    args = parser.parse_args(argv)
    options = server.ServeOptions(cert=Path(args.cert), key=Path(args.key), bind=args.bind,
                                  workers=args.workers, threads=args.threads, log_level=args.log_level)
    # the same process setup as webhook.server.gunicorn.application.run: a multi-process metrics directory exists (the
    # child_exit hook uses it) and only the master removes it
    owned = server.MULTIPROC_ENV not in os.environ
    metrics_dir = server.prepare_metrics_dir()
    master = os.getpid()
    try:
        server.AdmissionServer(options, app_factory=_factory).run()
    finally:
        if owned and os.getpid() == master:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
