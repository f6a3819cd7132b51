"""Tests for ``webhook.core.launchers``: one row per launcher and flag spelling, then the traps.

Each row is (id, container, expected fields); only the listed fields are checked, so a row says
exactly what it is about.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.properties import examples

from webhook.core.domain import LaunchSpec
from webhook.core.launchers import canonical_dtype, canonical_quantization, norm_flag, parse_container

M = "meta-llama/Llama-3.1-70B-Instruct"


def c(command: Any = None, args: Any = None, env: Any = None, image: str | None = None, **extra: Any) -> dict[str, Any]:
    """A container dict with only the given keys."""
    out: dict[str, Any] = {"name": "main", **extra}
    if command is not None:
        out["command"] = command
    if args is not None:
        out["args"] = args
    if env is not None:
        out["env"] = [{"name": k, "value": v} for k, v in env.items()] if isinstance(env, dict) else env
    if image is not None:
        out["image"] = image
    return out


def from_cm(name: str, cm: str = "llm-config", key: str = "tp") -> dict[str, Any]:
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": cm, "key": key}}}


def vllm(*flags: str) -> dict[str, Any]:
    return c(["vllm", "serve", M, *flags])


def pym(module: str, *args: str) -> list[str]:
    """``python -m module args``."""
    return ["python", "-m", module, *args]


TGI_IMAGE = "ghcr.io/huggingface/text-generation-inference:3.3.4"
NIM_8B = "nvcr.io/nim/meta/llama3-8b-instruct:1"
NIM_70B = "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.0"
TGL = "text-generation-launcher"


CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # ---- vLLM
    ("vllm-positional", vllm(), dict(framework="vllm", role="inference", model=M, tensor_parallel=None)),
    ("vllm-tp-long", vllm("--tensor-parallel-size", "4"), dict(tensor_parallel=4)),
    ("vllm-tp-short", vllm("-tp", "2"), dict(tensor_parallel=2)),
    ("vllm-tp-equals", vllm("--tensor-parallel-size=8"), dict(tensor_parallel=8)),
    ("vllm-tp-underscore", vllm("--tensor_parallel_size", "2"), dict(tensor_parallel=2)),
    ("vllm-pp-long", vllm("--pipeline-parallel-size", "2"), dict(pipeline_parallel=2)),
    ("vllm-pp-short", vllm("-pp", "4"), dict(pipeline_parallel=4)),
    ("vllm-pp-underscore-equals", vllm("--pipeline_parallel_size=2"), dict(pipeline_parallel=2)),
    ("vllm-dp-long", vllm("--data-parallel-size", "2"), dict(data_parallel=2)),
    ("vllm-dp-short", vllm("-dp", "4"), dict(data_parallel=4)),
    ("vllm-expert-parallel", vllm("-tp", "4", "-dp", "2", "--enable-expert-parallel"), dict(expert_parallel=8)),
    ("vllm-bool-before-model", c(["vllm", "serve", "--trust-remote-code", "Qwen/Qwen3-8B", "-tp", "2"]),
     dict(model="Qwen/Qwen3-8B", tensor_parallel=2)),
    ("vllm-ep-flag-does-not-swallow", c(["vllm", "serve", "--enable-expert-parallel", "Qwen/Qwen3-30B-A3B"]),
     dict(model="Qwen/Qwen3-30B-A3B", expert_parallel=1)),
    ("vllm-quant-long", vllm("--quantization", "awq_marlin"), dict(quantization="awq")),
    ("vllm-quant-short", vllm("-q", "gptq_marlin"), dict(quantization="gptq")),
    ("vllm-quant-equals", vllm("--quantization=fp8"), dict(quantization="fp8")),
    ("vllm-quant-unknown-lowercased", vllm("--quantization", "HQQ"), dict(quantization="hqq")),
    ("vllm-dtype-bfloat16", vllm("--dtype", "bfloat16"), dict(dtype="bf16")),
    ("vllm-dtype-half", vllm("--dtype=half"), dict(dtype="fp16")),
    ("vllm-dtype-float", vllm("--dtype", "float"), dict(dtype="fp32")),
    ("vllm-dtype-auto", vllm("--dtype", "auto"), dict(dtype="auto")),
    ("vllm-kv-cache", vllm("--kv-cache-dtype", "fp8_e4m3"), dict(kv_cache_dtype="fp8")),
    ("vllm-gpu-mem", vllm("--gpu-memory-utilization", "0.85"), dict(gpu_memory_utilization=0.85)),
    ("vllm-gpu-mem-underscore", vllm("--gpu_memory_utilization=0.9"), dict(gpu_memory_utilization=0.9)),
    ("vllm-module", c(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", M, "--tensor-parallel-size", "2"]),
     dict(framework="vllm", model=M, tensor_parallel=2)),
    ("vllm-module-python311-u", c(["python3.11", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model=x/y"]),
     dict(framework="vllm", model="x/y")),
    ("vllm-abs-path", c(["/usr/local/bin/vllm", "serve", M, "-tp", "8"]), dict(framework="vllm", tensor_parallel=8)),
    ("vllm-uv-run", c(["uv", "run", "--with", "vllm", "vllm", "serve", M]), dict(framework="vllm", model=M)),
    ("vllm-positional-beats-model-flag", c(["vllm", "serve", "a/b", "--model", "c/d"]), dict(model="a/b")),
    ("vllm-image-args-only", c(args=[M, "--tensor-parallel-size", "4"], image="vllm/vllm-openai:v0.10.1"),
     dict(framework="vllm", model=M, tensor_parallel=4)),
    ("vllm-entrypoint-wrapper", c(["/opt/nvidia/nvidia_entrypoint.sh", "vllm", "serve", M]), dict(model=M)),
    ("vllm-served-name-not-model", vllm("--served-model-name", "llama"), dict(model=M)),
    ("vllm-without-serve", c(["vllm", "--version"]), None),
    # ---- TGI
    ("tgi-flags", c([TGL, "--model-id", M, "--num-shard", "2"]),
     dict(framework="tgi", role="inference", model=M, tensor_parallel=2, uses_all_gpus=False)),
    ("tgi-image-args-only", c(args=["--model-id", M, "--num-shard=4"], image=TGI_IMAGE),
     dict(framework="tgi", model=M, tensor_parallel=4)),
    ("tgi-image-env-only", c(env={"MODEL_ID": M, "NUM_SHARD": "2"}, image=TGI_IMAGE),
     dict(framework="tgi", model=M, tensor_parallel=2)),
    ("tgi-sagemaker", c(env={"HF_MODEL_ID": M, "SM_NUM_GPUS": "8", "HF_MODEL_QUANTIZE": "gptq"},
                        image="763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.4.0"),
     dict(framework="tgi", model=M, tensor_parallel=8, quantization="gptq")),
    ("tgi-no-shard-uses-all", c([TGL, "--model-id", M]), dict(tensor_parallel=None, uses_all_gpus=True)),
    ("tgi-sharded-false", c([TGL, "--sharded", "false", "--model-id", M]),
     dict(tensor_parallel=1, uses_all_gpus=False, model=M)),
    ("tgi-sharded-bool-no-swallow", c([TGL, "--sharded", "--model-id", M]),
     dict(uses_all_gpus=True, model=M)),
    ("tgi-sharded-env-false", c([TGL], env={"SHARDED": "false", "MODEL_ID": M}),
     dict(tensor_parallel=1, model=M)),
    ("tgi-flag-beats-env", c([TGL, "--num-shard", "2"], env={"NUM_SHARD": "4"}), dict(tensor_parallel=2)),
    ("tgi-quantize-nf4", c([TGL, "--quantize", "bitsandbytes-nf4"]), dict(quantization="bnb-4bit")),
    ("tgi-quantize-env-eetq", c([TGL], env={"QUANTIZE": "eetq"}), dict(quantization="int8")),
    ("tgi-quantize-marlin", c([TGL, "--quantize=marlin"]), dict(quantization="gptq")),
    ("tgi-dtype", c([TGL, "--dtype", "bfloat16"]), dict(dtype="bf16")),
    ("tgi-dtype-env", c([TGL], env={"DTYPE": "float16"}), dict(dtype="fp16")),
    ("tgi-underscores", c([TGL, "--model_id", M, "--num_shard", "4"]), dict(model=M, tensor_parallel=4)),
    # ---- SGLang
    ("sglang-tp", c(["python3", "-m", "sglang.launch_server", "--model-path", M, "--tp", "8"]),
     dict(framework="sglang", model=M, tensor_parallel=8, tp_is_total=True)),
    ("sglang-tp-size", c(pym("sglang.launch_server", "--model", M, "--tp-size", "4")),
     dict(model=M, tensor_parallel=4)),
    ("sglang-tp-long-equals", c(pym("sglang.launch_server", "--tensor-parallel-size=2")), dict(tensor_parallel=2)),
    ("sglang-tp-underscore", c(pym("sglang.launch_server", "--tp_size", "2")), dict(tensor_parallel=2)),
    ("sglang-dp-ep-pp", c(pym("sglang.launch_server", "--dp-size", "2", "--ep", "8", "--pp-size", "2")),
     dict(data_parallel=2, expert_parallel=8, pipeline_parallel=2)),
    ("sglang-dp-ep-short", c(pym("sglang.launch_server", "--dp", "4", "--ep-size", "4")),
     dict(data_parallel=4, expert_parallel=4)),
    ("sglang-nnodes-mem", c(pym("sglang.launch_server", "--nnodes", "2", "--mem-fraction-static", "0.85")),
     dict(nnodes=2, gpu_memory_utilization=0.85)),
    ("sglang-quant-dtype", c(pym("sglang.launch_server", "--quantization", "fp8", "--dtype", "half")),
     dict(quantization="fp8", dtype="fp16")),
    ("sglang-serve", c(["sglang", "serve", "--model-path", M]), dict(framework="sglang", model=M)),
    ("sglang-multinode-script", c(["bash", "-c"], [
        "python3 -m sglang.launch_server \\\n  --model-path " + M + " \\\n  --tp 16 --nnodes 2 --node-rank ${POD_INDEX} \\\n"
        "  --dist-init-addr sglang-0.sglang:5000"], env=[from_cm("POD_INDEX")]),
     dict(tensor_parallel=16, nnodes=2, hidden=())),
    # ---- TensorRT-LLM and Triton
    ("trtllm-serve", c(["trtllm-serve", M, "--tp_size", "8", "--pp_size", "2"]),
     dict(framework="tensorrt-llm", model=M, tensor_parallel=8, pipeline_parallel=2)),
    ("trtllm-serve-subcommand", c(["trtllm-serve", "serve", M, "--tp-size=4", "--ep_size", "4"]),
     dict(model=M, tensor_parallel=4, expert_parallel=4)),
    ("triton-trtllm", c(["python3", "/app/scripts/launch_triton_server.py", "--world_size=4", "--model_repo=/models"]),
     dict(framework="triton-trtllm", model=None, procs_per_node=4, tensor_parallel=4)),
    # ---- NIM
    ("nim-image", c(image=NIM_70B),
     dict(framework="nim", role="inference", model="meta/llama-3.1-70b-instruct", uses_all_gpus=True)),
    ("nim-profile-vllm", c(image=NIM_70B, env={"NIM_MODEL_PROFILE": "vllm-bf16-tp4-pp1"}),
     dict(tensor_parallel=4, pipeline_parallel=1, dtype="bf16", uses_all_gpus=False)),
    ("nim-profile-trtllm-latency", c(image=NIM_8B, env={"NIM_MODEL_PROFILE": "tensorrt_llm-A100-fp16-tp2-latency"}),
     dict(tensor_parallel=2, dtype="fp16")),
    ("nim-profile-fp8-throughput", c(image=NIM_8B, env={"NIM_MODEL_PROFILE": "tensorrt_llm-h100-fp8-tp8-pp1-throughput"}),
     dict(tensor_parallel=8, pipeline_parallel=1, quantization="fp8")),
    ("nim-profile-opaque", c(image=NIM_8B,
                             env={"NIM_MODEL_PROFILE": "751382df4272eafc83f541f364d61b35aed9cce8c7b0c869269cea5a366cd08c"}),
     dict(tensor_parallel=None, uses_all_gpus=False, dtype=None)),
    ("nim-env-tp-pp", c(image="nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0",
                        env={"NIM_TENSOR_PARALLEL_SIZE": "8", "NIM_PIPELINE_PARALLEL_SIZE": "2"}),
     dict(tensor_parallel=8, pipeline_parallel=2)),
    ("nim-model-name-override", c(image="nvcr.io/nim/nvidia/llm-nim:1.12", env={"NIM_MODEL_NAME": "hf://mistralai/Mistral-7B-Instruct-v0.3"}),
     dict(framework="nim", model="mistralai/Mistral-7B-Instruct-v0.3")),
    ("nim-model-path-override", c(image=NIM_8B, env={"NIM_MODEL_PATH": "/models/llama-3-70b"}),
     dict(model="/models/llama-3-70b")),
    ("nim-mirror-digest", c(image="registry.local/nvcr.io/nim/mistralai/mixtral-8x7b-instruct-v01@sha256:" + "a" * 64),
     dict(framework="nim", model="mistralai/mixtral-8x7b-instruct-v01")),
    # ---- KServe Hugging Face runtime
    ("kserve-model-id-not-name", c(pym("huggingfaceserver", "--model_name=llama", "--model_id=meta-llama/Llama-3.1-8B-Instruct")),
     dict(framework="kserve-hf", model="meta-llama/Llama-3.1-8B-Instruct")),
    ("kserve-model-name-is-only-alias", c(pym("huggingfaceserver", "--model_name=llama-3-70b", "--model_dir=/mnt/models")),
     dict(framework="kserve-hf", model=None)),
    ("kserve-model-dir", c(pym("huggingfaceserver", "--model_name=x", "--model_dir=/models/llama-3-70b")),
     dict(model="/models/llama-3-70b")),
    ("kserve-tp-env", c(["bash", "-c"], ["python3 -m huggingfaceserver --model_dir=/mnt/models --tensor-parallel-size=${TENSOR_PARALLEL_SIZE}"],
                        env={"TENSOR_PARALLEL_SIZE": "4"}), dict(framework="kserve-hf", tensor_parallel=4)),
    ("kserve-image-args", c(args=["--model_name={{.Name}}", "--model_id=Qwen/Qwen2.5-7B", "--dtype=bfloat16"], image="kserve/huggingfaceserver:v0.15.0"),
     dict(framework="kserve-hf", model="Qwen/Qwen2.5-7B", dtype="bf16")),
    # ---- LMDeploy
    ("lmdeploy-tp", c(["lmdeploy", "serve", "api_server", "internlm/internlm2_5-20b-chat", "--tp", "2"]),
     dict(framework="lmdeploy", model="internlm/internlm2_5-20b-chat", tensor_parallel=2)),
    ("lmdeploy-format-policy", c(["lmdeploy", "serve", "api_server", "/models/qwen-awq", "--model-format", "awq", "--quant-policy", "8", "--model-name", "alias"]),
     dict(model="/models/qwen-awq", quantization="awq", kv_cache_dtype="int8")),
    ("lmdeploy-dp-ep-nnodes", c(["lmdeploy", "serve", "api_server", "m", "--dp", "2", "--ep", "8", "--nnodes", "2"]),
     dict(data_parallel=2, expert_parallel=8, nnodes=2)),
    # ---- llm-d (ray then vLLM)
    ("llmd-ray-then-vllm", c(["/bin/sh", "-c"], ["ray start --head --port=6379 && vllm serve " + M +
                                                  " --tensor-parallel-size 4 --distributed-executor-backend ray"]),
     dict(framework="vllm", model=M, tensor_parallel=4)),
    ("llmd-ray-address-env", c(["sh", "-c", "ray start --address=$(LEADER):6379 --block & vllm serve m -tp 8"], env={"LEADER": "x"}),
     dict(framework="vllm", tensor_parallel=8)),
    # ---- Ollama
    ("ollama-image-default", c(image="ollama/ollama:0.5.7"),
     dict(framework="ollama", model=None, tensor_parallel=None)),
    ("ollama-serve-then-pull", c(["/bin/sh", "-c", "ollama serve & sleep 5 && ollama pull llama3.1:70b && wait"]),
     dict(framework="ollama", model="llama3.1:70b")),
    ("ollama-run", c(["ollama", "run", "qwen2.5:7b"]), dict(model="qwen2.5:7b")),
    ("ollama-traps", c(["ollama", "serve"], env={"OLLAMA_NUM_PARALLEL": "4", "OLLAMA_NUM_GPU": "99", "num_gpu": "8"}),
     dict(tensor_parallel=None, data_parallel=None, pipeline_parallel=None, procs_per_node=None, uses_all_gpus=False)),
    ("ollama-poststart-pull", c(["ollama", "serve"], lifecycle={"postStart": {"exec": {"command": ["ollama", "pull", "mistral:7b"]}}}),
     dict(model="mistral:7b")),
    # ---- torchrun
    ("torchrun-dash-equals", c(["torchrun", "--nproc-per-node=8", "--nnodes=2", "train.py", "--model_name_or_path=" + M]),
     dict(framework="torchrun", role="training", procs_per_node=8, nnodes=2, model=M)),
    ("torchrun-underscore", c(["torchrun", "--nproc_per_node", "4", "train.py"]), dict(procs_per_node=4)),
    ("torchrun-auto", c(["torchrun", "--nproc-per-node", "auto", "train.py"]),
     dict(procs_per_node=None, uses_all_gpus=True)),
    ("torchrun-gpu", c(["torchrun", "--nproc_per_node=gpu", "train.py"]),
     dict(procs_per_node=None, uses_all_gpus=True)),
    ("torchrun-nnodes-min-max", c(["torchrun", "--nnodes", "1:4", "--nproc-per-node", "8", "train.py"]),
     dict(nnodes=4)),
    ("torchrun-module", c(pym("torch.distributed.run", "--nproc_per_node", "8", "train.py", "--model-name-or-path", "x/y")),
     dict(framework="torchrun", procs_per_node=8, model="x/y")),
    ("torch-distributed-launch", c(pym("torch.distributed.launch", "--use_env", "--nproc_per_node=2", "train.py", "--model", "a/b")),
     dict(procs_per_node=2, model="a/b")),
    ("torchrun-pet-env", c(["torchrun", "train.py", "--base_model", "b/c"], env={"PET_NPROC_PER_NODE": "8", "PET_NNODES": "2"}),
     dict(procs_per_node=8, nnodes=2, model="b/c")),
    ("torchrun-flag-beats-env", c(["torchrun", "--nproc-per-node", "4", "t.py"], env={"PET_NPROC_PER_NODE": "8"}),
     dict(procs_per_node=4)),
    ("torchrun-standalone-bool", c(["torchrun", "--standalone", "--nproc-per-node", "2", "train.py", "--bf16"]),
     dict(procs_per_node=2, dtype="bf16")),
    ("torchrun-megatron", c(["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "--tensor-model-parallel-size", "4",
                             "--pipeline-model-parallel-size", "2"]),
     dict(framework="torchrun", tensor_parallel=4, pipeline_parallel=2, procs_per_node=8)),
    # ---- accelerate, deepspeed
    ("accelerate-total", c(["accelerate", "launch", "--num_processes", "16", "--num_machines", "2", "train.py", "--model_name_or_path", M]),
     dict(framework="accelerate", role="training", total_procs=16, nnodes=2, model=M)),
    ("accelerate-bool-no-swallow", c(["accelerate", "launch", "--multi_gpu", "--num_processes=8", "--mixed_precision", "bf16", "train.py"]),
     dict(total_procs=8, dtype="bf16")),
    ("deepspeed", c(["deepspeed", "--num_gpus", "8", "--num_nodes", "2", "train.py", "--deepspeed", "ds.json", "--model_name_or_path", M]),
     dict(framework="deepspeed", procs_per_node=8, nnodes=2, model=M)),
    ("deepspeed-equals", c(["deepspeed", "--num_gpus=4", "train.py"]), dict(procs_per_node=4, uses_all_gpus=False)),
    ("deepspeed-default-all-gpus", c(["deepspeed", "train.py"]), dict(procs_per_node=None, uses_all_gpus=True)),
    # ---- Megatron, NeMo
    ("megatron-direct", c(["python", "pretrain_gpt.py", "--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2"]),
     dict(framework="megatron", role="training", tensor_parallel=4, pipeline_parallel=2)),
    ("nemo-hydra", c(["python", "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py",
                      "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=2",
                      "trainer.num_nodes=2", "trainer.devices=8", "trainer.precision=bf16-mixed"]),
     dict(framework="nemo", role="training", tensor_parallel=4, pipeline_parallel=2, nnodes=2, procs_per_node=8, dtype="bf16")),
    ("nemo-unknown-bool-before-override", c(["python", "/opt/NeMo/examples/nlp/megatron_gpt_sft.py", "--verbose",
                                              "model.tensor_model_parallel_size=8"]),
     dict(framework="nemo", tensor_parallel=8)),
    ("nemo-hydra-plus", c(["python", "train.py", "+model.tensor_model_parallel_size=2"]),
     dict(framework="nemo", tensor_parallel=2)),
    ("nemo-underscore-flag", c(["python", "convert.py", "--tensor_model_parallel_size", "2"]),
     dict(framework="nemo", tensor_parallel=2)),
    ("nemo-cli", c(["nemo", "llm", "pretrain", "--factory", "llama3_8b", "trainer.devices=8",
                    "trainer.strategy.tensor_model_parallel_size=2", "-y"]),
     dict(framework="nemo", model="llama3_8b", procs_per_node=8, tensor_parallel=2)),
    # ---- nothing known runs
    ("nginx", c(["nginx", "-g", "daemon off;"]), None),
    ("python-app", c(["python", "/app/server.py", "--port", "7860", "--model", "x"]), None),
    ("no-command-plain-image", c(image="busybox:1.36"), None),
    ("echo-mentions-vllm", c(["sh", "-c", "echo vllm serve x"]), None),
    ("custom-command-in-vllm-image", c(["python", "/app/server.py"], image="vllm/vllm-openai:v0.10.1"), None),
    ("python-c", c(["python", "-c", "import vllm"]), None),
]


@pytest.mark.parametrize(("container", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES])
def test_parse_container(container: dict[str, Any], expected: dict[str, Any] | None) -> None:
    spec = parse_container(container)
    if expected is None:
        assert spec is None
        return
    assert isinstance(spec, LaunchSpec)
    got = {k: getattr(spec, k) for k in expected}
    assert got == expected


# --------------------------------------------------------------------------- unknown values

HIDDEN_CASES = [
    ("kubelet-ref-configmap",
     c(["vllm", "serve", M, "--tensor-parallel-size", "$(TENSOR_PARALLEL_SIZE)"], env=[from_cm("TENSOR_PARALLEL_SIZE")]),
     ("TENSOR_PARALLEL_SIZE (tensor parallel size) comes from ConfigMap llm-config key tp",)),
    ("shell-ref-secret",
     c(["sh", "-c", "vllm serve m -tp ${TP}"], env=[{"name": "TP", "valueFrom": {"secretKeyRef": {"name": "s", "key": "tp"}}}]),
     ("TP (tensor parallel size) comes from Secret s key tp",)),
    ("kserve-tp-configmap",
     c(["bash", "-c", "python -m huggingfaceserver --model_dir=/mnt/models --tensor-parallel-size=${TENSOR_PARALLEL_SIZE}"],
       env=[from_cm("TENSOR_PARALLEL_SIZE")]),
     ("TENSOR_PARALLEL_SIZE (tensor parallel size) comes from ConfigMap llm-config key tp",)),
    ("envFrom-ref",
     c(["sh", "-c", "vllm serve m --tensor-parallel-size $TP"], envFrom=[{"configMapRef": {"name": "vllm-args"}}]),
     ("TP (tensor parallel size) may come from envFrom configMap vllm-args",)),
    ("envFrom-tgi-env",
     c(image=TGI_IMAGE, env={"MODEL_ID": M}, envFrom=[{"secretRef": {"name": "tgi"}}]),
     ("NUM_SHARD/SM_NUM_GPUS (tensor parallel size), QUANTIZE/HF_MODEL_QUANTIZE (quantization), DTYPE (dtype), "
      "KV_CACHE_DTYPE (KV cache dtype), CUDA_MEMORY_FRACTION (GPU memory utilization) may come from envFrom secret tgi",)),
    ("tgi-num-shard-valueFrom",
     c([TGL], env=[from_cm("NUM_SHARD", key="shards")]),
     ("NUM_SHARD (tensor parallel size) comes from ConfigMap llm-config key shards",)),
    ("nim-profile-valueFrom",
     c(image=NIM_8B, env=[from_cm("NIM_MODEL_PROFILE", key="profile")]),
     ("NIM_MODEL_PROFILE (NIM profile) comes from ConfigMap llm-config key profile",)),
    ("pet-fieldref",
     c(["torchrun", "train.py"], env=[{"name": "PET_NNODES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['n']"}}}]),
     ("PET_NNODES (node count) comes from the pod field metadata.annotations['n']",)),
    ("vllm-config-file", vllm("--config", "/etc/vllm/config.yaml"),
     ("settings in the vLLM --config file",)),
    ("accelerate-config-file", c(["accelerate", "launch", "--config_file", "/c.yaml", "train.py"]),
     ("settings in the accelerate --config_file file",)),
    ("model-from-secret-named", c(["vllm", "serve", "$(MODEL_TOKEN)"], env={"MODEL_TOKEN": "abcd"}),
     ("MODEL_TOKEN (model) is a secret-named variable, not read",)),
    ("model-derived-from-secret", c(["vllm", "serve", "$(MODEL)"], env={"HF_TOKEN": "hf_abc", "MODEL": "org/$(HF_TOKEN)"}),
     ("MODEL (model) holds the value of a secret-named variable, not read",)),
    ("envFrom-two-settings", c(["sh", "-c", "vllm serve $MODEL -tp $TP"], envFrom=[{"configMapRef": {"name": "a"}},
                                                                              {"secretRef": {"name": "b"}}]),
     ("TP (tensor parallel size), MODEL (model) may come from envFrom configMap a, envFrom secret b",)),
]


@pytest.mark.parametrize(("container", "hidden"), [x[1:] for x in HIDDEN_CASES], ids=[x[0] for x in HIDDEN_CASES])
def test_unknowable_values_are_hidden_by_name(container: dict[str, Any], hidden: tuple[str, ...]) -> None:
    spec = parse_container(container)
    assert spec is not None
    for text in hidden:
        assert text in spec.hidden


NOTE_CASES = [
    ("undefined-shell-var", c(["sh", "-c", "vllm serve m --tensor-parallel-size ${TP}"]),
     "tensor parallel size is ${TP}, not a literal: TP is not set in the pod spec", "tensor_parallel"),
    ("undefined-kubelet-var", c(["vllm", "serve", "m", "-tp", "$(TP)"]),
     "tensor parallel size is $(TP), not a literal: TP is not set in the pod spec", "tensor_parallel"),
    ("not-an-integer", c(["vllm", "serve", "m", "-tp", "abc"]), "tensor parallel size from -tp is not a positive integer",
     "tensor_parallel"),
    ("float-tp", c(["vllm", "serve", "m", "-tp", "4.0"]), "tensor parallel size from -tp is not a positive integer",
     "tensor_parallel"),
    ("zero-tp", c(["vllm", "serve", "m", "-tp", "0"]), "tensor parallel size from -tp is not a positive integer",
     "tensor_parallel"),
    ("exec-form-shell-syntax", c(["vllm", "serve", "m", "-tp", "${TP}"], env={"TP": "4"}),
     "tensor parallel size is ${TP} as literal text: no shell runs to expand it (Kubernetes expands $(TP))",
     "tensor_parallel"),
    ("command-substitution", c(["sh", "-c", "vllm serve m -tp $(cat /etc/tp)"]),
     "tensor parallel size from -tp holds a command substitution, not a literal", "tensor_parallel"),
    ("gpu-mem-out-of-range", vllm("--gpu-memory-utilization", "1.5"),
     "GPU memory utilization from --gpu-memory-utilization is not a fraction between 0 and 1", "gpu_memory_utilization"),
    ("bad-nnodes", c(["torchrun", "--nnodes", "two", "t.py"]), "node count from --nnodes is not N or MIN:MAX", "nnodes"),
    ("opaque-nim-profile", c(image=NIM_8B, env={"NIM_MODEL_PROFILE": "0" * 64}),
     "NIM_MODEL_PROFILE is an opaque profile id: its TP and precision are not visible", "tensor_parallel"),
    ("kserve-mnt-models", c(pym("huggingfaceserver", "--model_dir=/mnt/models")),
     "model is mounted at /mnt/models from the InferenceService storageUri", "model"),
    ("sh-c-positionals", c(["sh", "-c"], ["vllm serve m", "-tp", "4"]),
     "sh -c runs only its first argument; 2 more item(s) become $0.. and are not part of the command", "tensor_parallel"),
]


@pytest.mark.parametrize(("container", "note", "unset"), [x[1:] for x in NOTE_CASES], ids=[x[0] for x in NOTE_CASES])
def test_non_literal_values_are_noted_not_guessed(container: dict[str, Any], note: str, unset: str) -> None:
    spec = parse_container(container)
    assert spec is not None
    assert note in spec.notes
    assert getattr(spec, unset) is None


def test_gpu_resource_field_ref_is_resolved() -> None:
    """``resourceFieldRef: limits.nvidia.com/gpu`` is the container's own count: knowable."""
    container = c(["sh", "-c", "vllm serve m --tensor-parallel-size $(NUM_GPUS)"],
                  env=[{"name": "NUM_GPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.nvidia.com/gpu"}}}],
                  resources={"limits": {"nvidia.com/gpu": "4"}})
    spec = parse_container(container)
    assert spec is not None and spec.tensor_parallel == 4 and spec.hidden == ()


def test_script_export_reaches_tgi_env() -> None:
    spec = parse_container(c(["sh", "-c", "export NUM_SHARD=4 MODEL_ID=a/b && text-generation-launcher --port 80"]))
    assert spec is not None and (spec.tensor_parallel, spec.model) == (4, "a/b")


def test_first_launcher_wins() -> None:
    spec = parse_container(c(["sh", "-c", "vllm serve a -tp 2; python -m sglang.launch_server --tp 8"]))
    assert spec is not None and (spec.framework, spec.tensor_parallel) == ("vllm", 2)


# --------------------------------------------------------------------------- canonical values

@pytest.mark.parametrize(
    ("raw", "expected"),
    [("bfloat16", "bf16"), ("float16", "fp16"), ("half", "fp16"), ("float32", "fp32"), ("float", "fp32"),
     ("auto", "auto"), ("BF16", "bf16"), ("None", None), ("weird", "weird")],
    ids=lambda v: str(v),
)
def test_canonical_dtype(raw: str, expected: str | None) -> None:
    assert canonical_dtype(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("awq", "awq"), ("awq_marlin", "awq"), ("gptq", "gptq"), ("gptq_marlin", "gptq"), ("marlin", "gptq"),
     ("fp8", "fp8"), ("bitsandbytes", "bnb-4bit"), ("bitsandbytes-nf4", "bnb-4bit"), ("bitsandbytes-fp4", "bnb-4bit"),
     ("eetq", "int8"), ("compressed-tensors", "compressed-tensors"), ("compressed_tensors", "compressed-tensors"),
     ("mxfp4", "mxfp4"), ("gguf", "gguf"), ("int4", "int4"), ("int8", "int8"), ("EXL2", "exl2"), ("none", None)],
    ids=lambda v: str(v),
)
def test_canonical_quantization(raw: str, expected: str | None) -> None:
    assert canonical_quantization(raw) == expected


@pytest.mark.parametrize(
    ("spelling", "normal"),
    [("--tensor_parallel_size", "--tensor-parallel-size"), ("-tp", "-tp"), ("--Model_ID", "--model-id")],
    ids=["underscores", "short", "case"],
)
def test_norm_flag(spelling: str, normal: str) -> None:
    assert norm_flag(spelling) == normal


# --------------------------------------------------------------------------- robustness and secrets

GARBAGE = [
    ("none", None), ("list", []), ("string", "vllm serve m"), ("int", 5),
    ("command-int", {"command": 5}), ("command-dict", {"command": {"a": 1}}),
    ("env-dict", {"command": ["vllm", "serve", "m", "-tp", "$(TP)"], "env": {"TP": 4}}),
    ("env-garbage", {"command": ["vllm", "serve", "m"], "env": [1, "x", {"name": None}, {"name": "A", "valueFrom": 3}]}),
    ("args-none", {"command": ["vllm", "serve", "m"], "args": None}),
    ("image-int", {"image": 7, "args": ["--model-id", "x"]}),
    ("lifecycle-garbage", {"command": ["ollama", "serve"], "lifecycle": {"postStart": {"exec": {"command": 5}}}}),
    ("resources-garbage", {"command": ["vllm", "serve"], "env": [{"name": "G", "valueFrom": {"resourceFieldRef": {"resource": 5}}}],
                           "resources": {"limits": []}}),
    ("nested", {"command": [[[[[[["x"]]]]]]], "args": [{"a": {"b": {"c": [1, 2, {"d": None}]}}}]}),
]


@pytest.mark.parametrize("container", [g[1] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
def test_garbage_never_raises(container: Any) -> None:
    result = parse_container(container)
    assert result is None or isinstance(result, LaunchSpec)


def test_ints_where_strings_belong() -> None:
    spec = parse_container({"command": ["vllm", "serve", "m", "--tensor-parallel-size", 4, "--gpu-memory-utilization", 0.5],
                            "env": [{"name": "X", "value": 3}]})
    assert spec is not None and (spec.tensor_parallel, spec.gpu_memory_utilization) == (4, 0.5)


def test_command_as_plain_string() -> None:
    spec = parse_container({"command": "vllm serve m --tensor-parallel-size 2"})
    assert spec is not None and spec.tensor_parallel == 2


HOSTILE = [
    ("100k-char-arg", c(["vllm", "serve", "x" * 100_000, "-tp", "2"])),
    ("100k-char-script", c(["sh", "-c", "vllm serve m " + "--max-model-len 9 " * 6_000])),
    ("10k-args", c(["vllm", "serve", "m"] + ["-tp", "2"] * 5_000)),
    ("deep-garbage", {"command": ["sh", "-c", "${" * 30_000 + "$(" * 30_000], "args": [[[[[]]]]] * 1000,
                      "env": [{"name": f"E{i}", "value": "$(E0)" * 20} for i in range(1_000)]}),
    ("many-secrets", c(["vllm", "serve", "m"], env={f"TOKEN_{i}": "s" * 20 + str(i) for i in range(1_000)})),
]


@pytest.mark.parametrize("container", [h[1] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_input_is_fast(container: dict[str, Any]) -> None:
    start = time.perf_counter()
    parse_container(container)
    assert time.perf_counter() - start < 1.0


SECRET = "hf_secret123"
SECRET_LEAK_CASES = [
    ("model-from-token", c(["vllm", "serve", "$(HF_TOKEN)"], env={"HF_TOKEN": SECRET})),
    ("shell-model-from-token", c(["sh", "-c", "vllm serve $HF_TOKEN -tp ${HF_TOKEN}"], env={"HF_TOKEN": SECRET})),
    ("derived-var", c(["vllm", "serve", "$(MODEL)"], env={"HF_TOKEN": SECRET, "MODEL": "org/$(HF_TOKEN)"})),
    ("tgi-model-id-derived", c([TGL], env={"HF_TOKEN": SECRET, "MODEL_ID": "$(HF_TOKEN)"})),
    ("script-export", c(["sh", "-c", f"export HF_TOKEN={SECRET}; vllm serve $HF_TOKEN"])),
    ("bad-int-from-token", c(["vllm", "serve", "m", "-tp", "$(HF_TOKEN)", "--dtype", "$(HF_TOKEN)"], env={"HF_TOKEN": SECRET})),
    ("flag-value-bad", c(["vllm", "serve", "m", "-tp", "$(TP)"], env={"HF_TOKEN": SECRET, "TP": f"x{SECRET}"})),
]


@pytest.mark.parametrize("container", [s[1] for s in SECRET_LEAK_CASES], ids=[s[0] for s in SECRET_LEAK_CASES])
def test_secret_values_never_leave(container: dict[str, Any]) -> None:
    assert SECRET not in repr(parse_container(container))


def test_non_integer_env_value_is_not_echoed() -> None:
    spec = parse_container(c(["vllm", "serve", "m", "-tp", "$(TP)"], env={"TP": "four-please-x"}))
    assert spec is not None and spec.tensor_parallel is None
    assert "four-please-x" not in repr(spec)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=40,
)
TOKENS = ["vllm", "serve", "-tp", "--tensor-parallel-size", "--model", "text-generation-launcher", "--num-shard",
          "torchrun", "--nproc-per-node", "ollama", "pull", "sh", "-c", "&&", "python", "-m", "sglang.launch_server",
          "--tp", "$(HF_TOKEN)", "${HF_TOKEN}", "$HF_TOKEN", "$(API_KEY)", "$(MODEL)", "${TP}", "$(TP)", "--dtype",
          "--quantization", "4", "m/x", "'", '"', ";", "=", "--model-id"]
container_strategy = st.fixed_dictionaries(
    {
        "command": st.one_of(st.none(), st.lists(st.sampled_from(TOKENS) | json_values, max_size=12),
                             st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join)),
        "args": st.one_of(st.none(), st.lists(st.sampled_from(TOKENS) | json_values, max_size=12), json_values),
        "env": st.lists(
            st.one_of(
                st.fixed_dictionaries({"name": st.sampled_from(["HF_TOKEN", "API_KEY", "DB_PASSWORD"]), "value": st.just(SECRET)}),
                st.fixed_dictionaries({"name": st.sampled_from(["MODEL", "TP", "MODEL_ID", "NUM_SHARD"]),
                                       "value": st.sampled_from(["$(HF_TOKEN)", "a/$(API_KEY)", "4", "m/x"])}),
                json_values,
            ),
            max_size=6,
        ),
        "envFrom": st.one_of(st.none(), json_values),
        "image": st.sampled_from(["", "nvcr.io/nim/meta/llama3-8b-instruct:1", "ghcr.io/huggingface/text-generation-inference:3",
                                  "ollama/ollama", "vllm/vllm-openai:v0.10"]),
    }
)


@settings(max_examples=examples(300), deadline=None)
@given(json_values)
def test_parse_container_never_raises(value: Any) -> None:
    result = parse_container(value)
    assert result is None or isinstance(result, LaunchSpec)


@settings(max_examples=examples(400), deadline=None)
@given(container_strategy)
def test_secret_never_in_spec(container: dict[str, Any]) -> None:
    """Whatever the command line does with secret-named variables, their values never come back."""
    assert SECRET not in repr(parse_container(container))


# --------------------------------------------------------------------------- the memo of parse_container

from webhook.core.launchers import container as container_mod  # noqa: E402

_ALL_CONTAINERS = ([(x[0], x[1]) for x in CASES] + [(x[0], x[1]) for x in HIDDEN_CASES]
                   + [(x[0], x[1]) for x in NOTE_CASES] + [(g[0], g[1]) for g in GARBAGE if isinstance(g[1], dict)])


class _Recording(dict):  # type: ignore[type-arg]
    """A container that remembers which of its fields were read, however they were read."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self.read.add("<every field>")
        return super().__iter__()

    def items(self) -> Any:
        self.read.add("<every field>")
        return super().items()

    def values(self) -> Any:
        self.read.add("<every field>")
        return super().values()

    def keys(self) -> Any:
        self.read.add("<every field>")
        return super().keys()


@pytest.mark.parametrize("container", [x[1] for x in _ALL_CONTAINERS], ids=[x[0] for x in _ALL_CONTAINERS])
def test_memo_key_holds_every_field_the_parse_reads(container: dict[str, Any]) -> None:
    """The memo is keyed by READ_FIELDS: a field read but not in the key would let two containers
    that differ only there share one answer."""
    recording = _Recording({**container, "name": "c", "ports": [{"containerPort": 8000}],
                            "volumeMounts": [{"name": "v", "mountPath": "/v"}], "workingDir": "/w"})
    container_mod.parse_launch(recording)
    assert recording.read <= set(container_mod.READ_FIELDS), recording.read - set(container_mod.READ_FIELDS)


@pytest.mark.parametrize("container", [x[1] for x in _ALL_CONTAINERS], ids=[x[0] for x in _ALL_CONTAINERS])
def test_memo_answers_what_a_fresh_parse_answers(container: dict[str, Any]) -> None:
    container_mod.LAUNCHES.clear()
    first, again = parse_container(container), parse_container(dict(container))
    assert first == again == container_mod.parse_launch(container)


def test_memo_tells_apart_containers_differing_in_one_field() -> None:
    base = c(["vllm", "serve", M, "-tp", "$(TP)"], env={"TP": "4"})
    assert parse_container(base).tensor_parallel == 4
    assert parse_container(c(["vllm", "serve", M, "-tp", "$(TP)"], env={"TP": "8"})).tensor_parallel == 8
    assert parse_container({**base, "args": ["-tp", "2"]}) == container_mod.parse_launch({**base, "args": ["-tp", "2"]})


def test_memo_skips_what_is_not_json() -> None:
    import datetime
    odd = c(["vllm", "serve", M, "-tp", "2"], env={"WHEN": "x"})
    odd["env"].append({"name": "D", "value": datetime.date(2026, 1, 1)})  # YAML turns dates into dates
    assert container_mod._memo_key(odd) is None
    assert parse_container(odd).tensor_parallel == 2


def test_memo_is_bounded() -> None:
    container_mod.LAUNCHES.clear()
    for i in range(container_mod.LAUNCHES.limit + 10):
        parse_container(c(["vllm", "serve", f"org/m{i}"]))
    assert len(container_mod.LAUNCHES) <= container_mod.LAUNCHES.limit
