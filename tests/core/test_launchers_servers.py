"""The launchers added for issue 15 (point 1): one row per launcher form, then the traps.

Forms: a plain command, ``args`` to the image's own entrypoint, env only (no command at all), and a
``sh -c`` script. Each row checks framework, model, TP (or that TP spans every GPU) and the kind the
launcher itself knows; only the listed fields are compared, so a row says what it is about.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.domain import LaunchSpec
from webhook.core.launchers import parse_container, parse_env_model
from tests.core.test_launchers import c  # one container builder for every launcher table


def sh(script: str, **kw: Any) -> dict[str, Any]:
    return c(["/bin/sh", "-c", script], **kw)


TGI_DLC = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311"
TGI_GHCR = "ghcr.io/huggingface/text-generation-inference:3.0.1"
TEI_DLC = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-embeddings-inference-cu122.1-4.ubuntu2204"
TEI_GHCR = "ghcr.io/huggingface/text-embeddings-inference:1.5"
LLAMA_CPP = "ghcr.io/ggml-org/llama.cpp:server-cuda"
BGE = "BAAI/bge-large-en-v1.5"
GEMMA = "google/gemma-2-9b-it"

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # ---- vllm-omni: vLLM's own CLI with --omni (vllm-project/vllm-omni examples/online_serving/
    # qwen2_5_omni/README.md: "vllm serve Qwen/Qwen2.5-Omni-7B --omni --port 8091"), read as vLLM serve
    ("vllm-omni-serve", c(["vllm", "serve", "Qwen/Qwen2.5-Omni-7B", "--omni", "--port", "8091",
                           "--tensor-parallel-size", "2"], image="vllm/vllm-omni:v0.11.0rc1"),
     dict(framework="vllm", role="inference", model="Qwen/Qwen2.5-Omni-7B", tensor_parallel=2)),
    # ---- TGI from any image that runs its launcher, configured by env only
    ("tgi-dlc-env-only", c(env={"MODEL_ID": GEMMA, "NUM_SHARD": "2", "QUANTIZE": "bitsandbytes-nf4"}, image=TGI_DLC),
     dict(framework="tgi", role="inference", model=GEMMA, tensor_parallel=2, quantization="bnb-4bit")),
    ("tgi-ghcr-env-no-shard", c(env={"MODEL_ID": GEMMA}, image=TGI_GHCR),
     dict(framework="tgi", model=GEMMA, tensor_parallel=None, uses_all_gpus=True)),
    ("tgi-dlc-args", c(args=["--model-id", GEMMA, "--num-shard", "4"], image=TGI_DLC),
     dict(framework="tgi", model=GEMMA, tensor_parallel=4)),
    ("tgi-dlc-entrypoint-script", c(["/entrypoint.sh"], args=["--model-id", GEMMA, "--sharded", "false"], image=TGI_DLC),
     dict(framework="tgi", model=GEMMA, tensor_parallel=1)),
    ("tgi-sagemaker-image", c(env={"HF_MODEL_ID": GEMMA, "SM_NUM_GPUS": "4"},
                              image="763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.4-tgi3.0-gpu-py311-cu124-ubuntu22.04"),
     dict(framework="tgi", model=GEMMA, tensor_parallel=4)),
    ("tgi-vertex-gcs-model", c(env={"AIP_STORAGE_URI": "gs://bucket/models/Llama-3.1-8B-Instruct", "MODEL_ID": "x/y"}, image=TGI_DLC),
     dict(model="gs://bucket/models/Llama-3.1-8B-Instruct")),
    ("tgi-kv-cache-env", c(env={"MODEL_ID": GEMMA, "KV_CACHE_DTYPE": "fp8_e5m2"}, image=TGI_GHCR), dict(kv_cache_dtype="fp8")),
    ("tgi-default-model", c(["text-generation-launcher", "--port", "80"]), dict(model="bigscience/bloom-560m")),
    # ---- text-embeddings-inference
    ("tei-router-command", c(["text-embeddings-router", "--model-id", BGE, "--port", "8080"]),
     dict(framework="tei", role="inference", model=BGE, tensor_parallel=1, kind="embedding")),
    ("tei-image-args", c(args=["--model-id", BGE, "--dtype", "float16"], image=TEI_GHCR),
     dict(framework="tei", model=BGE, dtype="fp16", kind="embedding")),
    ("tei-turing-image-env", c(env={"MODEL_ID": "BAAI/bge-reranker-v2-m3"}, image="ghcr.io/huggingface/text-embeddings-inference:turing-1.5"),
     dict(framework="tei", model="BAAI/bge-reranker-v2-m3", kind="embedding")),
    ("tei-dlc-env", c(env={"MODEL_ID": "Snowflake/snowflake-arctic-embed-m"}, image=TEI_DLC),
     dict(framework="tei", model="Snowflake/snowflake-arctic-embed-m", tensor_parallel=1)),
    ("tei-dlc-gcs", c(env={"AIP_STORAGE_URI": "gs://b/bge-base-en-v1.5"}, image=TEI_DLC), dict(model="gs://b/bge-base-en-v1.5")),
    ("tei-sagemaker", c(env={"HF_MODEL_ID": BGE}, image="763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-tei:1.2.3-gpu-py310-cu122-ubuntu22.04"),
     dict(framework="tei", model=BGE)),
    ("tei-cuda-all-router", c(["text-embeddings-router-90", "--model-id", BGE]), dict(framework="tei", model=BGE)),
    ("tei-sh-c", sh(f"exec text-embeddings-router --model-id \"$MID\" --port 80", env={"MID": BGE}),
     dict(framework="tei", model=BGE)),
    ("tei-env-dtype", c(["text-embeddings-router"], env={"MODEL_ID": BGE, "DTYPE": "float32"}), dict(dtype="fp32")),
    # ---- Infinity
    ("infinity-v2", c(["infinity_emb", "v2", "--model-id", BGE, "--port", "7997"]),
     dict(framework="infinity", model=BGE, tensor_parallel=1, kind="embedding")),
    ("infinity-image-args", c(args=["v2", "--model-id", "mixedbread-ai/mxbai-rerank-xsmall-v1"], image="michaelf34/infinity:latest"),
     dict(framework="infinity", model="mixedbread-ai/mxbai-rerank-xsmall-v1")),
    ("infinity-env-list", c(image="michaelf34/infinity:0.0.76", env={"INFINITY_MODEL_ID": f"{BGE};BAAI/bge-m3;"}),
     dict(framework="infinity", model=BGE)),
    ("infinity-default-model", c(["infinity_emb", "v2"]), dict(model="michaelfeil/bge-small-en-v1.5")),
    ("infinity-v1-spelling", c(["infinity_emb", "--model-name-or-path", BGE]), dict(model=BGE)),
    ("infinity-dtype-env", c(["infinity_emb", "v2"], env={"INFINITY_MODEL_ID": BGE, "INFINITY_DTYPE": "float16;int8"}),
     dict(dtype="fp16")),
    # ---- llama.cpp llama-server
    ("llamacpp-model-path", c(["llama-server", "-m", "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "-ngl", "99"]),
     dict(framework="llama.cpp", model="/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", quantization="gguf-q4_k_m",
          tensor_parallel=None, uses_all_gpus=True)),
    ("llamacpp-hf-repo-default-quant", c(["llama-server", "--hf-repo", "ggml-org/gemma-3-1b-it-GGUF"]),
     dict(model="ggml-org/gemma-3-1b-it-GGUF", quantization="gguf-q4_k_m")),
    ("llamacpp-hf-short-quant", c(["llama-server", "-hf", "unsloth/Qwen3-8B-GGUF:Q8_0"]),
     dict(model="unsloth/Qwen3-8B-GGUF:Q8_0", quantization="gguf-q8_0")),
    ("llamacpp-hf-file", c(["llama-server", "-hfr", "bartowski/Llama-3.2-3B-Instruct-GGUF", "-hff", "Llama-3.2-3B-Instruct-Q8_0.gguf"]),
     dict(model="bartowski/Llama-3.2-3B-Instruct-GGUF", quantization="gguf-q8_0")),
    ("llamacpp-split-none", c(["llama-server", "-m", "/m/x-Q4_K_M.gguf", "-sm", "none"]), dict(tensor_parallel=1, uses_all_gpus=False)),
    ("llamacpp-tensor-split", c(["llama-server", "-m", "/m/x.gguf", "--tensor-split", "1,1,1,1"]),
     dict(tensor_parallel=4, quantization="gguf")),
    ("llamacpp-image-args", c(args=["-m", "/models/qwen2.5-7b-instruct-q4_k_m.gguf", "--port", "8080"], image=LLAMA_CPP),
     dict(framework="llama.cpp", model="/models/qwen2.5-7b-instruct-q4_k_m.gguf", uses_all_gpus=True)),
    ("llamacpp-env-only", c(image=LLAMA_CPP, env={"LLAMA_ARG_HF_REPO": "ggml-org/gemma-3-4b-it-GGUF", "LLAMA_ARG_SPLIT_MODE": "none"}),
     dict(model="ggml-org/gemma-3-4b-it-GGUF", tensor_parallel=1)),
    ("llamacpp-embedding", c(["llama-server", "-m", "/m/nomic-embed-text-v1.5.Q8_0.gguf", "--embedding"]),
     dict(kind="embedding", quantization="gguf-q8_0")),
    ("llamacpp-sh-c", sh("/app/llama-server -m /models/$F -ngl 99 --host 0.0.0.0", env={"F": "mistral-7b-instruct-v0.2.Q5_K_M.gguf"}),
     dict(framework="llama.cpp", model="/models/mistral-7b-instruct-v0.2.Q5_K_M.gguf", quantization="gguf-q5_k_m")),
    # ---- TorchServe
    ("torchserve-models-mar", c(["torchserve", "--start", "--ncs", "--model-store", "/ms", "--models", "llama=llama-3-8b.mar"]),
     dict(framework="torchserve", role="inference", model="llama-3-8b", tensor_parallel=None)),
    ("torchserve-models-equals-path", c(["torchserve", "--start", "--models=/ms/bert-base-uncased.mar"]), dict(model="bert-base-uncased")),
    ("torchserve-image-default", c(image="pytorch/torchserve:0.12.0-gpu"), dict(framework="torchserve", model=None)),
    ("torchserve-kfs-args", c(args=["torchserve", "--start", "--model-store=/mnt/models/model-store",
                                    "--ts-config=/mnt/models/config/config.properties"], image="pytorch/torchserve-kfs:0.9.0-gpu"),
     dict(framework="torchserve", model=None)),
    ("ts-llm-launcher", c(["python", "-m", "ts.llm_launcher", "--model_id", "meta-llama/Llama-3.2-3B-Instruct", "--disable_token_auth"]),
     dict(framework="torchserve", model="meta-llama/Llama-3.2-3B-Instruct", uses_all_gpus=True)),
    ("ts-llm-launcher-default", c(["python", "-m", "ts.llm_launcher"]), dict(model="meta-llama/Meta-Llama-3.1-8B-Instruct")),
    ("ts-llm-launcher-trt", c(["python", "-m", "ts.llm_launcher", "--model_id", "m/x-8b", "--engine", "trt_llm"]),
     dict(tensor_parallel=1, uses_all_gpus=False)),
    # ---- Triton and TensorRT-LLM
    ("tritonserver", c(["tritonserver", "--model-repository=/models"]), dict(framework="triton", model=None, tensor_parallel=None)),
    ("tritonserver-model-store-alias", c(["/opt/tritonserver/bin/tritonserver", "--model-store", "gs://b/repo"]),
     dict(framework="triton")),
    ("tritonserver-mpirun-trtllm", c(["mpirun", "--allow-run-as-root", "-n", "1", "tritonserver", "--model-repository=/m", ":",
                                      "-n", "1", "tritonserver", "--model-repository=/m"]),
     dict(framework="triton-trtllm", tensor_parallel=2, procs_per_node=2)),
    ("launch-triton-server-script", c(["python3", "scripts/launch_triton_server.py", "--world_size", "4", "--model_repo", "/r"]),
     dict(framework="triton-trtllm", tensor_parallel=4)),
    ("trtllm-serve", c(["trtllm-serve", "deepseek-ai/DeepSeek-R1", "--backend", "pytorch", "--tp_size", "8", "--ep_size", "8"]),
     dict(framework="tensorrt-llm", model="deepseek-ai/DeepSeek-R1", tensor_parallel=8, expert_parallel=8)),
    ("trtllm-serve-long-spellings", c(["trtllm-serve", "serve", "m/x-70b", "--tensor_parallel_size", "4", "--pipeline_parallel_size", "2"]),
     dict(tensor_parallel=4, pipeline_parallel=2)),
    ("trtllm-module", c(["python3", "-m", "tensorrt_llm.commands.serve", "meta-llama/Llama-3.1-8B-Instruct", "--tp_size", "2"]),
     dict(framework="tensorrt-llm", model="meta-llama/Llama-3.1-8B-Instruct", tensor_parallel=2)),
    ("trtllm-grpc", c(["trtllm-serve", "grpc", "Qwen/Qwen3-8B", "--tp_size", "2"]), dict(model="Qwen/Qwen3-8B", tensor_parallel=2)),
    ("trtllm-mpirun-llmapi-launch", c(["mpirun", "-n", "16", "--allow-run-as-root", "trtllm-llmapi-launch", "trtllm-serve",
                                       "deepseek-ai/DeepSeek-V3", "--tp_size", "16"]),
     dict(framework="tensorrt-llm", tensor_parallel=16)),
    ("trtllm-disaggregated", c(["trtllm-serve", "disaggregated", "-c", "disagg.yaml"]), dict(framework="tensorrt-llm", model=None)),
    ("trtllm-sh-c", sh("trtllm-serve $MODEL --tp_size $TP --port 8000", env={"MODEL": "Qwen/Qwen3-32B", "TP": "2"}),
     dict(model="Qwen/Qwen3-32B", tensor_parallel=2)),
    # ---- image servers
    ("comfyui-path", c(["python", "/ComfyUI/main.py", "--listen", "0.0.0.0", "--port", "8188"]),
     dict(framework="comfyui", model=None, tensor_parallel=1, kind="diffusion")),
    ("comfyui-image", sh("cd /app && python3 main.py --listen", image="ghcr.io/ai-dock/comfyui:latest-cuda"),
     dict(framework="comfyui", kind="diffusion")),
    ("comfyui-flag", c(["python", "main.py", "--highvram", "--preview-method", "auto"]), dict(framework="comfyui")),
    ("a1111-launch-ckpt", c(["python", "launch.py", "--listen", "--xformers", "--ckpt", "/models/sd_xl_base_1.0.safetensors"]),
     dict(framework="a1111", model="/models/sd_xl_base_1.0.safetensors", kind="diffusion", tensor_parallel=1)),
    ("a1111-webui-sh", c(["bash", "webui.sh", "--listen", "--api"]), dict(framework="a1111", model=None, kind="diffusion")),
    ("forge-image-launch", c(["python", "launch.py", "--listen"], image="ghcr.io/lllyasviel/stable-diffusion-webui-forge:latest"),
     dict(framework="a1111")),
    ("invokeai", c(["invokeai-web", "--root", "/invokeai"]), dict(framework="invokeai", kind="diffusion")),
    ("comfyui-generic-env", c(["python", "/ComfyUI/main.py"], env={"MODEL_NAME": "black-forest-labs/FLUX.1-dev"}),
     dict(model="black-forest-labs/FLUX.1-dev", kind="diffusion")),
    # ---- a known launcher whose model is not in its own flags: the generic env names, last
    ("accelerate-model-name-env", c(["accelerate", "launch", "fine_tune.py"], env={"MODEL_NAME": GEMMA}),
     dict(framework="accelerate", role="training", model=GEMMA)),
    ("torchrun-model-id-env", c(["torchrun", "--nproc-per-node", "8", "train.py"], env={"MODEL_ID": "Qwen/Qwen2.5-7B"}),
     dict(framework="torchrun", model="Qwen/Qwen2.5-7B")),
    ("script-flag-beats-env", c(["torchrun", "train.py", "--model_name_or_path", "a/b-7b"], env={"MODEL_ID": "c/d"}),
     dict(model="a/b-7b")),
]


@pytest.mark.parametrize(("container", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES])
def test_parse_container(container: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = parse_container(container)
    assert isinstance(spec, LaunchSpec)
    got = {k: getattr(spec, k) for k in expected}
    assert got == expected


NOTES = [
    ("tgi-default-model", c(["text-generation-launcher"]), "TGI runs its default model bigscience/bloom-560m"),
    ("infinity-two-models", c(["infinity_emb", "v2", "--model-id", "a/b", "--model-id", "c/d"]), "Infinity serves 2 models"),
    ("infinity-cpu", c(["infinity_emb", "v2", "--model-id", "a/b", "--device", "cpu"]), "--device cpu"),
    ("llamacpp-ngl-0", c(["llama-server", "-m", "/m/x.gguf", "-ngl", "0"]), "-ngl 0 keeps every layer on the CPU"),
    ("llamacpp-uneven", c(["llama-server", "-m", "/m/x.gguf", "-ts", "3,1"]), "splits the model unevenly"),
    ("torchserve-all", c(["torchserve", "--start", "--models", "all"]), "set annotation gpu-admission.io/model"),
    ("torchserve-many", c(["torchserve", "--start", "--models", "a=a.mar", "b=b.mar"]), "TorchServe loads 2 models"),
    ("tritonserver", c(["tritonserver", "--model-repository=/models"]), "set annotation gpu-admission.io/model"),
    ("comfyui", c(["python", "/ComfyUI/main.py"]), "set annotation gpu-admission.io/model"),
    ("comfyui-cpu", c(["python", "/ComfyUI/main.py", "--cpu"]), "--cpu"),
    ("generic-env", c(["torchrun", "t.py"], env={"MODEL_NAME": "x/y-7b"}), "model read from env MODEL_NAME"),
]


@pytest.mark.parametrize(("container", "note"), [x[1:] for x in NOTES], ids=[x[0] for x in NOTES])
def test_notes_say_what_is_not_visible(container: dict[str, Any], note: str) -> None:
    spec = parse_container(container)
    assert spec is not None and any(note in n for n in spec.notes), spec.notes


def test_torchserve_config_file_env_is_hidden_by_name() -> None:
    spec = parse_container(c(["torchserve", "--start"], env={"TS_CONFIG_FILE": "/cfg/config.properties"}))
    assert spec is not None and "settings in the TorchServe config file (TS_CONFIG_FILE)" in spec.hidden


def test_trtllm_config_file_is_hidden() -> None:
    spec = parse_container(c(["trtllm-serve", "m/x", "--extra_llm_api_options", "/c.yaml"]))
    assert spec is not None and "settings in the trtllm-serve --extra_llm_api_options file" in spec.hidden


# --------------------------------------------------------------------------- generic last resort

GENERIC = [
    ("model-id-env", c(["python", "serve.py"], env={"MODEL_ID": "stabilityai/stable-diffusion-xl-base-1.0"}),
     "stabilityai/stable-diffusion-xl-base-1.0"),
    ("hf-model-id-env", c(["python", "app.py"], env={"HF_MODEL_ID": "BAAI/bge-m3"}), "BAAI/bge-m3"),
    ("model-name-env", c(["uvicorn", "app:app"], env={"MODEL_NAME": "runwayml/stable-diffusion-v1-5"}),
     "runwayml/stable-diffusion-v1-5"),
    ("model-env", c(["./server"], env={"MODEL": "Qwen/Qwen2.5-7B-Instruct"}), "Qwen/Qwen2.5-7B-Instruct"),
    ("model-path-env", c(["python", "s.py"], env={"MODEL_PATH": "/models/llama-3-8b"}), "/models/llama-3-8b"),
    ("order-model-id-first", c(["python", "s.py"], env={"MODEL": "a/b", "MODEL_ID": "c/d"}), "c/d"),
    ("script-flag", c(["python", "/app/server.py", "--port", "7860", "--model-id", "black-forest-labs/FLUX.1-schnell"]),
     "black-forest-labs/FLUX.1-schnell"),
    ("sh-c-script-flag", sh("python3 serve.py --model_name_or_path=$M", env={"M": "x/y-3b"}), "x/y-3b"),
]


@pytest.mark.parametrize(("container", "model"), [x[1:] for x in GENERIC], ids=[x[0] for x in GENERIC])
def test_generic_model_is_the_last_resort(container: dict[str, Any], model: str) -> None:
    spec = parse_env_model(container)
    assert spec is not None
    assert (spec.framework, spec.role, spec.model, spec.tensor_parallel) == (None, None, model, None)
    assert any("no known launcher runs" in n for n in spec.notes)
    assert model not in " ".join(spec.notes)  # notes carry names, never env values


def test_generic_reports_a_hidden_model_by_name() -> None:
    container = c(["python", "s.py"], env=[{"name": "MODEL_ID", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "id"}}}])
    spec = parse_env_model(container)
    assert spec is not None and spec.model is None
    assert "MODEL_ID (model) comes from ConfigMap m key id" in spec.hidden


def test_generic_finds_nothing() -> None:
    assert parse_env_model(c(["python", "s.py"], env={"PORT": "8080"})) is None
    assert parse_env_model(c(["python", "s.py"], env={"HF_TOKEN": "hf_abcdefgh"})) is None


# --------------------------------------------------------------------------- traps

TRAPS = [
    ("plain-main-py", c(["python", "main.py", "--port", "8000"])),
    ("plain-launch-py", c(["python", "launch.py", "--config", "x.yaml"])),
    ("proxy-image-named-like-tgi", c(image="myorg/text-generation-inference-proxy:1", env={"MODEL_ID": "x/y"})),
    ("llama-cpp-full-image", c(image="ghcr.io/ggml-org/llama.cpp:full-cuda", args=["--run", "-m", "x.gguf"])),
    ("mpirun-training-left-alone", c(["mpirun", "-np", "4", "--allow-run-as-root", "python", "train.py", "--model", "x"])),
    ("mpirun-bash-script", c(["mpirun", "-n", "2", "bash", "-c", "tritonserver"])),
    ("tei-image-custom-command", c(["python", "/app/proxy.py"], image=TEI_GHCR, env={"MODEL_ID": BGE})),
    ("env-model-without-launcher", c(["nginx"], env={"MODEL_ID": BGE})),  # only inference consults it, for GPU containers
]


@pytest.mark.parametrize("container", [x[1] for x in TRAPS], ids=[x[0] for x in TRAPS])
def test_traps_are_not_launchers(container: dict[str, Any]) -> None:
    assert parse_container(container) is None


def test_secret_env_is_never_a_generic_model() -> None:
    spec = parse_env_model(c(["python", "s.py"], env={"MODEL_TOKEN": "hf_secretsecret", "MODEL": "$(MODEL_TOKEN)"}))
    assert spec is None or spec.model is None
    assert "hf_secretsecret" not in repr(spec)
