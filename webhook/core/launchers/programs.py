"""Argv -> the program it runs: strips interpreters, runners and entrypoint wrappers.

``python3 -u -m X``, ``uv run``, ``conda run -n env`` and ``*entrypoint*.sh`` all hide the real
program; ``program`` reduces an argv to (program, its args, as written) so launchers can be looked
up by name.
"""

from __future__ import annotations

import re
from typing import Sequence

_PYTHON_RE = re.compile(r"(?:python|pypy)(?:[0-9]{1,2}(?:\.[0-9]{1,3})?)?")
_PY_VALUE_OPTS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
_PY_CLUSTER_M_RE = re.compile(r"-[uBOsSEIqbdv]{1,4}m")
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "conda", "mamba", "micromamba", "pixi"})
_RUNNER_VALUE_OPTS = frozenset(
    {"--with", "-w", "--python", "-p", "--project", "--directory", "--extra", "--group",
     "--env-file", "-n", "--name", "--prefix", "--with-requirements", "--index", "--index-url",
     "--extra-index-url", "--package", "--from", "-e", "--environment"}
)
_ENTRYPOINT_RE = re.compile(r"[\w.-]{0,64}entrypoint[\w.-]{0,64}")


def base(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def program(argv: Sequence[str]) -> tuple[str, tuple[str, ...], str] | None:
    """Reduce an argv to (program, its args, as written): ``python3 -u -m X a`` -> (X, (a,), X).

    Skips ``python``/``python3.11`` and their options, ``uv run``/``conda run -n env``, and
    ``*entrypoint*.sh`` wrappers; a path becomes its basename. ``None`` for ``python -c`` or
    nothing to run.
    """
    i = 0
    n = len(argv)
    for _ in range(8):
        if i >= n:
            return None
        head = base(argv[i])
        if head in _RUNNERS and i + 1 < n and argv[i + 1] == "run":
            i = _skip_opts(argv, i + 2, _RUNNER_VALUE_OPTS)
        elif _PYTHON_RE.fullmatch(head):
            return _python_program(argv, i + 1)
        elif _ENTRYPOINT_RE.fullmatch(head):
            i = _skip_opts(argv, i + 1, frozenset())
        else:
            return head, tuple(argv[i + 1 :]), argv[i]
    return None


def _skip_opts(argv: Sequence[str], i: int, value_opts: frozenset[str]) -> int:
    """Index of the first non-option at or after ``i`` (one ``--`` is consumed)."""
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--":
            return i + 1
        i += 2 if argv[i] in value_opts else 1
    return i


def _python_program(argv: Sequence[str], i: int) -> tuple[str, tuple[str, ...], str] | None:
    """After ``python``: ``-m MODULE args`` or ``script.py args``; ``-c``/``-`` -> None."""
    n = len(argv)
    while i < n and argv[i].startswith("-"):
        opt = argv[i]
        if opt == "-m" or _PY_CLUSTER_M_RE.fullmatch(opt):
            return (argv[i + 1], tuple(argv[i + 2 :]), argv[i + 1]) if i + 1 < n else None
        if opt.startswith("-m") and len(opt) > 2:
            return opt[2:], tuple(argv[i + 1 :]), opt[2:]
        if opt in ("-c", "-") or opt.startswith("-c"):
            return None
        i += 2 if opt in _PY_VALUE_OPTS else 1
    if i >= n:
        return None
    return base(argv[i]), tuple(argv[i + 1 :]), argv[i]
