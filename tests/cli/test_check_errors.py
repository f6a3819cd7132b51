"""Issue 25, point 4, at the command line: ``check`` never prints a traceback and never exits 1 for a
bug. An object the engine raises on is one ``ERROR`` line naming it (``file#index``, kind and name)
and the exception; every other object is still judged and reported; the exit code is 2.

The bug that showed it (``replicas: "²"``: ``isdigit`` then ``int()``) is fixed, so the unexpected
exception is planted here (``engine.judge`` raising for one object), in one process and in the
worker processes of a large ``check``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli import check_pool
from webhook.cli.main import main
from webhook.core import engine

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"


def pod(name: str, gpus: Any = 1, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ai", **meta},
            "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                     "command": ["vllm", "serve", LLAMA_8B],
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def boom(monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine.judge`` raises for objects named ``boom*``: a bug the engine does not have yet."""
    real = engine.judge

    def judge(asked: engine.Request, *args: Any, **kw: Any) -> Any:
        if str(asked.obj.get("metadata", {}).get("name", "")).startswith("boom"):
            raise ValueError("invalid literal for int() with base 10: '\u00b2'\nsecond line")
        return real(asked, *args, **kw)

    monkeypatch.setattr(engine, "judge", judge)


def write(tmp_path: Path, *docs: Any) -> Path:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.usefixtures("boom")
def test_one_line_names_the_object_and_the_bug_the_others_are_judged(tmp_path: Path) -> None:
    path = write(tmp_path, pod("ok-before"), pod("boom"), pod("ok-after"))
    code, out, err = run("check", str(path))
    assert code == 2
    lines = [line for line in out.splitlines() if not line.startswith(" ")]  # verdict lines, not their details
    assert lines[0].startswith(f"OK    {path}#0  Pod ai/ok-before:")
    assert lines[1] == (f"ERROR {path}#1  Pod ai/boom: ValueError: invalid literal for int() with base 10: "
                        "'\u00b2': internal error, not judged (a bug in gpu-admission: please report it)")
    assert lines[2].startswith(f"OK    {path}#2  Pod ai/ok-after:")
    assert lines[-1] == "2 checked, 2 allowed, 0 denied, 0 warned, 1 internal error(s) (not judged)"
    assert "Traceback" not in out + err and "second line" not in out


@pytest.mark.usefixtures("boom")
def test_an_internal_error_outranks_a_denial(tmp_path: Path) -> None:
    """Exit 1 means "denied": a crash must not read as a verdict, whatever else the input holds."""
    path = write(tmp_path, pod("denied", gpus="x"), pod("boom"))
    assert run("check", str(path))[0] == 2
    assert run("check", write(tmp_path, pod("denied", gpus="x")).as_posix())[0] == 1


@pytest.mark.usefixtures("boom")
def test_json_and_junit_carry_the_error(tmp_path: Path) -> None:
    path = write(tmp_path, pod("boom", labels={"app": "x"}), pod("ok"))
    code, out, _ = run("check", str(path), "--output", "json")
    doc = json.loads(out)
    assert code == 2
    failed = doc["results"][0]
    assert failed["found"] == "error" and failed["allowed"] is False and failed["name"] == "boom"
    assert failed["error"] == "ValueError: invalid literal for int() with base 10: '\u00b2'"
    assert doc["results"][1]["allowed"] is True
    assert doc["summary"] == {"checked": 1, "without_gpus": 0, "allowed": 1, "denied": 0, "warned": 0, "unjudged": 0, "templated": 0,
                              "errors": 1, "unreadable": 0}
    code, out, _ = run("check", str(path), "--output", "junit")
    assert code == 2 and 'errors="1"' in out and "<error message=\"ValueError: invalid literal" in out
    assert "<failure" not in out


@pytest.mark.usefixtures("boom")
def test_worker_processes_report_it_the_same_way(tmp_path: Path) -> None:
    """A large ``check`` judges in forked workers (``check_pool``): the row crosses the process
    boundary like any other, so the report is the serial one."""
    n = check_pool.PARALLEL_MIN_DOCS + 20
    docs = [pod(f"ok-{i}") for i in range(n)]
    docs[137] = pod("boom-137")
    path = write(tmp_path, *docs)
    code, out, err = run("check", str(path), "--jobs", "2")
    serial = run("check", str(path), "--jobs", "1")
    assert code == serial[0] == 2 and out == serial[1]
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert errors == [f"ERROR {path}#137  Pod ai/boom-137: ValueError: invalid literal for int() with base 10: "
                      "'\u00b2': internal error, not judged (a bug in gpu-admission: please report it)"]
    assert out.splitlines()[-1].startswith(f"{n - 1} checked, {n - 1} allowed")
    assert "Traceback" not in err


@pytest.mark.usefixtures("boom")
def test_explain_says_not_judged_and_exits_2(tmp_path: Path) -> None:
    code, out, _ = run("explain", str(write(tmp_path, pod("boom"))))
    assert code == 2
    assert "Verdict: NOT JUDGED, internal error, not judged" in out
    assert "error: ValueError: invalid literal for int() with base 10: '\u00b2'" in out


def test_the_count_that_crashed_check_is_judged(tmp_path: Path) -> None:
    """``replicas: "²"`` (and the same digit in an annotation, a script and a quantity) was a
    traceback and exit 1; it is read as no count now, and the object is judged."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sup", "namespace": "ai"},
                  "spec": {"replicas": "\u00b2", "selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}, "annotations": {"gpu-admission.io/group-size": "\u00b2"}},
                      "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                                               "command": ["sh", "-c", f"exec vllm serve {LLAMA_8B} -tp $\u00b2"],
                                               "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
    path = write(tmp_path, deployment, pod("ok"))
    code, out, err = run("check", str(path))
    assert code == 0, out + err
    assert out.splitlines()[0].startswith(f"WARN  {path}#0  Deployment ai/sup: Llama-3.1-8B-Instruct 8B TP1 1 GPU;")
    assert "tensor parallel size from -tp is not a positive integer" in out  # "$²" is no positional parameter
    assert "ERROR" not in out and "Traceback" not in err


@pytest.mark.parametrize("jobs", [pytest.param("\u00b2", id="superscript"), pytest.param("\uff14", id="fullwidth"),
                                  pytest.param("+4", id="sign"), pytest.param("0", id="zero")])
def test_jobs_takes_ascii_digits_only(tmp_path: Path, jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--jobs ４`` was read as 4 (``isdigit`` then ``int()``); ``--jobs ²`` was argparse's generic
    "invalid _positive value"."""
    code, _, _ = run("check", str(write(tmp_path, pod("ok"))), "--jobs", jobs)
    assert code == 2
    assert f"must be a positive integer, got {jobs!r}" in capsys.readouterr().err
