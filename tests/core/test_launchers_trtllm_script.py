"""Issue 28: a TensorRT-LLM engine served by a launch script of its own (the Triton tutorials'
``server.py leader --tp=2 --pp=8``, the GKE LWS tutorial) is read for its split only when the command
line or the image names TensorRT-LLM; a ``--tp`` of any other script is not read. The LWS worker of
that tutorial states no split (it waits for the leader's ``mpirun``) and runs its leader's launch."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import settings as settings_mod
from webhook.core.launchers import parse_container
from tests.core.test_launchers import c, from_cm
from tests.judging import judge

REPO = "/data/tensorrtllm_backend/all_models/inflight_batcher_llm/"
TRITON_TRTLLM = "nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3"
TRTLLM = "nvcr.io/nvidia/tensorrt-llm/release:0.20.0"
LEADER = (f"./install_model.sh; python3 ./server.py leader --stateful_set_group_key=${{GROUP_KEY}} --pp=8 --tp=2 "
          f"--gpu_per_node=8 --triton_model_repo_dir={REPO}")
WORKER = f"./install_model.sh; python3 ./server.py worker --triton_model_repo_dir={REPO}"


def sh(script: str, **kw: Any) -> dict[str, Any]:
    return c(["sh", "-c", script], **kw)


READ = [
    pytest.param(sh(LEADER, image="IMAGE_NAME"),
                 dict(framework="triton-trtllm", tensor_parallel=2, pipeline_parallel=8, model=None),
                 id="gke-lws-leader-model-repo-path"),
    pytest.param(c(["python3", "server.py", "leader", "--tp", "4", "--pp", "2",
                    "--model", "meta-llama/Meta-Llama-3-8B"], image=TRITON_TRTLLM),
                 dict(framework="triton-trtllm", tensor_parallel=4, pipeline_parallel=2,
                      model="meta-llama/Meta-Llama-3-8B"),
                 id="triton-tutorial-leader-by-image"),
    pytest.param(c(["python3", "/app/serve_engine.py", "--tensor_parallel_size", "4", "--pipeline_parallel_size", "2"],
                   image=TRTLLM),
                 dict(framework="tensorrt-llm", tensor_parallel=4, pipeline_parallel=2),
                 id="trtllm-image-long-spellings-no-triton"),
    pytest.param(c(["python3", "server.py", "leader", f"--triton_model_repo_dir={REPO}", "--pp=2"]),
                 dict(framework="triton-trtllm", tensor_parallel=1, pipeline_parallel=2),
                 id="pp-only-tp-takes-the-script-default-1"),
    pytest.param(c(["python3", "server.py", "leader", "--tp", "8", "--dt", "bfloat16"], image=TRITON_TRTLLM),
                 dict(tensor_parallel=8, dtype="bf16"), id="dtype-flag"),
    pytest.param(c(["python3", "server.py", "leader", "--tp=$(TP)", "--pp", "2"], image=TRITON_TRTLLM,
                   env=[from_cm("TP")]),
                 dict(framework="triton-trtllm", tensor_parallel=None, unresolved=("tensor_parallel",)),
                 id="tp-from-a-configmap-is-not-a-default"),
]


@pytest.mark.parametrize(("container", "expected"), READ)
def test_trtllm_launch_script_split_is_read(container: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = parse_container(container)
    assert spec is not None and spec.role == "inference"
    assert {k: getattr(spec, k) for k in expected} == expected


NOT_READ = [
    pytest.param(c(["python3", "server.py", "leader", "--tp", "2", "--pp", "8"], image="myorg/app:1"),
                 id="tp-of-a-script-nothing-names-trtllm"),
    pytest.param(c(["python3", "bench.py", "--tp", "4"], image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"),
                 id="tp-of-a-pytorch-script"),
    pytest.param(sh(WORKER, image="IMAGE_NAME"), id="lws-worker-states-no-split"),
    pytest.param(c(["python3", "/data/tensorrtllm_backend/tensorrt_llm/examples/llama/convert_checkpoint.py",
                    "--model_dir", "./m", "--output_dir", "./ckpt", "--tp_size", "8", "--pp_size", "2"],
                   image=TRITON_TRTLLM),
                 id="checkpoint-converter-tp-size-is-not-a-server"),
]


@pytest.mark.parametrize("container", NOT_READ)
def test_no_trtllm_evidence_or_no_split_is_not_a_launcher(container: dict[str, Any]) -> None:
    assert parse_container(container) is None


def test_the_model_not_on_the_command_line_is_said() -> None:
    spec = parse_container(sh(LEADER, image="IMAGE_NAME"))
    assert spec is not None and any("gpu-admission.io/model" in n for n in spec.notes)


def _lws(leader: str, worker: str) -> dict[str, Any]:
    def template(script: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "main", "image": "IMAGE_NAME", "command": ["sh", "-c", script],
                                         "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "t"},
            "spec": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": template(leader),
                                              "workerTemplate": template(worker)}}}


def test_the_lws_worker_runs_its_leaders_split() -> None:
    leader, worker = judge(_lws(LEADER, WORKER), settings_mod.default())
    for r in (leader, worker):
        p = r.profile
        assert (p.framework, p.tensor_parallel, p.pipeline_parallel, p.gpus_per_pod, p.pods, p.gpus_used) == \
            ("triton-trtllm", 2, 8, 8, 2, 16)
        assert r.decision.allowed
    assert any("runs the launch of its group's leader (triton-trtllm)" in n for n in worker.profile.notes)


def test_a_worker_is_not_given_a_split_its_leader_does_not_state() -> None:
    _, worker = judge(_lws("python3 app.py", WORKER), settings_mod.default())
    assert worker.profile.tensor_parallel is None
    assert any("no known launcher or model id found" in n for n in worker.profile.notes)
