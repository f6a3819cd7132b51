"""ConfigMaps in the same input: the values a pod reads from them, put in place before it is read.

A Deployment often keeps its model and parallelism in a ConfigMap (``envFrom: configMapRef`` or
``valueFrom: configMapKeyRef``). At admission the webhook sees one object and reports such values as
unknown; ``check`` on a directory or a ``kustomize build`` has the ConfigMap beside the Deployment,
so it can read them as the kubelet will: ``envFrom`` sources first (in order, with their
``prefix``; keys that are not valid variable names are skipped, as the kubelet skips them), then
``env``, whose ``configMapKeyRef`` entries take the key's value. A reference to a ConfigMap or key
that is not in the input stays a reference (reported as unknown, as before). Only a copy is
changed: the patch applies to the object as written, and its ops never touch ``env``.

ConfigMap *volumes* are files a launcher may read (a DeepSpeed JSON, an accelerate YAML): the files a
container mounts from a ConfigMap of the input are put on its copy under :data:`FILES` (mount path ->
text), where ``launchers.files`` finds them, the way the kubelet lays them out: every key as a file
in ``mountPath`` (or the ``items`` it lists, at their ``path``), ``subPath`` mounting one of them at
``mountPath`` itself; ``projected`` volumes likewise.

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
FILES = "gpu-admission.io/configmap-files"
"""Key of the mounted-file map on a container copy: no Kubernetes field can have this name, and the
copy is only read (the patch applies to the object as written)."""
MAX_FILES = 64
MAX_FILE_CHARS = 256 * 1024


def data_of(configmap: Any) -> Mapping[str, str] | None:
    """A ConfigMap object's ``data`` with string values only (``None`` when it is not one)."""
    data = configmap.get("data") if isinstance(configmap, Mapping) else None
    if not isinstance(data, Mapping):
        return None
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def context_lookup(context: Mapping[tuple[str, str, str], Any] | None, namespace: Any) -> Lookup | None:
    """ConfigMap name -> data for the ConfigMaps of ``context`` (the input's other objects, keyed by
    kind, namespace, name) in ``namespace`` (one written without a namespace matches any), or
    ``None`` when the input holds none."""
    if not context or not any(isinstance(key, tuple) and key[:1] == ("ConfigMap",) for key in context):
        return None
    ns = namespace if isinstance(namespace, str) else ""

    def lookup(name: str) -> Mapping[str, str] | None:
        return data_of(context.get(("ConfigMap", ns, name)) or context.get(("ConfigMap", "", name)))

    return lookup


def pod_files(spec: Any, lookup: Lookup) -> dict[str, str]:
    """Mount path -> text of every ConfigMap file of the input any container of the pod ``spec``
    mounts (the first container to mount a path wins): what a program the pod runs but no container
    command names can read, such as the driver of a RayJob or a Ray Serve app's config."""
    if not isinstance(spec, Mapping):
        return {}
    volumes = _configmap_volumes(spec.get("volumes"))
    out: dict[str, str] = {}
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        for container in items[:MAX_ENTRIES] if isinstance(items, list) and volumes else ():
            if isinstance(container, Mapping):
                for path, text in _mounted_files(container, lookup, volumes).items():
                    if len(out) < MAX_FILES:
                        out.setdefault(path, text)
    return out


def materialize(spec: Mapping[str, Any], lookup: Lookup) -> Mapping[str, Any]:
    """``spec`` with every container's ConfigMap env resolved from ``lookup`` where it can be (a
    copy; ``spec`` itself when nothing refers to a ConfigMap that ``lookup`` knows)."""
    changed = False
    out = dict(spec)
    volumes = _configmap_volumes(spec.get("volumes"))
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        new = [_container(c, lookup, volumes) if isinstance(c, Mapping) else c for c in items]
        if any(a is not b for a, b in zip(new, items)):
            out[field] = new
            changed = True
    return out if changed else spec


def _container(container: Mapping[str, Any], lookup: Lookup,
               volumes: Mapping[str, list[Mapping[str, Any]]] | None = None) -> Mapping[str, Any]:
    out = _env_container(container, lookup)
    files = _mounted_files(container, lookup, volumes or {})
    if not files:
        return out
    out = dict(out)
    out[FILES] = files
    return out


def _configmap_volumes(value: Any) -> dict[str, list[Mapping[str, Any]]]:
    """Volume name -> its ConfigMap sources (``configMap``, or each ``projected`` source's)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for volume in value[:MAX_ENTRIES] if isinstance(value, list) else ():
        if not isinstance(volume, Mapping) or not isinstance(volume.get("name"), str):
            continue
        sources: list[Mapping[str, Any]] = []
        if isinstance(volume.get("configMap"), Mapping):
            sources.append(volume["configMap"])
        projected = volume.get("projected")
        if isinstance(projected, Mapping) and isinstance(projected.get("sources"), list):
            sources += [src["configMap"] for src in projected["sources"][:MAX_ENTRIES]
                        if isinstance(src, Mapping) and isinstance(src.get("configMap"), Mapping)]
        if sources:
            out[volume["name"]] = sources
    return out


def _mounted_files(container: Mapping[str, Any], lookup: Lookup,
                   volumes: Mapping[str, list[Mapping[str, Any]]]) -> dict[str, str]:
    """Mount path -> text of every ConfigMap file of the input this container mounts."""
    mounts = container.get("volumeMounts")
    files: dict[str, str] = {}
    for mount in mounts[:MAX_ENTRIES] if isinstance(mounts, list) and volumes else ():
        if not isinstance(mount, Mapping) or not isinstance(mount.get("mountPath"), str):
            continue
        sub = mount.get("subPath") if isinstance(mount.get("subPath"), str) else ""
        root = mount["mountPath"].rstrip("/") or "/"
        for source in volumes.get(mount.get("name"), ()) if isinstance(mount.get("name"), str) else ():
            data = lookup(source["name"]) if isinstance(source.get("name"), str) else None
            for rel, text in _layout(source, data or {}).items():
                path = root if sub else f"{root.rstrip('/')}/{rel}"
                if (not sub or rel == sub) and len(files) < MAX_FILES:
                    files[path] = text[:MAX_FILE_CHARS]
    return files


def _layout(source: Mapping[str, Any], data: Mapping[str, str]) -> dict[str, str]:
    """Relative file path -> text of one ConfigMap source: its ``items`` when listed, else every key."""
    items = source.get("items")
    if not isinstance(items, list):
        return dict(list(data.items())[:MAX_FILES])
    out: dict[str, str] = {}
    for item in items[:MAX_FILES]:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str) and item["key"] in data:
            path = item.get("path") if isinstance(item.get("path"), str) else item["key"]
            out[path] = data[item["key"]]
    return out


def _env_container(container: Mapping[str, Any], lookup: Lookup) -> Mapping[str, Any]:
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
