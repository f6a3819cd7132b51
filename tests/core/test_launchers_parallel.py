"""Expert and data parallelism (issue 15, point 3, the parsing half): flags -> LaunchSpec -> profile.

vLLM: every DP rank is TP x PP GPUs; ``--data-parallel-size-local`` ranks run in each pod; with
``--enable-expert-parallel`` the experts split over TP x DP ranks. SGLang: ``--tp`` is the whole
launch; ``--dp-size`` adds replicas unless ``--enable-dp-attention`` puts them inside the TP group;
``--ep-size`` or an all-to-all MoE backend splits the experts.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import settings as settings_mod
from tests.judging import judge
from webhook.core.launchers import parse_container

R1 = "deepseek-ai/DeepSeek-R1-0528"
V3 = "deepseek-ai/DeepSeek-V3"
S = settings_mod.default()


def c(command: list[str], env: dict[str, str] | None = None, gpus: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "server", "image": "vllm/vllm-openai:v0.11.0", "command": command}
    if env:
        out["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if gpus is not None:
        out["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return out


def vllm(*flags: str) -> dict[str, Any]:
    return c(["vllm", "serve", R1, *flags])


def sglang(*flags: str) -> dict[str, Any]:
    return c(["python3", "-m", "sglang.launch_server", "--model-path", V3, *flags])


WIDE_EP_SCRIPT = (
    "START_RANK=$(( ${LWS_WORKER_INDEX:-0} * DP_SIZE_LOCAL ))\n"
    f"exec vllm serve {R1} --port 8200 --trust-remote-code --data-parallel-hybrid-lb --enable-expert-parallel \\\n"
    "  --tensor-parallel-size $TP_SIZE --data-parallel-size $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) \\\n"
    "  --data-parallel-size-local $DP_SIZE_LOCAL --data-parallel-address ${LWS_LEADER_ADDRESS} \\\n"
    "  --data-parallel-rpc-port 5555 --data-parallel-start-rank $START_RANK --all2all-backend deepep_low_latency"
)
"""The decode worker of llm-d's wide-EP guide (guides/wide-ep-lws/manifests/modelserver/base/decode.yaml)."""
WIDE_EP_ENV = {"DP_SIZE_LOCAL": "8", "TP_SIZE": "1"}

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # ---- vLLM
    ("vllm-dp-tp", vllm("-dp", "4", "-tp", "2"),
     dict(data_parallel=4, tensor_parallel=2, data_parallel_local=None, nnodes=None, expert_parallel=None)),
    ("vllm-dp-local-spans-pods", vllm("--data-parallel-size", "16", "--data-parallel-size-local", "8"),
     dict(data_parallel=16, data_parallel_local=8, nnodes=2)),
    ("vllm-dpl-short", vllm("-dp", "4", "-dpl", "2", "-dpa", "10.0.0.1", "-dpp", "13345"),
     dict(data_parallel=4, data_parallel_local=2, nnodes=2)),
    ("vllm-dp-local-all-here", vllm("-dp", "8", "-dpl", "8"), dict(data_parallel_local=8, nnodes=None)),
    ("vllm-api-only-head", vllm("-dp", "4", "--data-parallel-size-local", "0"), dict(data_parallel_local=0, nnodes=None)),
    ("vllm-external-lb-rank", vllm("--data-parallel-size", "2", "--data-parallel-rank", "1"),
     dict(data_parallel=2, data_parallel_local=1, nnodes=2)),
    ("vllm-headless-start-rank", vllm("--headless", "-dp", "4", "-dpl", "2", "--data-parallel-start-rank", "2"),
     dict(data_parallel=4, data_parallel_local=2, model=R1)),
    ("vllm-ep-tp-dp", vllm("--enable-expert-parallel", "-tp", "2", "-dp", "8"),
     dict(expert_parallel=16, expert_parallel_enabled=True)),
    ("vllm-ep-short", vllm("-ep", "-dp", "8"), dict(expert_parallel=8, expert_parallel_enabled=True)),
    ("vllm-ep-dp-unresolved", c(["sh", "-c", f"vllm serve {R1} --enable-expert-parallel -dp $((A*B))"]),
     dict(expert_parallel=None, expert_parallel_enabled=True, data_parallel=None)),
    ("vllm-nnodes-flag-wins", vllm("-dp", "16", "-dpl", "8", "--nnodes", "4"), dict(nnodes=4)),
    ("vllm-task-embed", c(["vllm", "serve", "BAAI/bge-m3", "--task", "embed"]), dict(kind="embedding")),
    ("vllm-runner-pooling", c(["vllm", "serve", "BAAI/bge-reranker-v2-m3", "--runner", "pooling"]), dict(kind="embedding")),
    ("vllm-task-generate", vllm("--task", "generate"), dict(kind=None)),
    ("llm-d-wide-ep-script", c(["/bin/bash", "-c", WIDE_EP_SCRIPT], env=WIDE_EP_ENV),
     dict(framework="vllm", model=R1, tensor_parallel=1, data_parallel=None, data_parallel_local=8,
          expert_parallel_enabled=True, expert_parallel=None)),
    # ---- SGLang
    ("sglang-dpa-ep", sglang("--tp", "8", "--dp-size", "8", "--ep", "8", "--enable-dp-attention"),
     dict(tensor_parallel=8, data_parallel=8, dp_attention=True, expert_parallel=8, expert_parallel_enabled=True)),
    ("sglang-dpa-deepep-backend", sglang("--tp", "16", "--dp-size", "16", "--enable-dp-attention", "--moe-a2a-backend", "deepep"),
     dict(dp_attention=True, expert_parallel=16, expert_parallel_enabled=True)),
    ("sglang-old-deepep-flag", sglang("--tp", "8", "--enable-deepep-moe"), dict(expert_parallel=8, expert_parallel_enabled=True)),
    ("sglang-ep-size-1", sglang("--tp", "8", "--ep-size", "1", "--moe-a2a-backend", "deepep"),
     dict(expert_parallel=1, expert_parallel_enabled=False)),
    ("sglang-a2a-none", sglang("--tp", "8", "--moe-a2a-backend", "none"), dict(expert_parallel=None, expert_parallel_enabled=False)),
    ("sglang-native-dp", sglang("--tp", "2", "--dp", "2"), dict(data_parallel=2, dp_attention=False, tp_is_total=True)),
    ("sglang-embedding", c(["python3", "-m", "sglang.launch_server", "--model-path", "Alibaba-NLP/gte-Qwen2-7B-instruct",
                            "--is-embedding"]), dict(kind="embedding")),
    ("sglang-lws-pd-prefill", c(["python3", "-m", "sglang.launch_server", "--model-path", "/work/models", "--enable-dp-attention",
                                 "--dp-size", "16", "--tp-size", "16", "--nnodes", "2", "--node-rank", "0",
                                 "--moe-a2a-backend", "deepep", "--disaggregation-mode", "prefill"]),
     dict(tensor_parallel=16, data_parallel=16, nnodes=2, dp_attention=True, expert_parallel=16)),
    # ---- others that state an EP size
    ("trtllm-ep-size", c(["trtllm-serve", V3, "--tp_size", "8", "--ep_size", "4"]), dict(expert_parallel=4)),
    ("lmdeploy-dp-ep", c(["lmdeploy", "serve", "api_server", V3, "--dp", "8", "--ep", "8"]), dict(data_parallel=8, expert_parallel=8)),
]


@pytest.mark.parametrize(("container", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES])
def test_parse_parallelism(container: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = parse_container(container)
    assert spec is not None
    assert {k: getattr(spec, k) for k in expected} == expected


# --------------------------------------------------------------------------- into the profile


def pod(container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ai"},
            "spec": {"containers": [container]}}


def lws(container: dict[str, Any], size: int) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "decode", "namespace": "ai"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "workerTemplate": {
                "spec": {"containers": [container]}}}}}


PROFILES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("vllm-dp4-tp2-one-pod", pod(c(["vllm", "serve", R1, "-dp", "4", "-tp", "2"], gpus=8)),
     dict(data_parallel=4, gpus_used=8, pods=1, expert_parallel=False)),
    ("vllm-wide-ep-statefulset-style", pod(c(["vllm", "serve", R1, "-dp", "16", "-dpl", "8", "-ep"], gpus=8)),
     dict(data_parallel=16, data_parallel_local=8, pods=2, gpus_used=16, expert_parallel=True, expert_parallel_size=16)),
    ("llm-d-wide-ep-lws", lws(c(["/bin/bash", "-c", WIDE_EP_SCRIPT], env=WIDE_EP_ENV, gpus=8), 2),
     dict(tensor_parallel=1, data_parallel=16, data_parallel_local=8, pods=2, gpus_used=16, expert_parallel=True,
          expert_parallel_size=16, dp_attention=False)),
    ("sglang-dpa-uses-tp-gpus", pod(c(["python3", "-m", "sglang.launch_server", "--model-path", V3, "--tp", "8",
                                        "--dp-size", "8", "--enable-dp-attention", "--ep", "8"], gpus=8)),
     dict(tensor_parallel=8, data_parallel=8, dp_attention=True, gpus_used=8, expert_parallel=True, expert_parallel_size=8)),
    ("sglang-native-dp-adds-gpus", pod(c(["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
                                           "--tp", "2", "--dp", "2"], gpus=4)),
     dict(gpus_used=4, dp_attention=False, expert_parallel=False)),
    ("vllm-unresolved-tp-counts-nothing", pod(c(["vllm", "serve", R1, "-tp", "$(TP)"], gpus=8)),
     dict(gpus_used=None)),
]


@pytest.mark.parametrize(("obj", "expected"), [x[1:] for x in PROFILES], ids=[x[0] for x in PROFILES])
def test_profile_parallelism(obj: dict[str, Any], expected: dict[str, Any]) -> None:
    results = judge(obj, S)
    assert results
    profile = results[-1].profile
    assert {k: getattr(profile, k) for k in expected} == expected


def test_wide_ep_says_how_dp_was_taken() -> None:
    (r,) = judge(lws(c(["/bin/bash", "-c", WIDE_EP_SCRIPT], env=WIDE_EP_ENV, gpus=8), 2), S)
    assert "data parallel size taken as 8 local ranks x 2 pod(s) = 16" in r.profile.notes
    assert not any("requested but" in w for w in r.decision.warnings), r.decision.warnings


def test_unresolved_tp_gives_no_false_gpu_count_warning() -> None:
    (r,) = judge(pod(c(["vllm", "serve", R1, "-tp", "$(TP)"], gpus=8)), S)
    assert not any("requested but" in w for w in r.decision.warnings)
