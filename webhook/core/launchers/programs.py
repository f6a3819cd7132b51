"""Argv -> the program it runs: strips interpreters, runners and entrypoint wrappers.

``python3 -u -m X``, ``uv run``, ``conda run -n env`` and ``*entrypoint*.sh`` all hide the real
program; ``program`` reduces an argv to (program, its args, as written) so launchers can be looked
up by name.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.counts import parse_count

_PYTHON_RE = re.compile(r"(?:python|pypy)(?:[0-9]{1,2}(?:\.[0-9]{1,3})?)?")
_PY_VALUE_OPTS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
_PY_CLUSTER_M_RE = re.compile(r"-[uBOsSEIqbdv]{1,4}m")
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "conda", "mamba", "micromamba", "pixi"})
_RUNNER_VALUE_OPTS = frozenset(
    {"--with", "-w", "--python", "-p", "--project", "--directory", "--extra", "--group",
     "--env-file", "-n", "--name", "--prefix", "--with-requirements", "--index", "--index-url",
     "--extra-index-url", "--package", "--from", "-e", "--environment"}
)
ENTRYPOINT_RE = re.compile(r"[\w.-]{0,64}entrypoint[\w.-]{0,64}")
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
_WRAPPERS = frozenset({"tini", "dumb-init", "trtllm-llmapi-launch"})
"""Programs that only start the next word: init shims, and TensorRT-LLM's MPI launch helper
(``mpirun -n 8 trtllm-llmapi-launch trtllm-serve ...``)."""


def base(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def program(argv: Sequence[str]) -> tuple[str, tuple[str, ...], str] | None:
    """Reduce an argv to (program, its args, as written): ``python3 -u -m X a`` -> (X, (a,), X).

    Skips ``python``/``python3.11`` and their options, ``uv run``/``conda run -n env``, and
    ``*entrypoint*.sh`` wrappers and init shims (``tini --``); a path becomes its basename. ``None`` for ``python -c`` or
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
        elif ENTRYPOINT_RE.fullmatch(head) or head in _WRAPPERS:
            i = _skip_opts(argv, i + 1, frozenset())
        elif head in _SHELLS and i + 1 < n and not argv[i + 1].startswith("-"):
            i += 1  # ``bash webui.sh --listen`` runs the script file

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


MPI_LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun"})
_MPI_VALUE_OPTS = frozenset(
    {"-n", "-np", "--np", "-c", "-N", "--npernode", "-npernode", "-H", "--host", "-host", "--hostfile",
     "-hostfile", "--machinefile", "-machinefile", "-x", "--map-by", "-map-by", "--bind-to", "-bind-to",
     "--rank-by", "-rank-by", "-wdir", "--wdir", "-wd", "--prefix", "--output-filename", "--timeout",
     "-launch-agent", "--launch-agent", "-f", "-ppn", "-hosts", "-genv"}
)
_MPI_PAIR_OPTS = frozenset({"-mca", "--mca", "-gmca", "--gmca", "-genv"})
_COUNT_OPTS = frozenset({"-n", "-np", "--np", "-c"})
MAX_RANKS = 999_999
"""The largest ``-n`` read as a rank count (six digits); a bigger or unreadable one states none."""


def mpi_program(argv: Sequence[str]) -> tuple[int | None, list[tuple[str, ...]]] | None:
    """``mpirun [opts] -n 2 prog args : -n 2 prog args`` -> (ranks, [argv of each app context]).

    ``ranks`` sums the ``-n``/``-np`` counts of every colon-separated app context (``None`` when a
    context states none: the hostfile decides). ``None`` when ``argv`` is not an MPI launch.
    """
    if not argv or base(argv[0]) not in MPI_LAUNCHERS:
        return None
    contexts: list[list[str]] = [[]]
    for token in argv[1:4096]:
        if token == ":":
            contexts.append([])
        else:
            contexts[-1].append(token)
    total: int | None = 0
    apps: list[tuple[str, ...]] = []
    for ctx in contexts[:64]:
        count, i = None, 0
        while i < len(ctx) and ctx[i].startswith("-"):
            opt, _, inline = ctx[i].partition("=")
            value = inline if inline else (ctx[i + 1] if i + 1 < len(ctx) else "")
            if opt in _COUNT_OPTS and (ranks := parse_count(value, cap=MAX_RANKS)) is not None:
                count = ranks
            i += 3 if opt in _MPI_PAIR_OPTS else 2 if opt in _MPI_VALUE_OPTS and not inline else 1
        apps.append(tuple(ctx[i:]))
        total = None if total is None or count is None else total + count
    return total, apps
