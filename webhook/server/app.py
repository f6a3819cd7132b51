"""The HTTP front door: ``create_app(settings)`` with the admission routes, health and metrics
(``/metrics`` answers only on the probe port, :mod:`webhook.server.probes`).

The routes are one Blueprint (:data:`routes`); everything a request reads (the live policy, the
metrics, the verdict memo, the denial ledger, the inventory, the certificate status) is one
:class:`ServerState`, which ``create_app`` builds and keeps in ``app.extensions["gpu_admission"]``.
Routes are thin: parse the review (``review``), hand it to ``admission``, log and count. Error
mapping follows the contract: a bad *request* is HTTP 400 (or 413 when too big) with a JSON reason;
a bad *object* is a 200 denial; an unexpected exception is a 500 with a message and a log line
naming the request uid, never a dropped connection.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhook.core.inventory import Inventory
from webhook.core.redaction import redact
from webhook.core.settings import MODES, Settings, default as default_settings
from webhook.server import admission, denials, policy_review, probes, review
from webhook.server.filewatch import stat_signature
from webhook.server import DEFAULT_MAX_QUEUE_AGE
from webhook.server.gunicorn.overload import QUEUED_AT
from webhook.server.keypair import certificate_expiry, pair_problem
from webhook.server.live_settings import LiveSettings, PolicyUnavailable
from webhook.server.metrics import Metrics
from webhook.server.review import ReviewError
from webhook.server.verdict_cache import VerdictCache

log = logging.getLogger("gpu_admission.decision")
errlog = logging.getLogger("gpu_admission.server")

DEFAULT_MAX_BODY = 4 * 1024 * 1024


def _json(payload: Any, status: int = 200) -> Response:
    return Response(review.encode(payload), status=status, mimetype="application/json")


def _peek_uid(body: bytes) -> str | None:
    """The uid of a review for error logs, without trusting the body."""
    try:
        doc = json.loads(body)
        uid = doc.get("request", {}).get("uid")
        return uid if isinstance(uid, str) else None
    except Exception:  # noqa: BLE001 - best effort only
        return None


class _CertStatus:
    """Certificate facts for /readyz and the expiry gauge, re-read only when the file changes."""

    def __init__(self, cert: str | Path | None, key: str | Path | None) -> None:
        self.cert, self.key = cert, key
        self._cache: tuple[Any, str | None, float | None] = (None, None, None)

    def read(self) -> tuple[str | None, float | None]:
        if self.cert is None or self.key is None:
            return None, None
        # re-read when either file changes, and once a minute so expiry is noticed without a change
        signature = (stat_signature(Path(self.cert)), stat_signature(Path(self.key)), int(time.time() // 60))
        if self._cache[0] != signature:
            self._cache = (signature, pair_problem(self.cert, self.key), certificate_expiry(self.cert))
        return self._cache[1], self._cache[2]


def _whole_message(reply: dict[str, Any]) -> dict[str, str]:
    response = reply.get("response")
    notes = response.get("auditAnnotations") if isinstance(response, dict) else None
    message = notes.get("message") if isinstance(notes, dict) else None
    return {"message": message} if isinstance(message, str) and message else {}


class _App(Flask):
    """Flask, whose ``test_client()`` reads each response whole and closes it, as gunicorn does once
    it has written a response: the decision log line of a review is written on close
    (``Response.call_on_close``), so a test sees it right after its request. (werkzeug's test module
    is imported only by tests, not by every worker.)"""

    def test_client(self, use_cookies: bool = True, **kwargs: Any) -> Any:
        from flask.testing import FlaskClient

        class ClosingClient(FlaskClient):
            def open(self, *args: Any, **kw: Any) -> Any:  # noqa: A003 - werkzeug's name
                kw.setdefault("buffered", True)
                return super().open(*args, **kw)

        return ClosingClient(self, self.response_class, use_cookies=use_cookies, **kwargs)


@dataclass(eq=False)
class ServerState:
    """What the routes of one app share: built once by :func:`create_app`, read by every request
    through :func:`state`. Its counters (shed reviews, the served generation, metric children) change
    under the worker's threads only by single assignments, as they did as closure variables."""

    live: LiveSettings
    metrics: Metrics
    memo: VerdictCache
    ledger: denials.Ledger
    certs: _CertStatus
    inventory: Callable[[], Inventory | None]
    parent: "admission.Parent | None"
    clock: Callable[[], float]
    max_body: int
    max_queue_age: float | None
    served_generation: str | None = None
    shed: int = 0
    shed_logged: float = 0.0
    children: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def serving(self, s: Settings | None) -> None:
        """gpu_admission_policy_info: 1 for the generation served now, 0 for the one before."""
        generation = s.generation if s is not None else None
        if generation != self.served_generation:
            if self.served_generation is not None:
                self.metrics.policy_info.labels(generation=self.served_generation).set(0)
            if generation is not None:
                self.metrics.policy_info.labels(generation=generation).set(1)
            self.served_generation = generation

    def counted(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered: prometheus_client validates and locks on every
        ``labels()`` call, a few microseconds each, three times per review. The label values are
        bounded (endpoints, modes, booleans, violation codes), so the table is too."""
        key = (id(metric), *values)
        child = self.children.get(key)
        if child is None:
            child = self.children[key] = metric.labels(*values)
        return child

    def overloaded(self, waited: float) -> Response:
        """503 for a review that waited past ``max_queue_age``: kube-apiserver applies the
        failurePolicy now instead of timing out, and the worker moves on to fresher reviews."""
        self.metrics.errors.labels(status="503").inc()
        self.shed += 1
        now = time.monotonic()
        if now - self.shed_logged >= 1.0:  # one line a second at most: shedding happens under overload
            errlog.warning("overloaded: %d reviews refused (waited over %g s for a worker)", self.shed,
                           self.max_queue_age, extra={"event": "shed", "shed": self.shed,
                                                      "waited_ms": round(waited * 1000, 1)})
            self.shed, self.shed_logged = 0, now
        # no Retry-After: client-go retries a 5xx that carries one, and a review this old would be
        # retried past the webhook's timeout, adding load exactly when there is too much
        return _json({"error": f"overloaded: this review waited {waited:.1f} s for a worker (limit "
                               f"{self.max_queue_age:g} s); kube-apiserver applies the webhook's failurePolicy"}, 503)

    def handle(self, endpoint: str, decide: Callable[[review.Request, Settings], admission.Outcome], *,
               needs_policy: bool = True) -> Response:
        """One review: refuse it if it waited too long, parse it (400 when malformed), judge it with
        the current policy (503 without one, 500 on a bug), count it, and log it once it is sent."""
        m = self.metrics
        started = self.clock()
        http = request._get_current_object()  # type: ignore[attr-defined]  # once, not per attribute
        queued_at = http.environ.get(QUEUED_AT)
        waited = time.monotonic() - queued_at if isinstance(queued_at, float) else None
        if waited is not None and self.max_queue_age and waited > self.max_queue_age:
            return self.overloaded(waited)
        body = http.get_data(cache=False)
        if len(body) > self.max_body:
            raise RequestEntityTooLarge()
        try:
            req = review.parse(body, http.content_type)
        except ReviewError as exc:
            m.errors.labels(status=str(exc.status)).inc()
            return _json({"error": redact(exc.message)}, exc.status)
        try:
            # the policy route judges a policy, not with one: it answers while this worker has none
            settings = self.live.current() if needs_policy else default_settings()
        except PolicyUnavailable as exc:  # no policy: kube-apiserver applies the failurePolicy
            m.errors.labels(status="503").inc()
            return _json({"error": redact(f"no policy to judge with: {exc}")}, 503)
        try:
            outcome = decide(req, settings)
        except Exception as exc:  # noqa: BLE001 - the contract: a 500 with a message, never a dropped connection
            m.errors.labels(status="500").inc()
            errlog.exception("internal error on %s uid=%s", endpoint, req.uid,
                             extra={"event": "error", "uid": req.uid, "endpoint": endpoint})
            return _json({"error": f"internal error judging uid {req.uid}: {type(exc).__name__}"}, 500)
        elapsed = self.clock() - started
        # counted before the reply leaves, so a scrape after an answer always includes it
        counted = self.counted
        counted(m.requests, endpoint, outcome.mode, str(outcome.allowed).lower(), str(req.dry_run).lower()).inc()
        counted(m.duration, endpoint).observe(elapsed)
        if outcome.memo is not None:
            counted(m.memo, outcome.memo).inc()
        if outcome.codes and self.ledger.first(req.kind_name, req.obj, outcome.mode, outcome.codes,
                                               dry_run=req.dry_run):
            for code in outcome.codes:
                counted(m.violations, code, outcome.mode).inc()
            if not outcome.allowed and not req.dry_run:
                counted(m.denials, outcome.mode).inc()
        response = Response(outcome.wire if outcome.wire is not None else review.encode(outcome.review),
                            mimetype="application/json")
        if outcome.judged and log.isEnabledFor(logging.INFO):
            # logged once the reply is on the wire (the WSGI server closes the response after writing
            # it): kube-apiserver is not kept waiting for the log line
            response.call_on_close(lambda: _record(endpoint, req, outcome, elapsed, waited))
        return response

    def certificate(self) -> str | None:
        """The serving pair's problem, if any; the expiry gauge set on the way."""
        problem, expiry = self.certs.read()
        if expiry is not None:
            self.metrics.cert_expiry.set(expiry)
        return problem


def _record(endpoint: str, req: review.Request, outcome: admission.Outcome, elapsed: float,
            waited: float | None) -> None:
    """The decision log line of a judged review."""
    log.info("decision", extra={"event": "decision", "fields": {
        "endpoint": endpoint, "uid": req.uid, "namespace": req.namespace,
        "name": req.name, "kind": req.kind_name, "operation": req.operation, "mode": outcome.mode,
        "allowed": outcome.allowed, "codes": list(outcome.codes), "tier": outcome.tier,
        "dry_run": req.dry_run, "latency_ms": round(elapsed * 1000, 3),
        # the whole texts kubectl shows cut to one line each (already redacted in the reply)
        **_whole_message(outcome.review),
        **({"queued_ms": round(waited * 1000, 1)} if waited is not None else {})}})


EXTENSION = "gpu_admission"
"""The key of the app's :class:`ServerState` in ``app.extensions``."""


def state() -> ServerState:
    """The :class:`ServerState` of the app serving the current request."""
    return current_app.extensions[EXTENSION]  # type: ignore[no-any-return]


routes = Blueprint("gpu_admission", __name__)
"""The admission, health and metrics routes; :func:`create_app` registers them with their state."""


@routes.post("/mutate")
def mutate() -> Response:
    s = state()
    return s.handle("mutate", lambda req, p: admission.mutate(req, p, s.inventory(), memo=s.memo))


# /validate/audit is what the webhook configuration uses: kube-apiserver refuses a query string in
# a webhook's service path or URL, so ?mode=audit cannot be configured there
@routes.post("/validate")
@routes.post("/validate/<any(audit, enforce):path_mode>")
def validate(path_mode: str | None = None) -> Response:
    s = state()
    # request.args parses the query string into a MultiDict: only when there is one
    mode = path_mode or (request.args.get("mode", "enforce") if request.environ.get("QUERY_STRING") else "enforce")
    if mode not in MODES:
        s.metrics.errors.labels(status="400").inc()
        return _json({"error": f"mode must be one of {', '.join(MODES)}, got {mode[:20]!r}"}, 400)

    def decide(req: review.Request, policy: Settings) -> admission.Outcome:
        return admission.validate(req, policy, mode=mode, inventory=s.inventory(), parent=s.parent, memo=s.memo)
    return s.handle("validate", decide)


@routes.post("/validate/policy")
def validate_policy() -> Response:
    """The webhook's own policy ConfigMap, judged by the parser the workers load it with, so a
    broken policy is refused on apply (``kubectl apply --dry-run=server`` shows why)."""
    return state().handle("policy", lambda req, _s: policy_review.validate(req), needs_policy=False)


@routes.get("/healthz")
def healthz() -> Response:
    return _json({"status": "ok"})


@routes.get("/readyz")
def readyz() -> Response:
    s = state()
    served = s.live.refresh()
    problem = s.certificate()
    reasons = [problem] if problem else []
    if served is None:
        reasons.append(redact(f"no policy: {s.live.last_error}"))
    body: dict[str, Any] = {"status": "ok" if not reasons else "not ready",
                            "policy": served.source if served is not None else None,
                            "generation": served.generation if served is not None else None}
    if s.live.last_error:
        body["policy_reload_error"] = redact(s.live.last_error)
    if reasons:
        body["reasons"] = reasons
    return _json(body, 200 if not reasons else 503)


@routes.get("/metrics")
def metrics_route() -> Response:
    if request.environ.get(probes.LISTENER) != probes.PROBE:
        # only on the probe port, which the NetworkPolicy opens to the monitoring namespace alone
        return _json({"error": "/metrics is served on the probe port (serve --probe-bind, 8081)"}, 404)
    s = state()
    s.certificate()
    payload, content_type = s.metrics.exposition()
    return Response(payload, mimetype=content_type.split(";")[0], headers={"Content-Type": content_type})


@routes.app_errorhandler(RequestEntityTooLarge)
def too_large(_exc: RequestEntityTooLarge) -> Response:
    s = state()
    s.metrics.errors.labels(status="413").inc()
    return _json({"error": f"body larger than {s.max_body} bytes"}, 413)


@routes.app_errorhandler(HTTPException)
def http_error(exc: HTTPException) -> Response:
    return _json({"error": exc.description or exc.name}, exc.code or 500)


@routes.app_errorhandler(Exception)
def unexpected(exc: Exception) -> Response:  # pragma: no cover - last resort, routes catch their own
    errlog.exception("unhandled error", extra={"event": "error", "uid": _peek_uid(request.get_data())})
    return _json({"error": f"internal error: {type(exc).__name__}"}, 500)


def create_app(settings: Settings | LiveSettings | None = None, *, max_body: int = DEFAULT_MAX_BODY,
               cert_file: str | Path | None = None, key_file: str | Path | None = None,
               metrics: Metrics | None = None, clock: Callable[[], float] = time.perf_counter,
               inventory: Callable[[], Inventory | None] | None = None,
               max_queue_age: float | None = DEFAULT_MAX_QUEUE_AGE,
               parent: "admission.Parent | None" = None) -> Flask:
    """Build the admission server app. ``settings``: fixed Settings, a LiveSettings that reloads its
    file, or None for the embedded default. ``cert_file``/``key_file`` are only read for readiness.
    ``inventory``: returns the current GPU node inventory (the server's node watch), or None.
    ``max_queue_age``: seconds a review may have waited for a worker thread (``webhook.server.gunicorn.overload``)
    before it is refused with 503 instead of judged; None or 0 never refuses. ``parent``: reads the
    object of a scale-up (``webhook.server.parents``), so its reply can say what the new pods meet."""
    if isinstance(settings, LiveSettings):
        live = settings
    else:
        live = LiveSettings.fixed(settings if settings is not None else default_settings())
    m = metrics or Metrics()
    live.set_hook(lambda result, _err: (m.reloads.labels(result=result).inc(),
                                        m.config_valid.set(1 if result == "success" else 0)))
    if live.last_error:  # started on the last good copy, or on nothing, because the file does not load
        m.config_valid.set(0)
    shared = ServerState(live=live, metrics=m, memo=VerdictCache(), ledger=denials.Ledger(),
                         certs=_CertStatus(cert_file, key_file), inventory=inventory or (lambda: None),
                         parent=parent, clock=clock, max_body=max_body, max_queue_age=max_queue_age)
    live.on_change(shared.serving)
    app = _App("gpu_admission")
    # one byte more than allowed: a chunked body has no Content-Length to refuse up front, and werkzeug
    # stops reading it at the limit without an error, so handle() must see that there was more
    app.config["MAX_CONTENT_LENGTH"] = max_body + 1
    app.extensions[EXTENSION] = shared
    app.register_blueprint(routes)
    return app
