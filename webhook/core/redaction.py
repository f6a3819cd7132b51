"""Credentials never leave the pod spec: the last filter on every text the webhook emits.

The engine builds messages from names, not values, and never expands secret-named variables
(``container_env.is_secret_name``). But some messages quote what the user wrote, on purpose: the
model (``vllm serve <model>``), an annotation that does not parse, a GPU quantity, a node name. When
a user pastes a token there (``vllm serve hf_...``, ``--quantization nvapi-...``, a model URI with a
password in it), quoting it would put it into kubectl output, the apiserver's audit log and our
logs. So warnings, denial messages, audit annotations, HTTP error bodies, log lines and ``check``
output pass through :func:`redact`, which replaces with ``[redacted]``

- the literal values of secret-named env variables of the object under review (:func:`secret_values`),
- strings shaped like well-known credentials (Hugging Face, OpenAI/Anthropic, GitHub, GitLab, AWS
  access key ids, NVIDIA NGC, Slack, Google API keys, JWTs, PEM private keys: ``TOKEN_RE``),
- the userinfo of a URL (``https://user:pass@host`` -> ``https://[redacted]@host``, also a user
  alone: ``https://<token>@github.com`` is how tokens ride in clone URLs),
- the value of a query parameter whose name says credential (``?token=``, ``&api_key=``,
  ``X-Amz-Signature=``, ``sig=``: presigned and SAS URLs), and
- key-shaped strings with no known prefix (``gsk_...``, ``xai-...``, a random 40-character token):
  see :func:`is_key`. Model ids, Kubernetes names and uids, product names and image digests are
  words, numbers and short hyphenated segments, and are kept.

Every pattern is a literal anchor plus bounded character classes (no nested quantifiers), so the
scan is linear in the text; each pass is skipped when a substring test shows it cannot match.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from webhook.core.container_env import is_secret_name, scalar_text

REDACTED = "[redacted]"
"""Safe inside JSON strings, XML text and log lines alike."""

_DISTINCT_SHAPES = (
    r"hf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"sk-(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{20,}",  # OpenAI project/service keys, Anthropic
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{20,}",  # GitHub fine-grained
    r"glpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"nvapi-[A-Za-z0-9_\-]{20,}",  # NVIDIA NGC / build.nvidia.com
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----",  # PEM private key
)
"""Shapes whose prefix no ordinary word contains: matched wherever they start, also glued to text
before them (``NaNghp_...``, ``modelhf_...``: the mutation fuzzer found a token quoted that way)."""
_WORD_START_SHAPES = (
    r"sk-[A-Za-z0-9_\-]{20,}",  # OpenAI legacy keys ("task-", "disk-", "flask-" end words: not inside one)
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",  # AWS access key id
    r"AIza[A-Za-z0-9_\-]{30,}",  # Google API key
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
)
"""Shapes whose prefix also ends ordinary words: matched only at the start of a word."""
TOKEN_RE = re.compile("(?:" + "|".join(_DISTINCT_SHAPES) + ")|(?<![A-Za-z0-9])(?:" + "|".join(_WORD_START_SHAPES) + ")",
                      re.IGNORECASE)
_TOKEN_PREFIXES = ("hf_", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "akia", "asia",
                   "nvapi-", "xox", "aiza", "eyj", "-----begin")
"""The literal start of every shape, lower-cased: an ASCII text containing none of them cannot
match ``TOKEN_RE``, and a few substring searches are about ten times cheaper than running the 11-way
alternation at every position of a log line (it ran on every decision log line and message)."""

_USERINFO_RE = re.compile(r"(?<=://)[^\s/?#\"<>\[\]]{1,512}@(?!sha[0-9]{1,3}:)")
"""The userinfo of a URL with a scheme: everything between ``://`` and the last ``@`` before the
path, query or fragment, with or without a password (a token alone is a user: ``https://ghp_...@``).
A digest after the ``@`` (``docker://image@sha256:...``) is not a host: such an ``@`` is kept. Quotes
and brackets end it, so a log line's JSON fields or ``[redacted]`` itself are never swallowed."""
_QUERY_RE = re.compile(r"([?&;][A-Za-z0-9_.\-]{1,64}=)([^\s&#;\"'<>]{1,4096})")
"""One query parameter, ``?name=value`` or ``&name=value`` (``;`` also after XML's ``&amp;``)."""
_SECRET_PARAM_RE = re.compile(r"token|secret|pass|pwd|key|sig|credential|auth|session|cookie", re.IGNORECASE)
"""Parameter names whose values are credentials: ``token``, ``access_token``, ``api_key``,
``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Goog-Signature``, Azure SAS ``sig``, ``password``."""

KEY_MIN_CHARS = 20
"""Shortest key-shaped string redacted without a known prefix. Shorter random ids are everywhere in a
cluster and are not credentials: pod-name suffixes, EC2 instance ids (17 hex digits), UUID groups."""
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
"""What a candidate is made of: base64/base64url characters, ``/`` and ``+`` included so a standard
base64 secret is one candidate (paths are too: they are judged part by part)."""
_CLASSES = str.maketrans({chr(c): "x" if chr(c) in _RUN_CHARS else " " for c in range(128)})
_SEED = "x" * KEY_MIN_CHARS
_PART_RE = re.compile(r"[^+/]+")
_PART_SEP_RE = re.compile(r"[+/]")
_SEGMENT_RE = re.compile(r"[^_\-]+")
_ANY_SEP_RE = re.compile(r"[+/_\-]+")
_STRETCH_RE = re.compile(r"[A-Za-z0-9]{10}")
"""No key-shaped candidate lacks ten letters or digits in a row: with "has a digit", the cheap test
that drops most candidates (``missing-homogeneous-selector``, ``NVIDIA-H100-80GB-HBM3``) unsplit."""
_LONG_SEGMENT_RE = re.compile(r"[A-Za-z0-9]{%d}" % KEY_MIN_CHARS)
_DIGIT_RE = re.compile(r"[0-9]")
_LETTER_RE = re.compile(r"[A-Za-z]")
_HEX_RE = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_PIECE_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
"""Words and numbers: ``Qwen25Coder32BInstruct`` is Qwen, 25, Coder, 32, B, Instruct (3.7 characters
a piece); a random string breaks into a piece every two characters or so."""
_NUMBERS_RE = re.compile(r"[0-9]+")
_CONSONANTS_RE = re.compile(r"[bcdfghjklmnpqrstvwxz]{5}")
"""Five lower-case consonants in a row: no word of a model or product name has them (``Instruct``
has four), a random lower-case string of key length almost always does."""
_DIGEST_BEFORE_RE = re.compile(r"(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?)[:\-]\Z", re.IGNORECASE)
"""What precedes a content address (``sha256:<hex>``, Ollama's ``sha256-<hex>`` blob names)."""
_SNAPSHOT_BEFORE = "snapshots/"
"""The Hugging Face cache names a model's files ``.../snapshots/<40-hex commit>/``."""

MIN_SECRET_CHARS = 6
"""Shorter values of secret-named variables are not redacted: ``true`` or ``1`` would blank words."""
_MAX_VALUES = 256
MIN_QUOTED_CHARS = 4
"""Shorter values that are not :func:`quotable` are left where a message quotes them: replacing
``a b`` wherever it occurs would blank words, and no credential is that short."""


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random(text: str, *, hex_is_key: bool = True) -> bool:
    """Whether letters and digits ``text`` (no separators) read as random rather than as words.

    Measured against random strings (base62, hex, base36 in either case, base64url) and against the
    repository's own model ids, product, node and pod names: see ``tests/core/test_redaction.py``.
    Mixed letters and digits are required (a run of letters is a word or a CamelCase name, a run of
    digits a number). Hex of key length is a key (no name is spelt in ``0-9a-f`` alone) unless its
    entropy is under 3.0 bits (``000...0a``) or ``hex_is_key`` is off; anything else needs 3.5 bits
    and one sign of randomness: under three characters a piece (:data:`_PIECE_RE`), four or more
    separate numbers, or five lower-case consonants in a row."""
    if len(text) < KEY_MIN_CHARS or not _DIGIT_RE.search(text) or not _LETTER_RE.search(text):
        return False
    if _HEX_RE.fullmatch(text):
        return hex_is_key and _entropy(text) >= 3.0
    if _entropy(text) < 3.5:
        return False
    return (len(text) < 3 * len(_PIECE_RE.findall(text)) or len(_NUMBERS_RE.findall(text)) >= 4
            or _CONSONANTS_RE.search(text) is not None)


def _loose(text: str) -> bool:
    """A key with separators in it (base64url has ``-`` and ``_``, base64 ``+`` and ``/``): long
    stretches between them (eight characters on average; names have short words between hyphens),
    random once the separators are dropped. Not hex: hex keys have no separators, and numbers joined
    to hashes do (``v0.0.0-20240101120000-abcdef123456``, a Go pseudo-version)."""
    segments = [s for s in _ANY_SEP_RE.split(text) if s]
    alnum = "".join(segments)
    return len(segments) > 1 and len(alnum) >= 8 * len(segments) and _random(alnum, hex_is_key=False)


def _content_address(text: str, start: int, segment: str) -> bool:
    """A hex ``segment`` at ``start`` that names content, not a credential: an image or blob digest,
    a Hugging Face snapshot directory."""
    if not _HEX_RE.fullmatch(segment):
        return False
    return (_DIGEST_BEFORE_RE.search(text, max(0, start - 8), start) is not None
            or text.endswith(_SNAPSHOT_BEFORE, max(0, start - len(_SNAPSHOT_BEFORE)), start))


def _key_part(text: str, start: int, part: str) -> str:
    """What ``part`` (no ``/`` or ``+``), at ``start`` of ``text``, is: ``"key"``, ``"content"`` (it
    holds a content address, which no key rule may then claim) or ``""``."""
    if len(part) < KEY_MIN_CHARS:
        return ""
    if _LONG_SEGMENT_RE.search(part) is None:  # a loose key or nothing: counted before it is split
        core = part.strip("-_")
        separators = core.count("-") + core.count("_")
        return "key" if len(core) - separators >= 8 * (separators + 1) and _loose(part) else ""
    key = False
    for match in _SEGMENT_RE.finditer(part):
        segment = match.group()
        if len(segment) >= KEY_MIN_CHARS and _random(segment):
            if _content_address(text, start + match.start(), segment):
                return "content"
            key = True
    return "key" if key or _loose(part) else ""


def _key_spans(text: str) -> list[tuple[int, int]]:
    """Where :func:`redact` puts ``[redacted]`` for key-shaped strings: a path or a ``+``-joined
    string keeps its other parts; a base64 string that is only key when whole goes whole.

    Candidates (20 or more of :data:`_RUN_CHARS`) are found by substring searches in a copy of
    ``text`` mapped to two characters, candidate or not: several times cheaper than a regular
    expression, which tries every position, and this runs on every reply and log line. Most
    candidates (product names, rule codes) are dropped by two searches before any is split."""
    spans: list[tuple[int, int]] = []
    ascii_text = text if text.isascii() else text.encode("ascii", "replace").decode("ascii")  # same positions
    mapped = ascii_text.translate(_CLASSES)
    base = mapped.find(_SEED)  # the leftmost one starts a run: an earlier start would be found first
    while base >= 0:
        end = mapped.find(" ", base + KEY_MIN_CHARS)
        end = len(text) if end < 0 else end
        if _DIGIT_RE.search(text, base, end) and _STRETCH_RE.search(text, base, end):
            word = text[base:end]
            if _PART_SEP_RE.search(word) is None:  # the usual word: one part
                if _key_part(text, base, word) == "key":
                    spans.append((base, end))
            else:
                judged = set()
                for part in _PART_RE.finditer(word):
                    what = _key_part(text, base + part.start(), part.group())
                    judged.add(what)
                    if what == "key":
                        spans.append((base + part.start(), base + part.end()))
                if judged == {""} and _loose(word):
                    spans.append((base, end))
        base = mapped.find(_SEED, end)
    return spans


def is_key(word: str) -> bool:
    """Whether :func:`redact` replaces some of ``word`` as key-shaped (not counting ``TOKEN_RE``)."""
    return bool(_key_spans(word))


def _has_prefix(lowered: str) -> bool:
    return any(prefix in lowered for prefix in _TOKEN_PREFIXES)


def _secret_param(match: re.Match[str]) -> str:
    name = match.group(1)
    return name + REDACTED if _SECRET_PARAM_RE.search(name) else match.group(0)


def scrub(text: str, *, shortcut: bool = True) -> str:
    """``text`` with every credential shape replaced (the passes of :func:`redact` after the values).

    ``shortcut=False`` runs every pass even where a substring test says it cannot match: the
    reference the shortcuts are tested against."""
    if not shortcut or not text.isascii() or _has_prefix(text.lower()):
        # only for ASCII text can the prefixes decide: IGNORECASE also folds a few non-ASCII letters
        # (the Kelvin sign, the long s)
        text = TOKEN_RE.sub(REDACTED, text)
    if not shortcut or ("://" in text and "@" in text):
        text = _USERINFO_RE.sub(REDACTED + "@", text)
    # every separator _QUERY_RE starts a parameter at: "?", "&" and ";" (a ";token=..." was left whole
    # by the shortcut while the full pass redacted it: found by test_redact_prefilter_never_skips_a_match)
    if not shortcut or ("=" in text and ("?" in text or "&" in text or ";" in text)):
        text = _QUERY_RE.sub(_secret_param, text)
    spans = _key_spans(text)
    if spans:
        out, last = [], 0
        for start, end in spans:
            out += [text[last:start], REDACTED]
            last = end
        text = "".join(out) + text[last:]
    return text


def redact(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with the given secret ``values`` and credential-shaped strings replaced."""
    if not isinstance(text, str) or not text:
        return text
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return scrub(text)


def could_quote(texts: Iterable[str], values: Iterable[str] = ()) -> bool:
    """False when :func:`redact` would leave every one of ``texts`` as it is, decided in one scan of
    them joined by newlines (no shape spans a newline, so a text holds a match only if the joined
    text does). A reply's texts (message, warnings, audit annotations, the notes a patch writes) are
    checked together this way, so the usual reply, with nothing to redact, costs one scan instead
    of one for each of its ten texts; True means: redact each."""
    joined = "\n".join(t for t in texts if isinstance(t, str))
    if not joined:
        return False
    if any(value in joined for value in values):
        return True
    return scrub(joined) != joined


_PLAIN_RE = re.compile(r"[A-Za-z0-9./~][A-Za-z0-9._\-/:@+~]{0,255}")
"""One word of what model ids, paths, URIs and numbers are made of (not starting like a flag)."""
_BARE_USERINFO_RE = re.compile(r"[^/:@]+:[^/@]*@(?!sha[0-9]{1,3}:)")
"""``user:password@host`` without a scheme (not ``image:tag@sha256:...``)."""


@lru_cache(maxsize=1024)
def quotable(value: str) -> bool:
    """Whether a value of the pod (a model, a precision) may be quoted in an audit annotation, as
    :func:`redact` shows it.

    Audit annotations are written into the apiserver's audit log at every level, ``Metadata``
    included, where the pod spec itself is not: a value read from an env variable or an argument
    goes there only when it is plain once redacted: one word of letters, digits and ``._-/:@+~``, up
    to 256 characters (a model id, a path, a URI with ``[redacted]`` for its userinfo, a number, an
    Ollama tag, an image digest), not ``user:password@host`` without a scheme. Anything else (free
    text, quotes, a URL with a query, a command line) is written ``[redacted]`` whole: a value that
    is not a name cannot be told from a credential.

    Remembered for the last 1024 values: every review of a model asks again (a pure function of
    the string, so a memo cannot be stale)."""
    if not isinstance(value, str):
        return False
    cleaned = scrub(value)
    return (_PLAIN_RE.fullmatch(cleaned.replace(REDACTED, "x")) is not None
            and _BARE_USERINFO_RE.match(cleaned) is None)


def _containers(spec: Any) -> Iterable[Mapping[str, Any]]:
    if not isinstance(spec, Mapping):
        return
    for key in ("containers", "initContainers", "ephemeralContainers"):
        items = spec.get(key)
        for item in items[:256] if isinstance(items, list) else ():
            if isinstance(item, Mapping):
                yield item


def secret_values(specs: Iterable[Any]) -> tuple[str, ...]:
    """Literal values of secret-named env variables (``HF_TOKEN``, ``DB_PASSWORD``) in the
    containers of the given pod specs, longest first (so a value containing another goes whole)."""
    found: set[str] = set()
    for spec in specs:
        for container in _containers(spec):
            env = container.get("env")
            for item in env[:1024] if isinstance(env, list) else ():
                if not isinstance(item, Mapping) or not is_secret_name(item.get("name")):
                    continue
                value = scalar_text(item.get("value"))
                if value is not None and len(value) >= MIN_SECRET_CHARS:
                    found.add(value)
                    if len(found) >= _MAX_VALUES:
                        break
    return tuple(sorted(found, key=len, reverse=True))
