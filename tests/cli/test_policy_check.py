"""``gpu-admission policy check FILE``: a policy file validated offline, as the server loads it."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import ROOT, run
from webhook.core.settings import embedded_policy_text

HEADER = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"


def test_a_valid_file_is_one_summary_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(HEADER + "mode: audit\n")
    code, out, err = run("policy", "check", str(policy))
    generation = hashlib.sha256(policy.read_bytes()).hexdigest()[:12]
    assert code == 0 and err == "" and out.count("\n") == 1, (out, err)
    assert out.startswith(f"OK {policy}: generation {generation}, mode audit, mutate true, ")
    assert "hbm-nvlink (8 products)" in out


def test_the_shipped_default_is_valid() -> None:
    code, out, _ = run("policy", "check", str(ROOT / "manifests/base/policy.yaml"))
    assert code == 0 and "mode enforce" in out
    assert run("policy", "check", "-", stdin=embedded_policy_text())[0] == 0


@pytest.mark.parametrize(("text", "reason"), [
    pytest.param("", "the policy file is empty", id="empty"),
    pytest.param("".join(embedded_policy_text().splitlines(keepends=True)[:3]), "the policy file is empty",
                 id="the-default-cut-after-three-lines"),
    pytest.param("mode: audit\n", "apiVersion: missing", id="no-header"),
    pytest.param(HEADER.splitlines(keepends=True)[0], "kind: missing", id="truncated"),
    pytest.param("- a list\n", "must be a YAML mapping", id="not-a-mapping"),
    pytest.param(HEADER + "mode: strict\n", "mode: 'strict' is not one of", id="bad-mode"),
    pytest.param(HEADER + "tiers:\n  - name: cost\n    products: [L40Z]\n", "tiers[0].products[0]", id="unknown-product"),
    pytest.param(HEADER + "sizing:\n  memoryUtilization: 1.5\n", "sizing.memoryUtilization", id="out-of-range"),
    pytest.param(HEADER + "mode: [audit\n", "line 4: invalid YAML", id="invalid-yaml"),
])
def test_an_invalid_file_exits_1_with_the_reason(tmp_path: Path, text: str, reason: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    code, out, err = run("policy", "check", str(policy))
    assert code == 1 and out == "", (out, err)
    assert err.startswith(f"INVALID {policy}: ") and reason in err, err
    code, out, err = run("policy", "check", "-", stdin=text)  # the same from stdin
    assert code == 1 and err.startswith("INVALID (stdin): ") and reason in err, err


def test_a_file_that_is_not_utf8_is_invalid(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_bytes(b"\xff\xfe\x00")
    code, _, err = run("policy", "check", str(policy))
    assert code == 1 and "not UTF-8" in err


@pytest.mark.parametrize(("argv", "needle"), [
    pytest.param(["policy"], "required", id="no-subcommand"),
    pytest.param(["policy", "check"], "required: FILE", id="no-file"),
    pytest.param(["policy", "check", "a.yaml", "b.yaml"], "unrecognized arguments", id="two-files"),
    pytest.param(["policy", "lint", "a.yaml"], "invalid choice", id="unknown-subcommand"),
    pytest.param(["policy", "check", "/nonexistent/policy.yaml"], "cannot read", id="missing-file"),
])
def test_usage_errors_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert needle in err + capsys.readouterr().err


def test_help_explains_the_rule_and_the_exit_codes() -> None:
    done = subprocess.run([sys.executable, "-m", "webhook", "policy", "check", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for needle in ("apiVersion: gpu-admission.io/v1alpha1", "kind: Policy", "truncated", "generation",
                   "exit codes: 0 valid", "1 invalid", "2 usage", "- for stdin"):
        assert needle in done.stdout, needle
