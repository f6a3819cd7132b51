"""`make test`'s first step (tests/tools/prepare.sh): each tool build says when it starts, that it is
still running, and how long it took; a failed one is said so and the suite still runs (issue 26:
the first run was ~9 minutes without a line of output). Fake steps stand in for the real builds
here (the real ones are what the suite's fixtures run)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREPARE = ROOT / "tests" / "tools" / "prepare.sh"


def test_steps_report_progress_and_a_failure_does_not_stop_the_suite(tmp_path: Path) -> None:
    slow = tmp_path / "slow.sh"
    slow.write_text("sleep 2.5; echo /some/bin\n")
    broken = tmp_path / "broken.sh"
    broken.write_text("echo 'broken: go is required' >&2; exit 7\n")
    steps = f"the slow tool|{slow}\nthe broken tool|{broken}\n"
    done = subprocess.run(["bash", str(PREPARE)], env=dict(os.environ, PREPARE_STEPS=steps, HEARTBEAT="1"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # a script's stdout (its bin directory) is not the user's business here
    lines = done.stderr.splitlines()
    assert re.match(r"make test: \[0m0\ds\] the slow tool \.\.\.$", lines[0]), lines
    assert any("still on the slow tool (" in ln and " s so far)" in ln for ln in lines), lines
    assert any(re.search(r"the slow tool: ready \(\d+ s\)$", ln) for ln in lines), lines
    assert "broken: go is required" in lines
    assert any("the broken tool: FAILED" in ln and "exited 7" in ln for ln in lines), lines
    assert lines[-1].endswith("tools ready; the test suite follows (about 12 minutes on 2 cores)")


def test_make_test_runs_it_before_pytest() -> None:
    target = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert target.index("bash tests/tools/prepare.sh") < target.index("-m pytest")
