"""Reading manifests for ``check``: files, directories, stdin; multi-document YAML and JSON.

Everything is read and parsed before anything is judged, so an unreadable file or a YAML error
stops the run with exit 2 and a message naming the file and line, and nothing is half-printed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, TextIO

import yaml

from webhook.cli import yaml_fast

SUFFIXES = (".yaml", ".yml", ".json")


class InputError(Exception):
    """A manifest could not be read or parsed; the message names the file (and line)."""


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
        docs = yaml_fast.load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{name}{where}: invalid YAML: {problem}{_template_hint(text)}") from exc
    return [Document(f"{name}#{i}", doc) for i, doc in enumerate(docs) if doc is not None], len(docs)


TEMPLATE_HINT = " (it holds {{ ... }}: a template? render it first: helm template / envsubst / kustomize)"


def _template_hint(text: str) -> str:
    """The advice for a file that is not YAML because it is a Helm template (``{{- include ... }}``
    lines): still exit 2, the file cannot be read, but the message says what to do. A parsed
    template is reported by ``check`` instead (:mod:`webhook.core.templating`)."""
    start = text.find("{{")
    return TEMPLATE_HINT if start >= 0 and "}}" in text[start:] else ""


def read(paths: Iterable[str], stdin: TextIO | None = None) -> list[tuple[str, str]]:
    """(name, text) of every path (``-`` = stdin), directories searched recursively in sorted order."""
    texts: list[tuple[str, str]] = []
    for raw in paths:
        if raw == "-":
            stream = stdin if stdin is not None else sys.stdin
            texts.append(("<stdin>", stream.read()))
            continue
        path = Path(raw)
        if not path.exists():
            raise InputError(f"{raw}: no such file or directory")
        for file in _expand(path):
            try:
                text = file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{file}: not UTF-8 text") from None
            except OSError as exc:
                raise InputError(f"{file}: cannot read: {exc.strerror or exc}") from exc
            texts.append((str(file), text))
    return texts


def _expand(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    return [path]


def load(paths: Iterable[str], stdin: TextIO | None = None) -> list[Document]:
    """Documents of every path (``-`` = stdin), directories searched recursively in sorted order."""
    return [doc for name, text in read(paths, stdin) for doc in parse_stream(text, name)]
