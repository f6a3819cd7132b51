"""``check --output github``: GitHub Actions workflow commands, one annotation per finding.

A workflow step that prints ``::error file=F,line=L::message`` gets an annotation on that line of
the pull request's diff (GitHub's "Workflow commands for GitHub Actions": ``error``, ``warning`` and
``notice``, with the ``file``, ``line`` and ``title`` properties; in a message ``%``, CR and LF are
escaped as ``%25``, ``%0D``, ``%0A``, in a property also ``:`` and ``,`` as ``%3A``, ``%2C``).

What becomes what: a denied object and a file not read (or an object the engine raised on) are
``error``; an object admitted with warnings, and a GPU object that was not judged, are ``warning``
(never silent); a template to render first is a ``notice``; an object admitted without a warning
prints nothing. The line is where the object's document starts in its file (the first line of a
JSON file); the parser's line for a file that is not valid YAML. The last line is the text
report's summary, for the log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import yaml

from webhook.cli import report, sources

_PARSER_LINE = re.compile(r"^[^\n]*?:(\d+): ")


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def document_lines(text: str) -> list[int]:
    """The 1-based line of each document of a YAML stream, empty ones included (the indices of
    ``file#index``): where its content starts (``apiVersion: ...``, not the ``---`` before it), as
    far as the stream parses."""
    lines: list[int] = []
    opened = False
    try:
        for event in yaml.parse(text, Loader=sources.LOADER):
            if isinstance(event, yaml.DocumentStartEvent):
                opened = True
            elif opened:  # the document's root node
                lines.append(event.start_mark.line + 1)
                opened = False
    except yaml.YAMLError:
        pass
    return lines


def _line(row: report.Row, starts: Mapping[str, list[int]]) -> int:
    name, _, index = row.source.rpartition("#")
    if not name:  # a file's own row: the parser's line if it gave one
        found = _PARSER_LINE.match("; ".join(row.result.template.notes))
        return int(found.group(1)) if found else 1
    lines = starts.get(name, [])
    i = int(index) if index.isdigit() else 0
    return lines[i] if i < len(lines) else 1


def _file(row: report.Row) -> str:
    name, _, index = row.source.rpartition("#")
    return name if name and index.isdigit() else row.source


def render(rows: Sequence[report.Row], texts: Mapping[str, str]) -> str:
    """The workflow commands for ``rows``; ``texts``: file name -> its text (for the lines)."""
    starts: dict[str, list[int]] = {}
    out: list[str] = []
    for row in rows:
        name = _file(row)
        if name not in starts:
            starts[name] = document_lines(texts[name]) if name in texts else []
        command, title, message = _annotation(row)
        if command is None:
            continue
        props = f"file={escape_property(name)},line={_line(row, starts)},title={escape_property(title)}"
        out.append(f"::{command} {props}::{escape_data(message)}")
    out.append(report.render_text(rows).rstrip("\n").rsplit("\n", 1)[-1])
    return "\n".join(out) + "\n"


def _annotation(row: report.Row) -> tuple[str | None, str, str]:
    d = row.result.decision
    notes = "; ".join(row.result.template.notes)
    label = report.label(row)
    if report.is_unreadable(row):
        return "error", "gpu-admission: file not read", f"{notes}: nothing in it was judged"
    if report.is_failed(row):
        return "error", "gpu-admission: internal error", f"{label}: {notes}: {report.FAILED_MESSAGE}"
    if report.is_templated(row):
        if row.obj is None:
            return "notice", "gpu-admission: render first", notes
        return "notice", "gpu-admission: render first", f"{label}: {d.warnings[0] if d.warnings else notes}"
    if report.is_unjudged(row):
        return "warning", "gpu-admission: not judged", f"{label}: " + "; ".join(d.warnings)
    if not d.allowed:
        found = "; ".join(v.whole() for v in d.violations)
        return "error", "gpu-admission: denied", f"{label}: {found}"
    if d.warnings:
        return "warning", "gpu-admission: warning", f"{label}: " + "; ".join(d.warnings)
    return None, "", ""
