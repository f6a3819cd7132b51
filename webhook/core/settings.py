"""Policy configuration: schema, embedded default, validation.

One YAML file decides tiers, products, thresholds, the product label key and the GPU resource
names. The default is embedded in the package (``data/policy.yaml``); a user file is merged over it
field by field, validated against a JSON schema, and cross-checked against the GPU catalog, so a
bad file is rejected with a message naming the field instead of half-working at admission time.

A policy *file* (:func:`parse_text`, :func:`load`) is all or nothing: it must be a mapping that
states ``apiVersion: gpu-admission.io/v1alpha1`` and ``kind: Policy``. Every other field is optional,
so without that rule an empty file, or one cut off after its opening comments, was a valid policy:
the embedded default, which enforces, silently replacing an audit policy. Documents built in code
(:func:`from_mapping`) are partial policies by design and need neither.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from webhook.core import bundled
from webhook.core.hardware import Catalog, load_catalog

if TYPE_CHECKING:
    import jsonschema

MODES = ("enforce", "audit")

API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "Policy"
"""What every policy file states (``apiVersion``, ``kind``): the mark of a whole file."""

GENERATION_CHARS = 12
"""Hex digits of the sha256 of a policy file's bytes kept as its :attr:`Settings.generation`."""


class SettingsError(ValueError):
    """The policy file is invalid; the message names the file and the field."""


@dataclass(frozen=True)
class Tier:
    name: str
    products: tuple[str, ...]
    multi_gpu: bool
    description: str = ""


@dataclass(frozen=True)
class Settings:
    """Validated policy. Immutable, so a reload swaps the whole object atomically."""

    mode: str
    mutate: bool
    allow_audit_annotation: bool
    label_key: str
    label_scheme: str
    gpu_resources: tuple[str, ...]
    large_model_params_b: float
    memory_utilization: float
    overhead_gib: float
    kv_reserve_gib: float
    kv_fraction: float
    mixed_nodes: str
    """``exclude``: keep multi-GPU pods off mixed/mislabeled nodes by hostname; ``warn``: only say so."""
    multi_gpu_tier: str | None
    """``rules.multiGpuTier``: when set, every multi-GPU pod and multi-pod group goes to this tier (the
    policy's override). ``None`` (the default): where multi-GPU work goes is decided from the numbers
    (:mod:`webhook.core.tiering`): work whose weights need NVLink-class hardware goes to
    ``large_model_tier``, smaller work to ``small_model_tier`` when that tier takes multi-GPU pods."""
    large_model_tier: str
    small_model_tier: str
    escalate: bool
    tiers: tuple[Tier, ...]
    catalog: Catalog
    source: str = "embedded default"
    scalable_products: tuple[str, ...] = ()
    """Catalog ids of products an autoscaler can add without anything in the API saying so
    (cluster-autoscaler node groups, GKE node pools at zero): counted as present in the inventory."""
    absent_tier: str = "warn"
    """With an inventory, a tier no node (nor NodePool, nor ``scalable_products``) offers: ``warn``
    admits and warns (the Pending pod is what makes an autoscaler add the node), ``deny`` denies
    ``tier-not-in-cluster``."""
    group_fit: str = "warn"
    """With an inventory, a multi-pod group that no one product can hold whole (too few nodes with
    room for a member): ``warn`` admits and warns with the numbers (an autoscaler may add the nodes),
    ``deny`` denies ``group-does-not-fit``."""
    numa: str = "warn"
    """Multi-GPU pods on a multi-GPU (NVLink) tier, of a workload where alignment pays (training, a
    multi-pod group: ``rules.numa_pays``), that cannot get CPUs aligned with their GPUs from the
    kubelet (not Guaranteed QoS, fractional CPUs: :mod:`webhook.core.numa`): ``warn`` (default),
    ``deny`` (``numa-unaligned``), ``off``."""
    misplaced: str = "warn"
    """A workload that runs where it is pinned, but not where the policy would put it (kind
    ``misplaced``): ``warn`` admits it with the numbers and the fix, ``deny`` refuses it in enforce.
    The seed's trap with the way out in the cluster is denied either way (:mod:`webhook.core.tiering`)."""
    updates: str = "judgeChange"
    """``judgeChange``: an UPDATE is denied only for a violation the stored object did not have
    (:mod:`webhook.core.updates`); ``judgeObject``: every UPDATE is judged as a new object."""
    generation: str = field(default="", compare=False)
    """Which policy this is: the first :data:`GENERATION_CHARS` hex digits of the sha256 of the file's
    bytes (``sha256sum policy.yaml``), the same in every process that loaded the same file; for a
    document built in code, of its canonical JSON. Not compared: two files that say the same are
    equal settings."""

    def tier(self, name: str) -> Tier | None:
        return next((t for t in self.tiers if t.name == name), None)


_NAME = {"type": "string", "minLength": 1, "maxLength": 253}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0}

SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "gpu-admission.io/v1alpha1"},
        "kind": {"const": "Policy"},
        "mode": {"enum": list(MODES)},
        "updates": {"enum": ["judgeChange", "judgeObject"]},
        "numa": {"enum": ["warn", "deny", "off"]},
        "misplaced": {"enum": ["warn", "deny"]},
        "mutate": {"type": "boolean"},
        "allowAuditAnnotation": {"type": "boolean"},
        "productLabel": {"type": "string", "pattern": r"^([a-z0-9.-]+/)?[A-Za-z0-9._-]+$", "maxLength": 316},
        "labelScheme": _NAME,
        "gpuResources": {"type": "array", "items": _NAME, "minItems": 1, "uniqueItems": True},
        "largeModelParamsB": {"type": "number", "minimum": 0},
        "sizing": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "memoryUtilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "runtimeOverheadGiB": {"type": "number", "minimum": 0},
                "kvCacheReserveGiB": {"type": "number", "minimum": 0},
                "kvCacheFraction": {"type": "number", "minimum": 0, "maximum": 1},
            },
        },
        "rules": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "multiGpuTier": {"oneOf": [_NAME, {"type": "null"}]},
                "largeModelTier": _NAME,
                "smallModelTier": _NAME,
                "escalate": {"type": "boolean"},
            },
        },
        "tiers": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "products"],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"},
                    "description": {"type": "string"},
                    "multiGpu": {"type": "boolean"},
                    "products": {"type": "array", "items": _NAME, "minItems": 1, "uniqueItems": True},
                },
            },
        },
        "inventory": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "mixedNodes": {"enum": ["exclude", "warn"]},
                "absentTier": {"enum": ["warn", "deny"]},
                "groupFit": {"enum": ["warn", "deny"]},
                "scalableProducts": {"type": "array", "items": _NAME, "uniqueItems": True},
            },
        },
        "products": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id"],
                "properties": {
                    "id": _NAME,
                    "memory_gib": _POSITIVE,
                    "bandwidth_gbs": _POSITIVE,
                    "labels": {"type": "object", "additionalProperties": {"type": "array", "items": _NAME}},
                },
            },
        },
    },
}


@functools.cache
def _embedded_text() -> str:
    return bundled.text("policy.yaml")


def _load_bundled(text: str) -> Any:
    """Parse one of our own data files with PyYAML's C parser when it is there: the same documents as
    ``yaml.safe_load`` (same SafeConstructor), several times faster, which is most of the start-up
    time of ``gpu-admission check``. Operators' policy files keep ``safe_load`` and its messages."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


@functools.cache
def _catalog_data() -> Mapping[str, Any]:
    return _load_bundled(bundled.text("gpus.yaml"))


@functools.cache
def _embedded_doc() -> Mapping[str, Any]:
    """The embedded policy, parsed once (``_merge`` deep-copies it, so it is never changed)."""
    return _load_bundled(_embedded_text())


def embedded_policy_text() -> str:
    """The default policy file, comments included (what the ConfigMap ships)."""
    return _embedded_text()


def _field(error: jsonschema.ValidationError) -> str:
    parts = ""
    for token in error.absolute_path:
        parts += f"[{token}]" if isinstance(token, int) else (f".{token}" if parts else str(token))
    return parts or "(top level)"


def _schema_errors(raw: Mapping[str, Any]) -> list[jsonschema.ValidationError]:
    # imported here: jsonschema is a fifth of the start-up time of `check`, and only a policy file
    # (not the embedded default) needs it
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    return sorted(validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Field-by-field merge: nested objects merge, lists and scalars replace."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _catalog_with(extra: list[Mapping[str, Any]]) -> Catalog:
    if not extra:
        return load_catalog()
    data = copy.deepcopy(dict(_catalog_data()))
    products = list(data.get("products", []))
    index = {p.get("id"): i for i, p in enumerate(products) if isinstance(p, Mapping)}
    for product in extra:
        if product["id"] in index:
            i = index[product["id"]]
            products[i] = _merge(dict(products[i]), product)
        else:
            products.append(dict(product))
    data["products"] = products
    return load_catalog(data)


def _scheme_for(label_key: str, catalog: Catalog) -> str | None:
    return next((s for s, key in catalog.schemes.items() if key == label_key), None)


def generation_of(text: str) -> str:
    """The generation of a policy file's text: what ``sha256sum`` of the file starts with."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:GENERATION_CHARS]


def from_mapping(raw: Any, *, source: str = "embedded default", generation: str | None = None) -> Settings:
    """Validate a decoded policy document (merged over the embedded default) into Settings.

    For documents built in code: every field is optional, ``apiVersion`` and ``kind`` included. A
    policy *file* goes through :func:`parse_text`, which also requires those two."""
    if generation is None:
        try:
            generation = generation_of(json.dumps(raw, sort_keys=True, default=str))
        except (TypeError, ValueError, RecursionError):  # keys of mixed types, a self-referencing document
            generation = ""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{source}: the policy must be a YAML mapping, got {type(raw).__name__}")
    base = _embedded_doc()
    errors = _schema_errors(raw) if raw else []  # {} (the embedded default as it is) is valid
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise SettingsError(f"{source}: {_field(first)}: {first.message}{more}")
    doc = _merge(base, raw)
    if "productLabel" in raw and "labelScheme" not in raw:
        doc.pop("labelScheme", None)  # derive the scheme from the user's label key
    try:
        catalog = _catalog_with(list(doc.get("products") or []))
    except (ValueError, KeyError, TypeError) as exc:
        raise SettingsError(f"{source}: products: {exc}") from exc
    return _build(doc, catalog, source, generation)


def _build(doc: Mapping[str, Any], catalog: Catalog, source: str, generation: str) -> Settings:
    label_key = doc["productLabel"]
    scheme = doc.get("labelScheme") or _scheme_for(label_key, catalog)
    if scheme is not None and scheme not in catalog.schemes:
        raise SettingsError(f"{source}: labelScheme: {scheme!r} is not a label scheme of the GPU catalog "
                            f"(known: {', '.join(catalog.schemes)})")
    if scheme is None:
        raise SettingsError(f"{source}: labelScheme: cannot derive a label scheme for productLabel "
                            f"{label_key!r}; set labelScheme to one of {sorted(catalog.schemes)}")
    tiers = []
    for i, raw_tier in enumerate(doc["tiers"]):
        for j, product in enumerate(raw_tier["products"]):
            if product not in catalog.products:
                known = ", ".join(catalog.products)
                raise SettingsError(f"{source}: tiers[{i}].products[{j}]: {product!r} is not a GPU product "
                                    f"of the catalog (known: {known})")
        tiers.append(Tier(
            name=raw_tier["name"],
            products=tuple(raw_tier["products"]),
            multi_gpu=bool(raw_tier.get("multiGpu", True)),
            description=raw_tier.get("description", ""),
        ))
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise SettingsError(f"{source}: tiers: tier names must be unique, got {names}")
    inventory = doc["inventory"]
    scalable = tuple(inventory.get("scalableProducts", ()))
    for j, product in enumerate(scalable):
        if product not in catalog.products:
            raise SettingsError(f"{source}: inventory.scalableProducts[{j}]: {product!r} is not a GPU product "
                                f"of the catalog (known: {', '.join(catalog.products)})")
    rules = doc["rules"]
    for key in ("multiGpuTier", "largeModelTier", "smallModelTier"):
        if key == "multiGpuTier" and rules.get(key) is None:
            continue  # decided from the numbers
        if rules[key] not in names:
            raise SettingsError(f"{source}: rules.{key}: {rules[key]!r} is not a tier (tiers: {names})")
    sizing = doc["sizing"]
    return Settings(
        mode=doc["mode"],
        updates=doc["updates"],
        mutate=bool(doc["mutate"]),
        allow_audit_annotation=bool(doc["allowAuditAnnotation"]),
        label_key=label_key,
        label_scheme=scheme,
        gpu_resources=tuple(doc["gpuResources"]),
        large_model_params_b=float(doc["largeModelParamsB"]),
        memory_utilization=float(sizing["memoryUtilization"]),
        overhead_gib=float(sizing["runtimeOverheadGiB"]),
        kv_reserve_gib=float(sizing["kvCacheReserveGiB"]),
        kv_fraction=float(sizing["kvCacheFraction"]),
        mixed_nodes=inventory["mixedNodes"],
        absent_tier=inventory["absentTier"],
        group_fit=inventory.get("groupFit", "warn"),
        numa=doc.get("numa", "warn"),
        misplaced=doc.get("misplaced", "warn"),
        scalable_products=scalable,
        multi_gpu_tier=rules.get("multiGpuTier"),
        large_model_tier=rules["largeModelTier"],
        small_model_tier=rules["smallModelTier"],
        escalate=bool(rules.get("escalate", True)),
        tiers=tuple(tiers),
        catalog=catalog,
        source=source,
        generation=generation,
    )


_HEADER = f"a policy file states apiVersion: {API_VERSION} and kind: {KIND}"


def check_header(raw: Any, *, source: str) -> None:
    """Refuse a decoded policy file that is not a whole policy: empty (or only comments), not a
    mapping, or without its ``apiVersion`` and ``kind`` (a truncated or a foreign file)."""
    if raw is None:
        raise SettingsError(f"{source}: the policy file is empty (or only comments): {_HEADER}")
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{source}: the policy must be a YAML mapping, got {type(raw).__name__}: {_HEADER}")
    for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key not in raw:
            raise SettingsError(f"{source}: {key}: missing: {_HEADER} (is the file cut short, or not a policy?)")
        if raw[key] != expected:
            raise SettingsError(f"{source}: {key}: must be {expected}, got {str(raw[key])[:80]!r}")


def parse_text(text: str, *, source: str) -> Settings:
    """Parse a policy file's text: all or nothing. YAML errors name the line; the file must state
    ``apiVersion`` and ``kind`` (:func:`check_header`); then the schema and the catalog decide."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SettingsError(f"{source}:{where}: invalid YAML: {problem}") from exc
    check_header(raw, source=source)
    return from_mapping(raw, source=source, generation=generation_of(text))


def load(path: str | Path | None, *, read: Callable[[Path], bytes]) -> Settings:
    """The policy in ``path``, or the embedded default when ``path`` is None.

    ``read`` is the door's file access (``Path.read_bytes`` in the server and the CLI): the core
    opens no file itself, so tests hand it bytes and the error mapping below is the same for the
    live reload and ``check --config``."""
    if path is None:
        return default()
    try:
        data = read(Path(path))
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read policy file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: policy file is not UTF-8 text") from exc
    return parse_text(text, source=str(path))


@functools.cache
def default() -> Settings:
    """The embedded default policy (cached: it never changes within a process). Its file states
    ``apiVersion`` and ``kind`` like any other (``tests/core/test_settings.py``); its generation is
    that of its text, as if it were loaded from a file."""
    return from_mapping({}, source="embedded default", generation=generation_of(_embedded_text()))
