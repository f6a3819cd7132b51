"""Container ``command``/``args`` -> the command lines the container will run.

A launcher's flags hide in three shapes in real manifests: a plain exec list, one ``sh -c`` string
joined with ``&&`` and backslash-newlines, and variables (``$(VAR)`` expanded by the kubelet,
``${VAR}`` by the shell). This module undoes exactly those layers and nothing more, so
``launchers`` can read flags from plain argv tuples; reading the env itself (and deciding which
variables are secrets) is ``container_env``'s job. It never runs anything, never raises on odd
JSON, and keeps every loop bounded (caps on items, words and characters) because it judges
untrusted objects inside the API server's admission deadline.

Values whose source is unknowable at admission (``valueFrom``, ``envFrom``, variables the pod
never sets) are left *as written* (``${TP}``, ``$(TP)``) so the caller can name the variable
instead of guessing its value.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from webhook.core.container_env import container_env, expand_kubelet, is_secret_name, scalar_text
from webhook.core.counts import parse_count

__all__ = [
    "Invocation",
    "invocations",
    "split_commands",
    "split_words",
]

_BRACE_WINDOW = 256
"""How far ``${`` looks for its ``}``: keeps hostile ``${${${...`` strings linear."""
_MAX_NESTING = 4
"""``sh -c "bash -c '...'"`` nesting followed before giving up."""

SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh"})
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
     "{", "}", "(", ")", "!", "[[", "]]"}
)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,255})=(.*)", re.S)
_MAX_POSITIONAL = 999
"""``${N}`` takes up to three digits (:data:`_BRACE_RE`)."""
_BRACE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,255}|[0-9]{1,3}|[@*])(?:(:?[-=+?])(.*))?", re.S)
_REDIRECT_RE = re.compile(r"[0-9]{0,2}(?:&>>?|>>?&?|<<?<?|<&|>\|)")


@dataclass(frozen=True)
class Invocation:
    """One command line found in a container, after shell and kubelet expansion.

    ``env`` holds what the command line itself adds to the environment the container already has:
    variables a script exported before it and ``NAME=value``/``env NAME=value`` prefixes. Launchers
    such as TGI read settings (``NUM_SHARD``) from the environment, so they need both.
    """

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    stdout: str = ""
    """The file a ``>``/``>>`` redirection sends the command's output to (as expanded), else ``""``:
    ``echo '{...}' > ds_config.json`` writes a config the launcher reads later (``launchers.files``)."""
    stdin: str = ""
    """The body of a here-document fed to the command (``cat > f <<EOF ... EOF``), as written."""

    def env_map(self) -> dict[str, str]:
        """``env`` as a dict, later entries winning."""
        return dict(self.env)


# --------------------------------------------------------------------------- scripts


@dataclass
class _State:
    """What a script run has seen so far: variables, positionals, budgets and notes."""

    env: dict[str, str]
    maybe_set: Callable[[str], bool]
    """Whether an unset name might still be set at run time (valueFrom, envFrom, secret-named)."""
    positional: list[str] = field(default_factory=list)
    exported: dict[str, str] = field(default_factory=dict)
    words_left: int = 512
    max_tokens: int = 512
    max_script_chars: int = 65536
    expand: bool = True
    depth: int = 0
    """Nesting of ``${..:-${..}}`` default words being expanded."""
    nesting: int = 0
    """Nesting of ``sh -c`` inside ``sh -c``."""
    scan_budget: int = 200_000
    """Characters ``${`` may scan for its ``}`` in total: hostile input stays fast."""
    notes: list[str] = field(default_factory=list)
    out: list[Invocation] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def assign(self, name: str, value: str, *, export: bool) -> None:
        """Record a script assignment, except for secret-named variables (never kept)."""
        if is_secret_name(name):
            self.env.pop(name, None)
            self.exported.pop(name, None)
            return
        self.env[name] = value
        if export or name in self.exported:
            self.exported[name] = value


def split_commands(script: str) -> list[str]:
    """Cut a script into simple commands on unquoted ``&& || ; | &``, newlines and parentheses.

    Quote-, comment- and ``$(...)``-aware, one linear pass; an unbalanced quote just runs to the
    end (the container would fail, but we still read what it meant). Backslash-newline
    continuations must already be joined. A here-document's body (``<<EOF`` up to the line
    ``EOF``) is data, not commands: it is skipped (:func:`_split_script` keeps it).
    """
    return [segment for segment, _body in _split_script(script)]


_HEREDOC_RE = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]{1,64})'|\"([^\"\n]{1,64})\"|\\?([^\s;&|<>()'\"]{1,64}))")
"""``<<EOF``, ``<<-EOF``, ``<< 'EOF'``, ``<<"EOF"``, ``<<\\EOF``: (dash, delimiter in one of three groups)."""


def _split_script(script: str) -> list[tuple[str, str]]:
    """:func:`split_commands` with each command's here-document body (``""`` when it has none).

    POSIX: the body starts on the line after the ``<<WORD`` operator and ends at a line that is
    exactly ``WORD`` (``<<-``: leading tabs stripped first); quotes around ``WORD`` only turn off
    expansion in the body, which is kept as written here either way.
    """
    segments: list[str] = []
    bodies: dict[int, str] = {}
    pending: list[tuple[str, bool, int]] = []
    start = 0
    i = 0
    n = len(script)
    depth = 0
    word_start = True
    while i < n:
        c = script[i]
        if c in "'\"`":
            i = _skip_quoted(script, i)
            word_start = False
            continue
        if c == "\\":
            i += 2
            word_start = False
            continue
        if c == "$" and i + 1 < n and script[i + 1] == "(":
            depth += 1
            i += 2
            word_start = False
            continue
        if depth and c == "(":
            depth += 1
        elif depth and c == ")":
            depth -= 1
        elif not depth and c == "<" and script.startswith("<<", i):
            if script.startswith("<<<", i):  # a here-string: one word, no body
                i += 3
                continue
            m = _HEREDOC_RE.match(script, i)
            if m:
                pending.append((m.group(2) or m.group(3) or m.group(4), bool(m.group(1)), len(segments)))
                i = m.end()
                word_start = False
                continue
        elif not depth and c == "#" and word_start:
            segments.append(script[start:i])
            end = script.find("\n", i)
            i = start = n if end < 0 else end
            continue
        elif not depth and _is_separator(script, i):
            segments.append(script[start:i])
            width = 2 if script[i : i + 2] in ("&&", "||", ";;", "|&") else 1
            i = start = i + width
            if c == "\n" and pending:
                i = start = _read_bodies(script, i, pending, bodies)
                pending = []
            word_start = True
            continue
        word_start = c in " \t\r\n"
        i += 1
    segments.append(script[start:])
    return [(s, bodies.get(k, "")) for k, s in enumerate(segments) if s.strip()]


def _read_bodies(script: str, i: int, pending: list[tuple[str, bool, int]], bodies: dict[int, str]) -> int:
    """Read the here-document bodies due after the newline before ``i``; return where commands resume.

    Each body goes to the command that opened it (a later one on the same line appends); a body
    without its closing line runs to the end of the script, as the shell reads it.
    """
    n = len(script)
    for delimiter, strip_tabs, owner in pending:
        lines: list[str] = []
        while i < n:
            end = script.find("\n", i)
            end = n if end < 0 else end
            line = script[i:end]
            i = end + 1
            if (line.lstrip("\t") if strip_tabs else line).rstrip("\r") == delimiter:
                break
            lines.append(line.lstrip("\t") if strip_tabs else line)
        body = "\n".join(lines) + ("\n" if lines else "")
        bodies[owner] = bodies.get(owner, "") + body
    return min(i, n)


def _skip_quoted(script: str, i: int) -> int:
    """Index just after the quote that closes the one at ``i`` (or the end of the script)."""
    quote = script[i]
    j = i + 1
    n = len(script)
    while j < n:
        c = script[j]
        if c == "\\" and quote != "'":
            j += 2
            continue
        if c == quote:
            return j + 1
        j += 1
    return n


def _is_separator(script: str, i: int) -> bool:
    """Whether ``script[i]`` ends a simple command (``2>&1`` and ``&>`` are redirections)."""
    c = script[i]
    if c in ";|\n()":
        return True
    if c == "&":
        prev = script[i - 1] if i else ""
        nxt = script[i + 1] if i + 1 < len(script) else ""
        return prev not in "<>" and nxt != ">"
    return False


class _Words:
    """Word buffer of the lexer: tracks the current word and whether it has started."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.cur: list[str] = []
        self.started = False

    def add(self, text: str) -> None:
        self.cur.append(text)
        self.started = True

    def flush(self) -> None:
        if self.started:
            self.words.append("".join(self.cur))
        self.cur = []
        self.started = False

    def add_fields(self, fields: Sequence[str]) -> None:
        """``"$@"``: each field its own word, the first and last joined to their neighbours."""
        for k, item in enumerate(fields):
            if k:
                self.flush()
            self.add(item)

    def add_split(self, value: str) -> None:
        """An unquoted expansion: split on whitespace like the shell's default IFS."""
        if self.cur and _ASSIGN_PREFIX_RE.match(self.cur[0]):
            self.add(value)  # NAME=$VALUE is never split
            return
        parts = value.split()
        if value[:1].isspace():
            self.flush()
        self.add_fields(parts)
        if parts and value[-1:].isspace():
            self.flush()


_ASSIGN_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}=")


def split_words(text: str, state: _State | None = None) -> list[str]:
    """Split one simple command into words like a POSIX shell: quotes, escapes, expansions.

    Without a state nothing is expanded (used for ``args`` given as one string). Unknown
    variables and command substitutions stay as written.
    """
    state = state or _State(env={}, maybe_set=lambda _name: True, expand=False)
    buf = _Words()
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            buf.flush()
            i += 1
        elif c == "#" and not buf.started:
            break
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            buf.add(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, buf, state, stop_at_quote=True)
        elif c == "\\":
            buf.add(text[i + 1 : i + 2])
            i += 2
        elif c == "$" and state.expand:
            value, from_var, i = _dollar(text, i, state)
            if isinstance(value, list):
                buf.add_fields(value)
            elif from_var:
                buf.add_split(value)
            else:
                buf.add(value)
        else:
            j = i + 1
            while j < n and text[j] not in " \t\r\n'\"\\$":
                j += 1
            buf.add(text[i:j])
            i = j
    buf.flush()
    return buf.words


def _double_quoted(text: str, i: int, buf: _Words, state: _State, *, stop_at_quote: bool) -> int:
    """Read a double-quoted run starting at ``i`` into ``buf``; return the index after it."""
    n = len(text)
    buf.add("")
    while i < n:
        c = text[i]
        if c == '"' and stop_at_quote:
            return i + 1
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            buf.add(nxt if nxt in '$`"\\' else ("" if nxt == "\n" else c + nxt))
            i += 2
        elif c == "$" and state.expand:
            value, _from_var, i = _dollar(text, i, state)
            if isinstance(value, list):
                buf.add_fields(value)
            else:
                buf.add(value)
        else:
            j = i + 1
            while j < n and text[j] not in '"\\$':
                j += 1
            buf.add(text[i:j])
            i = j
    return n


def _dollar(text: str, i: int, state: _State) -> tuple[str | list[str], bool, int]:
    """Expand the ``$`` at ``i``: (value or fields, whether it came from a variable, next index)."""
    n = len(text)
    j = i + 1
    if j >= n:
        return "$", False, j
    c = text[j]
    if c == "{":
        close = _matching_brace(text, j, state)
        if close < 0:
            return "$", False, j
        value, from_var = _braced(text[j + 1 : close], text[i : close + 1], state)
        return value, from_var, close + 1
    if c == "(":
        end = _matching_paren(text, j)
        return text[i:end], False, end
    if c in "@*":
        return list(state.positional[1:]), True, j + 1
    k = parse_count(c, cap=9)  # $0 .. $9: one ASCII digit ("$²" is a "$" and a "²", as sh reads it)
    if k is not None:
        if k < len(state.positional):
            return state.positional[k], True, j + 1
        return text[i : j + 1], False, j + 1
    m = _NAME_RE.match(text, j)
    if m:
        name = m.group()
        if name in state.env:
            return state.env[name], True, m.end()
        return "$" + name, False, m.end()
    if c in "?#!$-":
        return text[i : j + 1], False, j + 1
    return "$", False, j


def _matching_brace(text: str, j: int, state: _State) -> int:
    """Index of the ``}`` closing the ``{`` at ``j`` within a bounded window, or -1."""
    end = min(len(text), j + _BRACE_WINDOW)
    if state.scan_budget <= 0:
        return -1
    state.scan_budget -= end - j
    depth = 0
    for k in range(j, end):
        ch = text[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k
    return -1


def _matching_paren(text: str, j: int) -> int:
    """Index just after the ``)`` closing the ``(`` at ``j`` (or the end of the text)."""
    depth = 0
    for k in range(j, len(text)):
        ch = text[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def _braced(inner: str, written: str, state: _State) -> tuple[str, bool]:
    """``${NAME}``, ``${NAME:-default}``, ``${NAME:=x}``, ``${NAME:+x}``, ``${1}``.

    An unset name that might still be set at run time keeps the expression as written; a name the
    pod certainly does not set takes the default, as the shell would.
    """
    m = _BRACE_RE.fullmatch(inner)
    if not m or state.depth > _MAX_NESTING:
        return written, False
    name, op, word = m.group(1), m.group(2), m.group(3) or ""
    value = _param(name, state)
    if op is None:
        return (value, True) if value is not None else (written, False)
    colon = op.startswith(":")
    usable = value is not None and (value != "" or not colon)
    if op[-1] == "+":
        if usable:
            return _expand_word(word, state), True
        return (written, False) if _might_be_set(name, state) else ("", True)
    if usable:
        return value or "", True
    if op[-1] == "?" or _might_be_set(name, state):
        return written, False
    default = _expand_word(word, state)
    if op[-1] == "=" and _NAME_RE.fullmatch(name):
        state.assign(name, default, export=False)
    return default, True


def _param(name: str, state: _State) -> str | None:
    """A variable or positional parameter's value, ``None`` when unset (``$@`` joined)."""
    if name in ("@", "*"):
        return " ".join(state.positional[1:])
    k = parse_count(name, cap=_MAX_POSITIONAL)
    if k is not None:
        return state.positional[k] if k < len(state.positional) else None
    return state.env.get(name)


def _might_be_set(name: str, state: _State) -> bool:
    return parse_count(name, cap=_MAX_POSITIONAL) is None and name not in "@*" and state.maybe_set(name)


def _expand_word(word: str, state: _State) -> str:
    """Expand a default/alternative word of ``${..:-word}`` as a double-quoted string."""
    state.depth += 1
    try:
        buf = _Words()
        _double_quoted(word, 0, buf, state, stop_at_quote=False)
        buf.flush()
        return " ".join(buf.words)
    finally:
        state.depth -= 1


def _join_continuations(script: str) -> str:
    """Backslash-newline is a line continuation in every shell: drop it (and CRLF variants)."""
    return script.replace("\\\r\n", "").replace("\\\n", "")


def _run_script(script: str, positional: list[str], state: _State) -> None:
    """Split a ``sh -c`` script into commands and run each through ``_simple_command``."""
    if len(script) > state.max_script_chars:
        script = script[: state.max_script_chars]
        state.note(f"container script cut at {state.max_script_chars} characters")
    saved = state.positional
    state.positional = positional
    try:
        for segment, body in _split_script(_join_continuations(script)):
            if state.words_left <= 0:
                state.note(f"container script cut at {state.max_tokens} words")
                return
            words = split_words(segment, state)
            if len(words) > state.words_left:
                words = words[: state.words_left]
                state.note(f"container script cut at {state.max_tokens} words")
            state.words_left -= len(words)
            _simple_command(words, state, shell=True, stdin=body)
    finally:
        state.positional = saved


def _simple_command(words: list[str], state: _State, *, shell: bool, stdin: str = "") -> None:
    """One simple command: record assignments/exports, unwrap wrappers, recurse into shells.

    ``shell`` is False for the exec form (no shell parses the items, so no keywords, redirections
    or assignments exist there; ``env A=B`` still does). ``stdin`` is the command's here-document
    body: a shell given one without ``-c`` (``bash <<EOF``) runs it as its script.
    """
    assigns: dict[str, str] = {}
    stdout = ""
    if shell:
        words, stdout = _strip_syntax(words)
        while words and _ASSIGN_RE.fullmatch(words[0]):
            name, value = _ASSIGN_RE.fullmatch(words[0]).groups()  # type: ignore[union-attr]
            if not is_secret_name(name):
                assigns[name] = value
            words = words[1:]
        if not words:
            for name, value in assigns.items():
                state.assign(name, value, export=False)
            return
        if words[0] in ("export", "readonly", "declare", "typeset", "local"):
            _export(words[1:], state, export=words[0] == "export" or "-x" in words[1:3])
            return
    words, more_env = _unwrap(words)
    assigns.update((k, v) for k, v in more_env.items() if not is_secret_name(k))
    if not words:
        return
    shell_parts = _shell_script(words)
    if shell_parts is None and stdin and _reads_script_from_stdin(words):
        shell_parts = (stdin, [])
    if shell_parts is not None and state.nesting < _MAX_NESTING:
        _run_child_shell(*shell_parts, assigns=assigns, state=state)
        return
    env = {**state.exported, **assigns}
    state.out.append(Invocation(argv=tuple(words), env=tuple(env.items()), stdout=stdout, stdin=stdin))


def _reads_script_from_stdin(words: Sequence[str]) -> bool:
    """``bash``, ``sh -e``, ``bash -s``: a shell with no ``-c`` and no script file reads stdin."""
    if not words or words[0].rsplit("/", 1)[-1] not in SHELLS:
        return False
    return all(w.startswith(("-", "+")) for w in words[1:]) and not any(
        not w.startswith("--") and "c" in w[1:] for w in words[1:])


def _run_child_shell(script: str, positional: list[str], *, assigns: dict[str, str], state: _State) -> None:
    """Run a nested ``sh -c``: it sees our variables plus its prefix assignments, then forgets them."""
    _note_ignored_positionals(script, positional, state)
    saved = (state.env, state.exported)
    state.env = {**state.env, **assigns}
    state.exported = {**state.exported, **assigns}
    state.nesting += 1
    try:
        _run_script(script, positional, state)
    finally:
        state.env, state.exported = saved
        state.nesting -= 1


_STDOUT_OPS = frozenset({">", ">>", "1>", "1>>", ">|", "&>", "&>>"})
"""Redirections whose target file receives the command's standard output."""


def _strip_syntax(words: list[str]) -> tuple[list[str], str]:
    """Drop shell keywords around a command (``then``, ``do``, ``{``) and redirections; also
    return the file standard output is redirected to (``echo x > f``, ``cat >>f``), else ``""``."""
    i = 0
    while i < len(words) and words[i] in _KEYWORDS:
        i += 1
    out: list[str] = []
    skip_next = False
    target_next = False
    stdout = ""
    for word in words[i:]:
        if skip_next:
            skip_next = False
            if target_next:
                stdout, target_next = word, False
            continue
        m = _REDIRECT_RE.match(word)
        if m and word[:1] in "0123456789<>&":
            to_file = m.group() in _STDOUT_OPS
            skip_next = m.end() == len(word)
            if to_file and skip_next:
                target_next = True
            elif to_file:
                stdout = word[m.end():]
            continue
        out.append(word)
    while out and out[-1] in ("}", ")", "fi", "done", "esac"):
        out.pop()
    return out, stdout


def _export(args: Sequence[str], state: _State, *, export: bool) -> None:
    """``export A=1 B``: record values and mark names exported (``-x``/``-r`` options skipped)."""
    for arg in args:
        if arg.startswith("-"):
            continue
        m = _ASSIGN_RE.fullmatch(arg)
        if m:
            state.assign(m.group(1), m.group(2), export=export)
        elif export and arg in state.env and not is_secret_name(arg):
            state.exported[arg] = state.env[arg]


_VALUE_OPTS = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "taskset": frozenset(),
    "numactl": frozenset(),
    "tini": frozenset({"-p", "-e"}),
    "dumb-init": frozenset({"-r", "--rewrite"}),
    "gosu": frozenset(),
}
_PLAIN_WRAPPERS = frozenset({"exec", "nohup", "time", "command", "builtin", "nice", "setsid"})


def _unwrap(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """Skip ``exec``, ``nohup``, ``time``, ``env A=B``, ``tini --``, ``timeout 1h`` and friends.

    Returns the remaining words and the variables ``env`` set. Each round consumes at least one
    word, so this always terminates.
    """
    env: dict[str, str] = {}
    for _ in range(16):
        if not words:
            break
        head = words[0].rsplit("/", 1)[-1]
        if head in _PLAIN_WRAPPERS and head not in _VALUE_OPTS:
            words = _skip_options(words[1:], frozenset({"-a"}))
        elif head == "env":
            words = _skip_options(words[1:], _VALUE_OPTS["env"])
            while words and _ASSIGN_RE.fullmatch(words[0]):
                name, value = _ASSIGN_RE.fullmatch(words[0]).groups()  # type: ignore[union-attr]
                env[name] = value
                words = words[1:]
        elif head == "timeout":
            words = _skip_options(words[1:], _VALUE_OPTS["timeout"])[1:]
        elif head in ("gosu", "su-exec", "chpst"):
            words = words[2:]
        elif head in _VALUE_OPTS:
            words = _skip_options(words[1:], _VALUE_OPTS[head])
            if head in ("taskset",) and words:
                words = words[1:]
        else:
            break
    return words, env


def _skip_options(words: list[str], value_opts: frozenset[str]) -> list[str]:
    """Drop leading ``-x``/``--long`` options (and the values of ``value_opts``) and one ``--``."""
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return words[i + 1 :]
        i += 2 if words[i] in value_opts else 1
    return words[i:]


def _shell_script(words: Sequence[str]) -> tuple[str, list[str]] | None:
    """``sh -c SCRIPT [$0 [$1 ...]]`` (also ``bash -lc``, ``-ec``, ``-o pipefail -c``) -> parts.

    ``None`` when the words do not run a shell with ``-c`` (``bash start.sh`` runs a file whose
    content is not in the pod).
    """
    i = 0
    if words and words[0].rsplit("/", 1)[-1] == "busybox":
        i = 1
    if i >= len(words) or words[i].rsplit("/", 1)[-1] not in SHELLS:
        return None
    i += 1
    has_c = False
    while i < len(words) and words[i][:1] in "-+" and words[i] not in ("-", "+"):
        opt = words[i]
        i += 1
        if opt == "--":
            break
        if opt in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 1
        elif not opt.startswith("--") and "c" in opt[1:]:
            has_c = True
    if not has_c or i >= len(words):
        return None
    return words[i], list(words[i + 1 :])


def _note_ignored_positionals(script: str, positional: Sequence[str], state: _State) -> None:
    """``command: [sh, -c], args: [vllm, serve, m]`` runs only ``vllm``: worth a warning."""
    if positional and not re.search(r"\$\{?[0-9@*]", script[: state.max_script_chars]):
        state.note(
            f"sh -c runs only its first argument; {len(positional)} more item(s) become $0.. "
            "and are not part of the command"
        )


# --------------------------------------------------------------------------- entry point


def invocations(
    container: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    max_tokens: int = 512,
    max_script_chars: int = 65536,
) -> tuple[tuple[Invocation, ...], tuple[str, ...]]:
    """``command`` + ``args`` -> the command lines the container runs, plus notes.

    Each item is first ``$(VAR)``-expanded from ``env`` (as the kubelet does), then a ``sh -c``
    script is split into simple commands whose words are shell-expanded with ``env`` plus the
    script's own assignments. Names the pod might set in a way we cannot see (``valueFrom``,
    ``envFrom``, secret-named, or literal in the container but absent from ``env``) stay as
    written. At most ``max_tokens`` items and script words are inspected and each item is cut at
    ``max_script_chars``; every cut adds a note.
    """
    if not isinstance(container, Mapping):
        return (), ()
    literal, hidden = container_env(container)
    env = _usable_env(env)
    state = _State(
        env=dict(env), maybe_set=_maybe_set_fn(literal, hidden, env),
        words_left=max(0, max_tokens), max_tokens=max_tokens, max_script_chars=max(0, max_script_chars),
    )
    items = _command_items(container, state)
    items = [expand_kubelet(item, env) for item in items]
    if items:
        _simple_command(items, state, shell=False)
    return tuple(state.out), tuple(state.notes)


def _usable_env(env: Any) -> dict[str, str]:
    """String-to-string entries of ``env`` without secret-named ones (never expanded)."""
    if not isinstance(env, Mapping):
        return {}
    return {
        k: v for k, v in env.items()
        if isinstance(k, str) and isinstance(v, str) and not is_secret_name(k)
    }


def _maybe_set_fn(
    literal: Mapping[str, str], hidden: Sequence[str], env: Mapping[str, str]
) -> Callable[[str], bool]:
    """Build the predicate: could ``name`` be set at run time although ``env`` lacks it?"""
    unknown = {h for h in hidden if _NAME_RE.fullmatch(h)}
    env_from = any(not _NAME_RE.fullmatch(h) for h in hidden)

    def maybe_set(name: str) -> bool:
        return env_from or name in unknown or (name in literal and name not in env) or is_secret_name(name)

    return maybe_set


def _command_items(container: Mapping[str, Any], state: _State) -> list[str]:
    """``command`` + ``args`` as strings, capped at ``max_tokens`` items (with a note).

    Scalars are stringified, other items ignored. A string where a list belongs is split into
    words, except the script of a ``sh -c`` whose script is still missing.
    """
    limit = state.max_tokens
    items = _as_items(container.get("command"), limit + 1, script_slot=False)
    awaiting_script = _awaits_script(items)
    items += _as_items(container.get("args"), limit + 1, script_slot=awaiting_script)
    if len(items) > limit:
        items = items[:limit]
        state.note(f"container args cut at {limit} items")
    cut = [item[: state.max_script_chars] for item in items]
    if any(len(a) != len(b) for a, b in zip(items, cut)):
        state.note(f"container argument cut at {state.max_script_chars} characters")
    return cut


def _as_items(value: Any, limit: int, *, script_slot: bool) -> list[str]:
    """One ``command``/``args`` field -> list of strings (bounded)."""
    if isinstance(value, str):
        return [value] if script_slot else split_words(value)[:limit]
    if not isinstance(value, list):
        scalar = scalar_text(value)
        return [scalar] if scalar is not None else []
    out: list[str] = []
    for item in itertools.islice(value, limit):
        scalar = scalar_text(item)
        if scalar is not None:
            out.append(scalar)
    return out


def _awaits_script(items: Sequence[str]) -> bool:
    """Whether ``items`` end in a shell's ``-c`` so the next item is the script."""
    return bool(items) and _shell_script(list(items) + ["x"]) == ("x", [])
