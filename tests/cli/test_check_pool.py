"""``check`` in several processes (``webhook.cli.check_pool``): the same report, in the same order, with
the same ``file#index`` sources and the same errors as one process."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any, Sequence

import pytest
import yaml
from hypothesis import given, settings, strategies as st
from tests.properties import examples

from bench import corpus
from webhook.cli import check_pool, main as cli, report, sources
from webhook.cli.main import main
from webhook.core import settings as settings_mod

S = settings_mod.default()


def judge(docs: Sequence[sources.Document]) -> list[report.Row]:
    return cli._rows(docs, S, mode=None, mutate=None)


def serial(texts: list[tuple[str, str]]) -> list[report.Row]:
    return judge([d for name, text in texts for d in sources.parse_stream(text, name)])


def rendered(rows: Sequence[report.Row]) -> tuple[str, str, str]:
    return report.render_json(rows), report.render_text(rows), report.render_junit(rows)


@pytest.fixture(scope="module")
def big_stream() -> str:
    """Over PARALLEL_MIN_DOCS documents, with what moves indices: empty documents, comments, a List,
    a scalar document, a comment on a marker line."""
    base = corpus.manifest_stream(check_pool.PARALLEL_MIN_DOCS + 60, seed=3)
    extras = ("---\n---\n# just a comment\n--- # marker with a comment\n" + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [next(iter(corpus.example_documents()))]}) + "---\nplain scalar\n")
    half = len(base) // 2
    cut = base.index("\n---", half) + 1
    return base[:cut] + extras + base[cut:]


SPLITS = [
    ("no-marker", "a: 1\n", ["a: 1\n"]),
    ("leading-marker", "---\na: 1\n---\nb: 2\n", ["---\na: 1\n", "---\nb: 2\n"]),
    ("implicit-first", "a: 1\n---\nb: 2\n", ["a: 1\n", "---\nb: 2\n"]),
    ("comment-on-marker", "a: 1\n--- # two\nb: 2\n", ["a: 1\n", "--- # two\nb: 2\n"]),
    ("indented-dashes-are-content", "a: |\n  ---\n  x\n", ["a: |\n  ---\n  x\n"]),
    ("dashes-in-a-word", "a: 1\n----\n", ["a: 1\n----\n"]),
    ("directive", "%YAML 1.1\n---\na: 1\n", None),
    ("document-end", "a: 1\n...\n---\nb: 2\n", None),
    ("content-after-marker", "--- |\n  x\n---\nb: 2\n", None),
    ("flow-after-marker", "--- {a: 1}\n", None),
    ("marker-at-end-of-text", "a: 1\n---", ["a: 1\n", "---"]),
    ("document-end-at-end-of-text", "a: 1\n...", None),
    ("directive-after-a-document", "a: 1\n%TAG ! x\n", None),
    ("crlf-marker-is-content", "a: 1\r\n---\r\nb: 2\r\n", ["a: 1\r\n---\r\nb: 2\r\n"]),
]

_LINE_MARKER = re.compile(r"^---[ \t]*(?:#[^\n]*)?$", re.M)
_LINE_UNSPLITTABLE = re.compile(r"^(?:%|\.\.\.(?:[ \t]|$)|---[ \t]+[^\s#])", re.M)


def _split_by_lines(text: str) -> list[str] | None:
    """The rule as first written, with multi-line anchors: the reference the faster one must equal."""
    if _LINE_UNSPLITTABLE.search(text):
        return None
    starts = [m.start() for m in _LINE_MARKER.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


_FRAGMENTS = st.sampled_from(["---", "--- ", "--- # c", "---\t", "--- x", "--- |", "...", "... ", "%YAML 1.1",
                              "----", " ---", "a: 1", "b: |", "  ---", "# c", "", "\r", "- x"])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_FRAGMENTS, st.sampled_from(["\n", "\r\n", ""])), max_size=12))
def test_split_documents_equals_the_line_anchored_rule(lines: list[tuple[str, str]]) -> None:
    text = "".join(fragment + end for fragment, end in lines)
    assert check_pool.split_documents(text) == _split_by_lines(text)


@pytest.mark.parametrize(("text", "pieces"), [s[1:] for s in SPLITS], ids=[s[0] for s in SPLITS])
def test_split_documents(text: str, pieces: list[str] | None) -> None:
    assert check_pool.split_documents(text) == pieces
    if pieces is not None:
        assert "".join(pieces) == text


def test_pool_gives_the_serial_rows(big_stream: str) -> None:
    texts = [("a.yaml", big_stream), ("b.yaml", "kind: ConfigMap\n"), ("c.yaml", big_stream)]
    assert check_pool._groups(texts, 2) is not None  # the pool really runs
    rows = check_pool.judge_texts(texts, judge, jobs=2)
    expected = serial(texts)
    assert [r.source for r in rows] == [r.source for r in expected]
    assert rendered(rows) == rendered(expected)
    assert any(r.source.startswith("c.yaml#") and r.pointer.startswith("/items/") for r in rows)


def test_small_inputs_stay_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_pool, "_run_pool", lambda *a: pytest.fail("a pool for a handful of documents"))
    text = corpus.manifest_stream(10)
    assert rendered(check_pool.judge_texts([("x", text)], judge, jobs=4)) == rendered(serial([("x", text)]))


def test_first_bad_file_is_reported_like_serial(big_stream: str) -> None:
    lines = big_stream.splitlines(keepends=True)
    broken = "".join(lines[:-40] + ["  bad: [unclosed\n"] + lines[-40:])
    texts = [("good.yaml", big_stream), ("bad1.yaml", broken), ("bad2.yaml", "a: 'x\n" + big_stream)]
    with pytest.raises(sources.InputError) as serial_error:
        serial(texts)
    with pytest.raises(sources.InputError) as pool_error:
        check_pool.judge_texts(texts, judge, jobs=2)
    assert str(pool_error.value) == str(serial_error.value)
    assert str(pool_error.value).startswith("bad1.yaml:")


def test_a_dead_worker_falls_back_to_one_process(big_stream: str) -> None:
    parent = os.getpid()

    def dying_judge(docs: Sequence[sources.Document]) -> list[report.Row]:
        if os.getpid() != parent:
            os._exit(3)  # what the OOM killer does to a worker
        return judge(docs)

    rows = check_pool.judge_texts([("a.yaml", big_stream)], dying_judge, jobs=2)
    assert rendered(rows) == rendered(serial([("a.yaml", big_stream)]))


def test_slim_rows_render_like_full_rows(big_stream: str) -> None:
    rows = serial([("a.yaml", big_stream)])
    assert rendered([r.slim() for r in rows]) == rendered(rows)


@pytest.mark.parametrize("output", ["json", "text", "junit"])
def test_cli_jobs_flag_same_report(tmp_path: Path, big_stream: str, output: str) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(big_stream)
    results: list[Any] = []
    for jobs in ("1", "2"):
        out, err = io.StringIO(), io.StringIO()
        code = main(["check", str(path), "--output", output, "--jobs", jobs], out=out, err=err)
        results.append((code, out.getvalue(), err.getvalue()))
    assert results[0] == results[1]
    assert results[0][0] in (0, 1)


def test_cli_jobs_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "x.yaml", "--jobs", "0"]) == 2  # argparse writes its usage error to stderr
    assert "argument --jobs: must be a positive integer" in capsys.readouterr().err


def test_unsplittable_big_file_is_still_right(big_stream: str) -> None:
    text = "%YAML 1.1\n---\n" + big_stream.split("\n---\n", 1)[1]
    assert check_pool.split_documents(text) is None
    rows = check_pool.judge_texts([("d.yaml", text), ("e.yaml", big_stream)], judge, jobs=2)
    assert rendered(rows) == rendered(serial([("d.yaml", text), ("e.yaml", big_stream)]))
