"""``check`` on many manifests: parse and judge them in several processes, report them in order.

Why: on a repository of thousands of objects ``check`` spent about 60% of its time in PyYAML (the C
parser still builds every Python object in Python) and the rest in the engine, one core busy and the
others idle. A multi-document stream splits cheaply at its ``---`` lines, so the documents can be
parsed and judged in worker processes (forked: the policy and catalogs are loaded once, nothing
has to be pickled to start them) and the rows brought back in input order.

What stays exactly as in one process: the rows, their order and their ``file#index`` sources (each
group of documents reports how many documents it held, and indices are renumbered here), and the
errors: any group that does not parse sends its whole file through ``sources.parse_stream`` again,
so the message (file and line) is the one a serial run gives, in the file's place among the rows. A stream is only split where a split cannot change what PyYAML reads: at lines
that are exactly ``---`` (optionally a comment), and not at all when the file holds directives
(``%YAML``), document end markers (``...``) or a ``---`` line followed by content (``--- |``, a root
block scalar, may hold ``---`` lines at column 0). Anything unexpected from a worker (a dead process)
falls back to the serial run.

Rows cross the process boundary slimmed (``report.Row.slim``): the renderers read the object's
identity and the template's name, not the pod spec.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Callable

from webhook.cli import sources
from webhook.cli.report import Row

PARALLEL_MIN_DOCS = 200
"""Below this many documents a pool costs more (forking, ~20 ms a worker) than it saves."""
MAX_JOBS = 8
GROUPS_PER_JOB = 4
"""Groups per worker: enough to even out documents of unequal cost, few enough to keep each cheap."""

# Both are searched in "\n" + text, and begin with that newline instead of a multi-line "^": a
# pattern that starts with a literal is searched for by the literal, which is several times faster
# than a multi-line anchor, and this split is a serial step of every large `check`
_MARKER = re.compile(r"\n---[ \t]*(?:#[^\n]*)?(?=\n|\Z)")
_UNSPLITTABLE = re.compile(r"\n(?:%|\.\.\.(?:[ \t]|\n|\Z)|---[ \t]+[^\s#])")

Judge = Callable[[Sequence[sources.Document]], list[Row]]
"""Documents -> rows (``cli._rows`` with the run's settings, mode and inventory bound)."""
Problem = Callable[[str, sources.Unreadable], list[Row]]
"""A file that cannot be read or parsed -> its rows (``check``: one error or "render first" row)."""
Texts = Sequence[tuple[str, "str | sources.Unreadable"]]


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count), capped."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_JOBS, cpus))


def split_documents(text: str) -> list[str] | None:
    """``text`` cut before each ``---`` line into pieces that PyYAML reads as the same documents, or
    ``None`` when the stream must not be split (see the module docstring)."""
    lines = "\n" + text  # a match at i in ``lines`` is the line that starts at i in ``text``
    if _UNSPLITTABLE.search(lines):
        return None
    starts = [m.start() for m in _MARKER.finditer(lines)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


@dataclass(frozen=True)
class _Group:
    file: int
    """Position of the file in the input."""
    name: str
    text: str


@dataclass(frozen=True)
class _Done:
    file: int
    documents: int
    rows: list[tuple[int, Row]]
    """(document index within the group, slim row)."""
    failed: bool = False


def _groups(texts: Texts, jobs: int) -> list[_Group] | None:
    pieces: list[tuple[int, str, list[str]]] = []
    for i, (name, text) in enumerate(texts):
        if isinstance(text, sources.Unreadable):
            continue  # no documents: its row is made where the rows are put in order
        split = split_documents(text)
        pieces.append((i, name, split if split is not None else [text]))
    total = sum(len(p[2]) for p in pieces)
    if total < PARALLEL_MIN_DOCS:
        return None
    size = max(1, -(-total // (jobs * GROUPS_PER_JOB)))
    groups: list[_Group] = []
    for i, name, docs in pieces:
        for start in range(0, len(docs), size):
            groups.append(_Group(i, name, "".join(docs[start:start + size])))
    return groups


_judge: Judge | None = None  # the worker's judge, inherited through fork


def _work(group: _Group) -> _Done:
    try:
        docs, count = sources.parse_counted(group.text, group.name)
    except sources.InputError:
        return _Done(group.file, 0, [], failed=True)
    assert _judge is not None
    # documents are numbered "name#i" from 0 within the group, empty ones included
    rows = [(int(row.source.rsplit("#", 1)[1]), row.slim()) for row in _judge(docs)]
    return _Done(group.file, count, rows)


def _raise(name: str, problem: sources.Unreadable) -> list[Row]:
    raise sources.InputError(problem.about(name), templated=problem.templated)


def judge_texts(texts: Texts, judge: Judge, *, jobs: int, problem: Problem = _raise) -> list[Row]:
    """Rows of every document of ``texts`` ((name, text) pairs, in input order), judged by ``judge``,
    in ``jobs`` processes when there are enough documents. A file that cannot be read (an
    :class:`~webhook.cli.sources.Unreadable` text) or parsed gives ``problem``'s rows in its place;
    by default ``problem`` raises ``sources.InputError``, as ``sources.parse_stream`` does."""
    groups = _groups(texts, jobs) if jobs > 1 else None
    if groups is not None:
        done = _run_pool(groups, judge, jobs)
        if done is not None:
            return _assemble(texts, done, judge, problem)
    rows: list[Row] = []
    for name, text in texts:
        rows.extend(_serial(name, text, judge, problem))
    return rows


def _serial(name: str, text: "str | sources.Unreadable", judge: Judge, problem: Problem) -> list[Row]:
    if isinstance(text, sources.Unreadable):
        return problem(name, text)
    try:
        docs = sources.parse_stream(text, name)
    except sources.InputError as exc:
        return problem(name, sources.Unreadable(str(exc), templated=exc.templated))
    return judge(docs)


def _run_pool(groups: list[_Group], judge: Judge, jobs: int) -> list[_Done] | None:
    # imported here: multiprocessing is a tenth of the start-up of a `check` on one file, which needs no pool
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    global _judge
    _judge = judge
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(groups)), mp_context=get_context("fork")) as pool:
            # many small files make many groups: hand them out in batches, not one message each
            return list(pool.map(_work, groups, chunksize=max(1, len(groups) // (jobs * GROUPS_PER_JOB))))
    except (BrokenProcessPool, OSError):  # a worker died or could not start: do it here instead
        return None
    finally:
        _judge = None


def _assemble(texts: Texts, done: list[_Done], judge: Judge, problem: Problem) -> list[Row]:
    """The workers' rows in input order; a file one of whose groups did not parse (the split may
    have cut what only parses whole) is read again here, whole, as the serial run reads it."""
    failed = {d.file for d in done if d.failed}
    by_file: dict[int, list[_Done]] = {}
    for d in done:
        by_file.setdefault(d.file, []).append(d)
    rows: list[Row] = []
    for i, (name, text) in enumerate(texts):
        if i in failed or isinstance(text, sources.Unreadable):
            rows.extend(_serial(name, text, judge, problem))
            continue
        base = 0
        for d in by_file.get(i, []):
            rows.extend(replace(row, source=f"{name}#{base + local}") for local, row in d.rows)
            base += d.documents
    return rows
