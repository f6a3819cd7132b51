"""Model servers whose model lives in a repository or an archive store: Triton and TorchServe.

Their command lines name a directory (``--model-repository``, ``--model-store``), not a model, so
the model and its parallelism are usually invisible at admission. The parsers say what they can
(the archive names TorchServe is told to load, the MPI world size of a TensorRT-LLM engine, the
TP and PP a TensorRT-LLM launch script is given, the model TorchServe's LLM launcher is given) and
otherwise leave a note naming the annotations that declare it, so the pod is never judged as
"nothing runs here".

Sources: triton-inference-server/server src/command_line_parser.cc (``--model-store``
"Equivalent to --model-repository", which "may be specified multiple times");
triton-inference-server/tensorrtllm_backend ``scripts/launch_triton_server.py`` (``--world_size``:
one MPI rank per GPU, the engine built for TP x PP = world size); pytorch/serve
docs/configuration.md (``--model-store``, ``--models``, ``--ts-config``; env ``TS_CONFIG_FILE``
wins over the flag), docker/dockerd-entrypoint.sh (the image runs ``torchserve --start --ts-config
/home/model-server/config.properties``) and ts/llm_launcher.py (``--model_id``, default
``meta-llama/Meta-Llama-3.1-8B-Instruct``; the vLLM engine takes ``tensor_parallel_size =
torch.cuda.device_count()``, the TensorRT-LLM engine builds a 1-GPU checkpoint); the TensorRT-LLM launch
scripts of triton-inference-server/tutorials (Deployment/Kubernetes/TensorRT-LLM_Multi-Node_Distributed_Models/
containers/server.py @ 5dd47254fbc4) and kubernetes-sigs/lws (docs/examples/tensorrt-llm/build/server.py
@ 4aaf9d50f542): ``leader --tp N --pp M`` runs ``mpirun -np N*M tritonserver`` over the group's pods,
``worker`` only waits for it.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.launchers.flags import (
    TORCHSERVE_FLAGS,
    TRITON_FLAGS,
    TRITONSERVER_FLAGS,
    TRTLLM_SCRIPT_FLAGS,
    TS_LLM_FLAGS,
)
from webhook.core.launchers.programs import base
from webhook.core.launchers.scan import flag_values, scan
from webhook.core.launchers.spec import Parser, Spec

TS_LLM_DEFAULT_MODEL = "meta-llama/Meta-Llama-3.1-8B-Instruct"
"""``python -m ts.llm_launcher`` without ``--model_id`` serves this (argparse default)."""
_DECLARE = "set annotation gpu-admission.io/model (or gpu-admission.io/params)"


def parse_tritonserver(args: Sequence[str], b: Spec) -> None:
    """``tritonserver --model-repository=/models``: the models are directories of that repository.

    Triton places an instance of each model on every visible GPU by default (``instance_group``),
    and a TensorRT-LLM engine's TP is fixed when it is built, so neither the model nor its split is
    visible; nothing is assumed.
    """
    found = scan(args, TRITONSERVER_FLAGS)
    repo = found.values["model_repository"][0] if "model_repository" in found.values else "its model repository"
    if not b.generic_model():
        b.note(f"Triton serves the models in {repo[:128]}; their names and parallelism are not visible: {_DECLARE}")


def parse_triton(args: Sequence[str], b: Spec) -> None:
    """``launch_triton_server.py --world_size=N``: N MPI ranks, one per GPU; model not visible.

    The engine was built for TP x PP = N. N is also reported as ``tensor_parallel`` because the
    weights are split N ways either way, which is what fit and placement need.
    """
    b.apply(scan(args, TRITON_FLAGS), label="Triton")
    if "procs_per_node" in b.fields:
        b.fields["tensor_parallel"] = b.fields["procs_per_node"]
    elif "procs_per_node" in b.unresolved:
        b.unresolved.add("tensor_parallel")
    if not b.generic_model():
        b.note(f"the TensorRT-LLM engine's model is in the Triton model repository: {_DECLARE}")


def triton_world(ranks: int) -> Parser:
    """A parser for ``mpirun -n 1 tritonserver ... : -n 1 tritonserver ...`` (TRT-LLM's launch
    script expanded): ``ranks`` MPI ranks, one GPU each, the engine split over all of them."""

    def parse(args: Sequence[str], b: Spec) -> None:
        b.fields["procs_per_node"] = ranks
        b.fields["tensor_parallel"] = ranks
        parse_tritonserver(args, b)

    return parse


_TRTLLM_RE = re.compile(r"tensorrt[_-]?llm|(?<![a-z0-9])trt[_-]?llm", re.IGNORECASE)
"""What names TensorRT-LLM in a path, a value or an image: ``tensorrtllm_backend`` (the Triton backend's
repository, whose ``all_models/inflight_batcher_llm`` is the model repository its tutorials serve),
``tensorrt_llm``, the NGC ``tritonserver:<yy.mm>-trtllm-python-py3`` tag, ``trtllm-...``."""
_TRITON_RE = re.compile(r"triton|tensorrtllm[_-]?backend", re.IGNORECASE)
_SCANNED = 256
"""Tokens of a script's command line searched for those names (the rest is not read)."""


def trtllm_script(path: str, args: Sequence[str], image: str) -> str | None:
    """The framework of a python launch script that serves a TensorRT-LLM engine, or None.

    Such scripts (the Triton tutorials' ``server.py leader --tp=2 --pp=8``) are each deployment's own, so
    their ``--tp``/``--pp`` mean tensor and pipeline parallelism only because TensorRT-LLM is what they
    run: they are read when the script's path, its arguments or the image name TensorRT-LLM (a
    ``--tp`` of any other script may mean anything) and when they state a split at all (the LWS
    ``server.py worker`` states none: it waits for the leader's ``mpirun`` to start its ranks, so the
    pod runs its leader's launch). ``triton-trtllm`` when Triton is named too, else ``tensorrt-llm``.
    """
    words = [path[:512], image[:512], *(a[:512] for a in args[:_SCANNED])]
    if not any(_TRTLLM_RE.search(w) for w in words):
        return None
    found = scan(args[:_SCANNED], TRTLLM_SCRIPT_FLAGS)
    if "tensor_parallel" not in found.values and "pipeline_parallel" not in found.values:
        return None
    return "triton-trtllm" if any(_TRITON_RE.search(w) for w in words) else "tensorrt-llm"


def parse_trtllm_script(args: Sequence[str], b: Spec) -> None:
    """A TensorRT-LLM launch script (:func:`trtllm_script`): ``--tp``/``--pp`` (and trtllm-serve's
    long spellings) are the engine's split over every pod of the group (the tutorials' leader runs
    ``mpirun -np TP*PP tritonserver`` over the group's pods); ``--model`` the checkpoint it converts,
    ``--dt`` its precision. A split with one factor given takes the script's default 1 for the other
    (argparse ``default=1`` in both tutorial scripts)."""
    b.apply(scan(args, TRTLLM_SCRIPT_FLAGS), label="the TensorRT-LLM launch script")
    for key in ("tensor_parallel", "pipeline_parallel"):
        if not b.mentioned(key):
            b.fields[key] = 1
    if not b.mentioned("model") and not b.generic_model():
        b.note(f"the TensorRT-LLM engine this script serves is not named on its command line: {_DECLARE}")


def parse_torchserve(args: Sequence[str], b: Spec) -> None:
    """``torchserve --start --model-store DIR --models name=name.mar ...``.

    A model is named by the archives ``--models`` loads (``name=file.mar``, a path or URL to one):
    the first is sized, and a note says when there are more. ``--models all`` or models loaded from
    the config file (``load_models``) are not visible.
    """
    found = scan(args, TORCHSERVE_FLAGS)
    b.apply(found, label="TorchServe")
    if "config" not in found.values and "TS_CONFIG_FILE" in b.ctx.env:
        b.hide("settings in the TorchServe config file (TS_CONFIG_FILE)")
    names = [_archive_model(v) for v in flag_values(args, ("--models",), nargs=True)]
    names = [n for n in names if n]
    if names:
        b.set("model", names[0], "--models")
        if len(names) > 1:
            b.note(f"TorchServe loads {len(names)} models; sized by the first only: set "
                   f"gpu-admission.io/params to their total")
    elif not b.generic_model():
        b.note(f"TorchServe loads its models from the model store or config file, not visible: {_DECLARE}")


def _archive_model(value: str) -> str | None:
    """``llama=llama-3-8b.mar`` -> ``llama-3-8b``; ``/store/x.mar`` or a URL -> ``x``; ``all`` -> None."""
    text = value.strip()
    if not text or text.lower() == "all":
        return None
    name, eq, archive = text.partition("=")
    target = archive if eq and archive else name
    stem = base(target.rstrip("/"))
    for suffix in (".mar", ".tar.gz", ".zip"):
        stem = stem.removesuffix(suffix)
    return stem or name or None


def parse_ts_llm_launcher(args: Sequence[str], b: Spec) -> None:
    """``python -m ts.llm_launcher --model_id X [--engine vllm|trt_llm]``: TorchServe's LLM launcher."""
    found = scan(args, TS_LLM_FLAGS)
    b.apply(found, label="TorchServe")
    if not b.mentioned("model"):
        b.fields["model"] = TS_LLM_DEFAULT_MODEL
        b.note(f"ts.llm_launcher serves its default model {TS_LLM_DEFAULT_MODEL}: no --model_id given")
    engine = found.values["engine"][0].strip().lower() if "engine" in found.values else "vllm"
    if engine == "trt_llm":
        b.fields["tensor_parallel"] = 1
    else:
        b.fields["uses_all_gpus"] = True
