"""The release users install (issue 26, point 5): the tag the docs name exists on main, and the two
documented install paths work from it, in their documented form, with a local git URL in place of
GitHub's (no network to GitHub here; the form is the same):

- ``pip install "gpu-admission @ git+<repository>@<tag>"`` (docs/ci.md) into a fresh venv: the
  light install, ``--version`` is the tag's, and ``check`` judges a manifest;
- pre-commit with ``repo: <repository>`` and ``rev: <tag>`` (docs/ci.md, .pre-commit-hooks.yaml's
  own header): the hook refuses a commit of a 70B pod pinned to L4.

Marked ``install`` (slow: fresh venvs from PyPI, with pip's cache).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli.test_precommit import EXAMPLE, _env, _l40s, _run

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "ci.md"
REPOSITORY = "https://github.com/gpu-admission/gpu-admission"
_PIP = re.compile(r'pip install "gpu-admission @ git\+' + re.escape(REPOSITORY) + r'@(v[0-9][^"]*)"')
_REV = re.compile(r"- repo: " + re.escape(REPOSITORY) + r"\n\s+rev: (\S+)")


def documented() -> tuple[str, str]:
    """(the tag of the pip snippets, the rev of the pre-commit snippet), each the same everywhere."""
    text = DOCS.read_text() + (ROOT / "README.md").read_text()
    tags = set(_PIP.findall(text))
    revs = set(_REV.findall(DOCS.read_text() + (ROOT / ".pre-commit-hooks.yaml").read_text()))
    assert len(tags) == 1 and len(revs) == 1, (tags, revs)
    return tags.pop(), revs.pop()


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_documented_tag_is_a_release_on_main() -> None:
    tag, rev = documented()
    assert tag == rev
    assert git("tag", "--list", tag) == tag, f"no git tag {tag}: the documented install path does not exist"
    assert subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", tag, "HEAD"]).returncode == 0
    version = re.search(r'__version__ = "([^"]+)"', git("show", f"{tag}:webhook/__init__.py"))
    assert version and f"v{version.group(1)}" == tag
    changelog = git("show", f"{tag}:CHANGELOG.md")
    assert re.search(rf"^## {re.escape(version.group(1))} ", changelog, re.M), "the tag's CHANGELOG has no section"


def test_pip_installs_the_tag_from_its_git_url(tmp_path: Path) -> None:
    tag, _ = documented()
    env = _env(tmp_path)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    # a current pip, as CI runners have (setup-python, the python:3.11 image): the pip this Python's
    # venv bundles (23.2.1) refuses a named git+file URL (no host), though not the documented git+https
    _run([str(venv / "bin" / "pip"), "install", "--quiet", "--upgrade", "pip"], tmp_path, env)
    _run([str(venv / "bin" / "pip"), "install", "--quiet", f"gpu-admission @ git+file://{ROOT}@{tag}"], tmp_path, env)
    version = _run([str(venv / "bin" / "gpu-admission"), "--version"], tmp_path, env).stdout.strip()
    assert version == f"gpu-admission {tag[1:]}"
    manifest = tmp_path / "l4.yaml"
    manifest.write_text(_l40s(EXAMPLE.read_text()))
    done = _run([str(venv / "bin" / "gpu-admission"), "check", str(manifest)], tmp_path, env, check=False)
    assert done.returncode == 1 and "model-does-not-fit" in done.stdout, done.stdout + done.stderr


def test_pre_commit_runs_the_hook_at_the_tag(tmp_path: Path) -> None:
    _, rev = documented()
    env = _env(tmp_path)
    sample = tmp_path / "sample"
    (sample / "deploy").mkdir(parents=True)
    config = {"repos": [{"repo": str(ROOT), "rev": rev, "hooks": [{"id": "gpu-admission-check"}]}]}
    (sample / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (sample / "deploy" / "llama-70b-l4.yaml").write_text(_l40s(EXAMPLE.read_text()))
    _run(["git", "init", "--quiet"], sample, env)
    _run(["git", "add", "."], sample, env)
    done = _run([sys.executable, "-m", "pre_commit", "run", "--all-files"], sample, env, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Failed" in out and "model-does-not-fit" in out, out
