"""The server's memo of verdicts on CREATEs, keyed by :func:`webhook.core.verdicts.key` (the object
without the fields a controller stamps differently on every copy of its template).

gunicorn's threads share one cache per worker; it is bounded, and an entry only ever answers for the
settings and inventory objects it was computed with (both are immutable and replaced on change).
Each entry also has room for the finished replies built from its verdict
(:meth:`VerdictCache.lookup`): a copy answered from the memo then skips building and encoding its
reply too, not only judging it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, MutableMapping, NamedTuple

from webhook.core import verdicts

MAX_REPLIES = 8
"""Finished replies kept per verdict: one per endpoint, mode and namespace the copies arrive with
(two or three in practice; a template used in many namespaces keeps the first eight)."""
MAX_ENTRIES = 512
"""Verdicts kept: a cluster runs a few hundred distinct pod templates; a miss costs one judgement.
An entry is about 3 KiB (its key and a detached judgement: measured 1.6 MiB for 512 unique pods of
the benchmark mix), so a full memo adds under 2 MiB to a worker (1,024 entries made the 100k-request RSS growth
target miss at 5.4%)."""


HIT, MISS, UNKEPT = "hit", "miss", "unkept"
"""How a lookup went: answered from the memo, computed and kept, or computed and not kept (not a
controller's copy: a pod written by hand, whose next copy would not look the same)."""


class Found(NamedTuple):
    value: Any
    replies: MutableMapping[Hashable, Any] | None
    """The entry's table of finished replies, on a hit (see :meth:`VerdictCache.lookup`)."""
    result: str
    """:data:`HIT`, :data:`MISS` or :data:`UNKEPT`: the ``result`` label of the memo's metric."""


class VerdictCache:
    """Bounded memo ``(key, settings, inventory, flags) -> verdict``. The settings and inventory
    objects are immutable and replaced on change (a policy reload, a node event), so an entry is
    only ever answered for the very objects it was computed with (compared by identity, and held,
    so an id is never reused while its entry lives)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: dict[tuple[Hashable, ...], tuple[Any, Any, Any, dict[Hashable, Any]]] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def lookup(self, obj: Any, settings: Any, inventory: Any, flags: tuple[Hashable, ...],
               compute: Callable[[], Any]) -> "Found":
        """The cached verdict for ``obj`` under ``settings``/``inventory``/``flags``, or ``compute()``
        (stored when ``obj`` is a controller's pod, :func:`webhook.core.verdicts.controller_made`,
        and has a key), with the entry's table of finished replies when the verdict came from the
        memo (None on a miss): the caller stores there what it built from this verdict, by
        what else the reply depends on, and finds it again for the next copy. Bounded to
        :data:`MAX_REPLIES`. Not offered on a miss: most verdicts that are never asked for again
        (pods written by hand under a generated name, a one-off Job) would keep a reply for nothing,
        and the memo's churn of evicted entries is what grows a worker's heap."""
        k = verdicts.key(obj) if verdicts.controller_made(obj) else None
        if k is None:
            return Found(compute(), None, UNKEPT)
        slot = (k, id(settings), id(inventory), *flags)
        found = self._entries.get(slot)
        if found is not None and found[0] is settings and found[1] is inventory:
            self.hits += 1
            return Found(found[2], found[3], HIT)
        self.misses += 1
        value = compute()
        if self.max_entries <= 0:
            return Found(value, None, MISS)
        with self._lock:
            while self._entries and len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)), None)  # oldest first
            self._entries[slot] = (settings, inventory, value, _Bounded(MAX_REPLIES))
        return Found(value, None, MISS)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class _Bounded(dict):  # type: ignore[type-arg]
    """A dict that ignores new keys once it holds ``limit`` (a reply table of one verdict)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Hashable, value: Any) -> None:
        if key in self or len(self) < self.limit:
            super().__setitem__(key, value)
