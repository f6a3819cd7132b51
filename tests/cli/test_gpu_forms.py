"""Issue 28 at ``check`` level: GPU requests in other forms are counted or said, never passed in silence.

- YAML anchors and aliases (``resources: *gpu8``, merge keys ``<<: *worker``) are resolved by the
  loader (PyYAML's safe loader, libyaml when present): the aliased GPUs are counted like written ones;
- a GPU quantity left empty by a template beside ``torchrun --nproc-per-node 8``: the object is
  reported templated, and the report keeps what the launcher states;
- a MIG slice (``nvidia.com/mig-3g.40gb``) and a KAI Scheduler shared GPU (``gpu-fraction``): a WARN
  row that says what was seen, not an OK row of a CPU pod.
The rules themselves are held in tests/core/test_gpu_shares.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import run

PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: train, namespace: ai}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - &trainer
              name: pytorch
              image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
              command: [torchrun, --nproc-per-node, "8", train.py, --model_name_or_path, Qwen/Qwen2.5-7B]
              resources: &gpu8
                limits: {nvidia.com/gpu: 8}
    Worker:
      replicas: 3
      template:
        spec:
          containers:
            - WORKER
"""

ALIAS_RESOURCES = """name: pytorch
              image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
              command: [torchrun, --nproc-per-node, "8", train.py, --model_name_or_path, Qwen/Qwen2.5-7B]
              resources: *gpu8"""


@pytest.mark.parametrize("worker", [
    pytest.param(ALIAS_RESOURCES, id="resources-alias"),
    pytest.param("*trainer", id="container-alias"),
    pytest.param("<<: *trainer\n              name: worker", id="merge-key"),
])
def test_aliased_gpu_resources_are_counted(tmp_path: Path, worker: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(PYTORCHJOB.replace("WORKER", worker))
    code, out, err = run("check", str(path), "--output", "json")
    assert code in (0, 1), err
    results = json.loads(out)["results"]
    assert [(r["template"], r["profile"]["gpus_per_pod"], r["profile"]["pods"]) for r in results] == [
        ("Master", 8, 4), ("Worker", 8, 4)], results


TEMPLATED = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: train, namespace: ai}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
              command: [torchrun, NPROC, train.py]
              resources:
                limits: {nvidia.com/gpu: QUANTITY}
"""


@pytest.mark.parametrize(("quantity", "nproc"), [
    pytest.param('""', "--nproc-per-node=8", id="empty-quantity-nproc-per-node"),
    pytest.param("null", "--nproc_per_node=8", id="null-quantity-nproc_per_node"),
    pytest.param('"{{ .Values.gpus }}"', "--nproc-per-node=8", id="helm-quantity"),
])
def test_a_templated_quantity_reports_what_the_launcher_states(tmp_path: Path, quantity: str, nproc: str) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(TEMPLATED.replace("QUANTITY", quantity).replace("NPROC", nproc))
    code, out, err = run("check", str(path))
    assert code == 0, err
    assert "templated: render it first" in out
    stated = "torchrun in pytorch at /spec/pytorchReplicaSpecs/Worker/template/spec states 8 GPU(s) per pod"
    assert stated in out, out
    code, out, _ = run("check", str(path), "--output", "json")
    (result,) = json.loads(out)["results"]
    assert result["found"] == "templated" and stated in result["reason"]


MIG_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: slice, namespace: ai}
spec:
  containers:
    - name: server
      image: vllm/vllm-openai:v0.10.1
      command: [vllm, serve, Qwen/Qwen2.5-7B-Instruct]
      resources:
        limits: {nvidia.com/mig-3g.40gb: 1}
"""

KAI_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: shared
  namespace: ai
  labels: {kai.scheduler/queue: default-queue}
  annotations: {gpu-fraction: "0.5"}
spec:
  schedulerName: kai-scheduler
  containers:
    - name: server
      image: vllm/vllm-openai:v0.10.1
      command: [vllm, serve, Qwen/Qwen2.5-7B-Instruct]
"""


@pytest.mark.parametrize(("manifest", "said"), [
    pytest.param(MIG_POD, "MIG: 1 x nvidia.com/mig-3g.40gb", id="mig-slice"),
    pytest.param(KAI_POD, "GPU sharing (KAI Scheduler annotations): gpu-fraction=0.5 of a GPU", id="kai-fraction"),
])
def test_other_gpu_forms_are_warned_rows(tmp_path: Path, manifest: str, said: str) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(manifest)
    code, out, err = run("check", str(path), "--strict")
    assert code == 0, (out, err)  # admitted and judged: not a skipped object, so --strict passes
    assert out.startswith("WARN") and said in out, out
    summary: dict[str, Any] = json.loads(run("check", str(path), "--output", "json")[1])["summary"]
    assert (summary["warned"], summary["without_gpus"], summary["unjudged"]) == (1, 0, 0), summary
