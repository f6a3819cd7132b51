"""The scheduler extender on a real ``gpu-admission serve`` (gunicorn, TLS): opt-in, on its own port
(``--extender-bind``), authenticated (``--extender-client-ca`` and/or ``--extender-token-file``), with
the admission routes' body limit, and memory bounded: the 64 MiB body of issue 25, which took a worker
to 1.8 GB when these routes read it, is refused with 413 while the workers' peak RSS stays flat.

The app's own rules (wire shapes, every authentication case, the limit to the byte) are tested
in-process in test_extender.py; here, what only the real server shows: the two listeners, each with
its own TLS context, routing by the port a connection came in on, and the memory of the workers.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from cryptography.x509.oid import ExtendedKeyUsageOID

from client_pki import make_ca, make_client, write_ca
from live import (
    IO_TIMEOUT, MAX_BODY, Pki, Server, StartServer, TP4, encode, free_port, once, post_while_reading,
    process_memory, reset_peak_memory, review, run_serve, wait_ready, wait_workers,
)

TOKEN = "extender-token-of-the-live-test"
MiB = 1024 * 1024
HUGE = 64 * MiB
"""The body of issue 25's report."""
GROWTH_LIMIT = 32 * MiB
"""At most this much more peak RSS in any worker for a refused body (it used to be 1.8 GB)."""


def gpu_node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
              "nvidia.com/gpu.count": "8"}
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "64", "nvidia.com/gpu": "8"}}}


def extender_args(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    pod = {"metadata": {"name": "p", "namespace": "ai"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
    return {"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}


SMALL = encode(extender_args([gpu_node("a100-0")]))


@dataclass
class Extender:
    server: Server
    port: int
    ca: Any
    good: tuple[Path, Path]
    """A client certificate the extender's CA signed (what kube-scheduler's tlsConfig presents)."""

    def context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.server.pki.ca_file))
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return ctx

    def connection(self, cert: tuple[Path, Path] | None = None, port: int | None = None,
                   timeout: float = IO_TIMEOUT) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", port or self.port, context=self.context(cert),
                                           timeout=timeout)

    def tls_socket(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT)
        return self.context(cert).wrap_socket(raw, server_hostname="127.0.0.1")


def post(ext: Extender, path: str, body: bytes = SMALL, *, port: int | None = None, token: str | None = None,
         cert: tuple[Path, Path] | None = None) -> tuple[int, Any] | Exception:
    """One POST on a new connection: (status, JSON), or the exception that stopped it (a refused
    handshake surfaces at the first read with TLS 1.3)."""
    conn = ext.connection(cert, port)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    except (ssl.SSLError, OSError, http.client.HTTPException) as exc:
        return exc
    finally:
        conn.close()


@pytest.fixture()
def extender(start_server: StartServer, tmp_path: Path) -> Extender:
    token = tmp_path / "extender-token"
    token.write_text(TOKEN + "\n")
    ca = make_ca("kube-scheduler client CA")
    port = free_port()
    server = start_server("--extender-bind", f"127.0.0.1:{port}", "--extender-token-file", str(token),
                          "--extender-client-ca", str(write_ca(ca, tmp_path / "scheduler-ca.crt")))
    return Extender(server, port, ca, make_client(ca, tmp_path / "scheduler", name="system:kube-scheduler"))


# ----------------------------------------------------------------------------- opt-in, its own port


def listening(server: Server) -> list[str]:
    """The addresses gunicorn says it listens at."""
    found = re.search(r"Listening at: (\S+) \(", server.stderr())
    assert found, server.stderr_tail()
    return found.group(1).split(",")


def test_the_extender_is_off_by_default(server: Server) -> None:
    for path in ("/scheduler/filter", "/scheduler/prioritize"):
        status, doc = once(server, "POST", path, SMALL)
        assert status == 404, (path, status, doc)
    assert listening(server) == [f"https://127.0.0.1:{server.port}"], server.stderr_tail()


def test_each_route_is_served_on_its_own_port_only(extender: Extender) -> None:
    admission, scheduler = extender.server.port, extender.port
    table = [  # (id, port, path, body, token, client certificate) -> status
        ("admission-has-no-filter", admission, "/scheduler/filter", SMALL, None, False, 404),
        ("the-token-opens-nothing-there", admission, "/scheduler/prioritize", SMALL, TOKEN, False, 404),
        ("admission-still-validates", admission, "/validate", encode(review(TP4)), None, False, 200),
        ("filter-with-token", scheduler, "/scheduler/filter", SMALL, TOKEN, False, 200),
        ("prioritize-with-certificate", scheduler, "/scheduler/prioritize", SMALL, None, True, 200),
        ("filter-without-credentials", scheduler, "/scheduler/filter", SMALL, None, False, 401),
        ("filter-with-a-wrong-token", scheduler, "/scheduler/filter", SMALL, TOKEN + "x", False, 401),
        ("no-admission-on-the-extender-port", scheduler, "/validate", encode(review(TP4)), TOKEN, False, 404),
        ("no-metrics-on-the-extender-port", scheduler, "/metrics", b"", TOKEN, False, 404),
        ("unauthenticated-probing", scheduler, "/validate", b"{}", None, False, 401),
    ]
    wrong = []
    for name, port, path, body, token, cert, status in table:
        for _ in range(2):  # new connections: either worker
            got = post(extender, path, body, port=port, token=token, cert=extender.good if cert else None)
            if isinstance(got, Exception) or got[0] != status:
                wrong.append(f"{name}: expected {status}, got {got}")
    assert not wrong, "\n".join(wrong)
    assert listening(extender.server) == [f"https://127.0.0.1:{admission}", f"https://127.0.0.1:{scheduler}"]


@pytest.mark.parametrize("client, served", [
    pytest.param("scheduler-certificate", True, id="scheduler-certificate"),
    pytest.param("no-certificate", False, id="no-certificate-is-401"),
    pytest.param("other-ca", False, id="other-ca"),
    pytest.param("expired", False, id="expired"),
    pytest.param("server-auth-only", False, id="server-auth-only"),
    pytest.param("the-serving-pair", False, id="the-serving-pair"),
])
def test_client_certificates_on_the_extender_port(extender: Extender, tmp_path: Path, client: str,
                                                  served: bool) -> None:
    cert = {"scheduler-certificate": lambda: extender.good,
            "no-certificate": lambda: None,
            "other-ca": lambda: make_client(make_ca("someone else's CA"), tmp_path / client),
            "expired": lambda: make_client(extender.ca, tmp_path / client, days=-1),
            "server-auth-only": lambda: make_client(extender.ca, tmp_path / client,
                                                    usage=ExtendedKeyUsageOID.SERVER_AUTH),
            "the-serving-pair": lambda: (extender.server.pki.cert_file, extender.server.pki.key_file),
            }[client]()
    for _ in range(3):
        got = post(extender, "/scheduler/filter", cert=cert)
        if served:
            assert not isinstance(got, Exception) and got[0] == 200, got
            assert [n["metadata"]["name"] for n in got[1]["Nodes"]["items"]] == ["a100-0"]
        elif cert is None:  # no certificate: the handshake completes, the request is refused
            assert not isinstance(got, Exception) and got[0] == 401, got
        else:  # a certificate that does not verify: refused at the handshake
            assert isinstance(got, Exception), f"{client}: served: {got}"
    assert extender.server.alive()


def test_each_port_trusts_only_its_own_client_ca(start_server: StartServer, pki: Pki, tmp_path: Path) -> None:
    """kube-apiserver's CA on the admission port, kube-scheduler's on the extender's: a certificate of
    one is refused on the other (each listener has its own TLS context)."""
    apiserver_ca, scheduler_ca = make_ca("kube-apiserver client CA"), make_ca("kube-scheduler client CA")
    apiserver = make_client(apiserver_ca, tmp_path / "apiserver")
    scheduler = make_client(scheduler_ca, tmp_path / "scheduler", name="system:kube-scheduler")
    port = free_port()
    server = start_server("--client-ca", str(write_ca(apiserver_ca, tmp_path / "apiserver-ca.crt")),
                          "--extender-bind", f"127.0.0.1:{port}",
                          "--extender-client-ca", str(write_ca(scheduler_ca, tmp_path / "scheduler-ca.crt")),
                          wait=False)
    server.client_ctx.load_cert_chain(str(apiserver[0]), str(apiserver[1]))  # the harness's probes
    wait_ready(server)
    wait_workers(server)
    ext = Extender(server, port, scheduler_ca, scheduler)
    review_body = encode(review(TP4))
    for _ in range(3):
        assert post(ext, "/validate", review_body, port=server.port, cert=apiserver)[0] == 200
        assert isinstance(post(ext, "/validate", review_body, port=server.port, cert=scheduler), Exception)
        assert post(ext, "/scheduler/filter", cert=scheduler)[0] == 200
        assert isinstance(post(ext, "/scheduler/filter", cert=apiserver), Exception)


# ----------------------------------------------------------------------------- the body limit, and memory


def repeated(total: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    block = b" " * piece  # generated as sent: the test process never holds the 64 MiB
    for _ in range(total // piece):
        yield block


def chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def workers_memory(server: Server) -> dict[int, dict[str, int]]:
    return {pid: process_memory(pid) for pid in server.worker_pids() if Path(f"/proc/{pid}").exists()}


def peak_growth(server: Server, send: Any) -> tuple[Any, int, dict[int, dict[str, int]]]:
    """(what ``send()`` returned, the largest growth of any worker's peak RSS over its RSS before, in
    bytes, and the workers' memory after). Each worker's peak is reset first where the kernel allows
    (/proc/<pid>/clear_refs), so the peak is this request's, not start-up's."""
    before = workers_memory(server)
    assert len(before) == 2, before
    for pid in before:
        reset_peak_memory(pid)
    before = workers_memory(server)
    result = send()
    time.sleep(0.2)  # the refusing thread has finished with the request
    after = workers_memory(server)
    growth = max(after[pid]["VmHWM"] - max(before[pid]["VmHWM"], before[pid]["VmRSS"]) for pid in before)
    return result, growth * 1024, after


def test_a_64_mib_body_is_refused_and_memory_stays_bounded(extender: Extender) -> None:
    server = extender.server
    for _ in range(6):  # both workers have served the extender once: imports and caches are warm
        assert post(extender, "/scheduler/filter", token=TOKEN)[0] == 200
    auth = {"Authorization": f"Bearer {TOKEN}"}
    report = []

    # the probe sees memory: a node list at the limit is read and parsed (200), and that shows
    padding = {f"x-padding/{i}": "v" * 50 for i in range(200)}
    nodes = [gpu_node(f"n{i}", padding) for i in range(int(MAX_BODY * 0.95) // 13_400)]
    at_limit = encode(extender_args(nodes))
    assert MAX_BODY * 0.9 < len(at_limit) <= MAX_BODY, len(at_limit)
    (status, _, doc, _), parsed, _ = peak_growth(server, lambda: post_while_reading(
        extender.tls_socket(), "/scheduler/filter", {**auth, "Content-Length": str(len(at_limit))}, [at_limit]))
    assert status == 200 and len(doc["Nodes"]["items"]) == len(nodes)
    report.append(f"{len(at_limit) / MiB:.1f} MiB node list, parsed: +{parsed / MiB:.1f} MiB peak RSS")
    assert parsed > 8 * MiB, f"the RSS probe does not see a parse ({parsed / MiB:.1f} MiB)"

    cases = [  # (id, headers, body pieces, expected status)
        ("content-length", {**auth, "Content-Length": str(HUGE)}, lambda: repeated(HUGE), 413),
        ("chunked", {**auth, "Transfer-Encoding": "chunked"}, lambda: chunked(repeated(HUGE)), 413),
        ("unauthenticated", {"Content-Length": str(HUGE)}, lambda: repeated(HUGE), 401),
    ]
    for name, headers, body, expected in cases:
        (status, response_headers, doc, sent), growth, after = peak_growth(
            server, lambda: post_while_reading(extender.tls_socket(), "/scheduler/filter", headers, body()))
        report.append(f"64 MiB {name}: {status}, {sent / MiB:.1f} MiB sent before the answer, "
                      f"+{growth / MiB:.1f} MiB peak RSS (workers now {[m['VmRSS'] // 1024 for m in after.values()]} MiB)")
        assert growth < GROWTH_LIMIT, f"{name}: a worker's peak RSS grew {growth / MiB:.1f} MiB ({status}: {doc})"
        assert status == expected, (name, doc)
        assert "error" in doc
        if expected == 413:
            assert doc["error"] == f"body larger than {MAX_BODY} bytes"
        assert sent < HUGE, f"{name}: the server read the whole body before answering"
    print("\n" + "\n".join(report))

    # and both workers carry on
    for _ in range(6):
        assert post(extender, "/scheduler/filter", token=TOKEN)[0] == 200
        assert once(server, "POST", "/validate", encode(review(TP4)))[0] == 200


# ----------------------------------------------------------------------------- start-up refusals


@pytest.mark.parametrize("flags, message", [
    pytest.param(["--extender-bind", "127.0.0.1:{port}"], "never served unauthenticated", id="no-authentication"),
    pytest.param(["--extender-token-file", "{token}"], "only apply with --extender-bind", id="token-without-bind"),
    pytest.param(["--extender-client-ca", "{ca}"], "only apply with --extender-bind", id="ca-without-bind"),
    pytest.param(["--extender-bind", "127.0.0.1:{admission}", "--extender-token-file", "{token}"],
                 "a port of its own", id="the-admission-port"),
    pytest.param(["--extender-bind", "8444", "--extender-token-file", "{token}"], "HOST:PORT", id="no-host"),
    pytest.param(["--extender-bind", "127.0.0.1:{port}", "--extender-token-file", "{empty}"], "is empty",
                 id="empty-token"),
    pytest.param(["--extender-bind", "127.0.0.1:{port}", "--extender-token-file", "{missing}"], "cannot read",
                 id="missing-token"),
    pytest.param(["--extender-bind", "127.0.0.1:{port}", "--extender-client-ca", "{missing}"], "no such file",
                 id="missing-ca"),
])
def test_serve_refuses_bad_extender_flags(pki: Pki, tmp_path: Path, flags: list[str], message: str) -> None:
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "empty").write_text("\n")
    admission, port = free_port(), free_port()
    values = {"port": port, "admission": admission, "token": tmp_path / "token", "ca": pki.ca_file,
              "empty": tmp_path / "empty", "missing": tmp_path / "absent"}
    done, took = run_serve("--cert", str(pki.cert_file), "--key", str(pki.key_file),
                           "--bind", f"127.0.0.1:{admission}", *(f.format(**values) for f in flags))
    assert done.returncode == 2, done
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert took < 15
    for p in (admission, port):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", p), timeout=2).close()
