"""The one-line fix of a violation: what a user reads first, in a kubectl warning line.

kubectl shows each admission warning on one line, and long ones are cut; a fix that lists seven
products by their label spelling does not fit. So every violation carries a ``fix`` of at most
:data:`FIX_BUDGET` characters once prefixed with its code: as many values as fit, then ``+N more``
(the whole list is in the message), never a value cut in the middle.
"""

from __future__ import annotations

from collections.abc import Sequence


FIX_BUDGET = 120
"""``code: fix`` must fit a kubectl warning line (120 characters, review.WARNING_MAX_CHARS)."""


def listed(values: Sequence[str], budget: int) -> str:
    """``values`` joined for a fix line: as many as fit in ``budget`` characters, then ``+N more``
    (never a value cut in the middle)."""
    out: list[str] = []
    for i, value in enumerate(values):
        rest = len(values) - i - 1
        tail = f", +{rest} more" if rest else ""
        candidate = ", ".join([*out, value])
        if len(candidate) + len(tail) > budget and out:
            return ", ".join(out) + f", +{len(values) - i} more"
        out.append(value)
    return ", ".join(out)


def fix_line(code: str, head: str, values: Sequence[str], tail: str = "") -> str:
    """``head [values] tail`` within :data:`FIX_BUDGET` once prefixed with ``code: ``: as many values
    as fit, then ``+N more`` (the message lists them all); the tail goes first when room runs out."""
    budget = FIX_BUDGET - len(code) - 2
    for end in (tail, ""):
        room = budget - len(head) - len(end) - 2
        text = f"{head}[{listed(list(values), room)}]{end}"
        if len(text) <= budget:
            return text
    return f"{head}[+{len(values)} in the message]"[:budget]
