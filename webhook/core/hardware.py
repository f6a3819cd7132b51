"""The GPU catalog: which node label values name which product, and what that product can hold.

Policy pins a workload to products by writing node-affinity values, and sizing checks a model
against the product behind each value. Both need the same answer to two questions: "which label
value(s) select product X under this cluster's label scheme?" and "what is a node with label value
V at least?". This module answers them from ``data/gpus.yaml`` (data, so a policy can add products
without code) and never decides anything itself.

Two choices shape the answers (both documented where they are made):

* Legacy spellings are pinned too. Older NVIDIA drivers name A100s without the ``NVIDIA-`` prefix
  (``A100-SXM4-80GB``); nodes still running them are as good as the others, so every value the
  catalog lists for a product is offered, canonical first, each as its own option.
* Coarse values get the weakest spec. Karpenter's ``a100`` names the 40 GB and the 80 GB A100; a
  node carrying it may be either, so the option's spec is the weakest of them and a fit is never
  promised that such a node might not keep.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml

from webhook.core import bundled
from webhook.core.counts import parse_count
from webhook.core.domain import GpuProduct, LabelOption, ParsedLabel

GFD = "gfd"
"""The NVIDIA GPU Feature Discovery scheme; the only one with ``-SHARED``/``-MIG-*`` suffixes."""

INTERCONNECTS: tuple[str, ...] = ("pcie", "nvlink-bridge", "infinity-fabric", "nvlink")
"""Known GPU-GPU links, weakest first (the order used to pick the weakest spec)."""

DEFAULT_ALLREDUCE_US: Mapping[str, float] = MappingProxyType({
    "pcie": 400.0,
    "nvlink-bridge": 250.0,
    "infinity-fabric": 40.0,
    "nvlink": 50.0,
})
"""All-reduce latency for products that omit ``allreduce_us`` (e.g. added by a policy file): the
slowest bundled value of each link class, so an unknown card is never assumed faster than its kin."""

_INTERCONNECT_RANK = {name: rank for rank, name in enumerate(INTERCONNECTS)}
_LEGACY_PREFIXES = ("nvidia-", "tesla-")
_SHARED_SUFFIX = "-SHARED"
_MIG_MARK = "-MIG-"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_PRODUCT_KEYS = frozenset({
    "id", "memory_gib", "bandwidth_gbs", "interconnect", "interconnect_gbs", "compute_capability",
    "family", "memory_type", "tier", "allreduce_us", "labels",
})
_REQUIRED_KEYS = ("id", "memory_gib", "bandwidth_gbs", "interconnect", "interconnect_gbs",
                  "compute_capability", "family", "memory_type")


@dataclass(frozen=True, eq=False)
class Catalog:
    """GPU products and the label values that name them.

    Compared and hashed by identity (``eq=False``): a catalog is a registry that other code caches
    against, and its mapping fields are not hashable. Compare the fields to compare contents.
    """

    products: Mapping[str, GpuProduct]
    """Product id -> product, in catalog order (the order options are offered in)."""
    schemes: Mapping[str, str]
    """Label scheme name -> node label key (``gfd`` -> ``nvidia.com/gpu.product``)."""
    tiers: Mapping[str, tuple[str, ...]]
    """Default tier -> product ids (from each product's ``tier``), catalog order."""
    allreduce_us: Mapping[str, float]
    """Product id -> latency of one tensor-parallel all-reduce at decode, microseconds."""

    _exact: Mapping[str, Mapping[str, tuple[str, ...]]] = field(init=False, repr=False)
    _folded: Mapping[str, Mapping[str, tuple[str, ...]]] = field(init=False, repr=False)
    _stems: Mapping[str, tuple[str, ...]] = field(init=False, repr=False)
    _options: dict[tuple[frozenset[str], str], tuple[LabelOption, ...]] = field(init=False, repr=False)
    """options() results per (product set, scheme): the catalog is immutable and every review asks
    for the same few tiers, so the weakest-spec work is done once per tier, not once per review."""

    def __post_init__(self) -> None:
        # The label indexes are built once here so parse_label is a few dict lookups per call
        # (it runs for every node and every pod selector the webhook reads).
        exact: dict[str, dict[str, list[str]]] = {scheme: {} for scheme in self.schemes}
        folded: dict[str, dict[str, list[str]]] = {scheme: {} for scheme in self.schemes}
        stems: dict[str, list[str]] = {}
        for pid, product in self.products.items():
            for scheme, values in product.labels.items():
                for value in values:
                    _add(exact.setdefault(scheme, {}), value, pid)
                    _add(folded.setdefault(scheme, {}), value.lower(), pid)
                    if scheme == GFD:
                        _add(stems, _stem(value), pid)
        object.__setattr__(self, "_exact", _freeze_index(exact))
        object.__setattr__(self, "_folded", _freeze_index(folded))
        object.__setattr__(self, "_stems", MappingProxyType({k: tuple(v) for k, v in stems.items()}))
        object.__setattr__(self, "_options", {})

    # ------------------------------------------------------------------ lookups

    def product(self, product_id: str) -> GpuProduct:
        """The product with this id; ``KeyError`` naming the known ids when there is none."""
        try:
            return self.products[product_id]
        except KeyError:
            known = ", ".join(self.products)
            raise KeyError(f"unknown GPU product {product_id!r} (known: {known})") from None

    def label_key(self, scheme: str) -> str:
        """The node label key of a scheme; ``ValueError`` for an unknown scheme."""
        self._require_scheme(scheme)
        return self.schemes[scheme]

    def parse_label(self, value: str, scheme: str = GFD) -> ParsedLabel:
        """Read a node's product label value back into catalog terms.

        Exact (case-sensitive) match first, then case-insensitive. Under ``gfd`` the suffixes GFD
        appends are recognised (``-SHARED`` for time-slicing/MPS replicas, ``-MIG-<profile>`` and
        ``-MIG-INVALID`` under the MIG single strategy; ``mig_profile`` is then the profile, or
        ``"INVALID"``), and so are spellings without the ``NVIDIA-``/``Tesla-`` prefix that older
        drivers use. Unknown values give ``product=None`` (suffix facts are still reported).

        A coarse value that names several products (Karpenter ``a100``) is read as the product with
        the least memory among them, matching the conservative spec :meth:`options` gives it; use
        :meth:`named_products` to see them all.
        """
        ids, shared, mig = self._resolve(value, scheme)
        return ParsedLabel(value=value, product=self._least_memory(ids), shared=shared, mig_profile=mig)

    def named_products(self, value: str, scheme: str = GFD) -> tuple[str, ...]:
        """Every product a label value may stand for (catalog order), with the same matching rules
        as :meth:`parse_label`; empty when the value is unknown."""
        return self._resolve(value, scheme)[0]

    def options(self, product_ids: Iterable[str], scheme: str = GFD) -> tuple[LabelOption, ...]:
        """The label values to pin so a pod lands on these products, each with its sizing spec.

        One option per distinct value, ordered by the catalog order of the first requested product
        naming it, then by the product's own value order; the order of ``product_ids`` does not
        matter, so the same request always yields the same affinity (and the same patch bytes).

        * Every value the catalog lists for a product is offered, canonical first: under ``gfd``
          that includes the prefix-less spelling of older drivers (A100), which real nodes carry.
        * A value naming several products (Karpenter ``a100``: 40 GB and 80 GB) is offered when any
          of them is requested; ``products`` lists all it names (the caller can refuse values that
          reach outside its set) and ``spec`` is the weakest of them, so fit is never over-promised.
        * Products without a label under the scheme are skipped (they cannot be pinned there).
        """
        self._require_scheme(scheme)
        if isinstance(product_ids, str):
            raise TypeError("product_ids must be an iterable of product ids, not a single string")
        wanted = set()
        for pid in product_ids:
            self.product(pid)  # unknown ids are a caller bug: fail loudly, naming the known ones
            wanted.add(pid)
        key = (frozenset(wanted), scheme)
        cached = self._options.get(key)
        if cached is not None:
            return cached
        index = self._exact.get(scheme, {})
        seen: set[str] = set()
        out: list[LabelOption] = []
        for pid, product in self.products.items():
            if pid not in wanted:
                continue
            for value in product.labels.get(scheme, ()):
                if value in seen:
                    continue
                seen.add(value)
                named = index[value]
                out.append(LabelOption(value=value, spec=self.weakest(named, scheme=scheme, value=value),
                                       products=named))
        if len(self._options) >= 512:  # callers may pass arbitrary subsets: keep the memo bounded
            self._options.clear()
        self._options[key] = result = tuple(out)
        return result

    def weakest(self, product_ids: Iterable[str], *, scheme: str | None = None,
                value: str | None = None) -> GpuProduct:
        """The spec no product of the set falls below: least memory, bandwidth and link.

        When one product is weakest on every axis it is returned unchanged (with its real id).
        Otherwise a synthetic spec is built with id ``"A|B"`` (the ids joined by ``|``), the minimum
        of each number, the weakest interconnect and the lowest compute capability.
        """
        products = [self.product(pid) for pid in dict.fromkeys(product_ids)]
        if not products:
            raise ValueError("weakest() needs at least one product id")
        candidate = min(products, key=_strength)
        if all(_dominated_by(candidate, other) for other in products):
            return candidate
        low_cc = min(products, key=lambda p: _cc_key(p.compute_capability))
        labels = {scheme: (value,)} if scheme is not None and value is not None else {}
        return GpuProduct(
            id="|".join(p.id for p in products),
            memory_gib=min(p.memory_gib for p in products),
            bandwidth_gbs=min(p.bandwidth_gbs for p in products),
            interconnect=min((p.interconnect for p in products), key=_INTERCONNECT_RANK.__getitem__),
            interconnect_gbs=min(p.interconnect_gbs for p in products),
            compute_capability=low_cc.compute_capability,
            family=low_cc.family,
            memory_type=candidate.memory_type,
            labels=MappingProxyType(labels),
        )

    def allreduce_latency_us(self, option: LabelOption | Iterable[str]) -> float:
        """All-reduce latency to assume for an option (or a set of product ids): the slowest of the
        products it may land on, for the same reason the spec is the weakest."""
        ids = option.products if isinstance(option, LabelOption) else tuple(option)
        if not ids:
            raise ValueError("allreduce_latency_us() needs at least one product id")
        for pid in ids:
            self.product(pid)
        return max(self.allreduce_us[pid] for pid in ids)

    # ------------------------------------------------------------------ internals

    def _require_scheme(self, scheme: str) -> None:
        if scheme not in self.schemes:
            raise ValueError(f"unknown label scheme {scheme!r} (known: {', '.join(self.schemes)})")

    def _resolve(self, value: str, scheme: str) -> tuple[tuple[str, ...], bool, str | None]:
        """(product ids, shared, MIG profile) for a label value; the whole value is tried before
        GFD suffixes are stripped, and the exact spelling before the prefix-less stem."""
        self._require_scheme(scheme)
        ids = self._match(scheme, value)
        if ids or scheme != GFD:
            return ids, False, None
        base, shared, mig = _split_gfd_suffixes(value)
        return self._match(scheme, base) or self._stems.get(_stem(base), ()), shared, mig

    def _match(self, scheme: str, value: str) -> tuple[str, ...]:
        ids = self._exact.get(scheme, {}).get(value)
        if ids is None:
            ids = self._folded.get(scheme, {}).get(value.lower(), ())
        return ids

    def _least_memory(self, ids: tuple[str, ...]) -> str | None:
        if not ids:
            return None
        return min(ids, key=lambda pid: _strength(self.products[pid]))


# --------------------------------------------------------------------------- compute capability

FP8 = "fp8"
MXFP4 = "mxfp4"
NVFP4 = "nvfp4"
WEIGHT_FORMATS: tuple[str, ...] = (FP8, MXFP4, NVFP4)
"""Weight formats whose kernels depend on the GPU generation (what :func:`native_formats` answers)."""

_CC = re.compile(r"^\s*([0-9]{1,3})\.([0-9]{1,3})", re.ASCII)

_NATIVE_FROM: Mapping[str, tuple[int, int]] = MappingProxyType({
    FP8: (8, 9),     # FP8 tensor cores: Ada Lovelace (8.9), Hopper (9.0), Blackwell
    MXFP4: (10, 0),  # FP4 tensor cores: Blackwell (10.0 B200/GB200, 12.0 RTX Blackwell)
    NVFP4: (10, 0),
})
"""Lowest NVIDIA compute capability with tensor cores for each format.

Sources: vLLM's FP8 page ("FP8 computation is supported on NVIDIA GPUs with compute capability
>= 8.9 (Ada Lovelace, Hopper, Blackwell)", docs.vllm.ai features/quantization/fp8); NVFP4 needs
"a Blackwell GPU with compute capability 10.0 or newer" (Hugging Face Transformers NVFP4 page) and
SGLang lists ``modelopt_fp4`` as "Blackwell/SM100+" (docs/advanced_features/quantization.md)."""

_NATIVE_AMD: Mapping[str, frozenset[str]] = MappingProxyType({
    "gfx942": frozenset({FP8}),  # MI300X/MI325X (CDNA3): FP8 yes, no FP4 (ROCm "Data types and precision
    # support", rocm.docs.amd.com/en/latest/reference/precision-support.html; AMD MI300X datasheet)
})
"""AMD gfx targets (the catalog's ``compute_capability`` for AMD products) -> native formats."""


def compute_capability(cc: str) -> tuple[int, int] | None:
    """``"8.9"`` -> ``(8, 9)``; ``"10.0"`` -> ``(10, 0)``; an AMD gfx target or anything else -> None."""
    match = _CC.match(cc) if isinstance(cc, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def native_formats(cc: str) -> frozenset[str]:
    """Weight formats of :data:`WEIGHT_FORMATS` that run on this compute capability's tensor cores.

    NVIDIA: FP8 from 8.9, MXFP4/NVFP4 from 10.0. AMD gfx targets by table (``gfx942``: FP8). An
    unknown target has none: a product a policy adds with an unreadable compute capability is never
    promised a low-precision kernel it may not have.
    """
    version = compute_capability(cc)
    if version is None:
        return _NATIVE_AMD.get(cc.strip().lower() if isinstance(cc, str) else "", frozenset())
    return frozenset(fmt for fmt, low in _NATIVE_FROM.items() if version >= low)


# --------------------------------------------------------------------------- loading


def load_catalog(data: Mapping[str, Any] | None = None) -> Catalog:
    """Build a catalog from parsed YAML (``None``: the bundled ``data/gpus.yaml``, loaded once).

    Every structural problem raises ``ValueError`` naming the field (``products[3].memory_gib:
    must be a positive number``), because the data can come from a policy file an operator edits.
    """
    if data is None:
        return _bundled_catalog()
    return _build(data)


def default_catalog() -> Catalog:
    """The bundled catalog (cached: the file is read and validated once per process)."""
    return _bundled_catalog()


@functools.cache
def _bundled_catalog() -> Catalog:
    text = bundled.text("gpus.yaml")
    # the C parser when PyYAML has it: same document, a fraction of the start-up time
    return _build(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # noqa: S506


def _build(data: Any) -> Catalog:
    if not isinstance(data, Mapping):
        raise ValueError("catalog: must be a mapping with 'schemes' and 'products'")
    for key in data:
        if key not in ("schemes", "products"):
            raise ValueError(f"{key}: unknown field (expected 'schemes' and 'products')")
    schemes = _schemes(data.get("schemes"))
    raw_products = data.get("products")
    if not isinstance(raw_products, list) or not raw_products:
        raise ValueError("products: must be a non-empty list")
    products: dict[str, GpuProduct] = {}
    first_seen: dict[str, int] = {}
    tiers: dict[str, list[str]] = {}
    allreduce: dict[str, float] = {}
    for i, raw in enumerate(raw_products):
        product, tier, latency = _product(f"products[{i}]", raw, schemes)
        if product.id in products:
            raise ValueError(f"products[{i}].id: duplicate product id {product.id!r} "
                             f"(also products[{first_seen[product.id]}])")
        first_seen[product.id] = i
        products[product.id] = product
        allreduce[product.id] = latency
        if tier is not None:
            tiers.setdefault(tier, []).append(product.id)
    return Catalog(
        products=MappingProxyType(products),
        schemes=MappingProxyType(schemes),
        tiers=MappingProxyType({name: tuple(ids) for name, ids in tiers.items()}),
        allreduce_us=MappingProxyType(allreduce),
    )


def _schemes(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError("schemes: must be a non-empty mapping of scheme name -> node label key")
    out: dict[str, str] = {}
    for name, key in raw.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"schemes.{name}: scheme names must be non-empty strings")
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"schemes.{name}: must be a non-empty label key string")
        out[name] = key
    return out


def _product(path: str, raw: Any, schemes: Mapping[str, str]) -> tuple[GpuProduct, str | None, float]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: must be a mapping")
    for key in raw:
        if key not in _PRODUCT_KEYS:
            raise ValueError(f"{path}.{key}: unknown field (known: {', '.join(sorted(_PRODUCT_KEYS))})")
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise ValueError(f"{path}.{key}: required field is missing")
    pid = _text(f"{path}.id", raw["id"])
    if any(ch.isspace() for ch in pid) or "|" in pid:
        raise ValueError(f"{path}.id: must not contain whitespace or '|'")
    interconnect = raw["interconnect"]
    if interconnect not in _INTERCONNECT_RANK:
        raise ValueError(f"{path}.interconnect: must be one of {', '.join(INTERCONNECTS)}, got {interconnect!r}")
    cc = raw["compute_capability"]
    if not isinstance(cc, str) or not cc.strip():
        raise ValueError(f'{path}.compute_capability: must be a string (quote it: "8.0")')
    tier = raw.get("tier")
    if tier is not None:
        tier = _text(f"{path}.tier", tier)
    latency = raw.get("allreduce_us")
    latency = DEFAULT_ALLREDUCE_US[interconnect] if latency is None else _positive(f"{path}.allreduce_us", latency)
    product = GpuProduct(
        id=pid,
        memory_gib=_positive(f"{path}.memory_gib", raw["memory_gib"]),
        bandwidth_gbs=_positive(f"{path}.bandwidth_gbs", raw["bandwidth_gbs"]),
        interconnect=interconnect,
        interconnect_gbs=_positive(f"{path}.interconnect_gbs", raw["interconnect_gbs"]),
        compute_capability=cc,
        family=_text(f"{path}.family", raw["family"]),
        memory_type=_text(f"{path}.memory_type", raw["memory_type"]),
        labels=_labels(f"{path}.labels", raw.get("labels"), schemes),
    )
    return product, tier, latency


def _labels(path: str, raw: Any, schemes: Mapping[str, str]) -> Mapping[str, tuple[str, ...]]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: must be a mapping of scheme -> list of label values")
    out: dict[str, tuple[str, ...]] = {}
    for scheme, values in raw.items():
        if scheme not in schemes:
            raise ValueError(f"{path}.{scheme}: unknown label scheme (known: {', '.join(schemes)})")
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}.{scheme}: must be a non-empty list of label values")
        for j, value in enumerate(values):
            if not isinstance(value, str) or not _LABEL_VALUE.match(value):
                raise ValueError(f"{path}.{scheme}[{j}]: {value!r} is not a valid label value "
                                 "(1-63 characters [A-Za-z0-9-_.], alphanumeric at both ends)")
            if value in values[:j]:
                raise ValueError(f"{path}.{scheme}[{j}]: duplicate label value {value!r}")
        out[scheme] = tuple(values)
    return MappingProxyType(out)


def _positive(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{path}: must be a positive number, got {value!r}")
    return float(value)


def _text(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{path}: must be a non-empty string, got {value!r}")
    return value


# --------------------------------------------------------------------------- helpers


def _add(index: dict[str, list[str]], key: str, pid: str) -> None:
    ids = index.setdefault(key, [])
    if pid not in ids:
        ids.append(pid)


def _freeze_index(index: dict[str, dict[str, list[str]]]) -> Mapping[str, Mapping[str, tuple[str, ...]]]:
    return MappingProxyType({
        scheme: MappingProxyType({value: tuple(ids) for value, ids in values.items()})
        for scheme, values in index.items()
    })


def _stem(value: str) -> str:
    """Lower-cased value without vendor prefixes: ``NVIDIA-A100-SXM4-80GB`` and the older drivers'
    ``A100-SXM4-80GB`` share the stem ``a100-sxm4-80gb``."""
    stem = value.lower()
    stripped = True
    while stripped:
        stripped = False
        for prefix in _LEGACY_PREFIXES:
            if stem.startswith(prefix) and len(stem) > len(prefix):
                stem = stem[len(prefix):]
                stripped = True
    return stem


def _split_gfd_suffixes(value: str) -> tuple[str, bool, str | None]:
    """``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED`` -> (``NVIDIA-A100-SXM4-40GB``, True, ``1g.5gb``).

    GFD appends ``-MIG-<profile>`` (single strategy) and then ``-SHARED`` (replicas > 1 without
    renaming), so they are stripped in the reverse order.
    """
    base, shared, mig = value, False, None
    if base.upper().endswith(_SHARED_SUFFIX) and len(base) > len(_SHARED_SUFFIX):
        base, shared = base[: -len(_SHARED_SUFFIX)], True
    at = base.upper().rfind(_MIG_MARK)
    if at > 0 and at + len(_MIG_MARK) < len(base):
        profile = base[at + len(_MIG_MARK):]
        base = base[:at]
        mig = "INVALID" if profile.upper() == "INVALID" else profile
    return base, shared, mig


def _strength(product: GpuProduct) -> tuple[float, float, int, float]:
    return (product.memory_gib, product.bandwidth_gbs, _INTERCONNECT_RANK[product.interconnect],
            product.interconnect_gbs)


def _dominated_by(weak: GpuProduct, other: GpuProduct) -> bool:
    """True when ``weak`` is no stronger than ``other`` on every sizing axis."""
    return all(a <= b for a, b in zip(_strength(weak), _strength(other)))


def _cc_key(cc: str) -> tuple[int, tuple[int, ...], str]:
    """Sort key for compute capabilities: numeric ``major.minor`` before opaque targets (``gfx942``)."""
    parts = tuple(parse_count(part, cap=999) for part in cc.split("."))
    if None in parts:
        return (1, (), cc)
    return (0, tuple(p for p in parts if p is not None), cc)
