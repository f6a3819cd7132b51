"""``gpu-admission serve``: the Flask app under gunicorn over TLS.

Why these choices:
- no thread waits for a client: a request is read whole by the worker's poller within
  ``read_deadline`` of its first byte before a thread takes it up (``webhook.server.gunicorn.reading``),
  so slow or stalled clients (slowloris) cannot hold the threads;
- threaded workers (``gthread``): kube-apiserver keeps connections alive, so a worker must hold
  idle keep-alive connections without blocking; sync workers would also pay a TLS handshake per request;
- connections balanced over the workers (``webhook.server.gunicorn.balance``): a connection stays with the worker
  that accepted it and the work is CPU-bound, so a busy worker leaves new ones to an idle one;
- TLS comes from :mod:`webhook.server.gunicorn.tls` through gunicorn's ``ssl_context`` hook, so a rotated certificate
  is picked up by new connections without a restart;
- the certificate pair is loaded in the master and inherited by every worker it forks (refreshed
  before each fork), so a worker that starts, or restarts after a crash, while the files on disk are
  half-written or invalid keeps the last good pair instead of failing handshakes;
- the policy is not the master's: every worker loads the file and keeps its last good copy on disk
  (``webhook.server.live_settings.LastGood``, under ``$TMPDIR``: the pod's emptyDir), and a worker that
  cannot load the file serves that copy, so every worker, one forked after a failed reload too, serves
  the same last good policy (the master's copy from start-up was a second, older truth). With neither a
  loadable file nor a copy a worker boots without a policy and stays unready (``/readyz`` 503 with the
  reason) until the file loads: never a failed boot (which makes gunicorn halt the whole server) nor an
  exit that the kubelet would turn into a crash loop;
- the kube-scheduler extender is off unless ``extender_bind`` is set; then it is a second listener of the
  same server, with its own TLS context and routes (:mod:`webhook.server.gunicorn.listeners`);
- several workers share metrics through ``PROMETHEUS_MULTIPROC_DIR``, set before any worker starts;
- SIGTERM is gunicorn's graceful shutdown: listeners close, in-flight reviews complete within
  ``graceful_timeout``.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gunicorn.app.base import BaseApplication

from webhook.core.settings import Settings
from webhook.server import logs, probes
from webhook.server.gunicorn import balance, listeners, overload, reading
from webhook.server import DEFAULT_MAX_QUEUE_AGE
from webhook.server.gunicorn.tls import RotatingContext
from webhook.server.live_settings import LastGood

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client reads this when it is IMPORTED, so it must be set before webhook.server.metrics is
imported in this process (hence no module-level import of webhook.server.metrics here)."""


@dataclass(frozen=True)
class ServeOptions:
    cert: Path
    key: Path
    bind: str = "0.0.0.0:8443"
    workers: int = 2
    threads: int = 8
    config: Path | None = None
    client_ca: Path | None = None
    log_level: str = "info"
    keepalive: int = 75
    """Seconds an idle keep-alive connection is held: above kube-apiserver's reuse window."""
    graceful_timeout: int = 20
    timeout: int = 30
    max_body: int = 4 * 1024 * 1024
    reload_interval: float = 1.0
    inventory: str = "auto"
    """GPU node inventory: ``auto`` (watch Nodes when an in-cluster or kubeconfig client loads and RBAC
    allows listing nodes), ``on`` (same, but keep retrying and say so loudly), ``off``."""
    kubeconfig: str | None = None
    max_queue_age: float = DEFAULT_MAX_QUEUE_AGE
    """Seconds a review may wait for a worker thread before it is refused with 503 (0: never), so
    nothing the apiserver has given up on is judged (``webhook.server.gunicorn.overload``)."""
    state_dir: Path | None = None
    """Where the last good copy of the policy file is kept (default ``$TMPDIR/gpu-admission``; in the
    pod the emptyDir at /tmp, so a restarted container finds it)."""
    read_deadline: float = reading.DEFAULT_READ_DEADLINE
    """Seconds from a request's first byte (a new connection's: its TLS ClientHello) until the request
    must be whole, headers and body; a connection past it is closed (``webhook.server.gunicorn.reading``)."""
    probe_bind: str | None = None
    """HOST:PORT of the plain-HTTP probe port (``/healthz``, ``/readyz``, ``/metrics``), served by a
    thread of its own in every worker (``webhook.server.probes``); None: none (``serve`` defaults to
    port 8081 on ``bind``'s host). ``/metrics`` is only served there."""
    extender_bind: str | None = None
    """HOST:PORT of the kube-scheduler extender's own listener (``/scheduler/filter``,
    ``/scheduler/prioritize``); None: no extender, and the admission port serves no ``/scheduler``."""
    extender_client_ca: Path | None = None
    """Extender callers may authenticate with a client certificate signed by this CA (kube-scheduler's
    ``tlsConfig.certFile``/``keyFile``)."""
    extender_token_file: Path | None = None
    """Extender callers may authenticate with ``Authorization: Bearer`` and the token in this file
    (a mounted Secret, re-read when it changes)."""


def _ssl_context_hook(rotating: RotatingContext, extender: RotatingContext | None = None
                      ) -> Callable[[Any, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """gunicorn calls this for every new connection. ``rotating`` was built in the master, so each
    worker owns a forked copy that starts from a pair that loaded, never from the files as they are
    at its first connection (possibly mid-rotation). ``extender``: the context of the extender's
    listener (same pair, its own client CA), chosen by the listener of the connection."""

    def hook(_conf: Any, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        if extender is not None and listeners.current() == listeners.EXTENDER:
            return extender.context()
        return rotating.context()

    return hook


def _app_factory(options: ServeOptions, last_good: LastGood | None) -> Any:
    from webhook.core import settings as settings_mod
    from webhook.server.app import create_app
    from webhook.server.live_settings import LiveSettings

    live = LiveSettings(options.config, interval=options.reload_interval, last_good=last_good)
    # the inventory is indexed by the policy's label key: by the default's while there is no policy (it
    # is re-indexed when the policy arrives, and no review is judged before)
    watch = _start_node_watch(options, lambda: live.peek() or settings_mod.default())
    from webhook.server.parents import ParentReader

    # the object of a scale-up is read on the first one (credentials as the node watch loads them)
    app = create_app(live, max_body=options.max_body, cert_file=options.cert, key_file=options.key,
                     inventory=watch.current if watch is not None else None, max_queue_age=options.max_queue_age,
                     parent=ParentReader(options.kubeconfig))
    live.watch_in_background(options.reload_interval)  # after create_app installed the metrics hook
    if options.extender_bind is None:
        return app
    from webhook.server import extender

    # the same body limit as /validate: node lists past it are refused (413), never read whole
    scheduler = extender.create_app(live, max_body=options.max_body, token_file=options.extender_token_file,
                                    client_ca=options.extender_client_ca is not None,
                                    reload_interval=options.reload_interval)
    return listeners.dispatch(app, scheduler)


def _start_node_watch(options: ServeOptions, settings: Callable[[], Settings]) -> Any:
    """Start this worker's node watch (no API call on the request path: reviews read its snapshot)."""
    if options.inventory == "off":
        return None
    import logging

    from webhook.server.node_watch import NodeWatch, load_client

    log = logging.getLogger("gpu_admission.inventory")
    try:
        api = load_client(options.kubeconfig)
    except Exception as exc:  # noqa: BLE001 - no cluster credentials: run without inventory
        level = logging.ERROR if options.inventory == "on" else logging.INFO
        log.log(level, "node inventory off: no Kubernetes credentials (%s)", exc, extra={"event": "inventory_off"})
        return None
    watch = NodeWatch(api, settings)
    watch.start()
    return watch


def _child_exit(_arbiter: Any, worker: Any) -> None:
    from webhook.server.metrics import mark_worker_dead

    mark_worker_dead(worker.pid)
    balance.child_exit(worker.pid)


class AdmissionServer(BaseApplication):
    """gunicorn application with its configuration given in code (no gunicorn.conf.py to forget)."""

    def __init__(self, options: ServeOptions,
                 app_factory: Callable[[ServeOptions, LastGood | None], Any] | None = None) -> None:
        self.options = options
        # which WSGI app each worker loads; only the benchmark's floor app passes another one, so that
        # it runs under exactly this gunicorn/TLS configuration
        self.app_factory = app_factory or _app_factory
        # master-side state, inherited by every worker through fork (see the module docstring)
        self.tls = RotatingContext(options.cert, options.key, options.client_ca, interval=options.reload_interval)
        self.extender_tls = RotatingContext(
            options.cert, options.key, options.extender_client_ca, interval=options.reload_interval,
            verify_mode=ssl.CERT_OPTIONAL) if options.extender_bind is not None else None
        # the workers' shared last good policy (a file, not a value inherited at fork: see the docstring)
        self.last_good = LastGood.for_config(options.config, options.state_dir) if options.config else None
        # the probe port is bound here, once, and inherited by every worker (webhook.server.probes)
        self.probe_socket = probes.listen(options.probe_bind) if options.probe_bind else None
        balance.install(options.workers)
        super().__init__()

    def _starting(self, _arbiter: Any) -> None:
        logs.configure(self.options.log_level)
        if self.probe_socket is not None:
            import logging

            logging.getLogger("gpu_admission.server").info(
                "probes and metrics at http://%s (/healthz, /readyz, /metrics)", probes.address(self.probe_socket),
                extra={"event": "probes_listening"})

    def _before_fork(self, _arbiter: Any, _worker: Any) -> None:
        """Refresh the pairs the next worker inherits; keep the old ones when the files do not load."""
        self.tls.context()
        if self.extender_tls is not None:
            self.extender_tls.context()

    def load_config(self) -> None:
        o = self.options
        settings: dict[str, Any] = {
            # the extender's listener second: webhook.server.gunicorn.listeners tells them apart by position
            "bind": [o.bind] + ([o.extender_bind] if o.extender_bind is not None else []),
            "workers": o.workers,
            "threads": o.threads,
            # gthread whose workers share keep-alive connections evenly (webhook.server.gunicorn.balance): without it
            # one worker can hold every connection of kube-apiserver and serve on one core
            "worker_class": "webhook.server.gunicorn.balance.BalancedThreadWorker",
            "certfile": str(o.cert),
            "keyfile": str(o.key),
            "ssl_context": _ssl_context_hook(self.tls, self.extender_tls),
            "pre_fork": lambda arbiter, worker: self._before_fork(arbiter, worker),
            "keepalive": o.keepalive,
            "graceful_timeout": o.graceful_timeout,
            "timeout": o.timeout,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": o.log_level,
            "proc_name": "gpu-admission",
            # no gunicornc control socket: it would be a second, unauthenticated way to steer the
            # server, and it writes under $HOME, which a read-only root filesystem does not allow
            "control_socket_disable": True,
            # worker heartbeat files on tmpfs, not on the (read-only) root filesystem
            "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
            "child_exit": _child_exit,
            "post_worker_init": lambda _worker: logs.configure(o.log_level),
            "on_starting": self._starting,
        }
        # requests read whole in the poller within a deadline: no thread ever waits for a client
        settings["worker_class"] = reading.reading_worker(
            balance.BalancedThreadWorker, read_deadline=o.read_deadline, max_body=o.max_body)
        # every request stamped with the moment it was queued for a thread, for load shedding
        settings["worker_class"] = overload.stamped_worker(settings["worker_class"], o.max_queue_age)
        if o.extender_bind is not None:  # which listener each connection came in on, for TLS and routing
            settings["worker_class"] = listeners.routed_worker(settings["worker_class"])
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        app = self.app_factory(self.options, self.last_good)
        if self.probe_socket is not None:  # in the worker: its own probe thread, on the inherited socket
            probes.ProbeServer(self.probe_socket, app).start()
        return app


def prepare_metrics_dir() -> Path:
    """A clean multi-process metrics directory (kept if the operator set one)."""
    existing = os.environ.get(MULTIPROC_ENV)
    if existing:
        path = Path(existing)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        return path
    path = Path(tempfile.mkdtemp(prefix="gpu-admission-metrics-"))
    os.environ[MULTIPROC_ENV] = str(path)
    return path


def run(options: ServeOptions) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""
    owned = MULTIPROC_ENV not in os.environ
    metrics_dir = prepare_metrics_dir()
    master = os.getpid()
    try:
        AdmissionServer(options).run()
    finally:
        # workers are forked inside run() and leave through sys.exit, which unwinds through here too:
        # only the master may remove the directory the other workers still write to
        if owned and os.getpid() == master:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0
