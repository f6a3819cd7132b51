"""NVIDIA NIM: model from the image name, TP/PP/precision from ``NIM_*`` env or the profile tag.

NIM containers usually set no command, so they are recognised by image (``NIM_IMAGE_RE``) and
read from env only; unlike the other launchers, nothing here looks at an argv.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.launchers.spec import Spec

NIM_IMAGE_RE = re.compile(
    r"(?:^|/)nim/([A-Za-z0-9][A-Za-z0-9._-]{0,127})/([A-Za-z0-9][A-Za-z0-9._-]{0,127})(?=[:@]|$)"
)
"""``.../nim/<org>/<model>`` followed by a tag, a digest or nothing."""
_NIM_GENERIC = ("llm-nim", "nim-llm", "multi-llm")
_PROFILE_TOKENS: dict[str, tuple[str, str]] = {
    "bf16": ("dtype", "bf16"), "fp16": ("dtype", "fp16"), "fp32": ("dtype", "fp32"),
    "fp8": ("quantization", "fp8"), "nvfp4": ("quantization", "nvfp4"),
    "mxfp4": ("quantization", "mxfp4"), "awq": ("quantization", "awq"),
    "int4_awq": ("quantization", "awq"), "gptq": ("quantization", "gptq"),
    "int8_wo": ("quantization", "int8"), "int8": ("quantization", "int8"),
    "int4_wo": ("quantization", "int4"), "int4": ("quantization", "int4"),
}
_OPAQUE_PROFILE_RE = re.compile(r"[0-9a-f]{16,128}")


def nim_image_model(image: str) -> str | None:
    """``nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.0`` -> ``meta/llama-3.1-70b-instruct``.

    Mirrors keep the ``nim/<org>/<model>`` tail, so any registry prefix is accepted. The generic
    multi-model NIM (``nvidia/llm-nim``) names no model.
    """
    if not isinstance(image, str):
        return None
    m = NIM_IMAGE_RE.search(image[:512])
    if not m or m.group(2).endswith(_NIM_GENERIC):
        return None
    return f"{m.group(1)}/{m.group(2)}"


def parse_nim(args: Sequence[str], b: Spec) -> None:
    """NIM: model from the image (``NIM_MODEL_NAME``/``NIM_MODEL_PATH`` override), TP/PP from
    ``NIM_TENSOR_PARALLEL_SIZE``/``NIM_PIPELINE_PARALLEL_SIZE`` or the ``NIM_MODEL_PROFILE`` tag.

    With neither, NIM picks a profile for the GPUs it sees: recorded as ``uses_all_gpus``.
    """
    model = nim_image_model(b.ctx.image)
    if model:
        b.fields["model"] = model
    raw = b.env_raw(("NIM_MODEL_NAME", "NIM_MODEL_PATH"), "model")
    if raw is not None:
        b.set("model", re.sub(r"^hf://", "", raw.strip()), "NIM_MODEL_NAME/NIM_MODEL_PATH")
    b.from_env(("NIM_TENSOR_PARALLEL_SIZE",), "tensor_parallel")
    b.from_env(("NIM_PIPELINE_PARALLEL_SIZE",), "pipeline_parallel")
    profile = b.env_raw(("NIM_MODEL_PROFILE",), "NIM profile")
    if profile is not None:
        _apply_nim_profile(profile, b)
    if not b.mentioned("tensor_parallel") and "NIM profile" not in b.unresolved:
        b.fields["uses_all_gpus"] = True


def _apply_nim_profile(profile: str, b: Spec) -> None:
    """``vllm-bf16-tp4-pp1`` / ``tensorrt_llm-h100-fp8-tp8-pp1-throughput`` -> tp, pp, precision.

    Explicit env wins over the tag; an opaque profile id says nothing visible.
    """
    text = profile.strip().lower()[:256]
    if _OPAQUE_PROFILE_RE.fullmatch(text):
        b.note("NIM_MODEL_PROFILE is an opaque profile id: its TP and precision are not visible")
        b.unresolved.add("NIM profile")
        return
    for token in text.split("-"):
        m = re.fullmatch(r"(tp|pp)([0-9]{1,3})", token)
        if m:
            key = "tensor_parallel" if m.group(1) == "tp" else "pipeline_parallel"
            if not b.mentioned(key):
                b.set(key, m.group(2), "NIM_MODEL_PROFILE")
        elif token in _PROFILE_TOKENS:
            key, value = _PROFILE_TOKENS[token]
            b.fields.setdefault(key, value)
