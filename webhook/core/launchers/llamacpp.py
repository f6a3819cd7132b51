"""llama.cpp ``llama-server``: a GGUF model from a path or a Hugging Face repo, split over GPUs.

Flags and env twins as documented in ggml-org/llama.cpp tools/server/README.md
(25d5b0c53f9a146f3d7a99a18610d9d623b5041e):

- model: ``-m/--model FNAME`` (``LLAMA_ARG_MODEL``); ``-hf/-hfr/--hf-repo <user>/<model>[:quant]``
  (``LLAMA_ARG_HF_REPO``), whose quant "default[s] to Q4_K_M"; ``-hff/--hf-file FILE``
  (``LLAMA_ARG_HF_FILE``) overrides that quant; ``-mu/--model-url`` (``LLAMA_ARG_MODEL_URL``).
- GPUs: ``-sm/--split-mode {none,layer,row,tensor}`` (default ``layer``: "split layers and KV across
  GPUs"), ``-ts/--tensor-split N0,N1,...`` ("fraction of the model to offload to each GPU"),
  ``-ngl/--gpu-layers/--n-gpu-layers N`` (layers kept in VRAM; default ``auto``).
- ``--embedding(s)``/``--reranking`` serve an encoder.

llama.cpp has no tensor parallelism in the vLLM sense: with the default split the layers (and so the
weights) are spread over every visible GPU, each GPU holding its share of the layers and their KV.
For sizing and placement that is what tensor parallelism is to this engine: the weights divided
over N GPUs of one pod, which must all fit their share, and a multi-GPU pod to pin to one product.
So it is recorded as ``uses_all_gpus`` (the profile's TP becomes the pod's GPU count), ``-sm none``
as one GPU, ``-ts`` as the GPUs it gives a non-zero share. The model's name and size come from the
GGUF file name through the catalog and name rules (``models.describe``); its quantization from the
type in that name (``models.quantization_from_name``: ``gguf-q5_k_m``, ``gguf-f16``...), sized with
llama.cpp's own bits-per-weight table (``sizing.GGUF_BITS``), or Q4_K_M for a bare ``--hf-repo``.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.counts import parse_count
from webhook.core.launchers.flags import LLAMACPP_FLAGS
from webhook.core.models import quantization_from_name
from webhook.core.launchers.scan import Scan, scan
from webhook.core.launchers.spec import Spec

HF_REPO_DEFAULT_QUANT = "gguf-q4_k_m"
"""``--hf-repo`` without ``:quant`` and without ``--hf-file`` downloads Q4_K_M."""
_ENV = {
    "model": "LLAMA_ARG_MODEL", "hf_repo": "LLAMA_ARG_HF_REPO", "hf_file": "LLAMA_ARG_HF_FILE",
    "model_url": "LLAMA_ARG_MODEL_URL", "gpu_layers": "LLAMA_ARG_N_GPU_LAYERS",
    "split_mode": "LLAMA_ARG_SPLIT_MODE", "tensor_split": "LLAMA_ARG_TENSOR_SPLIT",
}
_SPLIT_RE = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,6})?")


def parse_llama_server(args: Sequence[str], b: Spec) -> None:
    """``llama-server -m model.gguf -ngl 99`` / ``--hf-repo org/X-GGUF:Q8_0`` (or the server image)."""
    found = scan(args, LLAMACPP_FLAGS)
    raw = {key: _value(found, b, key) for key in _ENV}
    if "embedding" in found.values:
        b.fields["kind"] = "embedding"
    _model(raw, b)
    _gpus(raw, b)


def _value(found: Scan, b: Spec, key: str) -> str | None:
    """The flag's value, else its ``LLAMA_ARG_*`` env twin (flags win, as in common/arg.cpp)."""
    if key in found.values:
        return found.values[key][0]
    return b.ctx.env.get(_ENV[key])


def _model(raw: dict[str, str | None], b: Spec) -> None:
    """Model path, else HF repo (+ file), else URL; the GGUF quant from the file name or the default."""
    if raw["model"]:
        b.set("model", raw["model"], "-m/--model")
    elif raw["hf_repo"]:
        repo = raw["hf_repo"]
        b.set("model", repo, "--hf-repo")
        quant = quantization_from_name(raw["hf_file"]) if raw["hf_file"] else None
        if quant is None and ":" not in repo:
            quant = HF_REPO_DEFAULT_QUANT
        if quant:
            b.fields["quantization"] = quant
    elif raw["model_url"]:
        b.set("model", raw["model_url"].rsplit("/", 1)[-1], "--model-url")
    if "model" in b.fields and "quantization" not in b.fields:
        b.fields["quantization"] = quantization_from_name(b.fields["model"]) or "gguf"


def _gpus(raw: dict[str, str | None], b: Spec) -> None:
    """``-sm none`` -> 1 GPU; ``-ts 1,1`` -> 2 GPUs; otherwise every visible GPU; ``-ngl 0`` noted."""
    layers = (raw["gpu_layers"] or "").strip().lower()
    if layers == "0":
        b.note("llama-server -ngl 0 keeps every layer on the CPU: the GPUs it requests hold no weights")
    elif parse_count(layers, cap=999_999) is not None:
        b.note(f"llama-server offloads at most {layers} layers to the GPUs (-ngl); the rest stays on the CPU")
    mode = (raw["split_mode"] or "").strip().lower()
    if mode == "none":
        b.fields["tensor_parallel"] = 1
        return
    shares = [float(x) for x in (raw["tensor_split"] or "").replace("/", ",").split(",")[:64]
              if _SPLIT_RE.fullmatch(x.strip())]
    used = [x for x in shares if x > 0]
    if used:
        b.fields["tensor_parallel"] = len(used)
        if max(used) * len(used) > sum(used) * 1.01:
            b.note(f"llama-server splits the model unevenly (--tensor-split {raw['tensor_split']}); "
                   f"sized as an even split over {len(used)} GPUs")
        return
    b.fields["uses_all_gpus"] = True
