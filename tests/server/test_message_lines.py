"""A warning line kubectl shows whole: ``review.one_line`` cuts at a space, never inside a name
(moved from tests/core/test_messages.py: core tests import no server)."""

from __future__ import annotations

import pytest

from webhook.core.fixes import FIX_BUDGET
from webhook.server.review import WARNING_MAX_CHARS, one_line


def test_the_core_budget_is_the_servers_line() -> None:
    assert FIX_BUDGET == WARNING_MAX_CHARS


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("short", "short", id="kept"),
    pytest.param("a " * 70 + "NVIDIA-H100-80GB-HBM3", None, id="cut-before-a-name"),
    pytest.param("x" * 200, None, id="one-long-word"),
    pytest.param("warning: multi\nline", "multi line", id="one-line"),
])
def test_one_line_never_cuts_a_name(text: str, expected: str | None) -> None:
    line = one_line(text)
    assert len(line) <= WARNING_MAX_CHARS
    if expected is not None:
        assert line == expected
    if "NVIDIA" in text:
        assert "NVIDIA" not in line or "NVIDIA-H100-80GB-HBM3" in line
