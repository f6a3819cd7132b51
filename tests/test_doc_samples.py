"""The docs' sample warnings are what the code says (issue 26, point 7): every ``Warning:`` line in a
fenced block of README.md and docs/*.md sits in a block marked ``<!-- sample: NAME -->``, and each
marked block is exactly what ``tests/tools/doc_samples.py`` generates from the server's admission
functions (``make doc-samples`` rewrites them). The numbers the docs give for ``numa-unaligned``
on the bundled examples and on tests/data/public are counted again here."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tools"))

import doc_samples  # noqa: E402

FENCE = re.compile(r"^[ \t]*```[a-z]*\n(.*?)^[ \t]*```\n", re.M | re.S)


@pytest.mark.parametrize("path", doc_samples.DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_marked_blocks_are_generated(path: Path) -> None:
    text = path.read_text()
    rendered, changed = doc_samples.render(text)
    assert not changed, f"{path.name}: stale samples {changed}: run make doc-samples"
    assert rendered == text


@pytest.mark.parametrize("path", doc_samples.DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_warning_line_is_in_a_marked_block(path: Path) -> None:
    text = path.read_text()
    generated = {m.start("body") for m in doc_samples.MARKER.finditer(text)}
    loose = [line.strip() for m in FENCE.finditer(text) if m.start(1) not in generated
             for line in m.group(1).splitlines() if line.strip().startswith("Warning: ")]
    assert not loose, f"{path.name}: Warning: lines written by hand (mark the block, add a sample): {loose}"


def test_every_sample_is_used() -> None:
    used = {name for path in doc_samples.DOCS for name in doc_samples.marked(path.read_text())}
    assert used == set(doc_samples.SAMPLES)


def _counts(target: str) -> tuple[int, int]:
    """(numa-unaligned warnings, all warnings) of ``check`` over ``target``."""
    done = subprocess.run([sys.executable, "-m", "webhook", "check", str(ROOT / target), "--output", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    warnings = [w for r in json.loads(done.stdout)["results"] for w in r.get("warnings", [])]
    return sum(w.startswith("numa-unaligned") for w in warnings), len(warnings)


def test_the_numa_counts_in_the_docs_are_current() -> None:
    text = " ".join((ROOT / "docs" / "inference.md").read_text().split())
    found = re.search(r"On the bundled examples this leaves (\d+) `numa-unaligned` warnings of (\d+) .*?"
                      r"on the public manifests of `tests/data/public`, (\d+) of (\d+)", text)
    assert found, "docs/inference.md no longer states the numa-unaligned counts"
    examples, public = _counts("examples"), _counts("tests/data/public")
    assert (int(found[1]), int(found[2])) == examples
    assert (int(found[3]), int(found[4])) == public
