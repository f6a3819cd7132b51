"""Small helpers shared by the benchmarks: percentiles, scale (BENCH_QUICK), machine facts, processes."""

from __future__ import annotations

import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]


def quick() -> bool:
    """``BENCH_QUICK=1``: counts and durations scaled down for a smoke run (numbers not comparable)."""
    return os.environ.get("BENCH_QUICK", "") not in ("", "0")


def scaled(full: float, small: float) -> float:
    return small if quick() else full


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank-interpolated percentile (``p`` in 0..100) of ``values`` (need not be sorted)."""
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    k = (len(data) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(data[lo] + (data[hi] - data[lo]) * (k - lo))


def median(values: Iterable[float]) -> float:
    data = list(values)
    return float(statistics.median(data)) if data else math.nan


def cdf_points(values: Sequence[float], points: int = 200) -> list[tuple[float, float]]:
    """(value, fraction) pairs for plotting a CDF without storing every sample."""
    data = sorted(values)
    if not data:
        return []
    step = max(1, len(data) // points)
    out = [(float(data[i]), (i + 1) / len(data)) for i in range(0, len(data), step)]
    out.append((float(data[-1]), 1.0))
    return out


def free_port(avoid: frozenset[int] = frozenset()) -> int:
    """A free loopback port the kernel hands out, never one of ``avoid`` (ports other servers use)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


def https_ready(port: int, ca: Path, path: str = "/readyz") -> bool:
    """True when ``GET https://127.0.0.1:<port><path>`` (verified against ``ca``) answers 200."""
    import http.client
    import ssl

    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ssl.create_default_context(cafile=str(ca)))
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def tool_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory_gib": f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f}",
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "gunicorn": version_of("gunicorn"),
        "flask": version_of("flask"),
        "werkzeug": version_of("werkzeug"),
        "pyyaml": version_of("PyYAML"),
        "kubernetes_client": version_of("kubernetes"),
        "wrk": tool_version(["wrk", "-v"]).split(" [")[0],
        "hyperfine": tool_version(["hyperfine", "--version"]),
        "loadavg_at_start": " ".join(f"{x:.2f}" for x in load),
    }


def stop_process(proc: subprocess.Popen, timeout: float = 25.0) -> None:
    """SIGTERM (gunicorn: graceful), then SIGKILL of the process group it leads."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (gunicorn workers of a master), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'
        fields = stat.rsplit(")", 1)[1].split()
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


def wait_until(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
