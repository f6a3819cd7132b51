"""Certificate rotation every few seconds under load: zero TLS failures.

One instance, open loop at ``--rate`` for ``--seconds`` with a new connection (a TLS handshake) every
3 requests, while the serving pair is re-issued from the same CA every ``--every`` seconds, in turns
atomically (``gpu-admission certs`` writes by rename) and half-written (tls.crt first, tls.key 1.2 s
later, longer than the 1 s reload interval, so workers do see a mismatched pair and must keep the old
one). Counted: handshakes, failed handshakes, failed calls, and the distinct certificates clients saw.

``python -m bench.reliability.rotation_load [--seconds 60] [--every 2] [--rate 150]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.reliability import common


def replace_file(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


async def rotate(certs: Path, issued: Any, seconds: float, every: float, log: list[dict[str, Any]]) -> None:
    from webhook.cli import certs as certs_mod

    ca = (issued.ca_pem, issued.ca_key_pem)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() + every < end:
        await asyncio.sleep(every)
        fresh = certs_mod.issue(service="gpu-admission", namespace="gpu-admission", ips=["127.0.0.1"], ca=ca)
        n += 1
        if n % 2:
            certs_mod.write(fresh, certs)
            log.append({"t": time.monotonic(), "how": "atomic"})
        else:
            replace_file(certs / "tls.crt", fresh.cert_pem, 0o644)
            await asyncio.sleep(1.2)
            replace_file(certs / "tls.key", fresh.key_pem, 0o600)
            log.append({"t": time.monotonic(), "how": "half-written for 1.2 s"})


async def run(seconds: float, every: float, rate: float, work: Path) -> dict[str, Any]:
    certs = work / "certs"
    issued = common.make_certs(certs)
    server = common.start_server(work, certs_dir=certs)
    try:
        load = common.Load([server.port], server.ca, new_connection_every=3)
        load.record_peer = True
        start = time.monotonic()
        rotations: list[dict[str, Any]] = []
        rotator = asyncio.create_task(rotate(certs, issued, seconds, every, rotations))
        results = await load.open_loop(rate, seconds, start)
        await rotator
        load.close()
        deferred = server.stderr().count('"result":"deferred"')
        reloaded = server.stderr().count("serving certificate reloaded")
    finally:
        server.stop()
    return {"seconds": seconds, "rate": rate, "rotations": len(rotations),
            "rotation_kinds": {k: sum(1 for r in rotations if r["how"] == k) for k in {r["how"] for r in rotations}},
            "handshakes": load.handshakes, "tls_failures": len(load.handshake_failures),
            "tls_failure_samples": load.handshake_failures[:5],
            "distinct_certificates_seen": len(load.peers),
            "worker_reloads_logged": reloaded, "half_written_pairs_deferred_logged": deferred,
            "summary": common.summarize(results, seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--every", type=float, default=2)
    parser.add_argument("--rate", type=float, default=150)
    args = parser.parse_args()
    quiet = common.wait_quiet()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-rotation-") as tmp:
        result = asyncio.run(run(args.seconds, args.every, args.rate, Path(tmp)))
    result["machine"] = quiet
    path = common.save("rotation_load", result)
    print(f"{result['rotations']} rotations in {args.seconds:.0f} s, {result['handshakes']} handshakes, "
          f"{result['tls_failures']} TLS failures, {result['distinct_certificates_seen']} certificates seen, "
          f"calls {result['summary']['outcomes']} -> {path}")


if __name__ == "__main__":
    main()
