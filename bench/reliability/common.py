"""Shared by the reliability scripts: start ``gpu-admission serve`` as the Deployment runs it, drive it
with an asyncio HTTPS client that behaves like kube-apiserver's webhook client, sample memory, wait
for the machine to be quiet, and write results.

The client (``Load``):
- keep-alive HTTP/1.1 connections over TLS that verify the serving certificate, reused when idle and
  opened on demand (kube-apiserver keeps a pool per webhook host);
- every request has the webhook's ``timeoutSeconds`` (3 s) as its deadline; a request past it is
  abandoned and its connection closed, as Go's client does when the request context ends;
- a request that finds its idle keep-alive connection closed by the server is sent again on a new
  connection (Go's transport reads idle connections, sees the close and dials anew);
- ``retry``: also one more try on a *new* connection after any connection-level failure before the
  first byte of the answer (reset, refused, EOF). kube-apiserver itself does not do this for a POST
  it has written (client-go retries non-GET calls only on a 429/5xx with Retry-After), so this models
  a client that treats admission reviews as the side-effect-free calls they are (``sideEffects: None``);
- open loop (``rate``: arrivals at a fixed rate, whatever the answers) or closed loop
  (``concurrency``: that many requests in flight, back to back) for measuring capacity.

No third-party package: asyncio streams, ssl, json.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
import random
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
TIMEOUT = 3.0
"""The webhook configurations' timeoutSeconds (manifests/base/*webhookconfiguration.yaml)."""
KEY = "nvidia.com/gpu.product"


# ----------------------------------------------------------------------------- reviews


def review(obj: dict[str, Any], uid: str = "uid") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": obj["metadata"]["name"],
        "namespace": "ai", "operation": "CREATE", "userInfo": {"username": "system:serviceaccount:ai:deployer"},
        "object": obj, "oldObject": None, "dryRun": False, "options": None}}


def vllm_pod(name: str = "llama", *, pin: str | None = None, tp: int = 4) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", str(tp)],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        "resources": {"limits": {"nvidia.com/gpu": str(tp)}, "requests": {"cpu": "8", "memory": "64Gi"}}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "schedulerName": "default-scheduler",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}]}
    if pin:
        spec["nodeSelector"] = {KEY: pin}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ai"}, "spec": spec}


@dataclass(frozen=True)
class Mix:
    """A small mix like the apiserver sends: mutate unpinned pods, validate pinned and wrong ones."""

    items: tuple[tuple[str, bytes], ...]

    @classmethod
    def default(cls) -> "Mix":
        unpinned = vllm_pod("llama")
        pinned = vllm_pod("llama", pin="NVIDIA-A100-SXM4-80GB")
        wrong = vllm_pod("llama", pin="NVIDIA-L40S")
        small = vllm_pod("llama-8b", tp=1)
        small["spec"]["containers"][0]["command"][2] = "meta-llama/Llama-3.1-8B-Instruct"
        return cls(tuple((path, json.dumps(review(obj, "UID"), separators=(",", ":")).encode()) for path, obj in (
            ("/mutate", unpinned), ("/validate", pinned), ("/validate", wrong), ("/mutate", small),
            ("/validate", small))))

    @classmethod
    def heavy(cls) -> "Mix":
        """The default mix plus reviews of 60-container pods (~8 ms each), so that a worker killed at
        any moment has reviews in flight."""
        big = vllm_pod("llama")
        big["spec"]["containers"] = [dict(big["spec"]["containers"][0], name=f"c{i}") for i in range(60)]
        extra = tuple((path, json.dumps(review(big, "UID"), separators=(",", ":")).encode())
                      for path in ("/mutate", "/validate"))
        return cls(cls.default().items + extra * 2)

    def pick(self, i: int, uid: str) -> tuple[str, bytes]:
        path, body = self.items[i % len(self.items)]
        return path, body.replace(b'"uid":"UID"', f'"uid":"{uid}"'.encode(), 1)


# ----------------------------------------------------------------------------- the server


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in (8443, 18443, 28443, 38443):
            return port


def make_certs(out: Path, ca: tuple[bytes, bytes] | None = None) -> Any:
    from webhook.cli import certs

    issued = certs.issue(service="gpu-admission", namespace="gpu-admission", ips=["127.0.0.1"], ca=ca)
    certs.write(issued, out)
    return issued


@dataclass
class Server:
    proc: subprocess.Popen
    port: int
    certs: Path
    stderr_path: Path
    workdir: Path
    probe_port: int | None = None
    """The plain-HTTP probe port (/healthz, /readyz, /metrics); None for a tree without one."""

    @property
    def ca(self) -> Path:
        return self.certs / "ca.crt"

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def rss_mib(self) -> dict[int, float]:
        out = {}
        for pid in [self.proc.pid, *self.workers()]:
            kib = rss_kib(pid)
            if kib is not None:
                out[pid] = kib / 1024
        return out

    def stop(self, timeout: float = 25.0) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)


def start_server(workdir: Path, *extra: str, workers: int = 2, threads: int = 8, port: int | None = None,
                 certs_dir: Path | None = None, config: Path | None = None, log_level: str = "info",
                 source: Path | None = None) -> Server:
    """``gpu-admission serve`` with the Deployment's workers and threads (2 x 8) on loopback.
    ``source``: serve the ``webhook`` package of another tree (``git archive REV webhook | tar -x``),
    for before/after comparisons."""
    workdir.mkdir(parents=True, exist_ok=True)
    certs_dir = certs_dir or workdir / "certs"
    if not (certs_dir / "tls.crt").exists():
        make_certs(certs_dir)
    port = port or free_port()
    stderr_path = workdir / f"server-{port}.stderr"
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(TMPDIR=str(workdir), PYTHONUNBUFFERED="1")
    if source is not None:
        env["PYTHONPATH"] = str(source)
    argv = [sys.executable, "-m", "webhook", "serve", "--cert", str(certs_dir / "tls.crt"),
            "--key", str(certs_dir / "tls.key"), "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
            "--threads", str(threads), "--inventory", "off", "--log-level", log_level]
    if config is not None:
        argv += ["--config", str(config)]
    probe_port = None
    if "--probe-bind" in ((source or ROOT) / "webhook/cli/main.py").read_text():  # older trees have none
        probe_port = free_port()
        argv += ["--probe-bind", f"127.0.0.1:{probe_port}"]
    proc = subprocess.Popen([*argv, *extra], cwd=source or ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=stderr_path.open("wb"), start_new_session=True)
    server = Server(proc, port, certs_dir, stderr_path, workdir, probe_port)
    wait_ready(server, workers)
    return server


def client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def wait_ready(server: Server, workers: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    ctx = client_context(server.ca)
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"server exited {server.proc.returncode}:\n{server.stderr()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=2) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200") and len(server.workers()) >= workers \
                        and server.stderr().count("Booting worker") >= workers:
                    time.sleep(1.0)  # every worker has loaded the app
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready:\n{server.stderr()[-3000:]}")


def booted(server: Server) -> list[int]:
    return [int(p) for p in re.findall(r"Booting worker with pid: (\d+)", server.stderr())]


async def kill_worker_at(server: Server, at: float, log: list[dict[str, Any]], index: int = 0) -> None:
    """SIGKILL (what the OOM killer sends) a worker at ``at`` (monotonic) and log when gunicorn's
    replacement has booted."""
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    workers = server.workers()
    victim = sorted(workers)[index % len(workers)]
    before = set(booted(server))
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    entry: dict[str, Any] = {"instance": server.port, "pid": victim, "t": killed}
    log.append(entry)
    while time.monotonic() - killed < 20:
        fresh = set(booted(server)) - before
        if fresh:
            entry["replacement_pid"] = fresh.pop()
            entry["replacement_booted_after_s"] = round(time.monotonic() - killed, 2)
            break
        await asyncio.sleep(0.05)


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return sorted(out)


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------- the client


@dataclass
class Result:
    sent: float  # monotonic time the request was due (open loop) or sent (closed loop)
    latency: float  # seconds from the moment the client made the call until the answer (or the failure)
    status: int  # HTTP status; 0 = no answer
    outcome: str  # "ok" (200 with the request's uid), "shed" (503), "timeout", "reset", "error:..."
    retried: bool = False
    server: int = 0  # port of the instance that answered
    allowed: bool | None = None  # the review's verdict, when answered
    done: float = 0.0  # monotonic time the answer (or failure) came
    lag: float = 0.0  # how late the client made the call after it was due (the load generator's own delay)


_UID = re.compile(rb'"response":\{"uid":"([^"]*)"')


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        self.reader, self.writer, self.port = reader, writer, port
        self.used = 0

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001
            pass


class _Failure(Exception):
    def __init__(self, kind: str, answered_bytes: bool) -> None:
        super().__init__(kind)
        self.kind, self.answered_bytes = kind, answered_bytes


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    body = await reader.readexactly(int(m.group(1))) if m else b""
    close = bool(re.search(rb"(?im)^connection:\s*close", head))
    return status, body, close


class Load:
    """kube-apiserver-like HTTPS client for one or more server instances (a Service: a new connection
    goes to a random instance)."""

    def __init__(self, ports: Sequence[int], ca: Path, mix: Mix | None = None, *, timeout: float = TIMEOUT,
                 retry: bool = False, new_connection_every: int = 0, max_idle: int = 4096,
                 max_in_flight: int = 2000) -> None:
        self.ports, self.ctx = list(ports), client_context(ca)
        self.mix = mix or Mix.default()
        self.timeout, self.retry = timeout, retry
        self.new_connection_every = new_connection_every
        self.idle: list[_Conn] = []
        self.max_idle = max_idle
        self.results: list[Result] = []
        self.counter = 0
        self.handshakes = 0
        self.handshake_failures: list[str] = []
        self.check: Callable[[str, int, bytes], str | None] | None = None
        """Optional: (path, status, body) -> an error outcome, or None when the answer is right."""
        self.idle_closed_by_server = 0
        self.max_in_flight = max_in_flight
        """Calls on the wire at once (one connection each, HTTP/1.1); more wait for a connection, within
        their deadline (a client's connection pool is finite)."""
        self._slots: asyncio.Semaphore | None = None
        self.record_peer = False
        self.peers: dict[bytes, int] = {}
        """DER of each serving certificate seen at a handshake -> handshakes (with ``record_peer``)."""

    async def _connect(self) -> _Conn:
        port = random.choice(self.ports)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=self.ctx,
                                                           server_hostname="127.0.0.1", limit=1 << 22)
        except ssl.SSLError as exc:
            self.handshake_failures.append(f"{time.monotonic():.3f} {exc!r}")
            raise _Failure("tls", False) from None
        except (ConnectionRefusedError, ConnectionResetError, OSError) as exc:
            name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
            raise _Failure(f"connect:{name}", False) from None
        self.handshakes += 1
        if self.record_peer:
            ssl_object = writer.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            if der:
                self.peers[der] = self.peers.get(der, 0) + 1
        return _Conn(reader, writer, port)

    def _idle(self) -> _Conn | None:
        """An idle connection the server has not closed (Go's transport keeps reading idle connections
        and drops a closed one before reuse; asyncio has read the EOF too when the peer closed)."""
        while self.idle:
            conn = self.idle.pop()
            if conn.reader.at_eof() or conn.writer.is_closing():
                conn.close()
                self.idle_closed_by_server += 1
                continue
            return conn
        return None

    async def _once(self, path: str, body: bytes, uid: str, fresh: bool = False) -> tuple[int, bytes, int]:
        conn = (None if fresh else self._idle()) or await self._connect()
        reused = conn.used > 0
        head = (f"POST {path} HTTP/1.1\r\nHost: gpu-admission.gpu-admission.svc:443\r\n"
                f"Content-Type: application/json\r\nAccept: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        try:
            conn.writer.write(head + body)
            await conn.writer.drain()
            status, answer, close = await _read_response(conn.reader)
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError) as exc:
            conn.close()
            partial = isinstance(exc, asyncio.IncompleteReadError) and bool(exc.partial)
            raise _Failure("reset" if not reused else "reset-reused", partial) from None
        except asyncio.CancelledError:
            conn.close()  # the deadline passed: Go closes the connection of an abandoned request
            raise
        conn.used += 1
        if close or (self.new_connection_every and conn.used >= self.new_connection_every) \
                or len(self.idle) >= self.max_idle:
            conn.close()
        else:
            self.idle.append(conn)
        return status, answer, conn.port

    async def _slot_and_once(self, path: str, body: bytes, uid: str, fresh: bool) -> tuple[int, bytes, int]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        async with self._slots:
            return await self._once(path, body, uid, fresh)

    async def request(self, due: float) -> Result:
        """One admission call, made now (``due`` is when it was meant to be made): the deadline counts
        from now, as kube-apiserver's does from the moment it calls; a late start is recorded as ``lag``."""
        started = time.monotonic()
        lag = started - due
        deadline = started + self.timeout
        self.counter += 1
        uid = f"u{self.counter}"
        path, body = self.mix.pick(self.counter, uid)
        retried = False
        while True:
            try:
                status, answer, port = await asyncio.wait_for(
                    self._slot_and_once(path, body, uid, retried), timeout=max(0.001, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                return self._done(Result(due, time.monotonic() - started, 0, "timeout", retried, lag=lag))
            except _Failure as f:
                # ``retry``: a call that failed at the connection level before any answer byte is
                # retried once, on a new connection
                if self.retry and not f.answered_bytes and not retried and time.monotonic() < deadline:
                    retried = True
                    continue
                return self._done(Result(due, time.monotonic() - started, 0, f.kind, retried, lag=lag))
            latency = time.monotonic() - started
            if status == 503:
                return self._done(Result(due, latency, status, "shed", retried, port, lag=lag))
            if status != 200:
                return self._done(Result(due, latency, status, f"http-{status}", retried, port, lag=lag))
            m = _UID.search(answer)  # a regex, not json.loads: the generator must stay cheap under overload
            if m is None or m.group(1).decode() != uid:
                return self._done(Result(due, latency, status, "bad-answer", retried, port, lag=lag))
            allowed = b'"allowed":true' in answer
            if self.check is not None:
                wrong = self.check(path, status, answer)
                if wrong:
                    return self._done(Result(due, latency, status, wrong, retried, port, allowed, lag=lag))
            return self._done(Result(due, latency, status, "ok", retried, port, allowed, lag=lag))

    def _done(self, r: Result) -> Result:
        r.done = time.monotonic()
        self.results.append(r)
        return r

    async def open_loop(self, rate: float, seconds: float, start: float | None = None) -> list[Result]:
        """Requests due at ``rate`` per second for ``seconds``, each on its own task (open loop)."""
        start = start or time.monotonic()
        tasks: set[asyncio.Task] = set()
        n = int(rate * seconds)
        first = len(self.results)
        for i in range(n):
            due = start + i / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            t = asyncio.create_task(self.request(due))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return self.results[first:]

    async def closed_loop(self, concurrency: int, seconds: float) -> list[Result]:
        first = len(self.results)
        end = time.monotonic() + seconds

        async def client() -> None:
            while time.monotonic() < end:
                await self.request(time.monotonic())

        await asyncio.gather(*(client() for _ in range(concurrency)))
        return self.results[first:]

    def close(self) -> None:
        for c in self.idle:
            c.close()
        self.idle.clear()


def _child_open_loop(args: tuple[Any, ...], out: Any) -> None:
    ports, ca, mix, kwargs, rate, seconds, start = args
    load = Load(ports, ca, mix, **kwargs)
    results = asyncio.run(load.open_loop(rate, seconds, start))
    load.close()
    out.send(([(r.sent, r.latency, r.status, r.outcome, r.retried, r.server, r.allowed, r.done, r.lag)
               for r in results], load.handshakes, len(load.handshake_failures)))
    out.close()


def open_loop_processes(ports: Sequence[int], ca: Path, rate: float, seconds: float, start: float, *,
                        processes: int = 2, mix: Mix | None = None, **kwargs: Any) -> tuple[list[Result], int]:
    """``Load.open_loop`` split over ``processes`` client processes (one asyncio loop cannot make
    thousands of TLS calls a second on its own), all on the same schedule (CLOCK_MONOTONIC is
    system-wide). Returns the results and the number of TLS handshakes the clients made."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for i in range(processes):
        parent, child = ctx.Pipe(duplex=False)
        # interleaved schedules: process i sends requests i, i+P, i+2P, ... of the overall sequence
        proc = ctx.Process(target=_child_open_loop, args=(
            (list(ports), ca, mix, kwargs, rate / processes, seconds, start + i / rate), child))
        proc.start()
        child.close()
        pipes.append(parent)
        procs.append(proc)
    results: list[Result] = []
    handshakes = 0
    for parent in pipes:
        rows, hs, _failures = parent.recv()
        handshakes += hs
        results.extend(Result(*row) for row in rows)
    for proc in procs:
        proc.join(timeout=60)
    results.sort(key=lambda r: r.sent)
    return results, handshakes


# ----------------------------------------------------------------------------- the Go client

LOADGEN = Path(__file__).resolve().parent / "loadgen"


def loadgen_binary() -> Path:
    """``bench/reliability/loadgen`` built with the local Go toolchain (standard library only, no
    module download), cached under ~/.cache/gpu-admission and rebuilt when its source changes."""
    import hashlib
    import shutil

    source = (LOADGEN / "main.go").read_bytes()
    out = Path.home() / ".cache" / "gpu-admission" / f"loadgen-{hashlib.sha256(source).hexdigest()[:12]}"
    if out.exists():
        return out
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        raise RuntimeError("the high-rate runs need a Go toolchain (go build of bench/reliability/loadgen)")
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", CGO_ENABLED="0")
    subprocess.run([go, "build", "-o", str(out), "."], cwd=LOADGEN, env=env, check=True, timeout=600)
    return out


def go_closed_loop(port: int, ca: Path, concurrency: int, seconds: float, *, work: Path | None = None) -> float:
    """Capacity: answers per second with ``concurrency`` calls in flight back to back (Go client)."""
    start = time.monotonic() + 0.2
    results = go_open_loop([port], ca, 1, seconds, start, work=work, concurrency=concurrency)
    return sum(1 for r in results if r.outcome == "ok") / seconds


def go_open_loop(ports: Sequence[int], ca: Path, rate: float, seconds: float, start: float, *,
                 mix: Mix | None = None, retry: bool = False, work: Path | None = None,
                 concurrency: int = 0) -> list[Result]:
    """Open-loop load at ``rate`` from ``start`` (time.monotonic) for ``seconds`` with Go's net/http
    client (``bench/reliability/loadgen``): what kube-apiserver calls webhooks with, and cheap enough
    to make thousands of TLS calls a second next to the server on a 2-core machine."""
    mix = mix or Mix.default()
    work = work or Path(os.environ.get("TMPDIR", "/tmp"))
    bodies = work / f"calls-{os.getpid()}.txt"
    bodies.write_bytes(b"".join(path.encode() + b"\n" + body + b"\n" for path, body in mix.items))
    start_unix_ns = time.time_ns() + int((start - time.monotonic()) * 1e9)
    argv = [str(loadgen_binary()), "-ports", ",".join(str(p) for p in ports), "-ca", str(ca), "-bodies", str(bodies),
            "-rate", str(rate), "-duration", f"{seconds}s", "-start", str(start_unix_ns), "-timeout", f"{TIMEOUT}s"]
    if retry:
        argv.append("-retry")
    if concurrency:
        argv += ["-concurrency", str(concurrency)]
    done = subprocess.run(argv, capture_output=True, timeout=seconds + 120)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed: {done.stderr.decode()[-2000:]}")
    results = []
    for line in done.stdout.splitlines():
        due_ns, lag_ns, latency_ns, status, outcome, allowed = line.split()
        due = start + int(due_ns) / 1e9
        lag, latency = int(lag_ns) / 1e9, int(latency_ns) / 1e9
        results.append(Result(due, latency, int(status), outcome.decode(), outcome.startswith(b"retried-"),
                              0, allowed == b"true", due + lag + latency, lag))
    results.sort(key=lambda r: r.sent)
    return results


# ----------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    data = sorted(values)
    k = (len(data) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(data[lo] + (data[hi] - data[lo]) * (k - lo))


def summarize(results: Sequence[Result], seconds: float | None = None) -> dict[str, Any]:
    ok = [r.latency for r in results if r.outcome == "ok"]
    outcomes: dict[str, int] = {}
    for r in results:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    out: dict[str, Any] = {"requests": len(results), "outcomes": outcomes,
                           "ok_p50_ms": round(percentile(ok, 50) * 1000, 1) if ok else None,
                           "ok_p99_ms": round(percentile(ok, 99) * 1000, 1) if ok else None,
                           "ok_max_ms": round(max(ok) * 1000, 1) if ok else None,
                           "ok_over_timeout": sum(1 for x in ok if x > TIMEOUT),
                           "retried": sum(1 for r in results if r.retried),
                           "client_lag_p99_ms": round(percentile([r.lag for r in results], 99) * 1000, 1)
                           if results else None}
    if seconds:
        out["ok_per_s"] = round(len(ok) / seconds, 1)
    return out


def per_second(results: Sequence[Result], start: float, seconds: int) -> list[dict[str, Any]]:
    rows = []
    for s in range(seconds):
        window = [r for r in results if start + s <= r.sent < start + s + 1]
        ok = [r.latency for r in window if r.outcome == "ok"]
        rows.append({"t": s, "sent": len(window), "ok": len(ok),
                     "shed": sum(1 for r in window if r.outcome == "shed"),
                     "timeout": sum(1 for r in window if r.outcome == "timeout"),
                     "failed": sum(1 for r in window if r.outcome not in ("ok", "shed", "timeout")),
                     "p50_ms": round(percentile(ok, 50) * 1000, 1) if ok else None,
                     "p99_ms": round(percentile(ok, 99) * 1000, 1) if ok else None})
    return rows


# ----------------------------------------------------------------------------- the machine


OTHERS = re.compile(r"bench[./](run|server_bench|engine_bench|e2e_latency|check_bench)|(^|/)wrk( |$)|tests/e2e|pytest.*-m e2e")


def others_busy() -> list[str]:
    """Heavy processes of other developers (their benchmarks) that our load would distort."""
    me = {os.getpid(), os.getppid()}
    busy = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in me:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if cmd and OTHERS.search(cmd) and "reliability" not in cmd:
            busy.append(f"{entry.name} {cmd[:120]}")
    return busy


def wait_quiet(max_wait: float = 1200.0, poll: float = 30.0) -> dict[str, Any]:
    """Wait (polling every ``poll`` s, at most ``max_wait``) until no other benchmark runs."""
    started = time.monotonic()
    waited_for: list[str] = []
    while True:
        busy = others_busy()
        if not busy:
            return {"waited_s": round(time.monotonic() - started), "waited_for": waited_for[:5],
                    "loadavg": os.getloadavg()}
        if time.monotonic() - started > max_wait:
            return {"waited_s": round(time.monotonic() - started), "waited_for": waited_for[:5],
                    "still_busy": busy[:5], "loadavg": os.getloadavg()}
        waited_for.extend(b for b in busy if b not in waited_for)
        print(f"waiting for other benchmarks to finish: {busy[:2]}", flush=True)
        time.sleep(poll)


def provenance(tree: Path = ROOT) -> dict[str, Any]:
    """The commit a figure is measured on, and whether the served code differed from it: a figure
    without its commit cannot be compared with the next one (issue 25, point 9)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                                  timeout=10, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short=9", "HEAD").strip()
    # code only: the results files a run writes are not a change of what was measured
    changed = [line[3:] for line in git("status", "--porcelain", "--", "webhook", "bench",
                                        ":(exclude)bench/reliability/results", ":(exclude)bench/results").splitlines()
               if line.strip()]
    return {"commit": commit or "unknown", "commit_date": git("show", "-s", "--format=%cs", "HEAD").strip() or None,
            "uncommitted_changes": changed[:10]}


def save(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"name": name, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "nproc": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()], **provenance(), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def mean(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.fmean(data) if data else math.nan


@dataclass
class MemorySampler:
    server: Server
    samples: list[tuple[float, float]] = field(default_factory=list)  # (t, total RSS MiB of master + workers)

    async def run(self, start: float, stop: asyncio.Event, every: float = 1.0) -> None:
        while not stop.is_set():
            self.samples.append((round(time.monotonic() - start, 1), round(sum(self.server.rss_mib().values()), 1)))
            try:
                await asyncio.wait_for(stop.wait(), timeout=every)
            except asyncio.TimeoutError:
                pass
