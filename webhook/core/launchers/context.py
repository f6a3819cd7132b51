"""What a parser may know about a container besides the argv it reads.

Built once per container: literal env with secret-named variables (and anything holding their
values) withheld, ``valueFrom`` names and sources, ``envFrom`` descriptions, the image, GPU counts
the kubelet would resolve from the container's own resources, and every command line the container
runs (postStart hook included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.evolve import evolve
from webhook.core.configmaps import FILES
from webhook.core.container_env import container_env, env_sources, is_secret_name
from webhook.core.launchers.files import mounted, written_files
from webhook.core.launchers.values import MAX_FLAG_COUNT, flag_count
from webhook.core.shell import Invocation, invocations


@dataclass(frozen=True)
class Ctx:
    """What a parser may know about the container besides the argv it reads."""

    env: Mapping[str, str]
    """Literal env usable for values: no secret-named variables, nothing that contains one."""
    unknown: frozenset[str]
    """Names set by ``valueFrom``."""
    sources: Mapping[str, str]
    """``valueFrom`` name -> description of its source (names only)."""
    env_from: tuple[str, ...]
    """``envFrom`` descriptions: any variable may come from them."""
    withheld: frozenset[str]
    """Secret-named variables (and those containing one's value), never read."""
    image: str = ""
    argvs: tuple[tuple[str, ...], ...] = ()
    """Every command line of the container (Ollama pulls its model in a later command)."""
    secret_values: tuple[str, ...] = ()
    """Values of withheld variables: checked once more before a spec leaves this package."""
    env_values: tuple[str, ...] = ()
    """Every literal env value long enough to recognise, longest first, for redaction."""
    files: Mapping[str, str] = field(default_factory=dict)
    """Files the container can read that the input shows: mounted from a ConfigMap of the input
    (``configmaps.FILES``) or written by its own script (``launchers.files``), path -> text."""
    workdir: str = ""
    """The container's ``workingDir``: where relative paths of its command line point."""


EMPTY_CTX = Ctx(env={}, unknown=frozenset(), sources={}, env_from=(), withheld=frozenset())


def context(container: Mapping[str, Any]) -> Ctx:
    """Literal env minus secrets, valueFrom names and sources, envFrom descriptions, image."""
    literal, hidden = container_env(container)
    resolved = _gpu_resource_env(container)
    literal.update(resolved)
    withheld = {name for name in literal if is_secret_name(name)}
    secrets = tuple(literal[name] for name in withheld if len(literal[name]) >= 4)
    withheld |= {name for name, value in literal.items() if any(s in value for s in secrets)}
    image = container.get("image")
    workdir = container.get("workingDir")
    return Ctx(
        env={k: v for k, v in literal.items() if k not in withheld},
        unknown=frozenset(h for h in hidden if not h.startswith("envFrom ") and h not in resolved),
        sources=env_sources(container),
        env_from=tuple(h for h in hidden if h.startswith("envFrom ")),
        withheld=frozenset(withheld),
        image=image[:512] if isinstance(image, str) else "",
        secret_values=tuple(literal[name] for name in withheld if len(literal[name]) >= 4),
        env_values=tuple(sorted({v for v in literal.values() if len(v) >= 8}, key=len, reverse=True)),
        files=mounted(container.get(FILES)),
        workdir=workdir[:1024] if isinstance(workdir, str) else "",
    )


_GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu"})


def _gpu_resource_env(container: Mapping[str, Any]) -> dict[str, str]:
    """``valueFrom.resourceFieldRef: limits.nvidia.com/gpu`` is knowable: the container's own count.

    Only whole-GPU resources of this container with the default divisor are resolved.
    """
    out: dict[str, str] = {}
    env = container.get("env")
    resources = container.get("resources")
    if not isinstance(env, list) or not isinstance(resources, Mapping):
        return out
    for item in env[:1024]:
        ref = _resource_field_ref(item)
        if ref is None or ref.get("divisor") not in (None, "1", 1):
            continue
        if ref.get("containerName") not in (None, "", container.get("name")):
            continue
        section, _, resource = str(ref.get("resource", ""))[:256].partition(".")
        bucket = resources.get(section) if section in ("limits", "requests") else None
        value = bucket.get(resource) if isinstance(bucket, Mapping) and resource in _GPU_RESOURCES else None
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value) if 0 <= value <= MAX_FLAG_COUNT else None  # str() of a huge int raises
        count = flag_count(value, padded=False) if isinstance(value, str) else None
        if count is not None:
            out[item["name"]] = str(count)
    return out


def _resource_field_ref(item: Any) -> Mapping[str, Any] | None:
    """The ``resourceFieldRef`` of a named env entry, or None."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        return None
    value_from = item.get("valueFrom")
    ref = value_from.get("resourceFieldRef") if isinstance(value_from, Mapping) else None
    return ref if isinstance(ref, Mapping) else None


def with_argvs(ctx: Ctx, runs: Sequence[Invocation], container: Mapping[str, Any]) -> Ctx:
    """Add every command line (including a postStart exec hook) for parsers that look across them,
    and the files the command lines write (a written file shadows a mounted one of the same path)."""
    argvs = [run.argv for run in runs]
    hook = _post_start_command(container)
    if hook is not None:
        extra, _ = invocations({"command": hook, "env": container.get("env")}, ctx.env)
        argvs.extend(run.argv for run in extra)
    written = written_files(runs)
    files = {**ctx.files, **written} if written else ctx.files
    return evolve(ctx, argvs=tuple(argvs), files=files)


def _post_start_command(container: Mapping[str, Any]) -> Any:
    lifecycle = container.get("lifecycle")
    post = lifecycle.get("postStart") if isinstance(lifecycle, Mapping) else None
    exec_ = post.get("exec") if isinstance(post, Mapping) else None
    return exec_.get("command") if isinstance(exec_, Mapping) else None
