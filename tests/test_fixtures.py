"""The test data describing other projects' manifests is the project's own (issue 28, point 1): each
file under tests/data/ is in the fixture form of tests/tools/fixture_facts.py (the facts the engine's
judgement rests on, no upstream text) and names the source it describes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
DESCRIBES = re.compile(r"# describes: [\w.-]+/[\w.-]+ \S+ @ [0-9a-f]{7,40}")


@pytest.mark.parametrize("folder", ["operators", "public"])
def test_every_fixture_is_in_the_fixture_form(folder: str) -> None:
    files = sorted((DATA / folder).rglob("*.yaml"))
    assert len(files) >= 20
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert DESCRIBES.fullmatch(text.splitlines()[0]), f
        assert "SPDX" not in text and "Copyright" not in text, f"{f}: upstream text in a fixture"
    done = subprocess.run([sys.executable, str(ROOT / "tests/tools/fixture_facts.py"), "--check", *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_nothing_else_lies_in_tests_data() -> None:
    """Only the two fixture folders and their READMEs: a copied file elsewhere would escape the check."""
    found = {p.relative_to(DATA).parts[0] for p in DATA.rglob("*") if p.is_file()}
    assert found <= {"operators", "public"}, found
    assert {p.suffix for p in DATA.rglob("*") if p.is_file()} <= {".yaml", ".md"}


def test_the_tool_refuses_a_file_without_a_source() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import fixture_facts

    with pytest.raises(ValueError, match="describes"):
        fixture_facts.render("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")


def test_a_keep_line_keeps_what_a_test_reads() -> None:
    """A field no rule reads goes, unless a `# keeps:` line names it."""
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import fixture_facts

    pod = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n"
           "    image: vllm/vllm-openai:v0.9.0\n    args: [--model, meta-llama/Llama-3.1-8B-Instruct]\n"
           "    resources: {limits: {nvidia.com/gpu: 1}}\n  priorityClassName: high\n")
    plain = fixture_facts.render("# source: o/r/p.yaml@0123456\n" + pod)
    kept = fixture_facts.render("# source: o/r/p.yaml@0123456\n"
                                "# keeps: Pod:spec.priorityClassName (a test reads it)\n" + pod)
    assert "priorityClassName" not in plain and "meta-llama/Llama-3.1-8B-Instruct" in plain
    assert "priorityClassName: high" in kept and "# keeps: Pod:spec.priorityClassName" in kept


def test_a_knative_service_is_a_workload_and_a_core_service_is_not() -> None:
    """The tool drops the objects around a workload by kind; Knative's Service shares the name of
    the core one and holds a pod template, so it stays (and its Route goes)."""
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import fixture_facts

    text = ("# source: o/r/knative samples/serve.yaml@0123456\n"
            "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: llm}\nspec:\n  template:\n"
            "    spec:\n      containers:\n      - image: vllm/vllm-openai:v0.9.0\n"
            "        args: [--model, meta-llama/Llama-3.1-8B-Instruct]\n"
            "        resources: {limits: {nvidia.com/gpu: 1}}\n"
            "---\napiVersion: v1\nkind: Service\nmetadata: {name: llm-lb}\nspec: {ports: [{port: 80}]}\n"
            "---\napiVersion: serving.knative.dev/v1\nkind: Route\nmetadata: {name: llm}\nspec: {traffic: []}\n")
    out = fixture_facts.render(text)
    assert out.startswith("# describes: o/r knative samples/serve.yaml @ 0123456\n")  # a path with a space
    docs = list(yaml.safe_load_all(out))
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [("serving.knative.dev/v1", "Service")]
    assert "meta-llama/Llama-3.1-8B-Instruct" in out
