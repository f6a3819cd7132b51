"""ConfigMaps in the same input: the values a pod reads from them, put in place before it is read.

A Deployment often keeps its model and parallelism in a ConfigMap (``envFrom: configMapRef`` or
``valueFrom: configMapKeyRef``). At admission the webhook sees one object and reports such values as
unknown; ``check`` on a directory or a ``kustomize build`` has the ConfigMap beside the Deployment,
so it can read them as the kubelet will: ``envFrom`` sources first (in order, with their
``prefix``; keys that are not valid variable names are skipped, as the kubelet skips them), then
``env``, whose ``configMapKeyRef`` entries take the key's value. A reference to a ConfigMap or key
that is not in the input stays a reference (reported as unknown, as before). Only a copy is
changed: the patch applies to the object as written, and its ops never touch ``env``.

Pure: a pod spec and a lookup in, a pod spec out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Lookup = Callable[[str], Mapping[str, str] | None]
"""ConfigMap name -> its ``data`` (strings only), ``None`` when it is not in the input."""

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
MAX_ENTRIES = 256
"""Entries taken from one envFrom source: a ConfigMap of thousands of keys adds no model flag."""


def data_of(configmap: Any) -> Mapping[str, str] | None:
    """A ConfigMap object's ``data`` with string values only (``None`` when it is not one)."""
    data = configmap.get("data") if isinstance(configmap, Mapping) else None
    if not isinstance(data, Mapping):
        return None
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def materialize(spec: Mapping[str, Any], lookup: Lookup) -> Mapping[str, Any]:
    """``spec`` with every container's ConfigMap env resolved from ``lookup`` where it can be (a
    copy; ``spec`` itself when nothing refers to a ConfigMap that ``lookup`` knows)."""
    changed = False
    out = dict(spec)
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        new = [_container(c, lookup) if isinstance(c, Mapping) else c for c in items]
        if any(a is not b for a, b in zip(new, items)):
            out[field] = new
            changed = True
    return out if changed else spec


def _container(container: Mapping[str, Any], lookup: Lookup) -> Mapping[str, Any]:
    env = container.get("env")
    env_list = env if isinstance(env, list) else []
    added: list[dict[str, str]] = []
    kept_from: list[Any] = []
    for source in container.get("envFrom") if isinstance(container.get("envFrom"), list) else []:
        ref = source.get("configMapRef") if isinstance(source, Mapping) else None
        data = lookup(ref["name"]) if isinstance(ref, Mapping) and isinstance(ref.get("name"), str) else None
        if data is None:
            kept_from.append(source)
            continue
        prefix = source.get("prefix") if isinstance(source.get("prefix"), str) else ""
        added += [{"name": prefix + k, "value": v} for k, v in list(data.items())[:MAX_ENTRIES]
                  if _ENV_NAME.fullmatch(prefix + k)]
    resolved = [_entry(e, lookup) for e in env_list]
    if not added and all(a is b for a, b in zip(resolved, env_list)):
        return container
    out = dict(container)
    out["env"] = added + resolved
    if "envFrom" in container:
        out["envFrom"] = kept_from
    return out


def _entry(entry: Any, lookup: Lookup) -> Any:
    value_from = entry.get("valueFrom") if isinstance(entry, Mapping) else None
    ref = value_from.get("configMapKeyRef") if isinstance(value_from, Mapping) else None
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not isinstance(ref.get("key"), str):
        return entry
    data = lookup(ref["name"])
    if data is None or ref["key"] not in data:
        return entry
    return {"name": entry.get("name"), "value": data[ref["key"]]}
