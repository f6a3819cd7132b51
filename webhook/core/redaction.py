"""Credentials never leave the pod spec: the last filter on every text the webhook emits.

The engine builds messages from names, not values, and never expands secret-named variables
(``container_env.is_secret_name``). But some messages quote what the user wrote, on purpose: the
model (``vllm serve <model>``), an annotation that does not parse, a GPU quantity, a node name. When
a user pastes a token there (``vllm serve hf_...``, ``--quantization nvapi-...``), quoting it would put
it into kubectl output, the apiserver's audit log and our logs. So warnings, denial messages, audit
annotations, HTTP error bodies and log lines pass through :func:`redact`, which replaces

- strings shaped like well-known credentials (Hugging Face, OpenAI/Anthropic, GitHub, GitLab, AWS
  access key ids, NVIDIA NGC, Slack, Google API keys, JWTs, PEM private keys), and
- the literal values of secret-named env variables of the object under review (:func:`secret_values`)

with ``[redacted]``. Every pattern is a plain prefix plus one bounded character class (no nested
quantifiers), so the scan is linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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

MIN_SECRET_CHARS = 6
"""Shorter values of secret-named variables are not redacted: ``true`` or ``1`` would blank words."""
_MAX_VALUES = 256


def redact(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with credential-shaped strings and the given secret ``values`` replaced."""
    if not isinstance(text, str) or not text:
        return text
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    # only for ASCII text: IGNORECASE also folds a few non-ASCII letters (the Kelvin sign, the long s)
    if text.isascii():
        lowered = text.lower()
        if not any(prefix in lowered for prefix in _TOKEN_PREFIXES):
            return text
    return TOKEN_RE.sub(REDACTED, text)


def could_quote(texts: Iterable[str], values: Iterable[str] = ()) -> bool:
    """False when :func:`redact` would leave every one of ``texts`` as it is, decided in one scan:
    none holds one of ``values`` and, all ASCII, none holds the literal start of a credential shape.
    A reply's texts (message, warnings, audit annotations, the notes a patch writes) are checked
    together this way, so the usual reply, with nothing to redact, costs one lower() and a dozen
    substring searches instead of those for each of its ten texts; True means: redact each."""
    joined = "\n".join(t for t in texts if isinstance(t, str))
    if not joined:
        return False
    if any(value in joined for value in values):
        return True
    if not joined.isascii():
        return True
    lowered = joined.lower()
    return any(prefix in lowered for prefix in _TOKEN_PREFIXES)


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
