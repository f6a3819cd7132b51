"""Image-generation servers: ComfyUI, AUTOMATIC1111-style web UIs (A1111, Forge, SD.Next), InvokeAI.

They run one diffusion pipeline on one GPU, so they are recorded as ``kind = diffusion`` at TP 1.
The checkpoint is a file in a models directory chosen at run time, so the model is visible only
when a flag names the file (A1111 ``--ckpt``, AUTOMATIC1111/stable-diffusion-webui
modules/cmd_args.py); ``models`` knows common checkpoint file names (``sd_xl_base_1.0``,
``v1-5-pruned-emaonly``, ``flux1-dev``). Otherwise a note names the annotations that declare it.

Recognition is deliberately narrow, because ``main.py`` and ``launch.py`` are everyone's script
names: ComfyUI is ``main.py`` under a path or image that says ComfyUI, or with one of its own flags
(comfyanonymous/ComfyUI ``comfy/cli_args.py``); a web UI is ``webui.sh``/``webui.py``, or
``launch.py`` under a path or image that says webui/stable-diffusion or with an A1111-only flag.
"""

from __future__ import annotations

import re
from typing import Sequence

from webhook.core.launchers.flags import A1111_FLAGS
from webhook.core.launchers.scan import scan
from webhook.core.launchers.spec import Spec

_DECLARE = "set annotation gpu-admission.io/model (or gpu-admission.io/params)"
COMFY_MARK_RE = re.compile(r"comfy", re.I)
WEBUI_MARK_RE = re.compile(r"webui|stable-diffusion|automatic1111|sd-forge|sdnext", re.I)
COMFY_ONLY_FLAGS = frozenset(
    {"--preview-method", "--front-end-version", "--front-end-root", "--disable-auto-launch", "--highvram",
     "--normalvram", "--novram", "--gpu-only", "--cuda-device", "--use-pytorch-cross-attention",
     "--extra-model-paths-config", "--cuda-malloc", "--disable-cuda-malloc", "--force-fp16",
     "--enable-cors-header", "--use-sage-attention", "--disable-smart-memory", "--models-directory"}
)
"""ComfyUI comfy/cli_args.py flags no other ``main.py`` is likely to take."""
A1111_ONLY_FLAGS = frozenset(
    {"--ckpt", "--ckpt-dir", "--xformers", "--medvram", "--lowvram", "--no-half-vae", "--nowebui",
     "--skip-torch-cuda-test", "--enable-insecure-extension-access", "--opt-sdp-attention"}
)


def _has_flag(args: Sequence[str], flags: frozenset[str]) -> bool:
    return any(a.partition("=")[0] in flags for a in args[:256])


def is_comfyui(path: str, args: Sequence[str], image: str) -> bool:
    """``python /ComfyUI/main.py --listen`` (path, image or flag says ComfyUI)."""
    return bool(COMFY_MARK_RE.search(path[:512]) or COMFY_MARK_RE.search(image[:512])
                or _has_flag(args, COMFY_ONLY_FLAGS))


def is_webui(path: str, args: Sequence[str], image: str) -> bool:
    """``python launch.py --xformers --ckpt x`` of an A1111-style web UI."""
    return bool(WEBUI_MARK_RE.search(path[:512]) or WEBUI_MARK_RE.search(image[:512])
                or _has_flag(args, A1111_ONLY_FLAGS))


def parse_comfyui(args: Sequence[str], b: Spec) -> None:
    """ComfyUI: checkpoints are picked per workflow from ``models/checkpoints``: not visible."""
    b.fields["kind"] = "diffusion"
    b.fields["tensor_parallel"] = 1
    if "--cpu" in args[:256]:
        b.note("ComfyUI runs with --cpu: the GPU it requests is not used")
    if not b.generic_model():
        b.note(f"ComfyUI loads its checkpoints per workflow; the model is not visible: {_DECLARE}")


def parse_webui(args: Sequence[str], b: Spec) -> None:
    """A1111/Forge/SD.Next: ``--ckpt FILE`` names the checkpoint; otherwise it is not visible."""
    b.fields["kind"] = "diffusion"
    b.fields["tensor_parallel"] = 1
    b.apply(scan(args, A1111_FLAGS), label="web UI")
    if not b.mentioned("model") and not b.generic_model():
        b.note(f"the web UI loads a checkpoint from its models directory; not visible: {_DECLARE}")


def parse_invokeai(args: Sequence[str], b: Spec) -> None:
    """``invokeai-web``: models are installed through its model manager: not visible."""
    b.fields["kind"] = "diffusion"
    b.fields["tensor_parallel"] = 1
    if not b.generic_model():
        b.note(f"InvokeAI loads models from its model manager; not visible: {_DECLARE}")
