"""The docs people navigate: README.md and docs/*.md.

1. Every relative markdown link (``[text](path#anchor)``) points to a file or folder that exists, and
   its ``#anchor``, if any, to a heading of that file, spelled as GitHub spells anchors (lower case,
   punctuation other than ``-`` and ``_`` dropped, spaces to ``-``, ``-1``, ``-2`` for repeats).
   Links inside fenced code blocks are not links.
2. Every docs page opens with a table of contents that lists each of its sections.
3. Every ``sh`` block marked ``<!-- runnable -->`` on the line before it runs from the repository
   root, with the virtualenv's ``bin`` first on PATH, and exits 0. Mark only cheap, offline commands.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = "<!-- runnable -->"
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text (before de-duplication)."""
    text = LINK.sub(r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def outside_fences(text: str):
    """(line number, line) of the lines that are not inside a fenced code block."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        yield number, line


def headings(path: Path) -> list[tuple[int, str]]:
    return [(len(m.group(1)), m.group(2)) for _, line in outside_fences(path.read_text())
            if (m := HEADING.match(line))]


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, text in headings(path):
        base = anchor(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path):
    for number, line in outside_fences(path.read_text()):
        for m in LINK.finditer(line):
            yield number, m.group(2)


@pytest.mark.parametrize(("heading", "expected"), [
    ("The admission server: `gpu-admission serve`", "the-admission-server-gpu-admission-serve"),
    ("Roll out: audit first, then enforce", "roll-out-audit-first-then-enforce"),
    ("Dynamic Resource Allocation (`resource.k8s.io/v1`)", "dynamic-resource-allocation-resourcek8siov1"),
    ("The scheduler's homogeneity score: a kube-scheduler extender",
     "the-schedulers-homogeneity-score-a-kube-scheduler-extender"),
    ("snake_case and-dash", "snake_case-and-dash"),
])
def test_anchor_rules(heading, expected):
    assert anchor(heading) == expected


def test_link_checker_catches_bad_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A section: `x`\n\n[ok](#a-section-x) [bad](#nope)\n"
                    "```\n[in a fence](#ignored)\n```\n")
    found = [target for _, target in links(page)]
    assert found == ["#a-section-x", "#nope"]
    assert anchors(page) == {"title", "a-section-x"}


def test_pages_exist():
    names = {p.name for p in PAGES}
    assert {"README.md", "server.md", "install.md", "ci.md", "inference.md", "policy.md",
            "dra-and-extender.md", "development.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file")
        elif fragment:
            if dest.is_dir() or dest.suffix != ".md":
                broken.append(f"{where}: an anchor on something that is not a markdown file")
            elif fragment not in anchors(dest):
                broken.append(f"{where}: no heading with that anchor")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", [p for p in PAGES if p.parent.name == "docs"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_page_starts_with_contents(page):
    hs = headings(page)
    assert hs[0][0] == 1, "a docs page starts with its title"
    assert hs[1] == (2, "Contents"), "then its table of contents"
    text = page.read_text()
    toc = text[text.index("## Contents"):]
    toc = toc[:toc.index("\n#", len("## Contents"))]
    listed = {m.group(2) for m in LINK.finditer(toc)}
    sections = {"#" + anchor(h) for level, h in hs[2:] if level == 2}
    assert sections <= listed, f"sections missing from the contents: {sections - listed}"


def runnable_blocks():
    blocks = []
    for page in PAGES:
        lines = page.read_text().split("\n")
        for i, line in enumerate(lines):
            if line.strip() != RUNNABLE:
                continue
            assert i + 1 < len(lines) and lines[i + 1].strip() == "```sh", (
                f"{page.relative_to(ROOT)}:{i + 1}: {RUNNABLE} must be on the line before a ```sh block")
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
            blocks.append(pytest.param("\n".join(lines[i + 2:end]),
                                       id=f"{page.relative_to(ROOT)}:{i + 2}"))
    return blocks


BLOCKS = runnable_blocks()


def test_some_blocks_are_runnable():
    assert len(BLOCKS) >= 2


def venv_bin() -> Path:
    venv = ROOT / ".venv" / "bin"
    return venv if (venv / "gpu-admission").exists() else Path(sys.executable).parent


@pytest.mark.parametrize("script", BLOCKS)
def test_runnable_block(script):
    env = dict(os.environ, PATH=f"{venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{script}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
