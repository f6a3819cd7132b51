"""Files a container can read at start that are visible at admission: written by its own script, or
mounted from a ConfigMap of the same input.

Training launchers take their strategy from config files (``--deepspeed ds_config.json``, accelerate
``--config_file fsdp.yaml``). Most of those are in the image and unknowable, but two shapes are in
the pod itself: a script that writes the file before the launch (a here-document ``cat > f <<EOF``,
``tee f <<EOF``, ``echo ... > f``, ``printf ... > f``; see :mod:`webhook.core.shell`, which hands over
each command's redirection target and here-document body), and a ConfigMap volume
(:func:`webhook.core.configmaps.materialize` puts those files on the container copy under
:data:`webhook.core.configmaps.FILES`). A file is matched by its path exactly as the launcher names
it (relative paths against the container's ``workingDir``): a file of the same name elsewhere is
another file, and guessing would let a config the pod does not read decide its sizing.

``echo`` is read as bash runs it: escapes (``\\n``) only with ``-e``. Pure and bounded: at most
:data:`MAX_FILES` files of :data:`MAX_FILE_CHARS` characters each.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.core.shell import Invocation

MAX_FILES = 64
MAX_FILE_CHARS = 256 * 1024
"""A DeepSpeed or accelerate config is a few hundred bytes; a ConfigMap holds 1 MiB at most."""

ACCELERATE_DEFAULT = "accelerate/default_config.yaml"
"""accelerate's default config, ``$HF_HOME/accelerate/default_config.yaml`` (``HF_HOME`` defaulting
to ``~/.cache/huggingface``; accelerate ``commands/config/config_args.py``), read by ``accelerate
launch`` when no ``--config_file`` is given and the file exists."""

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"', "r": "\r", "0": ""}
_ESCAPE_RE = re.compile(r"\\(.)", re.S)
_PRINTF_RE = re.compile(r"%(%|[-+ #0-9.]*[sbdiu])")


def written_files(runs: Sequence[Invocation]) -> dict[str, str]:
    """Path -> content of the files the container's commands write with ``cat``, ``tee``, ``echo``
    or ``printf`` (``>>`` appends are joined in order; a later ``>`` is not distinguished from an
    append, which only ever adds text a config parser then rejects)."""
    out: dict[str, str] = {}
    for run in runs[:256]:
        for path, text in _writes(run):
            if path and (path in out or len(out) < MAX_FILES):
                out[path] = (out.get(path, "") + text)[:MAX_FILE_CHARS]
    return out


def _writes(run: Invocation) -> list[tuple[str, str]]:
    argv = run.argv
    head = argv[0].rsplit("/", 1)[-1] if argv else ""
    if head == "cat" and run.stdin and run.stdout and len(argv) == 1:
        return [(run.stdout, run.stdin)]
    if head == "tee" and run.stdin:
        return [(path, run.stdin) for path in argv[1:] if not path.startswith("-")][:4]
    if head == "echo" and run.stdout:
        return [(run.stdout, _echo(argv[1:]))]
    if head == "printf" and run.stdout and len(argv) > 1:
        return [(run.stdout, _printf(argv[1], argv[2:]))]
    return []


def _echo(args: Sequence[str]) -> str:
    """bash's ``echo``: options ``-n``, ``-e``, ``-E`` (combinable) first; escapes only with ``-e``."""
    newline, escapes = True, False
    i = 0
    while i < len(args) and re.fullmatch(r"-[neE]+", args[i]):
        newline = newline and "n" not in args[i]
        escapes = "e" in args[i] if "e" in args[i] or "E" in args[i] else escapes
        i += 1
    text = " ".join(args[i:])
    if escapes:
        text = _unescape(text)
    return text + ("\n" if newline else "")


def _printf(fmt: str, args: Sequence[str]) -> str:
    """``printf FORMAT ARGS``: ``%s``/``%b``/``%d`` take the arguments in turn, the format is reused
    while arguments remain (as the shell's printf does), escapes in the format are interpreted."""
    fmt = _unescape(fmt)
    items = list(args)
    out: list[str] = []
    for _ in range(64):
        taken = 0

        def sub(m: re.Match[str]) -> str:
            nonlocal taken
            if m.group(1) == "%":
                return "%"
            value = items[taken] if taken < len(items) else ""
            taken += 1
            return _unescape(value) if m.group(1).endswith("b") else value

        out.append(_PRINTF_RE.sub(sub, fmt))
        items = items[taken:]
        if not items or not taken:
            break
    return "".join(out)


def _unescape(text: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)


def mounted(value: Any) -> dict[str, str]:
    """The mounted-file map a container copy carries (``configmaps.FILES``), strings only."""
    if not isinstance(value, Mapping):
        return {}
    return {k: v[:MAX_FILE_CHARS] for k, v in list(value.items())[:MAX_FILES]
            if isinstance(k, str) and isinstance(v, str)}


def normal(path: str, workdir: str = "") -> str:
    """``path`` as an absolute-when-possible, normalised POSIX path (``./a//b`` -> ``a/b``)."""
    text = path.strip()
    if not text:
        return ""
    if not text.startswith(("/", "$", "~")) and workdir.startswith("/"):
        text = posixpath.join(workdir, text)
    return posixpath.normpath(text)


def find(files: Mapping[str, str], path: str, workdir: str = "") -> str | None:
    """The content of the file the launcher names as ``path``, or None when the pod does not show it."""
    if not path or not files:
        return None
    wanted = normal(path, workdir)
    for name, text in files.items():
        if normal(name, workdir) == wanted:
            return text
    return None


def accelerate_default(files: Mapping[str, str]) -> tuple[str, str] | None:
    """A written or mounted accelerate default config (any ``.../accelerate/default_config.yaml``:
    ``HF_HOME`` is the same for the script that writes it and the launcher that reads it)."""
    for name, text in files.items():
        if name == ACCELERATE_DEFAULT or name.endswith("/" + ACCELERATE_DEFAULT):
            return name, text
    return None
