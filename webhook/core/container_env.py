"""Container ``env``/``envFrom`` -> the values the kubelet would give it, and which to never read.

Reads the env exactly as the kubelet builds it (``envFrom`` first, then ``env``, later entries
winning, ``$(VAR)`` expanded from the entries before) and says what is unknowable at admission
(``valueFrom`` names with their source, ``envFrom`` sources) by name only. ``is_secret_name`` is the
one guard deciding which variables are credentials: their values are never expanded or recorded,
so they cannot reach a report. Like ``shell`` it never raises on odd JSON and keeps every loop
bounded, because it judges untrusted objects inside the API server's admission deadline.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "container_env",
    "env_sources",
    "expand_kubelet",
    "is_secret_name",
]

MAX_ENV_ENTRIES = 1024
"""Env entries read per container; the API server would reject far fewer long before this."""
MAX_NAME_CHARS = 253
MAX_EXPANDED_CHARS = 1 << 20
"""Characters one ``$(VAR)`` expansion may produce, and all literal env values of one container
together. Expansion multiplies (``V=$(V)$(V)`` repeated, or ``V1=$(V0)$(V0)``, ``V2=$(V1)$(V1)``...), so
without a bound a few KiB of env is a billion-laughs bomb: values past the budget count as unknown
at admission, like ``valueFrom``."""
_SECRET_RE = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|COOKIE|"
    r"(?:^|_)(?:KEY|PASS|PAT|PWD|CERT)(?:$|_)",
    re.I,
)


def is_secret_name(name: str) -> bool:
    """Whether a variable name looks like it holds a credential (``HF_TOKEN``, ``AWS_SECRET_...``).

    Such variables are never expanded or recorded, so their values cannot reach a report even when
    a command line mentions them.
    """
    return isinstance(name, str) and bool(_SECRET_RE.search(name[:MAX_NAME_CHARS]))


# --------------------------------------------------------------------------- env


def container_env(container: Mapping[str, Any]) -> tuple[dict[str, str], tuple[str, ...]]:
    """``env``/``envFrom`` -> (literal values by name, what is unknowable at admission).

    The second item lists names set by ``valueFrom`` and one description per ``envFrom`` source
    (``envFrom configMap NAME``) because such a source may set *any* variable. Entries are read in
    the kubelet's order (``envFrom`` first, then ``env``, later entries overriding earlier ones) and a
    literal value's ``$(VAR)`` references are expanded from the entries before it, as the kubelet
    does. Malformed entries are skipped or stringified: this never raises.
    """
    if not isinstance(container, Mapping):
        return {}, ()
    literal: dict[str, str] = {}
    unknown: dict[str, None] = {}
    sources = [_env_from_description(item) for item in _bounded(container.get("envFrom"))]
    budget = MAX_EXPANDED_CHARS
    for name, value in _env_entries(container.get("env")):
        expanded = None if value is None else expand_kubelet(value, literal, max_chars=budget)
        if expanded is None or len(expanded) >= budget:
            literal.pop(name, None)
            unknown[name] = None
            if expanded is not None:
                budget = 0  # spent: what follows is not expanded either
        else:
            budget -= len(expanded)
            unknown.pop(name, None)
            literal[name] = expanded
    hidden = tuple(unknown) + tuple(s for s in sources if s)
    return literal, hidden


def env_sources(container: Mapping[str, Any]) -> dict[str, str]:
    """``valueFrom`` names -> where the value lives (``ConfigMap llm key tp``), never the value."""
    out: dict[str, str] = {}
    if not isinstance(container, Mapping):
        return out
    env = container.get("env")
    for item in _bounded(env if isinstance(env, list) else ()):
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            value_from = item.get("valueFrom")
            if isinstance(value_from, Mapping):
                out[item["name"]] = _value_from_description(value_from)
            else:
                out.pop(item["name"], None)
    return out


def _bounded(value: Any) -> Iterable[Any]:
    """The first ``MAX_ENV_ENTRIES`` items of a list; nothing for anything else."""
    return itertools.islice(value, MAX_ENV_ENTRIES) if isinstance(value, list) else ()


def _env_entries(env: Any) -> Iterable[tuple[str, str | None]]:
    """(name, literal value or ``None`` when set by ``valueFrom``) for each well-formed entry.

    A dict instead of a list (a common templating slip) is read as name -> value.
    """
    if isinstance(env, Mapping):
        items: Iterable[Any] = (
            {"name": k, "value": v} for k, v in itertools.islice(env.items(), MAX_ENV_ENTRIES)
        )
    else:
        items = _bounded(env)
    for item in items:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            continue
        if isinstance(item.get("valueFrom"), Mapping):
            yield name, None
            continue
        value = scalar_text(item.get("value"))
        yield name, "" if value is None else value


def _env_from_description(item: Any) -> str:
    """``envFrom`` entry -> ``envFrom configMap NAME (prefix P_)``, or '' when malformed."""
    if not isinstance(item, Mapping):
        return ""
    for key, kind in (("configMapRef", "configMap"), ("secretRef", "secret")):
        ref = item.get(key)
        if isinstance(ref, Mapping):
            text = f"envFrom {kind} {_short(ref.get('name')) or '(unnamed)'}"
            prefix = _short(item.get("prefix"))
            return f"{text} (prefix {prefix})" if prefix else text
    return ""


def _value_from_description(value_from: Mapping[str, Any]) -> str:
    """A ``valueFrom`` object -> a human description of its source (names only)."""
    for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
        ref = value_from.get(key)
        if isinstance(ref, Mapping):
            return f"{kind} {_short(ref.get('name')) or '(unnamed)'} key {_short(ref.get('key')) or '?'}"
    ref = value_from.get("fieldRef")
    if isinstance(ref, Mapping):
        return f"the pod field {_short(ref.get('fieldPath')) or '?'}"
    ref = value_from.get("resourceFieldRef")
    if isinstance(ref, Mapping):
        return f"the container resource {_short(ref.get('resource')) or '?'}"
    return "a valueFrom source"


def _short(value: Any) -> str:
    """A name-like scalar as a bounded string ('' for anything else)."""
    text = scalar_text(value)
    return text[:MAX_NAME_CHARS] if text else ""


def scalar_text(value: Any) -> str | None:
    """Stringify JSON scalars the way a YAML author meant them; ``None`` for the rest."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


# --------------------------------------------------------------------------- kubelet $(VAR)


def expand_kubelet(text: str, env: Mapping[str, str], *, max_chars: int = MAX_EXPANDED_CHARS) -> str:
    """Kubernetes ``$(VAR)`` expansion exactly like the kubelet.

    Port of ``third_party/forked/golang/expansion``: ``$(VAR)`` is replaced when VAR is defined and
    left as written when not, ``$$`` escapes to ``$``, any other ``$x`` and an unclosed ``$(`` stay
    as they are. The scan for ``)`` is cached so hostile input stays linear, and the result is cut at
    ``max_chars`` (a short text of many ``$(BIG)`` references would otherwise be gigabytes).
    """
    if not isinstance(text, str) or "$" not in text:
        return (text if isinstance(text, str) else "")[:max_chars]
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(text)
    next_close = -2  # -2: not searched yet; -1: no ')' at or after the last search point
    size = 0
    while cursor < n:
        if size > max_chars:
            return "".join(out)[:max_chars]
        if text[cursor] == "$" and cursor + 1 < n:
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                if next_close == -2 or (next_close != -1 and next_close < cursor + 2):
                    next_close = text.find(")", cursor + 2)
                if next_close == -1:
                    out.append("$(")
                else:
                    name = text[cursor + 2 : next_close]
                    value = env.get(name) if isinstance(env, Mapping) else None
                    out.append(value if isinstance(value, str) else f"$({name})")
                    size += len(out[-1]) + len(out[-2])
                    cursor = next_close
                    checkpoint = cursor + 1
                    cursor += 1
                    continue
            else:
                out.append("$" + nxt)
            cursor += 1
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)[:max_chars]
