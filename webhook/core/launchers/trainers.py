"""Training-launcher parsers: torchrun, accelerate, deepspeed, TRL's CLI, the NeMo CLI and the
script they run.

A training launcher decides how many processes run (per node, nodes); the script it starts says
which model and how it is split (Megatron/NeMo TP/PP/EP flags, Hydra overrides, dtype). Both say
how memory is laid out (DeepSpeed, FSDP, DDP, Megatron, LoRA): ``strategy.settle`` reads that from
the two together. ``read_script_args`` also tells ``detection`` whether a bare ``python script.py``
is a Megatron or NeMo job.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.launchers import files, inference_scripts, strategy
from webhook.core.launchers.arch_flags import read_architecture
from webhook.core.launchers.flags import (
    ACCELERATE_FLAGS,
    ARCH_HYDRA_KEYS,
    DEEPSPEED_FLAGS,
    HYDRA_KEYS,
    SCRIPT_FLAGS,
    TORCHRUN_FLAGS,
    TRL_FLAGS,
)
from webhook.core.launchers.programs import base, program
from webhook.core.launchers.scan import Scan, scan, truthy
from webhook.core.launchers.spec import Parser, Spec
from webhook.core.launchers.values import FIELDS

TRL_COMMANDS = frozenset({"sft", "dpo", "grpo", "kto", "reward", "rloo", "orpo", "distillation", "gkd", "ppo",
                          "prm", "xpo", "nash_md", "bco", "cpo"})
"""``trl`` subcommands that train (trl/cli/commands: each a ``TrainingCommand`` run through
``accelerate launch``; older releases had more); ``trl env`` and ``trl vllm-serve`` are not training."""

_HYDRA_RE = re.compile(r"[+~]{0,2}([A-Za-z_][A-Za-z0-9_.]{0,200})=(.*)", re.S)


def parse_torchrun(args: Sequence[str], b: Spec) -> None:
    """torchrun / ``python -m torch.distributed.run|launch``; env ``PET_*`` as defaults."""
    found = scan(args, TORCHRUN_FLAGS, stop_at_positional=True)
    b.apply(found, label="torchrun")
    if not b.mentioned("procs_per_node") and not b.fields.get("uses_all_gpus"):
        b.from_env(("PET_NPROC_PER_NODE",), "nproc")
    if not b.mentioned("nnodes"):
        b.from_env(("PET_NNODES",), "nnodes")
    kind, script = _read_training_script(args[found.end :], b)
    if not _inference(args[found.end :], b):
        strategy.settle(b, launcher="torchrun", launch=None, script=script, kind=kind)


HYPERPODRUN_OWN_FLAGS = frozenset({"--pre-train-script", "--pre-train-args", "--post-train-script", "--post-train-args"})
"""The flags ``hyperpodrun`` adds to torchrun's whose values are scripts or their arguments."""


def parse_hyperpodrun(args: Sequence[str], b: Spec) -> None:
    """``hyperpodrun``, the launcher of the SageMaker HyperPod elastic agent (PyPI hyperpod-elastic-agent
    1.1.0, its project description: an extension of PyTorch's elastic agent that takes torchrun's
    arguments, plus ``--pre-train-script``/``--post-train-script`` and their ``-args``). Those four
    are dropped with their values, whose script would pass for the training script, and the rest is
    read as torchrun."""
    kept: list[str] = []
    skip = False
    for token in args[:4096]:
        if skip:
            skip = False
            continue
        name, eq, _ = token.partition("=")
        if name.replace("_", "-") in HYPERPODRUN_OWN_FLAGS:
            skip = not eq
            continue
        kept.append(token)
    parse_torchrun(kept, b)


def parse_accelerate(args: Sequence[str], b: Spec) -> None:
    """``accelerate launch``: ``--num_processes`` is the TOTAL over ``--num_machines``."""
    found = scan(args, ACCELERATE_FLAGS, stop_at_positional=True)
    _apply_accelerate(found, b, label="accelerate")
    kind, script = _read_training_script(args[found.end :], b)
    strategy.settle(b, launcher="accelerate", launch=found, script=script, kind=kind)


def parse_trl(args: Sequence[str], b: Spec) -> None:
    """``trl sft --model_name_or_path M --use_peft ...``: TRL passes the arguments its script does not
    take to ``accelerate launch`` (``--num_processes``, ``--config_file``), so both are read."""
    found = scan(args, TRL_FLAGS)
    _apply_accelerate(found, b, label="accelerate")
    _kind, script = read_script(args, b)
    strategy.settle(b, launcher="trl", launch=found, script=script, kind=None)


def _apply_accelerate(found: Scan, b: Spec, *, label: str) -> None:
    """``Spec.apply``, except that a ``--config_file`` the pod shows (written by its script or mounted
    from a ConfigMap of the input) is read by ``strategy``, not reported as hidden."""
    named = found.values.get("config")
    if named is not None and files.find(b.ctx.files, named[0], b.ctx.workdir) is not None:
        found = Scan(values={k: v for k, v in found.values.items() if k != "config"},
                     positionals=found.positionals, end=found.end)
    b.apply(found, label=label)


def parse_deepspeed(args: Sequence[str], b: Spec) -> None:
    """``deepspeed --num_gpus 8 --num_nodes 2 train.py``; without them it uses every GPU."""
    found = scan(args, DEEPSPEED_FLAGS, stop_at_positional=True)
    b.apply(found, label="deepspeed")
    if not b.mentioned("procs_per_node") and "hosts" not in found.values:
        b.fields["uses_all_gpus"] = True
    kind, script = _read_training_script(args[found.end :], b)
    if not _inference(args[found.end :], b):
        strategy.settle(b, launcher="deepspeed", launch=None, script=script, kind=kind)


def parse_nemo_cli(args: Sequence[str], b: Spec) -> None:
    """NeMo 2 CLI: ``nemo llm pretrain --factory llama3_8b trainer.devices=8 ...``."""
    _kind, script = read_script(args, b)
    strategy.settle(b, launcher="nemo", launch=None, script=script, kind="nemo")


def _script(tokens: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """(path, args) of the script a training launcher runs, None when it runs nothing."""
    prog = program(tokens)
    if prog is None:
        prog = (tokens[0], tuple(tokens[1:]), tokens[0]) if tokens else None
    if prog is None:
        return None
    _name, rest, path = prog
    return path, tuple(rest)


def _read_training_script(tokens: Sequence[str], b: Spec) -> tuple[str | None, Scan | None]:
    """The script a training launcher runs: model and Megatron/NeMo parallelism from its args."""
    found = _script(tokens)
    if found is None:
        return None, None
    path, rest = found
    return read_script(rest, b, path=path)


def _inference(tokens: Sequence[str], b: Spec) -> bool:
    """Whether the launcher's script is inference (xDiT, DeepSpeed-Inference), which then set ``b``
    (:mod:`.inference_scripts`): no training strategy is settled for it."""
    found = _script(tokens)
    return found is not None and inference_scripts.recognise((found[0], *found[1]), b)


def read_script_args(args: Sequence[str], b: Spec, *, path: str = "") -> str | None:
    """Read model/TP/PP/dtype flags and Hydra overrides; return ``nemo``/``megatron``/None.

    Values already set by the launcher (procs per node, nodes) are kept: the launcher decides
    how many processes run.
    """
    return read_script(args, b, path=path)[0]


def read_script(args: Sequence[str], b: Spec, *, path: str = "") -> tuple[str | None, Scan]:
    """:func:`read_script_args`, also returning the scan (``strategy`` reads its strategy flags)."""
    found = scan(args, SCRIPT_FLAGS)
    for key, (raw, spelled) in found.values.items():
        if key in FIELDS and not b.mentioned(key):
            b.set(key, raw, spelled)
    for key, dtype in (("bf16", "bf16"), ("fp16", "fp16")):
        if key in found.values and truthy(found.values[key][0]) and not b.mentioned("dtype"):
            b.fields["dtype"] = dtype
    shape = {k: v for k, v in found.values.items() if k.startswith("arch.")}
    hydra = _read_hydra(found.positionals, b, shape)
    read_architecture(shape, b)
    return _training_kind(args, found, path, hydra=hydra), found


_NEMO_SCRIPT_RE = re.compile(r"megatron_[\w-]{1,64}\.py")
"""NeMo 1 example scripts (``.../NeMo/examples/.../megatron_gpt_pretraining.py``)."""
_MEGATRON_SCRIPT_RE = re.compile(r"pretrain_(?:gpt|bert|t5|mamba|llama|vlm|retro|ict)[\w-]{0,32}\.py")


def _training_kind(args: Sequence[str], found: Scan, path: str, *, hydra: bool) -> str | None:
    """``nemo`` (Hydra overrides, NeMo's underscore flags or scripts), ``megatron`` or None."""
    underscore = any(a.startswith("--tensor_model_parallel_size") for a in args[:512])
    nemo_script = "/nemo/" in path[:1024].lower() and _NEMO_SCRIPT_RE.fullmatch(base(path)[:128])
    if hydra or underscore or nemo_script:
        return "nemo"
    megatron_flags = ("tensor_parallel", "pipeline_parallel", "expert_parallel")
    if any(k in found.values for k in megatron_flags) or _MEGATRON_SCRIPT_RE.fullmatch(base(path)[:128]):
        return "megatron"
    return None


def _read_hydra(tokens: Sequence[str], b: Spec, shape: dict[str, tuple[str, str]]) -> bool:
    """``model.tensor_model_parallel_size=4 trainer.num_nodes=2 ...``; True when any matched.

    Overrides that state the network's shape (``model.num_layers=32``) go into ``shape``."""
    matched = False
    for token in tokens[:256]:
        m = _HYDRA_RE.fullmatch(token)
        if not m:
            continue
        key, raw = m.group(1), m.group(2)
        arch = next((fld for name, fld in ARCH_HYDRA_KEYS if key == name or key.endswith("." + name)), None)
        if arch is not None:
            matched = True
            shape[arch] = (raw, key)
            continue
        for suffix, fld in HYDRA_KEYS:
            if key == suffix or key.endswith("." + suffix):
                matched = True
                if not b.mentioned(fld):
                    b.set(fld, raw, key)
                break
    return matched


def script_parser(path: str) -> Parser:
    """A parser for ``python pretrain_gpt.py ...`` run without a launcher (Megatron/NeMo)."""

    def parse(args: Sequence[str], b: Spec) -> None:
        kind, script = read_script(args, b, path=path)
        strategy.settle(b, launcher=kind or "", launch=None, script=script, kind=kind)

    return parse
