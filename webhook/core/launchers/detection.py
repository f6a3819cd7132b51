"""Which known launcher an argv runs: the registry by program name and by image, and ``detect``.

Maps program basenames and python modules to a ``Launcher`` (framework, role, parser, required
subcommand), and launcher images to the program their entrypoint runs. A python script no launcher
wraps is recognised as Megatron/NeMo training, as a ComfyUI/A1111 image server, or as a launch
script of a TensorRT-LLM engine (its TP and PP), from its path, its arguments and the image.
``mpirun`` is looked through only for the inference servers that are started that way (Triton with
a TensorRT-LLM engine, ``trtllm-serve``); an MPI training job is left to its own launcher pod as
before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from webhook.core.launchers.context import EMPTY_CTX
from webhook.core.launchers.diffusion import is_comfyui, is_webui, parse_comfyui, parse_invokeai, parse_webui
from webhook.core.launchers.embedding import parse_infinity, parse_tei
from webhook.core.launchers.llamacpp import parse_llama_server
from webhook.core.launchers.programs import mpi_program, program
from webhook.core.launchers.repository import (
    parse_torchserve,
    parse_triton,
    parse_tritonserver,
    parse_trtllm_script,
    parse_ts_llm_launcher,
    triton_world,
    trtllm_script,
)
from webhook.core.launchers.llm_servers import (
    parse_kserve,
    parse_lmdeploy,
    parse_ollama,
    parse_sglang,
    parse_tgi,
    parse_trtllm,
    parse_vllm_module,
    parse_vllm_serve,
)
from webhook.core.launchers.spec import Parser, Spec
from webhook.core.launchers.trainers import (
    TRL_COMMANDS,
    parse_accelerate,
    parse_deepspeed,
    parse_hyperpodrun,
    parse_nemo_cli,
    parse_torchrun,
    parse_trl,
    read_script_args,
    script_parser,
)


@dataclass(frozen=True)
class Launcher:
    """A known program: the subcommand words it needs, then how its flags are read."""

    framework: str
    role: str
    parse: Parser
    subcommand: tuple[str, ...] = ()
    commands: frozenset[str] = frozenset()
    """When not empty: the first word must be one of these (``trl sft``, ``trl dpo``); it is not
    passed to the parser."""


_VLLM_SERVE = Launcher("vllm", "inference", parse_vllm_serve, ("serve",))
_VLLM_MODULE = Launcher("vllm", "inference", parse_vllm_module)
_TORCHRUN = Launcher("torchrun", "training", parse_torchrun)
_ACCELERATE = Launcher("accelerate", "training", parse_accelerate)
_DEEPSPEED = Launcher("deepspeed", "training", parse_deepspeed)
_TEI = Launcher("tei", "inference", parse_tei)
_TRTLLM = Launcher("tensorrt-llm", "inference", parse_trtllm)
_WEBUI = Launcher("a1111", "inference", parse_webui)

LAUNCHERS: dict[str, Launcher] = {
    # program basename or python module -> launcher
    "vllm": _VLLM_SERVE,
    "vllm.entrypoints.cli.main": _VLLM_SERVE,
    "vllm.entrypoints.openai.api_server": _VLLM_MODULE,
    "vllm.entrypoints.api_server": _VLLM_MODULE,
    "text-generation-launcher": Launcher("tgi", "inference", parse_tgi),
    "sglang.launch_server": Launcher("sglang", "inference", parse_sglang),
    "sglang_router.launch_server": Launcher("sglang", "inference", parse_sglang),
    "sglang": Launcher("sglang", "inference", parse_sglang, ("serve",)),
    "trtllm-serve": _TRTLLM,
    "tensorrt_llm.commands.serve": _TRTLLM,
    "launch_triton_server.py": Launcher("triton-trtllm", "inference", parse_triton),
    "tritonserver": Launcher("triton", "inference", parse_tritonserver),
    "text-embeddings-router": _TEI,
    # the TEI "cuda-all" image dispatches to one router binary per compute capability
    **{f"text-embeddings-router-{cc}": _TEI for cc in ("75", "80", "86", "89", "90", "100", "120")},
    "infinity_emb": Launcher("infinity", "inference", parse_infinity),
    "llama-server": Launcher("llama.cpp", "inference", parse_llama_server),
    "torchserve": Launcher("torchserve", "inference", parse_torchserve),
    "ts.llm_launcher": Launcher("torchserve", "inference", parse_ts_llm_launcher),
    "invokeai-web": Launcher("invokeai", "inference", parse_invokeai),
    "webui.sh": _WEBUI,
    "webui.py": _WEBUI,
    "huggingfaceserver": Launcher("kserve-hf", "inference", parse_kserve),
    "lmdeploy": Launcher("lmdeploy", "inference", parse_lmdeploy, ("serve", "api_server")),
    "ollama": Launcher("ollama", "inference", parse_ollama),
    "torchrun": _TORCHRUN,
    "hyperpodrun": Launcher("torchrun", "training", parse_hyperpodrun),
    "torch.distributed.run": _TORCHRUN,
    "torch.distributed.launch": _TORCHRUN,
    "accelerate": Launcher("accelerate", "training", parse_accelerate, ("launch",)),
    "accelerate-launch": _ACCELERATE,
    "accelerate.commands.launch": _ACCELERATE,
    "deepspeed": _DEEPSPEED,
    "deepspeed.launcher.runner": _DEEPSPEED,
    "nemo": Launcher("nemo", "training", parse_nemo_cli),
    "trl": Launcher("trl", "training", parse_trl, commands=TRL_COMMANDS),
}

_DLC_SUFFIX = r"(?:-(?:cu[0-9]{2,4}|gpu|tpu|cpu|rocm)[\w.-]{0,128})?"
"""The accelerator suffix of a deep-learning-container image name (``-cu124.2-3.ubuntu2204.py311``,
``-gpu.2.1.0``, ``-cpu.1-4``); anything else after the project name is another image."""

IMAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    # image -> program its entrypoint runs, used when the container sets no command
    # TGI: ghcr.io/huggingface/text-generation-inference:<tag>, the Google Cloud DLC
    # .../huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311 (entrypoint.sh ends in
    # "exec text-generation-launcher $@") and SageMaker's huggingface-pytorch-tgi-inference
    (re.compile(rf"(?:^|/)(?:huggingface-)?text-generation-inference{_DLC_SUFFIX}(?:[:@]|$)"),
     "text-generation-launcher"),
    (re.compile(r"(?:^|/)huggingface-pytorch-tgi-inference(?:[:@]|$)"), "text-generation-launcher"),
    # TEI: ghcr.io/huggingface/text-embeddings-inference:<tag> (cpu-, turing-, 89-, hopper- tags
    # alike), the DLC huggingface-text-embeddings-inference-cu122.1-4..., SageMaker huggingface-tei
    (re.compile(rf"(?:^|/)(?:huggingface-)?text-embeddings-inference{_DLC_SUFFIX}(?:[:@]|$)"),
     "text-embeddings-router"),
    (re.compile(r"(?:^|/)huggingface-tei(?:-cpu)?(?:[:@]|$)"), "text-embeddings-router"),
    (re.compile(r"(?:^|/)vllm-openai(?:[:@]|$)"), "vllm serve"),
    (re.compile(r"(?:^|/)huggingfaceserver(?:[:@]|$)"), "huggingfaceserver"),
    (re.compile(r"(?:^|/)ollama/ollama(?:[:@]|$)"), "ollama"),
    # michaelf34/infinity: ENTRYPOINT infinity_emb (docs/docs/deploy.md runs "<image> v2 --model-id")
    (re.compile(r"(?:^|/)michaelf34/infinity(?:[:@]|$)"), "infinity_emb"),
    # ghcr.io/ggml-org/llama.cpp:server[-cuda...] (ggerganov/ before the move): ENTRYPOINT llama-server
    (re.compile(r"(?:^|/)(?:ggml-org|ggerganov)/llama\.cpp:server"), "llama-server"),
    # pytorch/torchserve:<tag>-gpu: dockerd-entrypoint.sh runs "torchserve --start --ts-config ..."
    (re.compile(r"(?:^|/)pytorch/torchserve(?:-kfs)?(?:[:@]|$)"), "torchserve --start"),
)
"""Launcher images and the program their entrypoint runs when the container sets no command."""

MPI_SERVERS = frozenset({"tritonserver", "trtllm-serve", "trtllm-llmapi-launch"})
"""Programs ``detect`` looks for behind ``mpirun``: inference servers whose ranks are GPUs."""


def detect(argv: Sequence[str], image: str = "") -> tuple[Launcher, tuple[str, ...]] | None:
    """The known launcher an argv runs and the args its parser reads, or None.

    ``image`` helps tell a ComfyUI or web-UI ``main.py``/``launch.py`` from any other script.
    """
    mpi = mpi_program(argv)
    if mpi is not None:
        return _detect_mpi(*mpi)
    prog = program(argv)
    if prog is None:
        return None
    name, rest, path = prog
    launcher = LAUNCHERS.get(name)
    if launcher is not None and launcher.commands:
        return (launcher, tuple(rest[1:])) if rest and rest[0] in launcher.commands else None
    if launcher is not None:
        k = len(launcher.subcommand)
        if tuple(rest[:k]) == launcher.subcommand:
            return launcher, tuple(rest[k:])
        return None
    if name.endswith(".py"):
        return _python_script(name, rest, path, image)
    return None


def _python_script(name: str, rest: tuple[str, ...], path: str, image: str) -> tuple[Launcher, tuple[str, ...]] | None:
    """A bare ``python script.py``: an image server by its path/flags/image, a TensorRT-LLM launch
    script (``server.py leader --tp=2 --pp=8`` beside a ``tensorrtllm_backend`` model repository),
    or Megatron/NeMo."""
    if name == "main.py" and is_comfyui(path, rest, image):
        return Launcher("comfyui", "inference", parse_comfyui), rest
    if name == "launch.py" and is_webui(path, rest, image):
        return _WEBUI, rest
    trtllm = trtllm_script(path, rest, image)
    if trtllm is not None:
        return Launcher(trtllm, "inference", parse_trtllm_script), rest
    probe = Spec(EMPTY_CTX, "", "")
    kind = read_script_args(rest, probe, path=path)
    if kind:
        return Launcher(kind, "training", script_parser(path)), rest
    return None


def _detect_mpi(ranks: int | None, apps: list[tuple[str, ...]]) -> tuple[Launcher, tuple[str, ...]] | None:
    """``mpirun -n 1 tritonserver ... : -n 1 tritonserver ...`` or ``mpirun -n 8 trtllm-llmapi-launch
    trtllm-serve ...``: the server of the first app context, its ranks as the GPUs it splits over."""
    first = apps[0] if apps else ()
    prog = program(first)
    if prog is None or prog[0] not in MPI_SERVERS:
        return None
    hit = detect(first)
    if hit is None:
        return None
    launcher, args = hit
    if launcher.framework == "triton" and ranks:
        return Launcher("triton-trtllm", "inference", triton_world(ranks)), args
    return hit
