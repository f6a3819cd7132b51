"""The ``gpu-admission`` CLI: every exit code, every output format, stdin, directories, errors."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

GOOD_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: llama, namespace: ai}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.10.1
      command: [vllm, serve, meta-llama/Llama-3.1-70B-Instruct, --tensor-parallel-size, "4"]
      resources: {limits: {nvidia.com/gpu: 4, cpu: "32", memory: 256Gi}}  # Guaranteed: NUMA-aligned CPUs
"""
BAD_POD = GOOD_POD.replace("name: llama,", "name: llama-l4,").replace(
    "  containers:", "  nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}\n  containers:")


def run(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    try:
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        code = main(list(argv), out=out, err=err)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD_POD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_POD)
    return {"good": good, "bad": bad, "dir": tmp_path}


def test_examples_all_admitted() -> None:
    code, out, err = run("check", str(EXAMPLES), "--output", "json")
    assert code == 0, out + err
    doc = json.loads(out)
    kinds = {r["kind"] for r in doc["results"]}
    assert {"Deployment", "StatefulSet", "Job", "LeaderWorkerSet"} <= kinds
    cpu = [r for r in doc["results"] if r["profile"]["gpus_per_pod"] == 0 and not r["warnings"]]
    assert cpu, "the examples have CPU templates (a Ray head, an MPI launcher): they are not counted as checked"
    assert doc["summary"]["without_gpus"] == len(cpu)
    assert doc["summary"]["denied"] == 0 and doc["summary"]["checked"] == len(doc["results"]) - len(cpu) >= 8
    assert doc["summary"]["unjudged"] == 0, [r for r in doc["results"] if r["found"] == "unjudged"]


@pytest.mark.parametrize(("which", "extra", "code"), [
    pytest.param("good", [], 0, id="admitted-after-mutation"),
    pytest.param("good", ["--no-mutate"], 1, id="as-written-missing-selector"),
    pytest.param("bad", [], 1, id="denied"),
    pytest.param("bad", ["--mode", "audit"], 0, id="audit-admits"),
])
def test_exit_codes(files: dict[str, Path], which: str, extra: list[str], code: int) -> None:
    got, out, err = run("check", str(files[which]), *extra)
    assert got == code, out + err


def test_json_shape(files: dict[str, Path]) -> None:
    code, out, _ = run("check", str(files["good"]), str(files["bad"]), "--output", "json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc["summary"]) == {"checked", "without_gpus", "allowed", "denied", "warned", "unjudged", "templated",
                                   "errors", "unreadable"}
    assert doc["summary"] == {"checked": 2, "without_gpus": 0, "allowed": 1, "denied": 1, "warned": 0, "unjudged": 0, "templated": 0,
                              "errors": 0, "unreadable": 0}
    good, bad = doc["results"]
    for r in doc["results"]:
        assert {"source", "apiVersion", "kind", "name", "namespace", "allowed", "mode", "profile", "tier",
                "products", "patch", "warnings", "violations", "template", "found"} <= set(r)
        assert r["found"] == "kind"
        assert set(r["profile"]) == {"framework", "model", "params_b", "active_params_b", "dtype", "quantization",
                                     "tensor_parallel", "pipeline_parallel", "data_parallel", "gpus_per_pod", "pods"}
    assert good["source"] == f"{files['good']}#0" and good["name"] == "llama" and good["namespace"] == "ai"
    assert good["profile"]["framework"] == "vllm" and good["profile"]["tensor_parallel"] == 4
    assert good["profile"]["params_b"] == pytest.approx(70.6, abs=0.1) and good["profile"]["pods"] == 1
    assert good["patch"] and good["patch"][0]["op"] == "add" and "NVIDIA-A100-SXM4-80GB" in good["products"]
    assert bad["allowed"] is False and bad["patch"] == [] and bad["products"] is None
    assert [v["code"] for v in bad["violations"]] == ["model-does-not-fit"] and bad["violations"][0]["kind"] == "cannot-work"
    assert bad["violations"][0]["path"] == "/spec/nodeSelector"


def test_lws_one_result_per_template() -> None:
    code, out, _ = run("check", str(EXAMPLES / "lws-vllm-405b.yaml"), "--output", "json")
    assert code == 0
    results = json.loads(out)["results"]
    assert [r["template"] for r in results] == ["leader", "worker"]
    assert all(r["profile"]["pods"] == 2 for r in results)
    assert results[0]["patch"][0]["path"].startswith("/spec/leaderWorkerTemplate/leaderTemplate/spec/")


def test_junit(files: dict[str, Path]) -> None:
    code, out, _ = run("check", str(files["good"]), str(files["bad"]), "--output", "junit")
    assert code == 1
    root = ET.fromstring(out)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "1"
    failures = root.findall(".//failure")
    assert len(failures) == 1 and "model-does-not-fit" in (failures[0].get("message") or "")


def test_text_output(files: dict[str, Path]) -> None:
    code, out, _ = run("check", str(files["bad"]))
    assert code == 1
    assert out.startswith("DENY") and "model-does-not-fit" in out and "1 denied" in out


def test_stdin_multi_document_and_list() -> None:
    stream = GOOD_POD + "---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        yaml.safe_load(BAD_POD), {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}]})
    code, out, _ = run("check", "-", "--output", "json", stdin=stream)
    assert code == 1
    results = json.loads(out)["results"]
    assert [r["source"] for r in results] == ["<stdin>#0", "<stdin>#1"]
    assert results[1]["pointer"] == "/items/0"


def test_directory_recursion(files: dict[str, Path]) -> None:
    nested = files["dir"] / "sub" / "deeper"
    nested.mkdir(parents=True)
    (nested / "x.yml").write_text(GOOD_POD)
    (nested / "notes.txt").write_text("not yaml: [")
    code, out, _ = run("check", str(files["dir"]), "--output", "json")
    assert code == 1
    assert json.loads(out)["summary"]["checked"] == 3


@pytest.mark.parametrize(("content", "needle"), [
    pytest.param("a: [1, 2\nb: 3\n", ":2", id="unclosed-flow"),
    pytest.param("kind: Pod\n  bad: indent\n", ":2", id="bad-indent"),
])
def test_bad_yaml_names_file_and_line(tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text(content)
    good = tmp_path / "a-good.yaml"
    good.write_text(GOOD_POD)
    code, out, err = run("check", str(tmp_path))
    assert code == 2  # after everything is printed: the bad file is one ERROR line, the rest judged
    assert f"ERROR {f}{needle}: invalid YAML" in out, out
    assert f"OK    {good}#0" in out and "1 file(s) not read" in out, out


@pytest.mark.parametrize(("argv", "needle"), [
    pytest.param(["check", "/nonexistent/file.yaml"], "no such file", id="missing-file"),
    pytest.param(["check"], "give a file", id="no-paths"),
    pytest.param(["check", "x.yaml", "--output", "xml"], "invalid choice", id="bad-output"),
    pytest.param(["check", "x.yaml", "--mode", "strict"], "invalid choice", id="bad-mode"),
    pytest.param(["frobnicate"], "invalid choice", id="unknown-command"),
])
def test_usage_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(*argv)
    captured = capsys.readouterr()
    assert code == 2
    assert needle in err + captured.err


def test_bad_config_is_usage_error(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\nlargeModelParamsB: lots\n")
    code, out, err = run("check", str(files["good"]), "--config", str(cfg))
    assert code == 2 and "largeModelParamsB" in err and out == ""


def test_config_changes_decisions(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\nmode: audit\n")
    code, out, _ = run("check", str(files["bad"]), "--config", str(cfg), "--output", "json")
    assert code == 0 and json.loads(out)["results"][0]["mode"] == "audit"


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"\xff\xfe\x00garbage")
    code, out, _ = run("check", str(f))
    assert code == 2 and f"ERROR {f}: not UTF-8 text: not judged" in out, out


def test_explain(files: dict[str, Path]) -> None:
    code, out, _ = run("explain", str(files["bad"]))
    assert code == 1
    for needle in ("Profile", "vllm", "70.6B", "TP4", "NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB", "DENIED",
                   "model-does-not-fit [cannot-work", "decode ms/token"):
        assert needle in out, needle
    a100 = next(line for line in out.splitlines() if "NVIDIA-A100-SXM4-80GB " in line)
    l40s = next(line for line in out.splitlines() if "NVIDIA-L40S " in line)
    assert float(a100.split()[-1]) < float(l40s.split()[-1])  # HBM + NVLink decodes faster


def test_help_explains() -> None:
    code, out, _ = run_subprocess("check", "--help")
    assert code == 0 and "exit codes" in out and "--no-mutate" in out


def run_subprocess(*argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "webhook", *argv], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_python_dash_m_and_stdin_pipe(files: dict[str, Path]) -> None:
    code, out, err = run_subprocess("check", "-", "--output", "json", stdin=BAD_POD)
    assert code == 1, err
    assert json.loads(out)["summary"]["denied"] == 1




CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: four-gpus, namespace: ai}
spec:
  devices:
    requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 4}
"""


def test_check_judges_dra_claims(tmp_path: Path) -> None:
    f = tmp_path / "claim.yaml"
    f.write_text(CLAIM)
    code, out, _ = run("check", str(f), "--output", "json")
    assert code == 0
    (r,) = json.loads(out)["results"]
    assert r["kind"] == "ResourceClaim" and r["patch"] and r["patch"][0]["path"].startswith("/spec/devices")
    code, out, _ = run("check", str(f), "--no-mutate")
    assert code == 1 and "dra-missing-product-constraint" in out


UNKNOWN = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: finetune, namespace: ai}
spec:
  templates:
  - name: serve
    container:
      image: vllm/vllm-openai:v0.10.1
      command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]
      resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: example.com/v1
kind: Trainer
metadata: {name: mystery, namespace: ai}
spec:
  resources: {limits: {nvidia.com/gpu: 8}}
"""


@pytest.mark.parametrize(("extra", "code"), [pytest.param([], 0, id="reported"),
                                             pytest.param(["--strict"], 1, id="strict-fails")])
def test_unknown_kinds_are_found_generically_or_reported(tmp_path: Path, extra: list[str], code: int) -> None:
    path = tmp_path / "unknown.yaml"
    path.write_text(UNKNOWN)
    got, out, err = run("check", str(path), *extra)
    assert got == code, out + err
    assert "Workflow ai/finetune [serve] (found generically)" in out
    assert "SKIP" in out and "Trainer ai/mystery: not judged" in out
    assert "1 checked, 1 allowed, 0 denied, 0 warned, 1 GPU object(s) not judged" in out
    _, out, _ = run("check", str(path), "--output", "json", *extra)
    doc = json.loads(out)
    assert [r["found"] for r in doc["results"]] == ["generic", "unjudged"]
    assert doc["summary"]["unjudged"] == 1
    _, out, _ = run("check", str(path), "--output", "junit", *extra)
    assert '<skipped message="not judged: not-judged: this Trainer asks for GPUs' in out


def test_a_pinned_deployment_is_one_short_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 15: a check line listed every label spelling (~300 characters); one name per product now.
    Run from the repository root with a relative path, as CI runs `check`."""
    monkeypatch.chdir(EXAMPLES.parent)
    code, out, _ = run("check", "examples/vllm-llama-70b-tp4.yaml")
    line = out.splitlines()[0]
    assert code == 0 and len(line) < 200, line
    assert "A100-SXM4-80GB" in line and "NVIDIA-A100-SXM4-80GB" not in line


def test_a_configmap_beside_the_deployment_is_read(tmp_path: Path) -> None:
    """issue 15: `kustomize build | gpu-admission check -` has the ConfigMap the pod reads its model from."""
    stream = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: llm-config, namespace: ai}
data: {MODEL: meta-llama/Llama-3.1-70B-Instruct, TP: "4"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ai}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          command: [sh, -c, "vllm serve $MODEL --tensor-parallel-size $TP"]
          envFrom: [{configMapRef: {name: llm-config}}]
          resources: {limits: {nvidia.com/gpu: 4, cpu: "16", memory: 64Gi}}
"""
    code, out, err = run("check", "-", "--output", "json", stdin=stream)
    assert code == 0, out + err
    (row,) = json.loads(out)["results"]
    assert row["profile"]["model"] == "meta-llama/Llama-3.1-70B-Instruct" and row["profile"]["tensor_parallel"] == 4
