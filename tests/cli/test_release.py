"""The release users install (issue 26, point 5): the tag the docs name exists on main, and the two
documented install paths work from it, in their documented form, with a local git URL in place of
GitHub's (no network to GitHub here; the form is the same):

- ``pip install "gpu-admission @ git+<repository>@<tag>"`` (docs/ci.md) into a fresh venv: the
  light install, ``--version`` is the tag's, and ``check`` judges a manifest;
- pre-commit with ``repo: <repository>`` and ``rev: <tag>`` (docs/ci.md, .pre-commit-hooks.yaml's
  own header): the hook refuses a commit of a 70B pod pinned to L4.

The tag itself is state on the hosting side, and a clone of main may carry none (CI's does not), so the
release is recorded where every clone has it: CHANGELOG.md's section names the tag's commit. The tests
check that commit (on main's history, its version and CHANGELOG are the tag's), check a local tag of
that name points at it when one exists, and install from a temporary clone of this repository with
the tag made there at the recorded commit: the install paths are the documented ones, at the
documented tag name, on the recorded tree.

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


def git(*args: str, where: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=True).stdout.strip()


def recorded_commit(tag: str) -> str:
    """The commit CHANGELOG.md (at HEAD) names for ``tag``: ``(`vX.Y.Z`, commit `<40 hex>`)``."""
    found = re.search(rf"\(`{re.escape(tag)}`, commit `([0-9a-f]{{40}})`\)", (ROOT / "CHANGELOG.md").read_text())
    assert found, f"CHANGELOG.md names no commit for {tag}: write it in the release's section"
    return found.group(1)


def tagged_clone(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    """A clone of this repository with the documented tag at its recorded commit; (clone, tag)."""
    tag, _ = documented()
    clone = tmp_path / "gpu-admission"
    _run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)], tmp_path, env)
    _run(["git", "-C", str(clone), "tag", "--force", tag, recorded_commit(tag)], tmp_path, env)
    return clone, tag


def test_the_documented_tag_is_a_release_on_main() -> None:
    tag, rev = documented()
    assert tag == rev
    commit = recorded_commit(tag)
    assert subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"]).returncode == 0, (
        f"{tag}'s recorded commit {commit} is not on this branch's history")
    local = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}"],
                           capture_output=True, text=True)
    if local.returncode == 0:  # a clone that has the tag: it is the recorded commit, not a moved tag
        assert local.stdout.strip() == commit, f"tag {tag} is {local.stdout.strip()}, CHANGELOG.md records {commit}"
    version = re.search(r'__version__ = "([^"]+)"', git("show", f"{commit}:webhook/__init__.py"))
    assert version and f"v{version.group(1)}" == tag
    changelog = git("show", f"{commit}:CHANGELOG.md")
    assert re.search(rf"^## {re.escape(version.group(1))} ", changelog, re.M), "the tag's CHANGELOG has no section"


def test_pip_installs_the_tag_from_its_git_url(tmp_path: Path) -> None:
    env = _env(tmp_path)
    clone, tag = tagged_clone(tmp_path, env)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    # a current pip, as CI runners have (setup-python, the python:3.11 image): the pip this Python's
    # venv bundles (23.2.1) refuses a named git+file URL (no host), though not the documented git+https
    _run([str(venv / "bin" / "pip"), "install", "--quiet", "--upgrade", "pip"], tmp_path, env)
    _run([str(venv / "bin" / "pip"), "install", "--quiet", f"gpu-admission @ git+file://{clone}@{tag}"], tmp_path, env)
    version = _run([str(venv / "bin" / "gpu-admission"), "--version"], tmp_path, env).stdout.strip()
    assert version == f"gpu-admission {tag[1:]}"
    manifest = tmp_path / "l4.yaml"
    manifest.write_text(_l40s(EXAMPLE.read_text()))
    done = _run([str(venv / "bin" / "gpu-admission"), "check", str(manifest)], tmp_path, env, check=False)
    assert done.returncode == 1 and "model-does-not-fit" in done.stdout, done.stdout + done.stderr


def test_pre_commit_runs_the_hook_at_the_tag(tmp_path: Path) -> None:
    env = _env(tmp_path)
    clone, rev = tagged_clone(tmp_path, env)
    sample = tmp_path / "sample"
    (sample / "deploy").mkdir(parents=True)
    config = {"repos": [{"repo": str(clone), "rev": rev, "hooks": [{"id": "gpu-admission-check"}]}]}
    (sample / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (sample / "deploy" / "llama-70b-l4.yaml").write_text(_l40s(EXAMPLE.read_text()))
    _run(["git", "init", "--quiet"], sample, env)
    _run(["git", "add", "."], sample, env)
    done = _run([sys.executable, "-m", "pre_commit", "run", "--all-files"], sample, env, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Failed" in out and "model-does-not-fit" in out, out
