"""Argv scanning: ``--flag value``/``--flag=value``/boolean flags -> raw values by field.

Reads an argv with one of the ``flags`` tables the way argparse/clap would (last occurrence wins),
including the guesses needed for flags the table does not know, and nothing else: values stay raw
strings here and are converted by the spec builder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from webhook.core.launchers.flags import B, OB, Flag, norm_flag

_NEGATIVE_NUMBER_RE = re.compile(r"-[0-9.]{1,32}")


@dataclass
class Scan:
    """Flags read from an argv: ``values`` by field (last occurrence wins, as in argparse)."""

    values: dict[str, tuple[str, str]] = field(default_factory=dict)
    """field -> (raw value, flag as spelled)."""
    positionals: list[str] = field(default_factory=list)
    end: int = 0
    """Index of the first positional when scanning stopped there (training launchers)."""


def is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER_RE.fullmatch(token)


_OVERRIDE_RE = re.compile(r"[+~]{0,2}[A-Za-z_][A-Za-z0-9_]{0,64}\.[A-Za-z0-9_.]{0,200}=")


def _plausible_value(token: str | None) -> bool:
    """Whether an unknown flag probably takes ``token`` as its value.

    Not when it is a flag, a script (``train.py``) or a Hydra override (``trainer.devices=8``),
    which are what follow boolean flags in practice.
    """
    return (
        token is not None
        and not is_flag(token)
        and not token.endswith((".py", ".sh"))
        and not _OVERRIDE_RE.match(token)
    )


def _bool_literal(token: str) -> bool:
    return token.lower() in ("true", "false", "1", "0", "yes", "no")


def scan(args: Sequence[str], table: Mapping[str, Flag], *, stop_at_positional: bool = False) -> Scan:
    """Read ``--flag value``, ``--flag=value`` and boolean flags from ``args`` using ``table``.

    Unknown flags take the next token as their value unless it looks like a flag or a script
    (``*.py``/``*.sh``), which is right for the value flags launchers are full of. With
    ``stop_at_positional`` scanning ends at the first positional (the training script).
    """
    out = Scan(end=len(args))
    i = 0
    n = len(args)
    while i < n:
        token = args[i]
        if token == "--":
            if stop_at_positional:
                out.end = i + 1
                return out
            out.positionals.extend(args[i + 1 :])
            break
        if not is_flag(token):
            if stop_at_positional:
                out.end = i
                return out
            out.positionals.append(token)
            i += 1
            continue
        name, eq, inline = token.partition("=")
        flag = table.get(norm_flag(name))
        nxt = args[i + 1] if i + 1 < n else None
        if flag is None:
            i += 2 if not eq and _plausible_value(nxt) else 1
            continue
        if eq:
            value, i = inline, i + 1
        elif flag.kind == B or (flag.kind == OB and (nxt is None or not _bool_literal(nxt))):
            value, i = "true", i + 1
        elif nxt is not None and (flag.kind == OB or not is_flag(nxt)):
            value, i = nxt, i + 2
        else:
            value, i = "", i + 1
        if flag.field:
            out.values[flag.field] = (value, name)
    return out


def truthy(raw: str) -> bool:
    return raw.strip().lower() not in ("false", "0", "no", "off")


def flag_values(args: Sequence[str], spellings: Sequence[str], *, nargs: bool = False, limit: int = 16) -> list[str]:
    """Every value given to one flag, in order: ``--model-id a --model-id b`` -> ``[a, b]``.

    ``scan`` keeps the last occurrence, as argparse does for plain options; Infinity repeats
    ``--model-id`` and TorchServe's ``--models`` takes several values (``nargs``: every token up to
    the next flag). Bounded by ``limit``.
    """
    wanted = {norm_flag(s) for s in spellings}
    out: list[str] = []
    i, n = 0, min(len(args), 4096)
    while i < n and len(out) < limit:
        name, eq, inline = args[i].partition("=")
        i += 1
        if not is_flag(name) or norm_flag(name) not in wanted:
            continue
        if eq:
            out.append(inline)
            if not nargs:
                continue
        while i < n and not is_flag(args[i]) and len(out) < limit:
            out.append(args[i])
            i += 1
            if not nargs:
                break
    return out
