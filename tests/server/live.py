"""Helpers for the tests that run a real ``gpu-admission serve`` (gunicorn, TLS) on loopback: the
server handle, a test PKI, HTTPS clients, waits with timeouts, TLS handshakes in memory.

Shared by test_server_live.py, test_balance.py, test_overload.py, test_secrets.py,
test_tls_hardening.py and test_extender_live.py; the fixtures built on them (``pki``,
``start_server``, ``server``) are in conftest.py beside this file.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from webhook.cli import certs


ROOT = Path(__file__).resolve().parents[2]


KEY = "nvidia.com/gpu.product"


SERVICE = NAMESPACE = "gpu-admission"


MAX_BODY = 4 * 1024 * 1024  # ServeOptions.max_body


START_TIMEOUT = 20.0


STOP_TIMEOUT = 25.0  # gunicorn's graceful_timeout is 20 s


IO_TIMEOUT = 10.0  # every socket operation of a client


RELOAD_TIMEOUT = 4.0  # the reload interval is 1 s; each worker reloads on its next request after that


CONSECUTIVE = 6  # new connections in a row that must agree, so both workers have answered


def vllm_pod(*flags: str, containers: int = 1, **spec: Any) -> dict[str, Any]:
    """A vLLM Llama-3.1-70B pod asking for 4 GPUs per container."""
    cs = [{"name": f"vllm-{i}" if i else "vllm", "image": "vllm/vllm-openai:v0.10.1",
           "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", *flags],
           "resources": {"limits": {"nvidia.com/gpu": 4}}} for i in range(containers)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama", "namespace": "ai"},
            "spec": {"containers": cs, **spec}}


TP4 = vllm_pod("--tensor-parallel-size", "4")


TP4_L4 = vllm_pod("--tensor-parallel-size", "4", nodeSelector={KEY: "NVIDIA-L4"})  # 33 GiB of weights per 24 GB GPU: cannot work


def review(obj: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": obj["metadata"]["name"], "namespace": "ai", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:ai:deployer"}, "object": obj, "oldObject": None,
        "dryRun": False, "options": None}}


def encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass
class Pki:
    dir: Path
    issued: certs.Issued

    @property
    def ca_file(self) -> Path:
        return self.dir / certs.CA_CERT

    @property
    def cert_file(self) -> Path:
        return self.dir / certs.TLS_CERT

    @property
    def key_file(self) -> Path:
        return self.dir / certs.TLS_KEY

    def reissue(self) -> certs.Issued:
        """A new serving pair from the SAME CA, so the caBundle (our client's trust) is unchanged."""
        return certs.issue(service=SERVICE, namespace=NAMESPACE, ips=["127.0.0.1"],
                           ca=(self.issued.ca_pem, self.issued.ca_key_pem))


def der(issued: certs.Issued) -> bytes:
    return ssl.PEM_cert_to_DER_cert(issued.cert_pem.decode())


def replace_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace one file atomically (new inode), as a rename-based writer would."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_policy(path: Path, text: str) -> None:
    replace_file(path, text.encode(), 0o644)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    pki: Pki
    run_dir: Path
    stderr_path: Path
    probe_port: int | None = None
    client_ctx: ssl.SSLContext = field(init=False)

    def __post_init__(self) -> None:
        self.client_ctx = ssl.create_default_context(cafile=str(self.pki.ca_file))

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr().splitlines()[-lines:])

    def connection(self, timeout: float = IO_TIMEOUT) -> http.client.HTTPSConnection:
        """A keep-alive HTTPS client like kube-apiserver's: verifies 127.0.0.1 against the IP SAN."""
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.client_ctx, timeout=timeout)

    def tls_socket(self, ctx: ssl.SSLContext | None = None, timeout: float = IO_TIMEOUT) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            return (ctx or self.client_ctx).wrap_socket(raw, server_hostname="127.0.0.1")
        except BaseException:
            raw.close()
            raise

    def probe(self, path: str, timeout: float = IO_TIMEOUT) -> tuple[int, str, http.client.HTTPResponse]:
        """GET ``path`` on the plain-HTTP probe port (``serve --probe-bind``): (status, body text, response)."""
        assert self.probe_port is not None, "this server was started without a probe port"
        conn = http.client.HTTPConnection("127.0.0.1", self.probe_port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(), resp
        finally:
            conn.close()

    def worker_pids(self) -> list[int]:
        return [int(p) for p in re.findall(r"Booting worker with pid: (\d+)", self.stderr())]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM (graceful), then SIGKILL of the whole process group if it does not exit in time."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                return self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            # the group is the session this fixture created for the master: master and its workers
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self.proc.wait(timeout=STOP_TIMEOUT)


def request_json(conn: http.client.HTTPConnection, method: str, path: str,
                 body: bytes | None = None) -> tuple[int, Any, http.client.HTTPResponse]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = raw
    return resp.status, doc, resp


def once(server: Server, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    """One request on a NEW connection (which the kernel hands to either worker)."""
    conn = server.connection()
    try:
        status, doc, _ = request_json(conn, method, path, body)
        return status, doc
    finally:
        conn.close()


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    last = "no attempt"
    while time.monotonic() < deadline:
        if not server.alive():
            pytest.fail(f"gpu-admission serve exited with {server.proc.returncode} before it was ready; "
                        f"stderr:\n{server.stderr_tail()}")
        try:
            status, doc = once(server, "GET", "/readyz")
            if status == 200:
                return
            last = f"/readyz answered {status}: {doc}"
        except (OSError, http.client.HTTPException) as exc:
            last = repr(exc)
        time.sleep(0.1)
    pytest.fail(f"gpu-admission serve not ready within {START_TIMEOUT:.0f} s (last: {last}); "
                f"stderr:\n{server.stderr_tail()}")


def live_workers(server: Server) -> set[int]:
    """Workers that have loaded the app (so accept connections): each one creates its live-gauge
    file in the multi-process metrics directory when the app's metrics are set up."""
    return {int(p.stem.rsplit("_", 1)[1]) for p in server.run_dir.glob("gpu-admission-metrics-*/gauge_live*_*.db")}


def wait_workers(server: Server, count: int = 2, exclude: set[int] = frozenset()) -> set[int]:
    """/readyz answers as soon as ONE worker is up; wait for ``count`` of them."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if not server.alive():
            pytest.fail(f"gpu-admission serve exited with {server.proc.returncode}; stderr:\n{server.stderr_tail()}")
        up = live_workers(server) - exclude
        if len(up) >= count:
            return up
        time.sleep(0.05)
    pytest.fail(f"{count} workers not up within {START_TIMEOUT:.0f} s; stderr:\n{server.stderr_tail()}")


StartServer = Callable[..., Server]


def until_consecutive(check: Callable[[], tuple[bool, Any]], what: str, *, k: int = CONSECUTIVE,
                      timeout: float = RELOAD_TIMEOUT) -> None:
    """Poll ``check`` (one new connection per call) until it holds ``k`` times in a row."""
    deadline = time.monotonic() + timeout
    streak, last = 0, None
    while time.monotonic() < deadline:
        ok, last = check()
        streak = streak + 1 if ok else 0
        if streak >= k:
            return
        time.sleep(0.05)
    pytest.fail(f"{what}: did not hold on {k} consecutive new connections within {timeout} s; last: {last}")


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name]


def handshake_in_memory(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> str | None:
    """Handshake two contexts over memory BIOs; the negotiated version, or None if it failed."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    srv = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, obj, out, peer_in in (("client", client, c_out, s_in), ("server", srv, s_out, c_in)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
                except ssl.SSLError:
                    return None
            peer_in.write(out.read())
        if all(done.values()):
            return client.version()
    return None


def permissive_server(pki: Pki) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    ctx.load_cert_chain(str(pki.cert_file), str(pki.key_file))
    return ctx


def client_context(pki: Pki, setup: Callable[[ssl.SSLContext], None]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    setup(ctx)
    return ctx


def run_serve(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "webhook", "serve", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    return done, time.monotonic() - started


def response_complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    return match is not None and len(body) >= int(match.group(1))


def post_while_reading(sock: ssl.SSLSocket, path: str, headers: dict[str, str],
                       chunks: Any) -> tuple[int, dict[str, str], Any, int]:
    """POST ``chunks`` on ``sock`` like a client that reads the answer while still sending (a server
    that refuses a body answers before reading it, then closes; a send-everything-first client would
    only see the reset). Returns (status, response headers, JSON body, request body bytes sent)."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sent = 0
    try:
        sock.sendall(head.encode())
        received = b""
        for chunk in chunks:
            if select.select([sock], [], [], 0)[0] or sock.pending():
                sock.setblocking(False)
                try:
                    data = sock.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    data = None  # only a TLS 1.3 session ticket, or half a record
                finally:
                    sock.settimeout(IO_TIMEOUT)
                if data == b"":
                    break
                if data:
                    received += data
                    break  # answered: stop sending
            try:
                sock.sendall(chunk)
                sent += len(chunk)
            except OSError:
                break  # closed by the server; its answer may already be here
        while not response_complete(received):
            try:
                data = sock.recv(65536)
            except OSError as exc:
                raise AssertionError(f"no complete answer ({exc!r}); got {received[:300]!r}") from None
            if not data:
                break
            received += data
    finally:
        sock.close()
    assert response_complete(received), received[:300]
    head_bytes, _, body = received.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    response_headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, response_headers, json.loads(body), sent


def process_memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak resident set) of a process, in KiB, from /proc/<pid>/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def reset_peak_memory(pid: int) -> bool:
    """Set a process's VmHWM back to its current RSS (Linux 4.0+: ``5`` to /proc/<pid>/clear_refs)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True
