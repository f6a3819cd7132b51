"""``-m "not e2e"`` runs without Go (issue 27, point 8): every fixture that builds or downloads a
tool from Go modules is in ``conftest.GO_TOOL_FIXTURES``, and a test that uses one, directly or
through another fixture (pytest's ``fixturenames`` is the whole closure), is marked ``e2e`` at
collection. Found by reading the fixtures' source, so a new one cannot slip by."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import GO_TOOL_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
GO_SIGNS = ("build-control-plane.sh", "build-helm.sh", "install-promtool.sh", '"go", "mod"', "'go', 'mod'")


def _fixtures() -> dict[str, tuple[str, list[str], Path]]:
    """name -> (source, parameter names, file) of every pytest fixture under tests/."""
    out: dict[str, tuple[str, list[str], Path]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
                out[node.name] = (ast.get_source_segment(text, node) or "", [a.arg for a in node.args.args], path)
    return out


def test_every_go_fixture_marks_its_tests_e2e() -> None:
    fixtures = _fixtures()
    needs_go = {name for name, (source, _, _) in fixtures.items() if any(sign in source for sign in GO_SIGNS)}
    assert needs_go, "no fixture builds a Go tool: the signs above are stale"
    # a fixture that stands on one needs no entry: an item's fixturenames is the whole closure
    missing = sorted(needs_go - GO_TOOL_FIXTURES)
    assert not missing, f"add to tests/conftest.py GO_TOOL_FIXTURES: {missing}"


def test_the_hook_marks_a_user_of_a_go_fixture() -> None:
    from tests.conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, names: list[str]) -> None:
            self.fixturenames, self.marks = names, []

        def add_marker(self, mark) -> None:
            self.marks.append(mark.name)

    go, plain = Item(["tmp_path", "kubectl"]), Item(["tmp_path"])
    pytest_collection_modifyitems([go, plain])  # type: ignore[list-item]
    assert go.marks == ["e2e"] and plain.marks == []


def test_core_tests_import_no_server() -> None:
    """The core is tested as the pure pipeline it is: a test that needs the HTTP door lives in
    tests/server (issue 27, point 8)."""
    offenders = []
    for path in sorted((ROOT / "tests" / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n == "webhook.server" or n.startswith("webhook.server.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
