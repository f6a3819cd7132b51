"""A slowloris attacker, run as its own process by tests/server/test_slow_clients.py and by
bench/reliability/slowloris.py: it must not share the test client's interpreter (and GIL).

Opens CONNECTIONS TLS connections to 127.0.0.1:PORT (the CA in CAFILE verifies the server) and keeps
them in one of two shapes, half each:

- ``trickle``: a POST /validate with a large Content-Length, one byte a second, forever;
- ``stall``: the first bytes of a request (``PO``), then nothing.

A connection the server closes is opened again (the attack keeps its size, as slowloris does). Every
second it prints one JSON line on stdout: open connections, reopened in total, handshakes failed.
Runs until SIGTERM. Usage: python slowloris.py PORT CAFILE CONNECTIONS
"""

from __future__ import annotations

import json
import selectors
import signal
import socket
import ssl
import sys
import time

REQUEST = (b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: 1000000\r\n\r\n" + b"{" * 1_000_000)


class Attack:
    def __init__(self, port: int, cafile: str, size: int) -> None:
        self.port, self.size = port, size
        self.ctx = ssl.create_default_context(cafile=cafile)
        self.conns: dict[int, tuple[ssl.SSLSocket, str, int]] = {}  # slot -> (socket, shape, bytes sent)
        self.reopened = self.failed = 0
        self.sel = selectors.DefaultSelector()

    def open(self, slot: int) -> None:
        shape = "trickle" if slot % 2 == 0 else "stall"
        try:
            raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            sock = self.ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            if shape == "stall":
                sock.sendall(b"PO")
            sock.setblocking(False)
        except (OSError, ssl.SSLError):
            self.failed += 1
            return
        self.conns[slot] = (sock, shape, 2 if shape == "stall" else 0)
        self.sel.register(sock, selectors.EVENT_READ, slot)

    def drop(self, slot: int) -> None:
        sock = self.conns.pop(slot)[0]
        self.sel.unregister(sock)
        sock.close()

    def tick(self) -> None:
        for slot in range(self.size):
            if slot not in self.conns:
                self.open(slot)
                self.reopened += 1
                continue
            sock, shape, sent = self.conns[slot]
            if shape == "trickle":
                try:
                    sock.send(REQUEST[sent:sent + 1])
                    self.conns[slot] = (sock, shape, sent + 1)
                except (OSError, ssl.SSLError):
                    self.drop(slot)

    def closed_by_server(self, timeout: float) -> None:
        for key, _ in self.sel.select(timeout):
            slot = key.data
            sock = self.conns[slot][0]
            try:
                if sock.recv(4096):
                    continue  # an answer (a 408/400): the server is closing it next
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except (OSError, ssl.SSLError):
                pass
            self.drop(slot)


def main() -> int:
    port, cafile, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    attack = Attack(port, cafile, size)
    for slot in range(size):
        attack.open(slot)
    attack.reopened = 0
    print(json.dumps({"open": len(attack.conns), "reopened": 0, "failed": attack.failed}), flush=True)
    while True:
        started = time.monotonic()
        attack.tick()
        while (left := 1.0 - (time.monotonic() - started)) > 0:
            attack.closed_by_server(left)
        print(json.dumps({"open": len(attack.conns), "reopened": attack.reopened, "failed": attack.failed}),
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
