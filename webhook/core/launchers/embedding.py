"""Embedding and reranker servers: text-embeddings-inference (TEI) and Infinity.

Both serve small encoders on one GPU each, so what matters is the model, and that the workload is
an embedding server (``kind``) even when the model name does not say so: the policy sends small
models on one GPU to the cost tier, and ``sizing`` skips the decode estimate for encoders.
"""

from __future__ import annotations

from typing import Sequence

from webhook.core.launchers.flags import INFINITY_FLAGS, TEI_FLAGS
from webhook.core.launchers.scan import flag_values, scan
from webhook.core.launchers.spec import Spec

INFINITY_DEFAULT_MODEL = "michaelfeil/bge-small-en-v1.5"
"""What ``infinity_emb v2`` loads when no ``--model-id`` is given (docs/docs/cli_v2.md)."""


def parse_tei(args: Sequence[str], b: Spec) -> None:
    """``text-embeddings-router --model-id X`` or the TEI image with env ``MODEL_ID``.

    Every flag has an env twin (clap ``#[clap(long, env)]`` in huggingface/text-embeddings-inference
    router/src/main.rs): ``MODEL_ID`` (required, no default), ``DTYPE``. SageMaker's entrypoint maps
    ``HF_MODEL_ID`` onto ``MODEL_ID`` (sagemaker-entrypoint.sh), Vertex AI's ``AIP_STORAGE_URI``.
    The router loads one model on one device (``--device-id``, default 0): TP is 1.
    """
    b.fields["kind"] = "embedding"
    b.apply(scan(args, TEI_FLAGS), label="TEI")
    b.model_from_env(("MODEL_ID", "HF_MODEL_ID"))
    if not b.mentioned("dtype"):
        b.from_env(("DTYPE",), "dtype")
    b.fields["tensor_parallel"] = 1


def parse_infinity(args: Sequence[str], b: Spec) -> None:
    """``infinity_emb v2 --model-id A --model-id B`` (or env ``INFINITY_MODEL_ID="A;B;"``).

    Infinity serves every listed model from one process on one device (docs/docs/cli_v2.md: options
    repeat per model, env values are ``;``-separated; the default model is
    ``michaelfeil/bge-small-en-v1.5``). The first model is the one sized; when there are more, a note
    says so, because their memory adds up on the same GPU.
    """
    if args and args[0] in ("v1", "v2"):
        args = args[1:]
    b.fields["kind"] = "embedding"
    found = scan(args, INFINITY_FLAGS)
    b.apply(found, label="Infinity")
    models = flag_values(args, ("--model-id", "--model-name-or-path"))
    if not models:
        raw = b.env_raw(("INFINITY_MODEL_ID",), "model")
        models = [m for m in (raw or "").split(";") if m.strip()]
        if models:
            b.set("model", models[0], "INFINITY_MODEL_ID")
        elif raw is None and not b.mentioned("model"):
            b.fields["model"] = INFINITY_DEFAULT_MODEL
            b.note(f"Infinity runs its default model {INFINITY_DEFAULT_MODEL}: no --model-id or INFINITY_MODEL_ID")
    else:
        b.fields.pop("model", None)
        b.set("model", models[0], "--model-id")
    if len(models) > 1:
        b.note(f"Infinity serves {len(models)} models on one GPU; sized by the first only: set "
               f"gpu-admission.io/params to their total")
    device = found.values["device"][0] if "device" in found.values else b.ctx.env.get("INFINITY_DEVICE", "")
    if device.split(";")[0].strip().lower() == "cpu":
        b.note("Infinity runs with --device cpu: the GPU it requests is not used")
    dtype = b.ctx.env.get("INFINITY_DTYPE", "")
    if dtype and not b.mentioned("dtype"):
        b.set("dtype", dtype.split(";")[0], "INFINITY_DTYPE")
    b.fields["tensor_parallel"] = 1
