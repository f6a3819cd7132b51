"""Reading manifests for ``check``: files, directories, stdin; multi-document YAML and JSON.

A repository is read as CI reads it: one file that cannot be read or parsed is one error result
(``check`` reports it among the others and exits 2 once everything is printed), never the end of the
run. Directories are searched the way a person means "the manifests here" (:func:`discover`): hidden
files and directories, ``node_modules``, ``__pycache__`` and the paths git ignores are skipped, as is
anything ``--exclude`` names; a file named on the command line is always read. The files of a Helm
chart's ``templates/`` directory are not manifests until rendered: they are reported "render first"
without being parsed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence, TextIO

import yaml

SUFFIXES = (".yaml", ".yml", ".json")

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""PyYAML's safe loader on its C parser (libyaml) when the wheel has it: the same documents as the
pure-Python one, several times faster."""


SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})
"""Directory names never searched (hidden ones neither: ``.git``, ``.venv``, ``.github``, ...)."""


class InputError(Exception):
    """A manifest could not be read or parsed; the message names the file (and line). ``templated``:
    the text is a template (``{{ ... }}``) and is to be rendered, not fixed."""

    def __init__(self, message: str, *, templated: bool = False) -> None:
        super().__init__(message)
        self.templated = templated


@dataclass(frozen=True)
class Unreadable:
    """In place of a file's text: why it was not read (one result of ``check``, the rest judged)."""

    reason: str
    templated: bool = False
    """A template to render first (a Helm chart's ``templates/``, or ``{{ ... }}`` that is not YAML):
    reported SKIP, not ERROR."""

    def about(self, name: str) -> str:
        """The reason naming the file ``name`` (a parser's message names it already, with its line)."""
        return self.reason if self.reason.startswith(name) else f"{name}: {self.reason}"


@dataclass(frozen=True)
class Document:
    source: str
    """``file#index`` (index of the document in the file, from 0)."""
    obj: Any


def parse_stream(text: str, name: str) -> list[Document]:
    """All non-empty documents of a YAML (or JSON) stream."""
    return parse_counted(text, name)[0]


def parse_counted(text: str, name: str) -> tuple[list[Document], int]:
    """:func:`parse_stream`, plus how many documents the stream held, empty ones included (each
    takes an index in ``file#index``)."""
    try:
        docs = list(yaml.load_all(text, Loader=LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        hint = _template_hint(text)
        raise InputError(f"{name}{where}: invalid YAML: {problem}{hint}", templated=bool(hint)) from exc
    return [Document(f"{name}#{i}", doc) for i, doc in enumerate(docs) if doc is not None], len(docs)


TEMPLATE_HINT = " (it holds {{ ... }}: a template? render it first: helm template / envsubst / kustomize)"


def _template_hint(text: str) -> str:
    """The advice for a file that is not YAML because it is a Helm template (``{{- include ... }}``
    lines): still exit 2, the file cannot be read, but the message says what to do. A parsed
    template is reported by ``check`` instead (:mod:`webhook.core.templating`)."""
    start = text.find("{{")
    return TEMPLATE_HINT if start >= 0 and "}}" in text[start:] else ""


def read(paths: Iterable[str], stdin: TextIO | None = None, *,
         exclude: Sequence[str] = ()) -> list[tuple[str, str | Unreadable]]:
    """(name, text) of every path (``-`` = stdin), directories searched as :func:`discover` says, in
    sorted order; a file that cannot be read has an :class:`Unreadable` in place of its text. A
    path that does not exist raises :class:`InputError` (a typo, not a finding)."""
    texts: list[tuple[str, str | Unreadable]] = []
    for raw in paths:
        if raw == "-":
            stream = stdin if stdin is not None else sys.stdin
            texts.append(("<stdin>", stream.read()))
            continue
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{raw}: no such file or directory")
        for file in discover(path, exclude) if path.is_dir() else [path]:
            texts.append((str(file), _read_one(file)))
    return texts


def _read_one(file: Path) -> str | Unreadable:
    chart = helm_chart_of(file)
    if chart is not None:
        return Unreadable(f"a template of the Helm chart {chart}, not judged: render it first "
                          f"(helm template {chart} | gpu-admission check -)", templated=True)
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Unreadable("not UTF-8 text")
    except OSError as exc:
        return Unreadable(f"cannot read: {exc.strerror or exc}")


def helm_chart_of(file: Path) -> Path | None:
    """The chart directory when ``file`` is under a Helm chart's ``templates/`` (a ``Chart.yaml``
    beside that directory), else None."""
    for parent in file.parents:
        if parent.name == "templates" and (parent.parent / "Chart.yaml").is_file():
            return parent.parent
    return None


def discover(root: Path, exclude: Sequence[str] = ()) -> list[Path]:
    """The ``*.yaml``, ``*.yml`` and ``*.json`` files under ``root``, sorted, without hidden files
    and directories, :data:`SKIPPED_DIRS`, the paths git ignores (when ``root`` is in a git work
    tree and git is installed) and the paths an ``exclude`` glob matches.

    A glob matches a path relative to ``root`` (``charts/*``, ``*.json``; ``*`` also crosses ``/``)
    or any one name in it (``vendor`` skips every directory or file named so)."""
    import fnmatch  # imported here, as subprocess below: only a directory search needs them (start-up of `check FILE`)

    found: list[Path] = []

    def excluded(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(name, g) for g in exclude)

    for top, dirs, files in os.walk(root):
        base = Path(top)
        rel_top = base.relative_to(root).as_posix()
        prefix = "" if rel_top == "." else rel_top + "/"
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS
                         and not excluded(prefix + d))
        found.extend(base / f for f in files
                     if not f.startswith(".") and Path(f).suffix in SUFFIXES and not excluded(prefix + f))
    return sorted(_not_ignored(root, found))


def _not_ignored(root: Path, files: list[Path]) -> list[Path]:
    """``files`` without those git ignores (``git check-ignore``: .gitignore files, info/exclude,
    the global excludes). Outside a work tree, without git, or when ``root`` itself is ignored,
    nothing is dropped."""
    import subprocess

    if not files:
        return files
    top = root.resolve()
    try:
        done = subprocess.run(["git", "-C", str(root), "check-ignore", "--stdin", "-z"],
                              input=b"".join(os.fsencode(p) + b"\0" for p in [top, *(f.resolve() for f in files)]),
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return files
    if done.returncode not in (0, 1):  # 128: not a git work tree
        return files
    ignored = {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}
    if str(top) in ignored:  # a directory named on the command line is read, ignored or not (a render
        return files         # into an ignored build/ checked in CI), as a named file is
    return [f for f in files if str(f.resolve()) not in ignored]


def is_blank(text: str) -> bool:
    """True when a YAML stream holds no document content at all: only blank lines, comments and
    document markers (``check`` then has nothing to judge: a path typo, an empty directory)."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped not in ("---", "..."):
            return False
    return True


def load(paths: Iterable[str], stdin: TextIO | None = None) -> list[Document]:
    """Documents of every path (``-`` = stdin), directories searched as :func:`discover` says;
    raises :class:`InputError` on the first file that cannot be read or parsed (``explain`` and
    ``--inventory`` read one file each: there it is the whole answer)."""
    docs: list[Document] = []
    for name, text in read(paths, stdin):
        if isinstance(text, Unreadable):
            raise InputError(f"{name}: {text.reason}", templated=text.templated)
        docs.extend(parse_stream(text, name))
    return docs
