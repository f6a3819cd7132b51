"""Issue 24, point 6: templates are reported, not denied.

Public tutorials ship ``nvidia.com/gpu: $GPU_PER_NODE`` (for envsubst), Helm charts
``"{{ .Values.gpus }}"``, and a chart rendered without a value leaves ``nvidia.com/gpu:`` empty.
kube-apiserver refuses such quantities before any webhook sees the object, so offline they are
templates to render: ``check`` reports them ``SKIP ... templated: render it first`` and exits 0
unless ``--strict``. Kubernetes' own env expansion (``$(MODEL_ID)`` in args) is no template: such an
object is judged as before. The rules themselves are held in tests/core/test_templating.py; at
admission nothing changes (tests/server/test_templates_at_admission.py).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import run

MESSAGE = "templated: render it first (helm template / envsubst / kustomize)"
"""Written out, not imported: the test fails if the words change."""
LIMIT = "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama, namespace: ai}
spec:
  replicas: 1
  selector: {matchLabels: {app: llama}}
  template:
    metadata: {labels: {app: llama}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def deployment(gpus: str | None = "1", *, node_selector: str = "{kubernetes.io/os: linux}", command: str | None = None,
               env: str | None = None) -> str:
    """The 8B Deployment above with one field rewritten; ``gpus=None`` leaves the key without a value."""
    text = DEPLOYMENT.replace("nodeSelector: {kubernetes.io/os: linux}", f"nodeSelector: {node_selector}")
    text = text.replace("nvidia.com/gpu: 1", "nvidia.com/gpu:" if gpus is None else f"nvidia.com/gpu: {gpus}")
    if command is not None:
        text = text.replace("command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]", command)
    if env is not None:
        text = text.replace("          resources:", f"          env:\n{env}          resources:")
    return text


@dataclass(frozen=True)
class Case:
    manifest: str
    templated: str | None
    """The reason's words for a templated object, ``None`` for one judged as before."""


CASES = [
    pytest.param(Case(deployment("$GPU_PER_NODE"), f'GPU quantity "$GPU_PER_NODE" at {LIMIT}'),
                 id="envsubst-$GPU_PER_NODE"),
    pytest.param(Case(deployment("${GPUS}"), f'GPU quantity "${{GPUS}}" at {LIMIT}'), id="envsubst-${GPUS}"),
    pytest.param(Case(deployment('""'), f"empty GPU quantity at {LIMIT}"), id="empty-quantity"),
    pytest.param(Case(deployment(None), f"empty GPU quantity at {LIMIT}"), id="null-quantity"),
    pytest.param(Case(deployment('"{{ .Values.gpus }}"'), f'GPU quantity "{{{{ .Values.gpus }}}}" at {LIMIT}'),
                 id="helm-{{ .Values.gpus }}-quantity"),
    pytest.param(Case(deployment('"$(GPUS)"'), f'GPU quantity "$(GPUS)" at {LIMIT}'),
                 id="kustomize-var-$(GPUS)-quantity"),
    pytest.param(Case(deployment(node_selector='{nvidia.com/gpu.product: "{{ .Values.gpuProduct }}"}'),
                      'nodeSelector "{{ .Values.gpuProduct }}" at /spec/template/spec/nodeSelector/'
                      'nvidia.com~1gpu.product'),
                 id="helm-template-in-nodeSelector-value"),
    pytest.param(Case(deployment(command='command: [vllm, serve]\n          args: ["$(MODEL_ID)", --port, "8000"]',
                                 env="            - {name: MODEL_ID, value: meta-llama/Llama-3.1-8B-Instruct}\n"),
                      None),
                 id="kubelet-$(MODEL_ID)-in-args-is-judged"),
    pytest.param(Case(deployment(command='command: [sh, -c, "exec vllm serve ${MODEL} --port $PORT"]',
                                 env="            - {name: MODEL, value: meta-llama/Llama-3.1-8B-Instruct}\n"
                                     "            - {name: PORT, value: \"8000\"}\n"),
                      None),
                 id="shell-${MODEL}-in-command-is-judged"),
    pytest.param(Case(DEPLOYMENT, None), id="normal-object-is-judged"),
]


DENIED = deployment('"four"')
"""What ``check`` still denies (``invalid-gpu-request``): a GPU count that is no number and no template."""


def _json(*argv: str, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    code, out, err = run("check", *argv, "--output", "json", stdin=stdin)
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize("case", CASES)
def test_a_template_is_reported_not_denied(case: Case) -> None:
    code, doc = _json("-", stdin=case.manifest)
    (row,) = doc["results"]
    if case.templated is None:
        assert code == 0 and row["found"] == "kind" and row["allowed"] is True, row
        assert row["profile"]["model"] == "meta-llama/Llama-3.1-8B-Instruct" and row["profile"]["gpus_per_pod"] == 1
        assert "reason" not in row and doc["summary"]["templated"] == 0
        return
    assert code == 0, row  # was 1: denied invalid-gpu-request
    assert row["found"] == "templated" and row["reason"] == case.templated
    assert row["allowed"] is True and row["violations"] == [] and row["patch"] == []
    assert doc["summary"] == {"checked": 0, "without_gpus": 0, "allowed": 0, "denied": 0, "warned": 0, "unjudged": 0, "templated": 1,
                              "errors": 0, "unreadable": 0}
    _, out, _ = run("check", "-", stdin=case.manifest)
    first, detail, last = out.splitlines()
    assert first == f"SKIP  <stdin>#0  Deployment ai/llama: {MESSAGE}"
    assert detail == f"      {case.templated}"
    assert last == "0 checked, 0 allowed, 0 denied, 0 warned, 1 templated (not judged)"


@pytest.mark.parametrize(("manifest", "extra", "code"), [
    pytest.param(deployment("$GPU_PER_NODE"), [], 0, id="templated"),
    pytest.param(deployment("$GPU_PER_NODE"), ["--strict"], 1, id="templated-strict-fails"),
    pytest.param(deployment(None), ["--mode", "audit", "--strict"], 1, id="templated-strict-fails-in-audit"),
    pytest.param(DEPLOYMENT, ["--strict"], 0, id="normal-strict-passes"),
])
def test_exit_codes(manifest: str, extra: list[str], code: int) -> None:
    got, out, err = run("check", "-", *extra, stdin=manifest)
    assert got == code, out + err


def test_json_shape() -> None:
    stream = deployment('"{{ .Values.gpus }}"') + "---\n" + DEPLOYMENT
    code, doc = _json("-", stdin=stream)
    assert code == 0
    templated, judged = doc["results"]
    assert set(templated) == set(judged) | {"reason"}  # every field of a judged row, and the reason
    assert templated["source"] == "<stdin>#0" and templated["kind"] == "Deployment" and templated["name"] == "llama"
    assert templated["found"] == "templated" and templated["tier"] is None and templated["products"] is None
    assert templated["warnings"] == [f'{MESSAGE}: GPU quantity "{{{{ .Values.gpus }}}}" at {LIMIT}']
    assert templated["profile"]["gpus_per_pod"] == 0
    assert judged["found"] == "kind" and judged["tier"] == "cost"
    assert doc["summary"] == {"checked": 1, "without_gpus": 0, "allowed": 1, "denied": 0, "warned": 0, "unjudged": 0, "templated": 1,
                              "errors": 0, "unreadable": 0}


def test_junit_shape() -> None:
    stream = deployment("$GPU_PER_NODE") + "---\n" + deployment(None) + "---\n" + DEPLOYMENT
    code, out, _ = run("check", "-", "--output", "junit", stdin=stream)
    assert code == 0
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("1", "0", "2")
    cases = suite.findall("testcase")
    assert len(cases) == 3 and not suite.findall(".//failure")
    skipped = [c.find("skipped") for c in cases]
    assert skipped[2] is None
    assert [s.get("message") for s in skipped[:2] if s is not None] == [
        f'{MESSAGE}: GPU quantity "$GPU_PER_NODE" at {LIMIT}', f"{MESSAGE}: empty GPU quantity at {LIMIT}"]


def test_a_stream_with_a_template_and_a_denial_exits_1() -> None:
    """A template is skipped, a quantity that is no number (and no template) is still denied."""
    stream = deployment("$GPU_PER_NODE") + "---\n" + DENIED + "---\n" + deployment("${GPUS}")
    code, out, _ = run("check", "-", stdin=stream)
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0] == f"SKIP  <stdin>#0  Deployment ai/llama: {MESSAGE}"
    assert lines[2].startswith("DENY  <stdin>#1  Deployment ai/llama:")
    assert lines[3].startswith("      invalid-gpu-request: nvidia.com/gpu limits 'four' is not a quantity")
    assert lines[-1] == "1 checked, 0 allowed, 1 denied, 0 warned, 2 templated (not judged)"
    code, doc = _json("-", stdin=stream)
    assert code == 1 and [r["found"] for r in doc["results"]] == ["templated", "kind", "templated"]


def test_list_items_name_their_pointer() -> None:
    """A ``v1`` List of templates: the reason points into the item, as every other path of check."""
    item = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "x",
                                                "resources": {"limits": {"nvidia.com/gpu": "${N}"}}}]}})
    _, doc = _json("-", stdin=f'{{"apiVersion": "v1", "kind": "List", "items": [{{"kind": "Service"}}, {item}]}}')
    (row,) = doc["results"]
    assert row["pointer"] == "/items/1"
    assert row["reason"] == 'GPU quantity "${N}" at /items/1/spec/containers/0/resources/limits/nvidia.com~1gpu'


def test_a_quoted_token_is_redacted() -> None:
    """The reason quotes what the user wrote; a credential pasted there never reaches the CI log."""
    token = "hf_" + "Q" * 30
    manifest = deployment(node_selector=f'{{team: "{{{{ .Values.team }}}}{token}"}}')
    for output in ("text", "json", "junit"):
        _, out, _ = run("check", "-", "--output", output, stdin=manifest)
        assert "templated" in out and token not in out and "[redacted]" in out, output


def test_parallel_check_reports_templates_as_serial_does(tmp_path: Path) -> None:
    """check_pool sends slimmed rows between processes: the reason must survive the trip."""
    path = tmp_path / "many.yaml"
    path.write_text("---\n".join([deployment("$GPU_PER_NODE")] * 199 + [DENIED]))
    serial = run("check", str(path), "--output", "json", "--jobs", "1")
    parallel = run("check", str(path), "--output", "json", "--jobs", "2")
    assert serial == parallel and serial[0] == 1
    assert json.loads(serial[1])["summary"]["templated"] == 199


def test_explain_says_templated() -> None:
    code, out, _ = run("explain", "-", stdin=deployment("$GPU_PER_NODE"))
    assert code == 0
    assert f"Verdict: NOT JUDGED, {MESSAGE}" in out and f'GPU quantity "$GPU_PER_NODE" at {LIMIT}' in out


def test_an_unrendered_chart_file_says_to_render_it(tmp_path: Path) -> None:
    """A chart's template with ``{{- include ... }}`` lines is not YAML: one SKIP line with the advice
    (exit 1 under --strict, as any templated object), not an input error that ends the run."""
    path = tmp_path / "deployment.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    {{- include \"x.labels\" . | nindent 4 }}\n"
                    "spec: {}\n")
    code, out, err = run("check", str(path))
    assert code == 0 and err == ""
    assert out.startswith(f"SKIP  {path}:5: invalid YAML") and "a template? render it first" in out, out
    assert "1 templated (not judged)" in out
    assert run("check", str(path), "--strict")[0] == 1
