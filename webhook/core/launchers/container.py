"""Container -> ``LaunchSpec``: find the command line that runs a known launcher and parse it.

The entry point of the package: builds the container's context, tries every command line, falls
back to the image (NIM by name, launcher images whose entrypoint runs when no command is set),
and makes sure no env value (secrets above all) leaves the pod in the finished spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import marshal

from typing import Any

from webhook.core.evolve import evolve
from webhook.core.configmaps import FILES
from webhook.core.container_env import is_secret_name
from webhook.core.domain import LaunchSpec
from webhook.core.memo import MARSHAL_VERSION, MISSING, Memo
from webhook.core.launchers.context import Ctx, context, with_argvs
from webhook.core.launchers.detection import IMAGES, Launcher, detect
from webhook.core.launchers.nim import NIM_IMAGE_RE, parse_nim
from webhook.core.launchers.programs import ENTRYPOINT_RE
from webhook.core.launchers.spec import MAX_MESSAGES, Spec
from webhook.core.shell import Invocation, invocations


READ_FIELDS = ("command", "args", "env", "envFrom", "image", "resources", "name", "lifecycle", "workingDir", FILES)
"""Every container field the parse reads (``context``, ``invocations``, the image fallback): the
memo key of :func:`parse_container`. A field read below must be listed here."""

LAUNCHES: Memo[LaunchSpec | None] = Memo(2048)
""":func:`parse_container`'s results by :func:`_memo_key` (:mod:`webhook.core.memo`)."""
_MEMO_KEY_MAX = 64 * 1024


def _memo_key(container: Mapping[str, Any]) -> bytes | None:
    """The fields :func:`parse_launch` reads, serialized with :mod:`marshal` (version 2, as
    :func:`webhook.core.verdicts.key` and for the same reasons: a type tag with every value, so equal
    bytes are equal values; without back-references; an interned string and an equal one that is
    not are written differently, which costs a miss, never a wrong answer); cheaper than
    ``json.dumps`` of the same fields."""
    try:
        key = marshal.dumps([container.get(k) for k in READ_FIELDS], MARSHAL_VERSION)
    except (TypeError, ValueError, RecursionError):  # not plain data (YAML dates, deep nesting): no memo
        return None
    return key if len(key) <= _MEMO_KEY_MAX else None


def parse_container(container: Mapping[str, Any]) -> LaunchSpec | None:
    """:func:`parse_launch`, memoized by the fields it reads.

    Why: every pod is judged twice (``/mutate``, then ``/validate`` with the patch applied, which
    leaves the containers as they were), and the replicas of a Deployment, Job or LeaderWorkerSet
    carry identical containers; reading a command line (shell parsing, env expansion, flag tables)
    is the dearest step of the engine. The result is immutable, so sharing it is safe. Bounded:
    cleared when full, keys over 64 KiB are not kept. The memo holds env values in memory only, as
    the request did; nothing in it is logged.
    """
    if not isinstance(container, Mapping):
        return None
    key = _memo_key(container)
    if key is not None:
        hit = LAUNCHES.get(key)
        if hit is not MISSING:
            return hit  # type: ignore[return-value]
    spec = parse_launch(container)
    if key is not None:
        LAUNCHES.put(key, spec)
    return spec


def parse_launch(container: Mapping[str, Any]) -> LaunchSpec | None:
    """Find the first command line in the container that runs a known launcher and read model,
    parallelism and precision from its flags and env.

    Falls back to the image (NIM by name; TGI, vLLM, KServe, Ollama images whose entrypoint is
    the launcher when the container sets no command). ``None`` when nothing known runs (a plain
    CPU app). Never raises on JSON input and never puts an env value into ``hidden``/``notes``.
    """
    if not isinstance(container, Mapping):
        return None
    ctx = context(container)
    runs, notes = invocations(container, ctx.env)
    ctx = with_argvs(ctx, runs, container)
    for run in runs:
        hit = detect(run.argv, ctx.image)
        if hit is not None:
            spec = _run_parser(hit[0], hit[1], ctx, run)
            return finish_spec(spec, notes, ctx)
    spec = _parse_by_image(container, ctx)
    return finish_spec(spec, notes, ctx) if spec is not None else None


def _run_parser(launcher: Launcher, args: Sequence[str], ctx: Ctx, run: Invocation | None) -> LaunchSpec:
    """Run one launcher's parser with the env the command line sees (script exports included)."""
    if run is not None and run.env:
        extra = {k: v for k, v in run.env if k not in ctx.withheld and not is_secret_name(k)}
        ctx = evolve(ctx, env={**ctx.env, **extra})
    b = Spec(ctx, launcher.framework, launcher.role)
    launcher.parse(args, b)
    b.generic_model()
    return b.build()


def _parse_by_image(container: Mapping[str, Any], ctx: Ctx) -> LaunchSpec | None:
    """NIM by image name; launcher images only when the image's own entrypoint runs: ``command``
    absent, or only an ``*entrypoint*`` script (the DLC and TorchServe images ship one that ends in
    ``exec <launcher> "$@"``)."""
    if NIM_IMAGE_RE.search(ctx.image):
        return _run_parser(Launcher("nim", "inference", parse_nim), (), ctx, None)
    command = container.get("command")
    if command not in (None, []) and not _entrypoint_only(command):
        return None
    for pattern, entry in IMAGES:
        if pattern.search(ctx.image):
            args = _entrypoint_args(container, ctx)
            hit = detect(tuple(entry.split()) + args)
            if hit is not None:
                return _run_parser(hit[0], hit[1], ctx, None)
    return None


def _entrypoint_only(command: Any) -> bool:
    """``command: ["/entrypoint.sh"]``: the image's wrapper script, given nothing but the args."""
    return (isinstance(command, list) and len(command) == 1 and isinstance(command[0], str)
            and ENTRYPOINT_RE.fullmatch(command[0].rsplit("/", 1)[-1][:128]) is not None)


def _entrypoint_args(container: Mapping[str, Any], ctx: Ctx) -> tuple[str, ...]:
    """``args`` as the image entrypoint receives them ($(VAR)-expanded, capped)."""
    probe = {"command": ["entrypoint"], "args": container.get("args"),
             "env": container.get("env"), "envFrom": container.get("envFrom")}
    runs, _ = invocations(probe, ctx.env)
    return runs[0].argv[1:] if runs else ()


def finish_spec(spec: LaunchSpec, notes: Sequence[str], ctx: Ctx) -> LaunchSpec:
    """Attach the shell's notes and make sure no env value (secrets above all) left the pod."""
    all_notes = list(dict.fromkeys([*spec.notes, *notes]))[:MAX_MESSAGES]
    changes: dict[str, Any] = {}
    for name in ("model", "dtype", "quantization", "kv_cache_dtype"):
        value = getattr(spec, name)
        if isinstance(value, str) and any(s in value for s in ctx.secret_values):
            changes[name] = None
            all_notes.append(f"{name} withheld: it contains the value of a secret-named variable")
    source = getattr(spec, "strategy_source", None)
    if isinstance(source, str):  # names a config path, which may hold an expanded env value
        secret = any(s in source for s in ctx.secret_values)
        changes["strategy_source"] = ("(withheld: it names the value of a secret-named variable)" if secret
                                      else _redact(source, ctx.env_values))
    changes["hidden"] = tuple(_redact(h, ctx.env_values) for h in spec.hidden)
    changes["notes"] = tuple(_redact(n, ctx.env_values) for n in all_notes)
    return evolve(spec, **changes)


def _redact(text: str, values: Sequence[str]) -> str:
    """Belt and braces: messages are built from names only, but never let a value through."""
    for value in values[:256]:
        if value in text:
            text = text.replace(value, "<value>")
    return text
