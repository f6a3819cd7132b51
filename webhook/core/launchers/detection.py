"""Which known launcher an argv runs: the registry by program name and by image, and ``detect``.

Maps program basenames and python modules to a ``Launcher`` (framework, role, parser, required
subcommand), and launcher images to the program their entrypoint runs. A python script no launcher
wraps is recognised as Megatron/NeMo training from its arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from webhook.core.launchers.context import EMPTY_CTX
from webhook.core.launchers.programs import program
from webhook.core.launchers.serving import (
    parse_kserve,
    parse_lmdeploy,
    parse_ollama,
    parse_sglang,
    parse_tgi,
    parse_triton,
    parse_trtllm,
    parse_vllm_module,
    parse_vllm_serve,
)
from webhook.core.launchers.spec import Parser, Spec
from webhook.core.launchers.training import (
    parse_accelerate,
    parse_deepspeed,
    parse_nemo_cli,
    parse_torchrun,
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


_VLLM_SERVE = Launcher("vllm", "inference", parse_vllm_serve, ("serve",))
_VLLM_MODULE = Launcher("vllm", "inference", parse_vllm_module)
_TORCHRUN = Launcher("torchrun", "training", parse_torchrun)
_ACCELERATE = Launcher("accelerate", "training", parse_accelerate)
_DEEPSPEED = Launcher("deepspeed", "training", parse_deepspeed)

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
    "trtllm-serve": Launcher("tensorrt-llm", "inference", parse_trtllm),
    "launch_triton_server.py": Launcher("triton-trtllm", "inference", parse_triton),
    "huggingfaceserver": Launcher("kserve-hf", "inference", parse_kserve),
    "lmdeploy": Launcher("lmdeploy", "inference", parse_lmdeploy, ("serve", "api_server")),
    "ollama": Launcher("ollama", "inference", parse_ollama),
    "torchrun": _TORCHRUN,
    "torch.distributed.run": _TORCHRUN,
    "torch.distributed.launch": _TORCHRUN,
    "accelerate": Launcher("accelerate", "training", parse_accelerate, ("launch",)),
    "accelerate-launch": _ACCELERATE,
    "accelerate.commands.launch": _ACCELERATE,
    "deepspeed": _DEEPSPEED,
    "deepspeed.launcher.runner": _DEEPSPEED,
    "nemo": Launcher("nemo", "training", parse_nemo_cli),
}

IMAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    # image -> program its entrypoint runs, used when the container sets no command
    (re.compile(r"(?:^|/)(?:text-generation-inference|huggingface-pytorch-tgi-inference)(?:[:@]|$)"),
     "text-generation-launcher"),
    (re.compile(r"(?:^|/)vllm-openai(?:[:@]|$)"), "vllm serve"),
    (re.compile(r"(?:^|/)huggingfaceserver(?:[:@]|$)"), "huggingfaceserver"),
    (re.compile(r"(?:^|/)ollama/ollama(?:[:@]|$)"), "ollama"),
)


def detect(argv: Sequence[str]) -> tuple[Launcher, tuple[str, ...]] | None:
    """The known launcher an argv runs and the args its parser reads, or None."""
    prog = program(argv)
    if prog is None:
        return None
    name, rest, path = prog
    launcher = LAUNCHERS.get(name)
    if launcher is not None:
        k = len(launcher.subcommand)
        if tuple(rest[:k]) == launcher.subcommand:
            return launcher, tuple(rest[k:])
        return None
    if name.endswith(".py"):
        probe = Spec(EMPTY_CTX, "", "")
        kind = read_script_args(rest, probe, path=path)
        if kind:
            return Launcher(kind, "training", script_parser(path)), rest
    return None
