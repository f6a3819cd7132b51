"""Model id or path -> total and active parameter counts.

Sizing a GPU request needs the parameter count of the served model, and workloads only name the
model: a Hugging Face id, a NIM image-derived name, an ollama tag, a local or object-store path.
This module turns such a name into a :class:`~webhook.core.domain.ModelInfo`:

1. The bundled catalog (``data/models.yaml``) is consulted first: it knows the counts a name cannot
   give (``DeepSeek-R1``, ``bge-m3``) or gives wrongly (``Mixtral-8x7B`` is 46.7B, not 56B; the
   ``17B`` of ``Llama-4-Scout-17B-16E`` is the *active* count).
2. Otherwise a size token of the name is read (``70b``, ``1.5B``, ``560m``), avoiding the traps
   of real model ids: dates (``Mistral-Small-2409``), versions (``Llama-3.1``), context lengths
   (``128k``) and quantization bits (``4bit``) are not sizes.

Everything is pure: no network, no clock; the catalog is read once from package data. Inputs come
from user manifests and may be hostile, so names are capped at :data:`MAX_NAME_CHARS`, numbers at a
few digits, and every regular expression is linear (no nested repetition).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import yaml

from . import bundled
from .counts import ASCII_SPACE
from .domain import ModelInfo

MAX_NAME_CHARS = 512
"""Longer model names are refused (``None``): real ids and paths are far shorter, and the cap bounds
the work an admission request can cause."""

MAX_COMPONENTS = 6
"""Path components tried, from the last: enough for an HF cache path
('models--org--name/snapshots/<hash>') or a checkpoint directory, and bounded for hostile paths."""

KINDS = frozenset({"llm", "embedding", "diffusion", "vision", "other"})

MOE_TOTAL_SHARE = 0.85
"""Unknown ``NxM`` MoE: total ~= N x M x 0.85, because attention and embeddings are shared by the
experts (Mixtral 8x7B: 56 x 0.83 = 46.7; 8x22B: 176 x 0.80 = 141)."""
MOE_ACTIVE_SHARE = 0.9
MOE_TOP_K = 2
"""Unknown ``NxM`` MoE: active ~= top-2 experts x M x 0.9 (Mixtral 8x7B: 12.6 vs 12.9 real)."""

MIN_EXPERTS_TOKEN = 8
"""``16E``/``128E`` (Llama 4) count experts; smaller ``Ne`` tokens are more likely learning rates
(``lr-3e-5``) than expert counts, so they are ignored."""

MIN_MILLIONS = 10.0
"""A ``NNNm`` token is a size only above 10M: ``1M``/``2M``/``10M`` are context lengths
(``Qwen2.5-7B-Instruct-1M``), while real million-parameter names start around 14M (pythia-14m)."""

MAX_PARAMS_B = 100_000.0
"""Anything above 100T parameters is not a model size but a parsing accident."""

CLOSE_LOW, CLOSE_HIGH = 0.6, 1.6
"""A size stated after a catalog match must lie within this ratio of the row's count, otherwise the
row is not this model (``deepseek-r1:70b`` is the 70B distill, not the 671B R1)."""

_NUMBER = r"[0-9]{1,5}(?:\.[0-9]{1,3})?"
_SIZE_RE = re.compile(rf"({_NUMBER})([bmt])")
_ACTIVE_RE = re.compile(rf"a({_NUMBER})([bm])")
_MOE_RE = re.compile(rf"([0-9]{{1,3}})x({_NUMBER})b")
_EXPERTS_RE = re.compile(r"([0-9]{1,4})e")
_SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]{0,15}://", re.IGNORECASE)
_LONE_DOT_RE = re.compile(r"(?<![0-9])\.|\.(?![0-9])")
_SEGMENT_SPLIT_RE = re.compile(r"[^a-z0-9.]+")
_LEX_RE = re.compile(r"[0-9]+x[0-9]+(?:\.[0-9]+)?[a-z]*|[0-9]+(?:\.[0-9]+)*[a-z]*|[a-z]+")
_PARAMS_RE = re.compile(r"([0-9]{1,6}(?:\.[0-9]{1,6})?|\.[0-9]{1,6})\s*([bmt]?)", re.ASCII)
_UNIT_B = {"": 1.0, "b": 1.0, "m": 1e-3, "t": 1e3}

_NOISE_SEGMENTS = frozenset({"latest"})
"""Segments dropped before matching: ollama's ``:latest`` tag says nothing about the model."""
_HALF_PRECISION = frozenset({"bf16", "fp16", "f16"})
"""A name saying the weights are half precision overrides a catalog ``native_dtype``."""


# --------------------------------------------------------------------------- public API


def describe(model: str | None) -> ModelInfo | None:
    """See :func:`_describe` (memoized per name: every review of a Deployment's pods, and every
    pod of a busy namespace, names the same few models; the catalog is immutable)."""
    if not isinstance(model, str) or len(model) > MAX_NAME_CHARS:
        return None
    return _describe_cached(model)


def _describe(model: str | None) -> ModelInfo | None:
    """Model id (HF id like 'meta-llama/Llama-3.1-70B-Instruct', NIM image-derived name like
    'meta/llama-3.1-70b-instruct', ollama 'llama3.1:70b', local path '/models/llama-3-70b-awq',
    's3://bucket/x', 'pvc://...') -> ModelInfo or None when neither the catalog nor the name rules
    give a size.

    Path components are tried from the last one backwards, so '/models/llama-3-70b/checkpoint-100'
    and HF cache paths ('.../models--org--name/snapshots/<hash>') still resolve. Per component the
    catalog wins over the name rules.
    """
    text = _clean(model)
    if text is None or not isinstance(model, str):
        return None
    quant = quantization_from_name(text)
    for component in _components(text):
        segments = _segments(component)
        if not segments:
            continue
        entry = _match_catalog(segments)
        if entry is not None:
            return _info_from_entry(model, entry, segments, quant)
        size = _size_from_segments(segments)
        if size is not None and size.total is not None:
            return ModelInfo(
                name=model,
                params_b=size.total,
                active_params_b=size.active,
                kind=_kind_from_key(_key(segments)[0]),
                name_quantization=quant,
                source="name",
            )
    return None


_describe_cached = functools.lru_cache(maxsize=4096)(_describe)


def parse_params(text: str | None) -> float | None:
    """Human size -> billions: '70B'->70.0, '70b'->70.0, '1.5B'->1.5, '560M'->0.56,
    '1.2T'->1200.0, '70'->70.0 (bare number = billions).

    Used for the gpu-admission.io/params annotation, where a user states the size the name does
    not give. Only a plain size is accepted ('8x7B' -> None: say the total). Garbage -> None,
    never an exception.
    """
    if not isinstance(text, str) or len(text) > 32:
        return None
    match = _PARAMS_RE.fullmatch(text.strip(ASCII_SPACE).lower())
    if match is None:
        return None
    value = float(match.group(1)) * _UNIT_B[match.group(2)]
    return value if _plausible(value) else None


def quantization_from_name(model: str | None) -> str | None:
    """Quantization read off a name: canonical values 'awq', 'gptq', 'fp8', 'int8', 'int4',
    'bnb-4bit', 'mxfp4', 'nvfp4', 'gguf-<llama.cpp type>' ('gguf-q4_k_m', 'gguf-q8_0', 'gguf-iq4_xs',
    'gguf-f16', ...) or 'gguf' (a GGUF whose type the name does not show).

    e.g. 'TheBloke/Llama-2-70B-AWQ'->'awq', 'Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4'->'gptq',
    'unsloth/llama-3-8b-bnb-4bit'->'bnb-4bit', 'neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8'->'fp8',
    'bartowski/...-Q4_K_M.gguf' or 'llama3:70b-instruct-q4_K_M' -> 'gguf-q4_k_m'.

    The whole string is read (a quantization may sit in a parent directory or a GGUF file name).
    Rules are ordered: a method ('gptq') beats the bit width next to it ('int4'); half precision
    ('bf16', 'fp16') is not a quantization and gives None.
    """
    text = _clean(model)
    if text is None:
        return None
    lowered = text.lower()
    gguf = _gguf_type(lowered)
    if gguf is not None:
        return gguf
    for pattern, canonical in _QUANT_RULES:
        if pattern.search(lowered):
            return canonical
    return None


# --------------------------------------------------------------------------- quantization table


def _word(body: str) -> re.Pattern[str]:
    """A pattern matching ``body`` only as a whole word (not inside 'hawq' or '2024q4')."""
    return re.compile(rf"(?<![a-z0-9])(?:{body})(?![a-z0-9])", re.ASCII)


_GGUF_QUANT_RE = _word(r"i?q[1-8](?:[_-](?:k|0|1|xxs|xs|s|m|l|nl)){0,2}")
"""A llama.cpp tensor type as GGUF file names and Ollama tags write it (``Q4_K_M``, ``IQ4_XS``, ``q8_0``)."""
_GGUF_FLOAT_RE = _word(r"bf16|f16|f32")
_GGUF_WORD_RE = _word(r"gguf")


def _gguf_type(lowered: str) -> str | None:
    """``gguf-<type>`` for a llama.cpp type in the name (``...-Q5_K_M.gguf`` -> ``gguf-q5_k_m``), also
    an unquantized GGUF (``...-f16.gguf`` -> ``gguf-f16``: 16 bits, not a 4-bit guess); None otherwise.

    The type is what sizing needs: a Q6_K file is a third larger than a Q4_K_M one
    (``sizing.GGUF_BITS``). A float type counts only beside the word ``gguf``: elsewhere ``f16``
    says half precision, which is no quantization."""
    m = _GGUF_QUANT_RE.search(lowered)
    if m is None and _GGUF_WORD_RE.search(lowered):
        m = _GGUF_FLOAT_RE.search(lowered)
    return f"gguf-{m.group(0).replace('-', '_')}" if m is not None else None


_QUANT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # a named llama.cpp type was taken by _gguf_type; a GGUF of no visible type is "gguf"
    (_word(r"gguf"), "gguf"),
    (_word(r"awq"), "awq"),
    (_word(r"gptq"), "gptq"),
    (_word(r"bnb[_-]?8[_-]?bit"), "int8"),
    (_word(r"bnb(?:[_-]?4[_-]?bit)?|nf4"), "bnb-4bit"),
    (_word(r"mxfp4"), "mxfp4"),
    (_word(r"nvfp4|fp4"), "nvfp4"),
    (_word(r"fp8|float8"), "fp8"),
    (_word(r"w4a16|w4a8|int4|4[_-]?bit"), "int4"),
    (_word(r"w8a8|w8a16|int8|8[_-]?bit"), "int8"),
)


# --------------------------------------------------------------------------- normalisation


def _clean(model: Any) -> str | None:
    """The usable text of a model reference, or None for non-strings, blanks and over-long input."""
    if not isinstance(model, str) or len(model) > MAX_NAME_CHARS:
        return None
    text = model.strip().strip("'\"").strip()
    return text or None


def _components(text: str) -> list[str]:
    """The last :data:`MAX_COMPONENTS` path components, last first: the model is named at the end
    of an id or a path.

    Strips a URI scheme ('s3://', 'hf://', 'pvc://'), an image digest ('@sha256:...') and turns
    an HF cache directory 'models--org--name' into 'name'.
    """
    text = _SCHEME_RE.sub("", text)
    parts = [p for p in re.split(r"[/\\]", text) if p]
    result = []
    for part in reversed(parts[-MAX_COMPONENTS:]):
        part = part.split("@", 1)[0]
        if part.startswith("models--"):
            part = part.rsplit("--", 1)[-1]
        if part:
            result.append(part)
    return result


def _segments(component: str) -> tuple[str, ...]:
    """Separator-delimited pieces of a component, lower-cased.

    Separators are anything but letters, digits and a dot between digits, so '3.1' and '1.5b'
    survive while 'FLUX.1' and 'model.gguf' split. Size tokens are whole segments only: a size
    glued to letters ('a7b3f' in a hash) never counts.
    """
    lowered = _LONE_DOT_RE.sub("-", component.lower())
    return tuple(s for s in _SEGMENT_SPLIT_RE.split(lowered) if s and s not in _NOISE_SEGMENTS)


def _key(segments: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    """The catalog key and the offset at which each segment ends in it.

    Segments are further split at letter->digit boundaries ('llama3' -> 'llama-3', 'a3b' -> 'a-3b')
    so 'llama3.1:70b' and 'Llama-3.1-70B' give the same key; '8x7b' and '70b' stay whole.
    """
    tokens: list[str] = []
    ends: list[int] = []
    for segment in segments:
        tokens.extend(_LEX_RE.findall(segment))
        ends.append(len("-".join(tokens)))
    return "-".join(tokens), tuple(ends)


# --------------------------------------------------------------------------- name rules


@dataclass(frozen=True)
class _NameSize:
    """What size tokens of a name say. ``total`` is None when only the active count is known."""

    total: float | None
    active: float | None = None


def _plausible(value: float) -> bool:
    """A positive, finite size below :data:`MAX_PARAMS_B`."""
    return math.isfinite(value) and 0 < value <= MAX_PARAMS_B


def _plain_size(segment: str) -> tuple[float, bool] | None:
    """('70b' -> (70.0, True), '560m' -> (0.56, False)); None when the segment is not a size.

    The flag says whether the size was written in billions/trillions, which outranks millions.
    """
    match = _SIZE_RE.fullmatch(segment)
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2)
    if unit == "m" and number <= MIN_MILLIONS:
        return None
    value = number * _UNIT_B[unit]
    return (value, unit != "m") if _plausible(value) else None


def _moe_size(segment: str) -> _NameSize | None:
    """'8x7b' -> estimated total and top-2 active (see :data:`MOE_TOTAL_SHARE`)."""
    match = _MOE_RE.fullmatch(segment)
    if match is None or int(match.group(1)) < 2:
        return None
    experts, expert_b = int(match.group(1)), float(match.group(2))
    total = experts * expert_b * MOE_TOTAL_SHARE
    if not _plausible(total):
        return None
    return _NameSize(total=total, active=min(total, MOE_TOP_K * expert_b * MOE_ACTIVE_SHARE))


def _active_size(segment: str) -> float | None:
    """'a3b' -> 3.0, 'a400m' -> 0.4: the active count of Qwen3-30B-A3B-style names."""
    match = _ACTIVE_RE.fullmatch(segment)
    if match is None:
        return None
    value = float(match.group(1)) * _UNIT_B[match.group(2)]
    return value if _plausible(value) else None


def _has_experts_token(segments: tuple[str, ...]) -> bool:
    """True for a '16e'/'128e' segment: the B size next to it is then the ACTIVE count (Llama 4)."""
    for segment in segments:
        match = _EXPERTS_RE.fullmatch(segment)
        if match is not None and int(match.group(1)) >= MIN_EXPERTS_TOKEN:
            return True
    return False


def _size_from_segments(segments: tuple[str, ...]) -> _NameSize | None:
    """The size a name states, or None.

    Order: an 'NxMb' MoE token (estimated); a B/T size with a '16E' experts token (active only,
    total unknown); the largest B/T size, else the largest M size, with an 'A3B' active token when
    smaller than the total. Largest, because over-estimating a size asks for too much GPU memory
    while under-estimating it admits a pod that cannot load.
    """
    for segment in segments:
        moe = _moe_size(segment)
        if moe is not None:
            return moe
    sizes = [s for s in map(_plain_size, segments) if s is not None]
    billions = [value for value, in_billions in sizes if in_billions]
    candidates = billions or [value for value, _ in sizes]
    if not candidates:
        return None
    if billions and _has_experts_token(segments):
        return _NameSize(total=None, active=billions[0])
    total = max(candidates)
    actives = [a for a in map(_active_size, segments) if a is not None and a < total]
    return _NameSize(total=total, active=actives[0] if actives else None)


_DIFFUSION_TOKENS = frozenset({"flux", "sdxl", "sd", "pixart", "kandinsky"})
_DIFFUSION_MARKS = ("-t-2v-", "-i-2v-", "-ti-2v-", "-t-2i-", "-txt-2img-", "-text-to-image", "-text-to-video")
"""Text/image-to-video and text-to-image markers as they look in a key ("T2V" lexes to "t-2v")."""


def _kind_from_key(key: str) -> str:
    """A best guess at the kind of a model known only by name."""
    tokens = set(key.split("-"))
    if "embed" in key or "rerank" in key or "colbert" in key or "ms-marco" in key:
        return "embedding"
    if "diffusion" in key or tokens & _DIFFUSION_TOKENS or any(m in f"-{key}" for m in _DIFFUSION_MARKS):
        return "diffusion"
    if "llava" in key or tokens & {"vl", "vision"}:
        return "vision"
    return "llm"


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class _Entry:
    """One row of ``data/models.yaml`` with its match patterns compiled."""

    id: str
    params_b: float
    active_params_b: float | None
    kind: str
    layers: int | None
    native_dtype: str | None
    patterns: tuple[re.Pattern[str], ...]


@functools.cache
def _catalog() -> tuple[_Entry, ...]:
    """The catalog, read and validated once; a malformed row fails loudly with its id."""
    # the C parser when PyYAML has it: same document, a fraction of the start-up time
    document = yaml.load(bundled.text("models.yaml"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    rows = document.get("models") if isinstance(document, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError("data/models.yaml: expected a non-empty 'models' list")
    return tuple(_load_entry(row) for row in rows)


def _load_entry(row: Any) -> _Entry:
    """Validate one catalog row; errors name the row so the data file is easy to fix."""
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        raise ValueError(f"data/models.yaml: row without an id: {row!r}")
    where = f"data/models.yaml: {row['id']}"
    params = row.get("params_b")
    active = row.get("active_params_b")
    kind = row.get("kind", "llm")
    layers = row.get("layers")
    patterns = row.get("match")
    if not isinstance(params, (int, float)) or not _plausible(float(params)):
        raise ValueError(f"{where}: params_b must be a positive number")
    if active is not None and not (isinstance(active, (int, float)) and 0 < active <= params):
        raise ValueError(f"{where}: active_params_b must be positive and <= params_b")
    if kind not in KINDS:
        raise ValueError(f"{where}: kind must be one of {sorted(KINDS)}")
    if layers is not None and not (isinstance(layers, int) and layers > 0):
        raise ValueError(f"{where}: layers must be a positive integer")
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise ValueError(f"{where}: match must be a non-empty list of patterns")
    try:
        compiled = tuple(re.compile(rf"(?:{p})(?=-|$)", re.ASCII) for p in patterns)  # \d in a pattern: ASCII
    except re.error as exc:
        raise ValueError(f"{where}: bad match pattern: {exc}") from exc
    return _Entry(
        id=row["id"],
        params_b=float(params),
        active_params_b=None if active is None else float(active),
        kind=kind,
        layers=layers,
        native_dtype=row.get("native_dtype"),
        patterns=compiled,
    )


def _close(stated: float, known: float) -> bool:
    """True when a size stated in a name is plausibly the catalog's (rounding, 'as named')."""
    return CLOSE_LOW <= stated / known <= CLOSE_HIGH


def _consistent(entry: _Entry, rest: tuple[str, ...]) -> bool:
    """Whether the segments after a catalog match agree with the row.

    'deepseek-r1:70b' matches the 'deepseek-r-1' pattern but states 70B: that is a distill, not
    the 671B model, so the row is refused and the name rules answer instead.
    """
    size = _size_from_segments(rest)
    if size is None:
        return True
    if size.total is not None and not _close(size.total, entry.params_b):
        return False
    if size.active is not None:
        return entry.active_params_b is not None and _close(size.active, entry.active_params_b)
    return True


def _match_catalog(segments: tuple[str, ...]) -> _Entry | None:
    """The catalog row whose pattern matches the longest prefix of the key and agrees with the rest.

    A match must end where a segment ends: 'command-r' must not claim 'command-r7b', whose size
    would otherwise hide inside the matched segment. Longest wins so
    'DeepSeek-R1-Distill-Qwen-7B' is the distill and not 'DeepSeek-R1'; ties go to the row listed
    first.
    """
    key, ends = _key(segments)
    best: _Entry | None = None
    best_end = 0
    for entry in _catalog():
        for pattern in entry.patterns:
            match = pattern.match(key)
            if match is None or match.end() <= best_end or match.end() not in ends:
                continue
            rest = segments[ends.index(match.end()) + 1 :]
            if _consistent(entry, rest):
                best, best_end = entry, match.end()
    return best


def _info_from_entry(
    model: str, entry: _Entry, segments: tuple[str, ...], quant: str | None
) -> ModelInfo:
    """ModelInfo for a catalog hit; a 'bf16' in the name overrides the row's native dtype."""
    native = None if _HALF_PRECISION & set(segments) else entry.native_dtype
    return ModelInfo(
        name=model,
        params_b=entry.params_b,
        active_params_b=entry.active_params_b,
        kind=entry.kind,
        layers=entry.layers,
        native_dtype=native,
        name_quantization=quant,
        source="catalog",
    )
