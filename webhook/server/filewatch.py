"""Cheap change detection for mounted files (policy ConfigMap, certificate Secret).

Kubernetes updates mounted ConfigMaps and Secrets by swapping a ``..data`` symlink, so the file's
inode, size and mtime change together; comparing ``os.stat`` signatures catches that and a plain
rewrite alike. Checks are rate-limited, so calling :meth:`FileWatch.changed` on every request costs
one clock read most of the time and a few ``stat`` calls at most once per interval.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

Signature = tuple[tuple[int, int, int, int] | None, ...]


def stat_signature(path: Path) -> tuple[int, int, int, int] | None:
    """(inode, device, size, mtime_ns) of a file, None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


class FileWatch:
    """Tells when any of ``paths`` changed since the last accepted state."""

    def __init__(self, paths: Sequence[str | Path], *, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._next_check = 0.0
        self._seen: Signature = self.signature()

    def signature(self) -> Signature:
        return tuple(stat_signature(p) for p in self.paths)

    def changed(self) -> Signature | None:
        """The new signature when the files changed (and the interval has passed), else None.

        The caller accepts a signature with :meth:`accept` once it has loaded the files
        successfully; until then the same change keeps being reported, so a half-written file
        is retried on the next interval instead of forgotten."""
        now = self._clock()
        if now < self._next_check:
            return None
        with self._lock:
            if now < self._next_check:
                return None
            self._next_check = now + self.interval
            current = self.signature()
            return current if current != self._seen else None

    def accept(self, signature: Signature) -> None:
        self._seen = signature
