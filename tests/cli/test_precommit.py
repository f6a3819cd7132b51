"""The pre-commit hook (.pre-commit-hooks.yaml), run by pre-commit itself on a sample repository,
configured as a user would: ``repo:`` + ``rev:`` + ``id: gpu-admission-check``.

pre-commit clones the hook repository at ``rev`` and ``pip install``s it (the light install) into
its own environment, so the hook repository here is a one-commit git snapshot of the working tree's
package files and hook manifest: the test checks what is edited, committed or not, and works from a
clean clone in CI. pre-commit comes from the test extra.

Marked ``install`` (slow: ~15-25 s, pre-commit builds the hook's virtualenv once, with pip's cache).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli.test_install_light import copy_tree_files

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-llama-70b-tp4.yaml"
HOOK_FILES = (".pre-commit-hooks.yaml", "setup.cfg", "pyproject.toml", "README.md", "webhook")
TIMEOUT = 600
"""Seconds for one pre-commit run: the first one installs the hook's environment from PyPI."""


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    (tmp / "gitconfig").write_text("[user]\n\tname = test\n\temail = test@example.com\n"
                                   "[commit]\n\tgpgsign = false\n[init]\n\tdefaultBranch = main\n")
    env.update(GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"), GIT_CONFIG_NOSYSTEM="1",
               PRE_COMMIT_HOME=str(tmp / "pre-commit-home"), PYTHONNOUSERSITE="1")
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _hook_repository(where: Path, env: dict[str, str]) -> str:
    """A git repository holding the working tree's hook manifest and package; its commit."""
    where.mkdir()
    copy_tree_files(HOOK_FILES, where)
    _run(["git", "init", "--quiet"], where, env)
    _run(["git", "add", "."], where, env)
    _run(["git", "commit", "--quiet", "-m", "snapshot of the working tree"], where, env)
    return _run(["git", "rev-parse", "HEAD"], where, env).stdout.strip()


def _l40s(text: str) -> str:
    """The 70B TP4 example pinned to L4: 33 GiB of weights per 24 GB card, the deny the hook exists for."""
    return text.replace("    spec:\n      containers:",
                        "    spec:\n      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}\n      containers:", 1)


def test_hooks_file_declares_the_check_hook() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gpu-admission-check"
    assert hook["entry"] == "gpu-admission check" and hook["language"] == "python"
    assert hook["pass_filenames"] is True and set(hook["types_or"]) == {"yaml", "json"}


def test_pre_commit_runs_the_hook_on_a_sample_repository(tmp_path: Path) -> None:
    env = _env(tmp_path)
    rev = _hook_repository(tmp_path / "hooks", env)
    sample = tmp_path / "sample"
    sample.mkdir()
    config = {"repos": [{"repo": str(tmp_path / "hooks"), "rev": rev, "hooks": [{"id": "gpu-admission-check"}]}]}
    (sample / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))  # YAML the hook also sees: it passes
    (sample / "deploy").mkdir()
    (sample / "deploy" / "llama-70b.yaml").write_text(EXAMPLE.read_text())
    (sample / "README.md").write_text("not a manifest: the hook's types leave it out\n")
    pre_commit = [sys.executable, "-m", "pre_commit"]
    _run(["git", "init", "--quiet"], sample, env)
    _run(["git", "add", "."], sample, env)

    done = _run([*pre_commit, "run", "--all-files"], sample, env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gpu-admission check" in done.stdout and "Passed" in done.stdout

    # the same, as a git hook: the commit of the good manifest goes through, the L40S pin is refused
    _run([*pre_commit, "install"], sample, env)
    _run(["git", "commit", "--quiet", "-m", "llama 70b"], sample, env)
    (sample / "deploy" / "llama-70b-l40s.yaml").write_text(_l40s(EXAMPLE.read_text()))
    _run(["git", "add", "."], sample, env)
    done = _run(["git", "commit", "-m", "llama 70b on L40S"], sample, env, check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Failed" in out and "DENY  deploy/llama-70b-l40s.yaml#0" in out and "model-does-not-fit" in out, out
    assert "llama-70b.yaml#0" not in out  # pass_filenames: only the staged file is judged
    assert _run(["git", "rev-list", "--count", "HEAD"], sample, env).stdout.strip() == "1"

    # args reach the command: in audit mode the same pin warns and the commit goes through
    config["repos"][0]["hooks"][0]["args"] = ["--mode", "audit"]
    (sample / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _run(["git", "add", "."], sample, env)
    done = _run(["git", "commit", "-m", "llama 70b on L40S, audited"], sample, env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
