"""The one reading of a count written as text: ASCII digits, bounded, or nothing.

Counts arrive as text from everywhere a pod is described: annotations (``tensor-parallel``,
``group-size``), labels (a node's GPU count), a shell script's positional parameters (``$1``),
launcher flags (``-tp 4``, ``mpirun -n 8``), replicas an operator's manifest writes as a string,
config files (a ZeRO stage). Python's spellings of "a number" are all wrong for this:

- ``str.isdigit()`` is true for ``"²"`` and ``"⑤"``, and ``int()`` then raises: the webhook answered
  HTTP 500 and ``check`` would print a traceback;
- ``int()`` itself takes far more than Kubernetes or the programs ever wrote: other scripts' digits
  (``"١٢"``, fullwidth ``"１２"``: 12), ``"1_000"``, a sign, surrounding Unicode whitespace; and it
  raises past 4,300 digits;
- ``\\d`` in a ``str`` pattern matches every script's digits unless the pattern is ``re.ASCII``.

So a count is: ``[0-9]+`` (ASCII only), with at most as many significant digits as ``cap`` has
and a value of at most ``cap`` (leading zeros are kept: ``"04"`` is 4, as ``atoi`` and ``int()``
read it). Nothing else, except what the caller says its writer's own parser takes:

- ``padded``: ASCII whitespace around the digits (space, tab, CR, LF, VT, FF), for annotation,
  label and string values a person types or a YAML block scalar ends with a newline;
- ``signs``: the leading signs allowed (``"+"`` for flags parsed by Python's ``int()``/argparse,
  ``"-"`` where an operator reads a negative replica count as none, ``"+-"`` for both); the
  result is then negative for ``-``, and ``cap`` bounds its magnitude.

Anything else is ``None``: the caller reports it (an invalid annotation, an unreadable flag) or
falls back to its default, and never has to catch an exception. Pure and total: any ``str`` in,
an ``int`` or ``None`` out, in time linear in the text.
"""

from __future__ import annotations

from typing import Any

ASCII_SPACE = " \t\r\n\x0b\x0c"
"""What ``padded`` strips: ASCII whitespace only (``str.strip()`` would also take U+00A0, U+2003,
U+3000, ... and the ASCII separators U+001C to U+001F)."""


def parse_count(text: Any, *, cap: int, padded: bool = False, signs: str = "") -> int | None:
    """``text`` read as a count of at most ``cap`` (see the module docstring), or ``None``.

    ``parse_count("4", cap=4096) == 4``; ``"²"``, ``"１２"``, ``"1_000"``, ``"+3"``, ``" 12 "``,
    ``"4\\x00"``, ``""`` and ``"9" * 5000`` are all ``None`` (``" 12 "`` is 12 with ``padded``,
    ``"+3"`` is 3 with ``signs="+"``). A non-``str`` is ``None`` too: callers that take YAML
    integers check for ``int`` themselves, where ``True`` is no count.
    """
    if not isinstance(text, str) or cap < 0:
        return None
    if padded:
        text = text.strip(ASCII_SPACE)
    sign = text[:1] if text[:1] and text[:1] in signs else ""
    digits = text[len(sign):]
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0")
    if len(significant) > len(str(cap)):  # before int(): no big-number work, never its 4,300-digit error
        return None
    value = int(significant or "0")
    if value > cap:
        return None
    return -value if sign == "-" else value
