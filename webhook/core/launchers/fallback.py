"""Last resort for a GPU container no known launcher runs: a model id in a well-known place.

Custom servers (a diffusers app, a FastAPI wrapper around transformers) are configured the same few
ways: an env variable named ``MODEL_ID``, ``HF_MODEL_ID``, ``MODEL_NAME``, ``MODEL`` or
``MODEL_PATH``, or a ``--model``-style flag of the script. Reading that is a guess, so it is used
only when nothing better was found, only for containers that request GPUs (``inference`` decides),
and the spec says where the model was read and that the framework is unknown. Nothing is assumed
about parallelism or role: TP and GPUs stay unknown unless annotated. A script that names no model
but states its network's shape with the Megatron flags is sized from that shape (``arch_flags``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Sequence

from webhook.core.launchers.container import finish_spec
from webhook.core.launchers.arch_flags import PREFIX, read_architecture
from webhook.core.launchers.context import Ctx, context, with_argvs
from webhook.core.launchers.flags import GENERIC_ENV, GENERIC_FLAGS, SCRIPT_FLAGS
from webhook.core.launchers.scan import scan
from webhook.core.domain import LaunchSpec
from webhook.core.launchers.spec import Spec
from webhook.core.shell import Invocation, invocations


def parse_env_model(container: Mapping[str, Any]) -> LaunchSpec | None:
    """A spec with ``model`` from well-known env names or script flags, or None when there is none.

    Values that are not literal (``valueFrom``, ``envFrom``, ``$(VAR)``) are reported by name in
    ``hidden`` exactly as for a known launcher, so the user learns where the model hides.
    """
    if not isinstance(container, Mapping):
        return None
    ctx = context(container)
    runs, notes = invocations(container, ctx.env)
    ctx = with_argvs(ctx, runs, container)
    b = Spec(ctx, "", "")
    b.fields["framework"] = None
    b.fields["role"] = None
    source = ""
    for name in GENERIC_ENV:
        if name in ctx.env and ctx.env[name].strip():
            b.set("model", ctx.env[name], f"env {name}")
            source = f"env {name}"
            break
        if name in ctx.unknown or name in ctx.withheld:
            b.env_raw((name,), "model")
            break
    if not b.mentioned("model"):
        for run in runs[:16]:
            found = scan(run.argv[1:], GENERIC_FLAGS)
            if "model" in found.values:
                raw, spelled = found.values["model"]
                source = f"{spelled[:64]} of {run.argv[0].rsplit('/', 1)[-1][:64]}"
                b.set("model", raw, source)
                break
    if not b.mentioned("model"):
        source = _inline_model(runs, b)
    if not b.mentioned("model"):
        return _architecture_only(b, runs, notes, ctx)
    if "model" in b.fields:
        # names only: the value is an env value, and messages never carry those
        unknown = "" if b.fields.get("framework") else "; framework and parallelism unknown"
        b.note(f"no known launcher runs: the model was read from {source}{unknown}")
    return finish_spec(b.build(), notes, ctx)


_FROM_PRETRAINED = re.compile(r"""\.from_pretrained\(\s{0,8}(?:pretrained_model_name_or_path\s{0,4}=\s{0,4})?["']([^"'\s]{1,200})["']""")
"""``AutoModelForCausalLM.from_pretrained("meta-llama/...")``: a literal id as the first argument."""
_DEVICE_MAP = re.compile(r"""device_map\s{0,4}=\s{0,4}["'](auto|balanced|balanced_low_0|sequential)["']""")
MAX_CODE = 65_536
"""Characters of inline code searched (``python -c``): bounded for hostile input."""


def _inline_model(runs: Sequence[Invocation], b: Spec) -> str:
    """The model an inline script loads (``python -c "...from_pretrained('org/model', device_map='auto')"``):
    set on ``b`` with a note, its source returned ("" when none). ``device_map='auto'`` (Accelerate's
    big-model inference) puts consecutive layers on the pod's GPUs, one after another: no tensor
    parallelism, which the note says; the split itself is left to the fallback's rules (unknown)."""
    for run in runs[:16]:
        for token in run.argv[1:64]:
            code = token[:MAX_CODE] if isinstance(token, str) and "from_pretrained" in token else ""
            match = _FROM_PRETRAINED.search(code)
            if match and b.set("model", match.group(1), "from_pretrained"):
                program = run.argv[0].rsplit("/", 1)[-1][:64]
                mapped = _DEVICE_MAP.search(code)
                if mapped:
                    b.fields.update(framework="transformers", role="inference")
                    b.note(f"device_map={mapped.group(1)!r}: Accelerate places consecutive layers on the pod's "
                           f"GPUs, run one after another (no tensor parallelism)")
                return f"from_pretrained in the inline code of {program}"
    return ""


def _architecture_only(b: Spec, runs: Sequence[Invocation], notes: Sequence[str], ctx: Ctx) -> LaunchSpec | None:
    """A script that names no model but states its network's shape (``python train.py --num-layers
    24 --hidden-size 2048 ...``, the Megatron spellings): the shape sizes it; None when no run does."""
    for run in runs[:16]:
        found = scan(run.argv[1:], SCRIPT_FLAGS)
        shape = {k: v for k, v in found.values.items() if k.startswith(PREFIX)}
        if not shape:
            continue
        read_architecture(shape, b)
        program = run.argv[0].rsplit("/", 1)[-1][:64]
        if "architecture" in b.fields:
            b.note(f"no known launcher runs: the network's shape was read from the flags of {program}; "
                   f"framework and parallelism unknown")
        return finish_spec(b.build(), notes, ctx)
    return None
