"""The layout's rules, enforced over the real import graph (ARCHITECTURE.md states them):

1. ``webhook.core`` imports nothing from ``webhook.server`` or ``webhook.cli``, none of the libraries
   a door owns (Flask, gunicorn, the Kubernetes client, Prometheus), nothing that keeps time, opens
   sockets or starts threads, and reads no file but its bundled data (``webhook.core.bundled``, the
   one core module that opens files: those of its own ``data/`` folder).
2. ``webhook.server`` never imports ``webhook.cli``; ``webhook.cli`` uses the server only through the
   names in ``webhook.server.__all__``.
3. Both doors import the core only through the modules in ``webhook.core.PUBLIC``.
4. ARCHITECTURE.md names every module of the package, and names none that does not exist.

The checker is a plain function over source text, so the table below first proves it catches each
kind of breach (a rule test that cannot fail would prove nothing), then it runs over the package.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import webhook.core
import webhook.server

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webhook"

DOOR_LIBRARIES = ("flask", "werkzeug", "gunicorn", "kubernetes", "prometheus_client", "cryptography")
"""Libraries only a door may use."""
IMPURE_STDLIB = ("os", "sys", "time", "datetime", "socket", "ssl", "selectors", "select", "threading",
                 "multiprocessing", "concurrent", "asyncio", "subprocess", "signal", "logging", "http",
                 "urllib", "tempfile", "shutil", "random", "io")
"""Standard-library modules that mean I/O, a clock, processes or threads: none belongs in the core."""
FILE_CALLS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes", "open", "iterdir", "glob", "rglob"})


@dataclass(frozen=True)
class Module:
    name: str
    """Dotted module name, e.g. ``webhook.core.engine``."""
    source: str
    is_package: bool = False


def _imports(module: Module) -> list[tuple[str, tuple[str, ...], int]]:
    """(imported module, names taken from it, line) for every import anywhere in the module,
    relative imports resolved (lazy imports inside functions count the same)."""
    out: list[tuple[str, tuple[str, ...], int]] = []
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            out.extend((alias.name, (), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((_from(module, node), tuple(alias.name for alias in node.names), node.lineno))
    return out


def _from(module: Module, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` statement of ``module`` reads, a relative one resolved."""
    base = node.module or ""
    if not node.level:
        return base
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    parts = package.split(".")
    anchor = ".".join(parts[: len(parts) - node.level + 1])
    return f"{anchor}.{base}" if base else anchor


BUNDLED_READER = "webhook.core.bundled"
"""The one core module that reads files: the package's own ``data/`` (plain files beside the modules;
not through ``importlib.resources``, whose import costs every ``check`` start about 12 ms)."""


def _file_access(module: Module) -> list[int]:
    """Lines of file calls (``open(...)``, ``x.read_text()``...) in a core module other than
    :data:`BUNDLED_READER`."""
    if module.name == BUNDLED_READER:
        return []
    bad: set[int] = set()
    for node in ast.walk(ast.parse(module.source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in FILE_CALLS:
            bad.add(node.lineno)
    return sorted(bad)


def _top(name: str) -> str:
    return name.split(".")[0]


def violations(module: Module) -> list[str]:
    """Every breach of the rules by one module, as ``module:line: what``."""
    out: list[str] = []
    where = module.name
    layer = where.split(".")[1] if where.count(".") >= 1 else ""
    for target, names, line in _imports(module):
        at = f"{where}:{line}"
        if layer == "core":
            if target.startswith(("webhook.server", "webhook.cli")) or (
                    target == "webhook" and any(n in ("server", "cli") for n in names)):
                out.append(f"{at}: the core imports a door ({target})")
            if _top(target) in DOOR_LIBRARIES or _top(target) in IMPURE_STDLIB:
                out.append(f"{at}: the core imports {target} (I/O, a clock or a door's library)")
            continue
        if layer not in ("server", "cli"):
            continue
        other = "cli" if layer == "server" else "server"
        if target == f"webhook.{other}" or target.startswith(f"webhook.{other}."):
            if layer == "server":
                out.append(f"{at}: the server imports the command line ({target})")
            elif target != "webhook.server":
                out.append(f"{at}: the command line imports a server internal ({target}); "
                           f"use a name of webhook.server.__all__")
            else:
                private = [n for n in names if n not in webhook.server.__all__]
                if private or not names:
                    out.append(f"{at}: the command line imports {private or target} from the server, "
                               f"not in webhook.server.__all__")
        if target == "webhook" and other in names:
            out.append(f"{at}: `from webhook import {other}`: import the names the door offers")
        if target == "webhook.core":
            private = [n for n in names if n not in webhook.core.PUBLIC and n not in webhook.core.__all__]
            if private or not names:
                out.append(f"{at}: {where} imports core internals {private or target}")
        elif target.startswith("webhook.core."):
            first = target.split(".")[2]
            if first not in webhook.core.PUBLIC:
                out.append(f"{at}: {where} imports core internal {target} (public: webhook.core.PUBLIC)")
    if layer == "core":
        out.extend(f"{where}:{line}: the core accesses a file" for line in _file_access(module))
    return out


def package_modules() -> list[Module]:
    mods = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        mods.append(Module(".".join(parts), path.read_text(encoding="utf-8"), is_package))
    return mods


# --- the checker catches each kind of breach ---------------------------------------------------------

BREACHES = [
    pytest.param("webhook.core.policy", "from webhook.server.review import respond", "imports a door", id="core-imports-server"),
    pytest.param("webhook.core.policy", "from webhook import cli", "imports a door", id="core-imports-cli-package"),
    pytest.param("webhook.core.launchers.scan", "from ...cli import report", "imports a door", id="core-relative-import-of-cli"),
    pytest.param("webhook.core.engine", "def f():\n    import flask", "flask", id="core-lazy-imports-flask"),
    pytest.param("webhook.core.engine", "import time", "time", id="core-keeps-time"),
    pytest.param("webhook.core.engine", "from kubernetes import client", "kubernetes", id="core-imports-kubernetes"),
    pytest.param("webhook.core.settings", "def f(p):\n    return open(p).read()", "accesses a file", id="core-opens-a-file"),
    pytest.param("webhook.core.settings", "def f(p):\n    return p.read_text()", "accesses a file", id="core-reads-a-path"),
    pytest.param("webhook.core.hardware",
                 "from importlib import resources\ndef f():\n    return resources.files('webhook.core').joinpath('x').read_text()",
                 "accesses a file", id="core-reads-data-outside-bundled"),
    pytest.param("webhook.server.app", "from webhook.cli import report", "imports the command line", id="server-imports-cli"),
    pytest.param("webhook.server.gunicorn.application", "from webhook.cli.main import main", "imports the command line",
                 id="server-gunicorn-imports-cli"),
    pytest.param("webhook.cli.main", "from webhook.server.app import create_app", "server internal", id="cli-imports-server-module"),
    pytest.param("webhook.cli.main", "from webhook.server import app", "not in webhook.server.__all__", id="cli-imports-server-submodule"),
    pytest.param("webhook.cli.main", "from webhook.core.policy import decide", "core internal", id="cli-imports-core-internal"),
    pytest.param("webhook.server.admission", "from webhook.core import inference", "core internals", id="server-imports-core-internal"),
    pytest.param("webhook.cli.report", "from webhook.core.launchers import parse_container", "core internal",
                 id="cli-imports-core-subpackage"),
]


@pytest.mark.parametrize(("name", "source", "expected"), BREACHES)
def test_checker_catches(name: str, source: str, expected: str) -> None:
    found = violations(Module(name, source))
    assert any(expected in v for v in found), found


ALLOWED = [
    pytest.param("webhook.core.bundled", "def text(name):\n    return (DATA / name).read_text()",
                 id="core-reads-bundled-data"),
    pytest.param("webhook.core.hardware", "from webhook.core import bundled\ndef f():\n    return bundled.text('gpus.yaml')",
                 id="core-asks-bundled-for-data"),
    pytest.param("webhook.core.models", "from .domain import ModelInfo", id="core-relative-sibling"),
    pytest.param("webhook.core.settings", "import yaml\nimport jsonschema", id="core-parses-yaml"),
    pytest.param("webhook.cli.main", "from webhook.server import run, ServeOptions", id="cli-uses-server-surface"),
    pytest.param("webhook.cli.main", "from webhook.core import engine, settings as s", id="cli-uses-core-public"),
    pytest.param("webhook.server.app", "from webhook.core.redaction import redact", id="server-uses-core-public"),
    pytest.param("webhook.server.app", "from webhook.server.gunicorn.overload import QUEUED_AT", id="server-uses-its-gunicorn"),
]


@pytest.mark.parametrize(("name", "source"), ALLOWED)
def test_checker_allows(name: str, source: str) -> None:
    assert violations(Module(name, source)) == []


# --- the package keeps the rules ---------------------------------------------------------------------


def test_every_folder_is_a_layer() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert layers == {"core", "server", "cli"}
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == {"__init__.py", "__main__.py"}, "a module outside core/, server/ and cli/"


def test_package_keeps_the_import_rules() -> None:
    mods = package_modules()
    assert len(mods) > 40  # the walk found the package
    found = [v for m in mods for v in violations(m)]
    assert found == [], "\n".join(found)


def test_public_surfaces_exist() -> None:
    for name in webhook.core.PUBLIC:
        assert (PACKAGE / "core" / f"{name}.py").exists(), name
    for name in webhook.server.__all__:
        assert getattr(webhook.server, name) is not None


def test_each_folder_says_what_it_owns_and_must_never_import() -> None:
    for folder in ("core", "server", "server/gunicorn", "cli"):
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())) or ""
        assert "Owns:" in doc and ("Never" in doc or "never" in doc), folder


def test_architecture_md_names_every_module() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table = text.split("## Folders", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)\.py`", table)) | set(re.findall(r"`(?:[a-z_]+/)*([a-z_]+)/`", table))
    modules = {p.stem for p in PACKAGE.rglob("*.py") if p.stem not in ("__init__", "__main__")}
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE} | {"data"}
    missing = sorted((modules | packages) - named)
    assert not missing, f"the folder table of ARCHITECTURE.md does not name: {missing}"
    unknown = sorted(named - modules - packages)
    assert not unknown, f"the folder table of ARCHITECTURE.md names what does not exist: {unknown}"
    for folder in re.findall(r"^\| `(webhook/[a-z_/]+)/` \|", table, re.M):
        assert (ROOT / folder / "__init__.py").exists(), folder


# --- no import cycle in the core ---------------------------------------------------------------------


def _module_level_imports(module: Module, known: frozenset[str]) -> set[str]:
    """The core modules ``module`` imports when it is loaded: statements at module level (not inside
    a function), each with the packages a submodule import loads."""
    out: set[str] = set()
    for node in ast.parse(module.source).body:
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from(module, node)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            parts = target.split(".")
            out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    # its own packages are already loading when a module of theirs is (Python puts the package in
    # sys.modules before running its __init__), so importing them is no edge
    ancestors = {module.name.rsplit(".", i)[0] for i in range(1, module.name.count(".") + 1)}
    return {name for name in out if name in known and name != module.name and name not in ancestors}


def import_cycles(modules: list[Module]) -> list[list[str]]:
    """Groups of modules that import each other at load time (Tarjan's strongly connected components
    of more than one module, or a module importing itself)."""
    known = frozenset(m.name for m in modules)
    graph = {m.name: _module_level_imports(m, known) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for other in sorted(graph[name]):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == name:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    modules = [Module("webhook.core.a", "from webhook.core import b\n"),
               Module("webhook.core.b", "from webhook.core.c import x\n"),
               Module("webhook.core.c", "import webhook.core.a\n"),
               Module("webhook.core.d", "def f():\n    from webhook.core import a\n"),
               Module("webhook.core.p", "from webhook.core.p import q\n", is_package=True),
               Module("webhook.core.p.q", "from webhook.core.p.r import x\n")]
    assert import_cycles(modules) == [["webhook.core.a", "webhook.core.b", "webhook.core.c"]]
    assert import_cycles(modules[1:]) == []


def test_the_core_has_no_import_cycle() -> None:
    core = [m for m in package_modules() if m.name.startswith("webhook.core")]
    assert len(core) > 40
    assert import_cycles(core) == []
