"""``check`` on a real repository (issue 26, point 4): one bad file is one result, discovery skips
what is not the repository's manifests, an empty selection is not a pass, Helm chart templates say
"render first", and ``--output github`` annotates file and line."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_cli import BAD_POD, GOOD_POD, run
from webhook.cli import github, sources

BROKEN = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n bad: [\n"
"""Not YAML: the parser stops at line 5."""
CHART_TEMPLATE = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n{{- include \"x\" . }}\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# --- one bad file is one result --------------------------------------------------------------------

@pytest.mark.parametrize("jobs", ["1", "2"], ids=["serial", "parallel"])
def test_a_bad_file_is_one_error_result_and_the_rest_is_judged(tmp_path: Path, jobs: str) -> None:
    # enough documents for the pool (check_pool.PARALLEL_MIN_DOCS) in the parallel case
    many = "---\n".join(GOOD_POD.replace("name: llama,", f"name: llama-{i},") for i in range(210))
    tree(tmp_path, {"a-many.yaml": many, "b-broken.yaml": BROKEN, "c-bad.yaml": BAD_POD})
    code, out, err = run("check", str(tmp_path), "--jobs", jobs)
    assert code == 2 and err == "", err  # exit 2 only after everything is printed
    lines = out.splitlines()
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert errors == [f"ERROR {tmp_path / 'b-broken.yaml'}:5: invalid YAML: did not find expected key: not judged"]
    # in input order: the many pods, the broken file, then the denied pod
    assert lines.index(errors[0]) > max(i for i, ln in enumerate(lines) if "a-many.yaml#209" in ln)
    assert any(ln.startswith("DENY") and "c-bad.yaml#0" in ln for ln in lines)
    assert lines[-1].endswith("1 file(s) not read") and lines[-1].startswith("211 checked, 210 allowed, 1 denied")


def test_json_and_junit_carry_the_unread_file(tmp_path: Path) -> None:
    tree(tmp_path, {"a.yaml": GOOD_POD, "b.yaml": BROKEN})
    code, out, _ = run("check", str(tmp_path), "--output", "json")
    doc = json.loads(out)
    assert code == 2
    entry = doc["results"][1]
    assert entry["source"] == str(tmp_path / "b.yaml") and entry["found"] == "unreadable"
    assert entry["allowed"] is False and entry["error"].startswith(f"{tmp_path / 'b.yaml'}:5: invalid YAML")
    assert doc["summary"]["unreadable"] == 1 and doc["summary"]["checked"] == 1
    code, out, _ = run("check", str(tmp_path), "--output", "junit")
    suite = ET.fromstring(out).find("testsuite")
    assert code == 2 and suite is not None and suite.get("errors") == "1"
    (error,) = suite.iter("error")
    assert "invalid YAML" in (error.get("message") or "")


def test_a_file_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "ok.yaml").write_text(GOOD_POD)
    code, out, _ = run("check", str(tmp_path))
    assert code == 2 and f"ERROR {tmp_path / 'bin.yaml'}: not UTF-8 text: not judged" in out
    assert f"OK    {tmp_path / 'ok.yaml'}#0" in out


# --- discovery ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("files", "argv", "read"), [
    pytest.param({"a.yaml": "", ".github/w.yaml": "", ".venv/x/p.yaml": "", "node_modules/m/p.yml": "",
                  "x/__pycache__/p.json": "", ".pre-commit-config.yaml": "", "b/c.json": ""},
                 [], ["a.yaml", "b/c.json"], id="hidden-node-modules-pycache"),
    pytest.param({"a.yaml": "", "vendor/v.yaml": "", "x/vendor/w.yaml": ""}, ["--exclude", "vendor"],
                 ["a.yaml"], id="exclude-a-name-anywhere"),
    pytest.param({"a.yaml": "", "charts/c/t.yaml": "", "x/charts.yaml": ""}, ["--exclude", "charts/*"],
                 ["a.yaml", "x/charts.yaml"], id="exclude-a-relative-glob"),
    pytest.param({"a.yaml": "", "b.json": "", "c/d.json": ""}, ["--exclude", "*.json"], ["a.yaml"],
                 id="exclude-by-suffix"),
    pytest.param({"a.yaml": "", "b.yaml": ""}, ["--exclude", "a.yaml", "--exclude", "b.yaml"], [],
                 id="repeatable"),
    pytest.param({"a.yaml": "", "notes.txt": "", "b.yml": ""}, [], ["a.yaml", "b.yml"], id="suffixes"),
])
def test_discovery(tmp_path: Path, files: dict[str, str], argv: list[str], read: list[str]) -> None:
    root = tree(tmp_path / "repo", files)
    exclude = argv[1::2]
    assert [p.relative_to(root).as_posix() for p in sources.discover(root, exclude)] == read


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed: the .gitignore rule needs it")
def test_what_git_ignores_is_skipped_unless_named(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo", {".gitignore": "build/\n*.rendered.yaml\n", "ok.yaml": GOOD_POD,
                                    "build/out.yaml": BROKEN, "x.rendered.yaml": BROKEN})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert [p.name for p in sources.discover(root)] == ["ok.yaml"]
    code, out, _ = run("check", str(root))
    assert code == 0 and "not read" not in out, out
    # a directory named on the command line is read, ignored or not (a render into build/, in CI)
    code, out, _ = run("check", str(root / "build"))
    assert code == 2 and f"ERROR {root / 'build' / 'out.yaml'}:5" in out
    # and a file named is always read
    assert run("check", str(root / "x.rendered.yaml"))[0] == 2


def test_a_named_file_is_read_even_if_a_glob_matches_it(tmp_path: Path) -> None:
    path = tree(tmp_path, {"a.yaml": BAD_POD}) / "a.yaml"
    assert run("check", str(path), "--exclude", "*.yaml")[0] == 1


# --- an empty selection -------------------------------------------------------------------------

@pytest.mark.parametrize(("files", "extra", "code"), [
    pytest.param({}, [], 0, id="empty-dir-warns"),
    pytest.param({}, ["--strict"], 2, id="empty-dir-strict-fails"),
    pytest.param({"a.yaml": "# nothing\n"}, ["--strict"], 2, id="only-empty-documents-strict"),
    pytest.param({"node_modules/a.yaml": GOOD_POD}, ["--strict"], 2, id="all-skipped-strict"),
    pytest.param({"a.yaml": "---\n...\n\n"}, ["--strict"], 2, id="only-markers-strict"),
])
def test_an_empty_selection_is_not_a_pass(tmp_path: Path, files: dict[str, str], extra: list[str],
                                          code: int) -> None:
    root = tree(tmp_path / "repo", files)
    root.mkdir(exist_ok=True)
    got, out, err = run("check", str(root), *extra)
    assert got == code
    assert f"no manifests found in {root}" in err and ("error" if code else "warning") in err, err
    assert out.endswith("0 checked, 0 allowed, 0 denied, 0 warned\n"), out
    got, out, _ = run("check", str(root), *extra, "--output", "json")
    assert got == code and json.loads(out)["results"] == []


def test_objects_without_pods_are_a_selection_not_an_empty_one(tmp_path: Path) -> None:
    """A commit that touches only a ConfigMap (the pre-commit hook, --strict) has nothing to judge
    but found what it was given: exit 0, no warning."""
    root = tree(tmp_path, {"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"})
    code, out, err = run("check", str(root / "cm.yaml"), "--strict")
    assert code == 0 and err == "", err
    assert run("check", str(root), "--strict")[0] == 0


# --- Helm chart templates ------------------------------------------------------------------------

def test_helm_chart_templates_say_render_first(tmp_path: Path) -> None:
    root = tree(tmp_path, {"chart/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n",
                           "chart/templates/pod.yaml": CHART_TEMPLATE, "chart/values.yaml": "gpus: 4\n",
                           "ok.yaml": GOOD_POD})
    code, out, _ = run("check", str(root))
    chart = root / "chart"
    assert code == 0, out
    assert (f"SKIP  {chart / 'templates' / 'pod.yaml'}: a template of the Helm chart {chart}, not judged: "
            f"render it first (helm template {chart} | gpu-admission check -)") in out
    assert "1 templated (not judged)" in out
    assert run("check", str(root), "--strict")[0] == 1
    # a templates/ directory without a Chart.yaml beside it is read as manifests
    plain = tree(tmp_path / "plain", {"templates/pod.yaml": GOOD_POD})
    assert run("check", str(plain))[0] == 0


# --- --output github ------------------------------------------------------------------------------

def test_github_annotations_name_file_and_line(tmp_path: Path) -> None:
    stream = f"# a comment\n{GOOD_POD}---\n{BAD_POD}"
    tree(tmp_path, {"a.yaml": stream, "b.yaml": BROKEN})
    code, out, _ = run("check", str(tmp_path), "--output", "github")
    assert code == 2
    lines = out.splitlines()
    bad_line = stream.splitlines().index("---") + 2  # 1-based: the line after the second document's ---
    (denied,) = [ln for ln in lines if ln.startswith("::error") and "a.yaml" in ln]
    assert denied.startswith(f"::error file={tmp_path / 'a.yaml'},line={bad_line},title=gpu-admission%3A denied::")
    assert "Pod ai/llama-l4" in denied
    (unread,) = [ln for ln in lines if "b.yaml" in ln]
    assert unread.startswith(f"::error file={tmp_path / 'b.yaml'},line=5,title=gpu-admission%3A file not read::")
    assert not any("llama," in ln or "Pod ai/llama:" in ln for ln in lines if ln.startswith("::"))  # OK: silent
    assert lines[-1] == "2 checked, 1 allowed, 1 denied, 0 warned, 1 file(s) not read", lines[-1]


@pytest.mark.parametrize(("text", "lines"), [
    pytest.param("a: 1\n", [1], id="one-implicit"),
    pytest.param("---\na: 1\n---\nb: 2\n", [2, 4], id="content-after-explicit-starts"),
    pytest.param("# c\n\na: 1\n---\n---\nb: 2\n", [3, 5, 6], id="comments-and-an-empty-document"),
    pytest.param('{"kind": "Pod"}', [1], id="json"),
])
def test_document_lines(text: str, lines: list[int]) -> None:
    assert github.document_lines(text) == lines


@pytest.mark.parametrize(("raw", "data", "prop"), [
    pytest.param("a%b", "a%25b", "a%25b", id="percent"),
    pytest.param("x\ny\r", "x%0Ay%0D", "x%0Ay%0D", id="newlines"),
    pytest.param("k: v, w", "k: v, w", "k%3A v%2C w", id="colon-comma-in-properties"),
])
def test_github_escaping(raw: str, data: str, prop: str) -> None:
    assert github.escape_data(raw) == data and github.escape_property(raw) == prop
