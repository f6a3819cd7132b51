"""The spec builder: collects one LaunchSpec while a parser reads flags and env.

Parsers only say which raw value feeds which field; ``Spec`` converts it, keeps what is unknowable
at admission (``$(TP)``, ``${TP}``, ``valueFrom``, ``envFrom``) out of the fields, and explains it in
``hidden``/``notes`` by *name and source*, never by value, because pods carry credentials in their
env and reports end up in logs and API warnings. ``Parser`` is the signature every framework parser
has.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from webhook.core.container_env import is_secret_name
from webhook.core.domain import LaunchSpec
from webhook.core.launchers.context import Ctx
from webhook.core.launchers.flags import GENERIC_ENV
from webhook.core.launchers.scan import Scan
from webhook.core.launchers.values import ALL_GPUS, BAD, FIELDS, SKIP, Field

MAX_MESSAGES = 32
"""hidden/notes entries kept per spec: enough to explain, bounded for hostile input."""

_REF_RE = re.compile(
    r"\$\(([A-Za-z_][A-Za-z0-9_.-]{0,127})\)"  # $(VAR): kubelet syntax left unexpanded
    r"|\$\{([A-Za-z_][A-Za-z0-9_]{0,127})[^}]{0,256}\}"  # ${VAR}, ${VAR:-x}
    r"|\$([A-Za-z_][A-Za-z0-9_]{0,127})"  # $VAR
    r"|\$\{?([0-9@*])"  # $1, ${1}, $@
)


class Spec:
    """Collects one LaunchSpec while a parser reads flags and env: fields, hidden values, notes."""

    def __init__(self, ctx: Ctx, framework: str, role: str) -> None:
        self.ctx = ctx
        self.fields: dict[str, Any] = {"framework": framework, "role": role}
        self.unresolved: set[str] = set()
        self.hidden: list[str] = []
        self.notes: list[str] = []
        self.maybe_env_from: list[str] = []
        """Settings an ``envFrom`` source may set: reported together in one hidden entry."""

    # ---- messages (names and sources only, never values)

    def hide(self, text: str) -> None:
        if text not in self.hidden:
            self.hidden.append(text)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def mentioned(self, key: str) -> bool:
        """Whether the field was given at all, as a value or as something unknowable."""
        target = FIELDS[key].target if key in FIELDS else key
        return target in self.fields or target in self.unresolved

    # ---- values

    def set(self, key: str, raw: str, source: str) -> bool:
        """Convert ``raw`` for field ``key`` and store it; explain (without the value) if it can't."""
        spec = FIELDS[key]
        if self._unresolved(raw, spec, source):
            self.unresolved.add(spec.target)
            return False
        value = spec.convert(raw)
        if value is BAD:
            self.note(f"{spec.what} from {source} is not {spec.expected}")
            self.unresolved.add(spec.target)
            return False
        if value is ALL_GPUS:
            self.fields["uses_all_gpus"] = True
            self.fields.pop(spec.target, None)
            return True
        if value is SKIP:
            return False
        self.fields[spec.target] = value
        self.unresolved.discard(spec.target)
        return True

    def apply(self, found: Scan, *, label: str) -> None:
        """Store every scanned value whose field is a ``FIELDS`` key; report config files."""
        for key, (raw, spelled) in found.values.items():
            if key in FIELDS:
                self.set(key, raw, spelled)
        if "config" in found.values:
            spelled = found.values["config"][1]
            self.hide(f"settings in the {label} {spelled} file")

    def env_raw(self, names: Sequence[str], key: str) -> str | None:
        """The first of ``names`` the container sets literally; hidden sources are reported."""
        what = FIELDS[key].what if key in FIELDS else key
        for name in names:
            if name in self.ctx.env:
                return self.ctx.env[name]
            if name in self.ctx.unknown or name in self.ctx.withheld:
                self._explain(name, what, style="env")
                self.unresolved.add(FIELDS[key].target if key in FIELDS else key)
                return None
        if self.ctx.env_from:
            self.maybe_env_from.append(f"{'/'.join(names)} ({what})")
            self.unresolved.add(FIELDS[key].target if key in FIELDS else key)
        return None

    def from_env(self, names: Sequence[str], key: str) -> bool:
        """Set field ``key`` from the first env variable of ``names`` that is set."""
        for name in names:
            if name in self.ctx.env:
                return self.set(key, self.ctx.env[name], name)
        self.env_raw(names, key)
        return False

    def model_from_env(self, names: Sequence[str]) -> None:
        """Model from the first of ``names`` the container sets, unless a flag already gave it.

        The Hugging Face deep-learning containers for Vertex AI replace ``MODEL_ID`` with the local
        copy of ``AIP_STORAGE_URI`` when that is a ``gs://`` path (huggingface/Google-Cloud-Containers
        ``containers/tgi/gpu/*/entrypoint.sh`` and ``containers/tei/*/entrypoint.sh``), so the URI,
        whose path often carries the model name, is what runs.
        """
        if self.mentioned("model"):
            return
        uri = self.ctx.env.get("AIP_STORAGE_URI", "")
        if uri.startswith("gs://"):
            self.set("model", uri, "AIP_STORAGE_URI")
            return
        self.from_env(names, "model")

    def generic_model(self) -> bool:
        """Last resort when the launcher names no model: a literal ``MODEL_ID``, ``HF_MODEL_ID``,
        ``MODEL_NAME``, ``MODEL`` or ``MODEL_PATH`` (``flags.GENERIC_ENV``), with a note saying so.

        Training scripts and model servers that take their model from a repository are often told
        the model this way; the launcher does not document the name, so it is a guess, named as one.
        """
        if self.mentioned("model"):
            return False
        for name in GENERIC_ENV:
            value = self.ctx.env.get(name, "")
            if value.strip() and self.set("model", value, f"env {name}"):
                self.note(f"model read from env {name}, a generic setting the launcher itself does not read")
                return True
        return False

    def _unresolved(self, raw: str, spec: Field, source: str) -> bool:
        """Whether ``raw`` still holds a variable or command substitution; if so, explain it."""
        if "$" not in raw and "`" not in raw:
            return False
        refs = [m for m in _REF_RE.finditer(raw[:2048])]
        if not refs:
            if "$(" in raw or "`" in raw:
                self.note(f"{spec.what} from {source} holds a command substitution, not a literal")
                return True
            return False
        for m in refs[:4]:
            if m.group(4):
                self.note(f"{spec.what} from {source} is a positional parameter of the script")
            elif m.group(1):
                self._explain(m.group(1), spec.what, style="kubelet")
            else:
                self._explain(m.group(2) or m.group(3), spec.what, style="shell")
        return True

    def _explain(self, name: str, what: str, *, style: str) -> None:
        """Say where variable ``name`` (feeding ``what``) comes from, or that the pod lacks it."""
        ctx = self.ctx
        written = f"$({name})" if style == "kubelet" else f"${{{name}}}"
        if name in ctx.unknown:
            self.hide(f"{name} ({what}) comes from {ctx.sources.get(name, 'a valueFrom source')}")
        elif is_secret_name(name):
            self.hide(f"{name} ({what}) is a secret-named variable, not read")
        elif name in ctx.withheld:
            self.hide(f"{name} ({what}) holds the value of a secret-named variable, not read")
        elif ctx.env_from:
            self.maybe_env_from.append(f"{name} ({what})")
        elif style == "shell" and name in ctx.env:
            self.note(f"{what} is {written} as literal text: no shell runs to expand it "
                      f"(Kubernetes expands $({name}))")
        elif style == "env":
            self.hide(f"{name} ({what}) is not readable at admission")
        else:
            self.note(f"{what} is {written}, not a literal: {name} is not set in the pod spec")

    def build(self) -> LaunchSpec:
        if self.maybe_env_from:
            items = ", ".join(dict.fromkeys(self.maybe_env_from))
            self.hide(f"{items} may come from {', '.join(self.ctx.env_from)}")
        return LaunchSpec(
            **self.fields,
            unresolved=tuple(sorted(self.unresolved))[:MAX_MESSAGES],
            hidden=tuple(self.hidden[:MAX_MESSAGES]),
            notes=tuple(self.notes[:MAX_MESSAGES]),
        )


Parser = Callable[[Sequence[str], Spec], None]
