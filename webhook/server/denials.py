"""Which violations are news: a denial counted once per object generation, not per retry.

A controller whose pods are denied keeps trying: a ReplicaSet re-creates the missing pods with
exponential backoff (every attempt a new pod CREATE, a new name), a Job retries, ``kubectl apply``
in a CI loop sends the same object again. Counting each attempt made a single stuck ReplicaSet look
like a spike of denials (the alert fired on one Deployment). The object's generation is what it
asks for: :func:`webhook.core.verdicts.key`, the object without the fields a controller stamps on
every copy (names, uids, the pod-template hash), so the copies of one template in one namespace
share it, and a changed template is a new generation.

Per worker, bounded: gunicorn's workers do not share it, so one generation is counted at most once
per worker (two by default); one forgotten after :data:`MAX_KEPT` newer ones is counted again.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from webhook.core import verdicts

MAX_KEPT = 4096
"""Generations remembered (16-byte digests: about 0.5 MiB with the dict's overhead)."""


class Ledger:
    """The generations already counted, with the mode and codes they were counted for."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()
        self.max_kept = max_kept

    def first(self, kind: str | None, obj: Any, mode: str, codes: tuple[str, ...], *, dry_run: bool = False) -> bool:
        """True the first time this generation of ``obj`` is found with ``codes`` in ``mode``; an
        object without a key (not a mapping) is always news. A dry run is its own news: the CI
        check that ran ``--dry-run=server`` first must not hide the real apply's denial."""
        k = verdicts.key(obj)
        if k is None:
            return True
        tag = f"{kind}|{mode}|{dry_run}|{','.join(codes)}\0".encode()
        digest = hashlib.blake2b(tag + k, digest_size=16).digest()
        with self._lock:
            if digest in self._seen:
                self._seen.move_to_end(digest)
                return False
            self._seen[digest] = None
            if len(self._seen) > self.max_kept:
                self._seen.popitem(last=False)
            return True
