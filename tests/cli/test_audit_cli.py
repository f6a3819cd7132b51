"""``gpu-admission audit --from DUMP`` (issue 29): the report of a saved ``kubectl get ... -o yaml``
dump, in text, JSON and JUnit, with ``check``'s exit codes. The dump is the snapshot of
tests/core/test_audit.py written as one ``kind: List``, as ``kubectl get -A -o yaml`` writes it.
The live path (the cluster through the kubeconfig, pages of 500) runs in tests/e2e/test_audit_e2e.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.cli.test_cli import run
from tests.core import test_audit as snapshot


@pytest.fixture()
def dump(tmp_path: Path) -> Path:
    path = tmp_path / "dump.yaml"
    items = [*snapshot.NODES, *snapshot.SNAPSHOT]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))
    return path


def test_json_names_every_workload_by_namespace_with_its_findings(dump: Path) -> None:
    code, out, err = run("audit", "--from", str(dump), "--output", "json")
    assert code == 1, err  # enforce would deny the L40S pin, and a group runs on two products
    data = json.loads(out)
    names = {ns: sorted(w["name"] for w in rows) for ns, rows in data["namespaces"].items()}
    assert names == {"serving": ["adhoc", "llama-70b", "llama-on-l40s", "qwen-7b"], "training": ["pretrain"]}
    pretrain = data["namespaces"]["training"][0]
    assert pretrain["result"] == "fail" and "mixed-products" in {f["rule"] for f in pretrain["findings"]}
    assert {p["value"] for p in pretrain["pods"]} == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}
    assert data["summary"]["workloads"] == 5 and data["summary"]["fail"] == 2
    idle = {i["value"]: i["idle"] for i in data["idle"]}
    assert idle == {"NVIDIA-A100-SXM4-80GB": 3, "NVIDIA-H100-80GB-HBM3": 0, "NVIDIA-L40S": 11}


def test_text_is_a_report_per_namespace(dump: Path) -> None:
    code, out, _ = run("audit", "--from", str(dump))
    assert code == 1
    assert "namespace serving:" in out and "namespace training:" in out
    assert "FAIL  Deployment/llama-on-l40s" in out and "FAIL  JobSet/pretrain" in out
    assert "runs on: NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3 (4 GPU pods)" in out
    assert out.rstrip().splitlines()[-1].startswith("5 GPU workloads: 2 failing")


def test_junit_has_a_suite_per_namespace(dump: Path) -> None:
    code, out, _ = run("audit", "--from", str(dump), "--output", "junit")
    assert code == 1
    root = ET.fromstring(out)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"serving", "training"}
    assert suites["training"].get("failures") == "1"
    failure = suites["training"].find("testcase/failure")
    assert failure is not None and "mixed-products" in (failure.get("message") or "")


def test_a_namespace_filter_judges_only_its_workloads_and_the_whole_clusters_capacity(dump: Path) -> None:
    code, out, _ = run("audit", "--from", str(dump), "--output", "json", "-n", "serving")
    data = json.loads(out)
    assert set(data["namespaces"]) == {"serving"} and code == 1
    assert {i["value"]: i["requested"] for i in data["idle"]}["NVIDIA-H100-80GB-HBM3"] == 16  # training's pods


def test_a_clean_namespace_exits_0(dump: Path) -> None:
    code, out, _ = run("audit", "--from", str(dump), "--output", "json", "-n", "nobody")
    assert code == 0 and json.loads(out)["summary"]["workloads"] == 0


@pytest.mark.parametrize(("argv", "said"), [
    pytest.param(["--from", "/nonexistent/dump.yaml"], "dump.yaml", id="missing-file"),
    pytest.param(["--from", "/dev/null"], "no objects", id="empty-dump"),
    pytest.param(["--config", "/nonexistent/policy.yaml", "--from", "/dev/null"], "policy.yaml", id="missing-policy"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], said: str) -> None:
    code, out, err = run("audit", *argv)
    assert code == 2 and not out
    assert said in err and "Traceback" not in err


def test_a_runtime_in_the_dump_is_the_context_of_the_kind_that_names_it(tmp_path: Path) -> None:
    """A TrainJob's ClusterTrainingRuntime, listed beside it, is read as its runtime (as `check`
    reads one in the same input), not reported missing; the runtime itself is no workload."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "trainjob-torch-llama.yaml"
    docs = [d for d in yaml.safe_load_all(examples.read_text()) if d]
    for i, d in enumerate(docs):
        d["metadata"]["uid"] = f"u{i}"
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    code, out, err = run("audit", "--from", str(path), "--output", "json")
    rows = [w for ws in json.loads(out)["namespaces"].values() for w in ws]
    assert [w["kind"] for w in rows] == ["TrainJob"], rows
    assert not any("not in the input" in f["message"] for f in rows[0]["findings"]), rows[0]["findings"]


@pytest.mark.parametrize("command", [["audit"], ["reporter", "--once"]])
def test_a_cluster_that_cannot_be_read_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    """A kubeconfig that is not one (here: an empty file) is the live commands' most common first
    error: one line that says so, exit 2, no traceback."""
    empty = tmp_path / "kubeconfig"
    empty.write_text("")
    code, out, err = run(*command, "--kubeconfig", str(empty))
    assert code == 2 and not out, err
    assert "cannot read the cluster" in err and "Traceback" not in err
