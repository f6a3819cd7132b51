"""The server's memo of verdicts on CREATEs, keyed by :func:`webhook.core.verdicts.key` (the object
without the fields a controller stamps differently on every copy of its template).

gunicorn's threads share one cache per worker; it is bounded, and an entry only ever answers for the
settings and inventory objects it was computed with (both are immutable and replaced on change).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable

from webhook.core import verdicts

MAX_ENTRIES = 512
"""Verdicts kept: a cluster runs a few hundred distinct pod templates; a miss costs one judgement.
An entry is about 3 KiB (its key and a detached judgement: measured 1.6 MiB for 512 unique pods of
the benchmark mix), so a full memo adds under 2 MiB to a worker (1,024 entries made the 100k-request RSS growth
target miss at 5.4%)."""


class VerdictCache:
    """Bounded memo ``(key, settings, inventory, flags) -> verdict``. The settings and inventory
    objects are immutable and replaced on change (a policy reload, a node event), so an entry is
    only ever answered for the very objects it was computed with (compared by identity, and held,
    so an id is never reused while its entry lives)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: dict[tuple[Hashable, ...], tuple[Any, Any, Any]] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, obj: Any, settings: Any, inventory: Any, flags: tuple[Hashable, ...],
                       compute: Callable[[], Any]) -> Any:
        """The cached verdict for ``obj`` under ``settings``/``inventory``/``flags``, or ``compute()``
        (stored when ``obj`` is a controller's pod, :func:`webhook.core.verdicts.controller_made`,
        and has a key)."""
        k = verdicts.key(obj) if verdicts.controller_made(obj) else None
        if k is None:
            return compute()
        slot = (k, id(settings), id(inventory), *flags)
        found = self._entries.get(slot)
        if found is not None and found[0] is settings and found[1] is inventory:
            self.hits += 1
            return found[2]
        self.misses += 1
        value = compute()
        if self.max_entries <= 0:
            return value
        with self._lock:
            while self._entries and len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)), None)  # oldest first
            self._entries[slot] = (settings, inventory, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
