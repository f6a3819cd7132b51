"""Inference run by a training launcher: xDiT and DeepSpeed-Inference scripts under torchrun/deepspeed.

Why: ``torchrun`` and ``deepspeed`` start training jobs far more often than anything else, so their
scripts are read as training (memory for gradients and optimizer state, a training strategy). Two
common inference launches use the same launchers, and sizing them as training over-states their
memory many times and names a strategy they do not have:

- **xDiT** (xdit-project/xDiT, package ``xfuser``): ``torchrun --nproc_per_node=8 flux_example.py
  --model black-forest-labs/FLUX.1-dev --pipefusion_parallel_degree 2 --ulysses_degree 2
  --ring_degree 2``. Its parallel flags are those of ``xFuserArgs.add_cli_args``
  (``xfuser/config/args.py`` @ 045d2f903eb67138e9515fa8e004a1819556bb1c: ``--use_cfg_parallel``
  (a degree of 2), ``--data_parallel_degree``, ``--ulysses_degree``, ``--ring_degree``,
  ``--pipefusion_parallel_degree``, ``--tensor_parallel_degree``; its ``FlexibleArgumentParser``
  takes dashes for underscores). Ulysses and Ring are sequence parallelism and PipeFusion a patch
  pipeline of a diffusion transformer: none is an LLM's tensor or pipeline parallelism, so none
  becomes the profile's TP or PP. Every rank is read as one data-parallel rank that holds the whole
  model (Ulysses, Ring and CFG ranks do; PipeFusion splits the transformer, so this over-states its
  memory, never under-states it), and ``--tensor_parallel_degree`` as TP.
- **DeepSpeed-Inference**: ``deepspeed --num_gpus 4 inference-test.py --ds_inference``. DeepSpeed's
  own example (deepspeedai/DeepSpeedExamples ``inference/huggingface/text-generation/inference-test.py``)
  passes ``--ds_inference`` and calls ``deepspeed.init_inference(..., mp_size=world_size)``: the model
  is split tensor-parallel over every process. Read as inference with TP = the processes per pod
  (every visible GPU when ``--num_gpus`` is not given). A script is taken for DeepSpeed-Inference
  only by that flag or by a name that says so (``inference*.py``, ``*_generate.py``, ...); any
  other script stays training.

Pure: argv tokens in, fields of the launch's :class:`~webhook.core.launchers.spec.Spec` out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from webhook.core.launchers.flags import XDIT_FLAGS
from webhook.core.launchers.programs import base
from webhook.core.launchers.scan import scan
from webhook.core.launchers.spec import Spec

XDIT_ONLY = ("pipefusion_parallel_degree", "ulysses_degree", "ring_degree", "use_cfg_parallel")
"""Fields of :data:`~webhook.core.launchers.flags.XDIT_FLAGS` only xDiT's argument parser has (one
is enough to recognise it)."""
_XDIT_DEGREES = ("data_parallel_degree", "ulysses_degree", "ring_degree", "pipefusion_parallel_degree",
                 "tensor_parallel_degree")
DS_INFERENCE_FLAGS = ("ds_inference",)
"""The flag DeepSpeed's inference examples take to run ``deepspeed.init_inference``."""
_INFERENCE_SCRIPT = re.compile(r"(?:^|[_\-.])(?:inference|infer|generate|generation|serve|serving)(?:[_\-.]|$)")
"""A script named for inference: ``inference-test.py``, ``run_generation.py``, ``ds_serve.py``."""
MAX_TOKENS = 512
"""Script arguments read (bounded for hostile input)."""
MAX_DEGREE = 4096


def _degree(raw: str | None) -> int | None:
    if raw is None or not raw.isdigit():
        return None
    value = int(raw)
    return value if 1 <= value <= MAX_DEGREE else None


def recognise(tokens: Sequence[str], b: Spec) -> bool:
    """When the script ``tokens`` (its path first) run by a training launcher is xDiT or DeepSpeed-
    Inference, make ``b`` an inference launch and return True; else change nothing, False."""
    if not tokens:
        return False
    flags = {k: v for k, (v, _spelled) in scan(tokens[1:MAX_TOKENS + 1], XDIT_FLAGS).values.items()}
    if any(f in flags for f in XDIT_ONLY):
        _xdit(flags, b)
        return True
    if b.fields.get("framework") == "deepspeed" and (
            any(f in flags for f in DS_INFERENCE_FLAGS) or _INFERENCE_SCRIPT.search(base(tokens[0])[:128].lower())):
        _deepspeed_inference(tokens[0], b)
        return True
    return False


def _xdit(flags: dict[str, str], b: Spec) -> None:
    degrees = {name: _degree(flags.get(name)) or 1 for name in _XDIT_DEGREES}
    cfg = 2 if "use_cfg_parallel" in flags else 1
    tp = degrees["tensor_parallel_degree"]
    world = cfg * tp * degrees["data_parallel_degree"] * degrees["ulysses_degree"] * degrees["ring_degree"] \
        * degrees["pipefusion_parallel_degree"]
    b.fields.update(role="inference", framework="xdit", tensor_parallel=tp, pipeline_parallel=1,
                    data_parallel=world // tp)
    for key in ("uses_all_gpus",):
        b.fields.pop(key, None)
    named = " x ".join(f"{label} {n}" for label, n in (
        ("CFG", cfg), ("data", degrees["data_parallel_degree"]), ("Ulysses", degrees["ulysses_degree"]),
        ("Ring", degrees["ring_degree"]), ("PipeFusion", degrees["pipefusion_parallel_degree"]),
        ("TP", tp)) if n > 1) or "1"
    b.note(f"xDiT diffusion inference: {named} = {world} rank(s); sequence (Ulysses, Ring), CFG and PipeFusion "
           f"ranks are not LLM tensor or pipeline parallelism: the model is sized whole on each GPU")


def _deepspeed_inference(script: str, b: Spec) -> None:
    procs = b.fields.get("procs_per_node")
    b.fields.update(role="inference", framework="deepspeed-inference")
    if isinstance(procs, int) and procs > 0:
        b.fields["tensor_parallel"] = procs
    b.note(f"DeepSpeed-Inference ({base(script)[:64]}): the model is split tensor-parallel over the "
           f"launcher's processes (deepspeed.init_inference mp_size = world size)")
