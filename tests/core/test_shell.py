"""Tests for ``webhook.core.shell``: kubelet expansion, env reading and ``sh -c`` splitting.

Tables first (one row per shape seen in real manifests), then hostile input and properties.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.properties import examples

from webhook.core.container_env import container_env, expand_kubelet, is_secret_name
from webhook.core.shell import Invocation, invocations, split_commands, split_words


def argvs(container: dict[str, Any], env: dict[str, str] | None = None) -> list[tuple[str, ...]]:
    """The argv of every invocation, with the container's own literal env by default."""
    if env is None:
        env = container_env(container)[0]
    runs, _notes = invocations(container, env)
    return [run.argv for run in runs]


def notes_of(container: dict[str, Any]) -> tuple[str, ...]:
    return invocations(container, container_env(container)[0])[1]


# --------------------------------------------------------------------------- expand_kubelet

KUBELET_CASES = [
    ("defined", "--tp=$(TP)", {"TP": "4"}, "--tp=4"),
    ("undefined-kept", "--tp=$(TP)", {}, "--tp=$(TP)"),
    ("escape", "$$(TP)", {"TP": "4"}, "$(TP)"),
    ("double-dollar", "a$$b", {}, "a$b"),
    ("triple-dollar", "$$$(TP)", {"TP": "4"}, "$4"),
    ("trailing-dollar", "cost$", {}, "cost$"),
    ("unclosed", "$(TP", {"TP": "4"}, "$(TP"),
    ("lone-open", "x $(", {}, "x $("),
    ("empty-name", "$()", {}, "$()"),
    ("other-char", "$TP ${TP}", {"TP": "4"}, "$TP ${TP}"),
    ("twice", "$(A)-$(A)", {"A": "x"}, "x-x"),
    ("empty-value", "[$(A)]", {"A": ""}, "[]"),
    ("no-dollar", "plain text", {"A": "x"}, "plain text"),
]


@pytest.mark.parametrize(
    ("text", "env", "expected"), [c[1:] for c in KUBELET_CASES], ids=[c[0] for c in KUBELET_CASES]
)
def test_expand_kubelet(text: str, env: dict[str, str], expected: str) -> None:
    assert expand_kubelet(text, env) == expected


@given(st.text(max_size=200))
def test_expand_kubelet_without_env_only_unescapes(text: str) -> None:
    """With nothing defined, the only change the kubelet makes is ``$$`` -> ``$``."""
    if "$$" not in text:
        assert expand_kubelet(text, {}) == text


# --------------------------------------------------------------------------- container_env

ENV_CASES = [
    (
        "literal",
        {"env": [{"name": "TP", "value": "4"}]},
        {"TP": "4"},
        (),
    ),
    (
        "valueFrom-kinds",
        {"env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "D", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        ]},
        {},
        ("A", "B", "C", "D"),
    ),
    (
        "later-wins-literal",
        {"env": [{"name": "TP", "value": "2"}, {"name": "TP", "value": "8"}]},
        {"TP": "8"},
        (),
    ),
    (
        "literal-overrides-valueFrom",
        {"env": [{"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
                 {"name": "TP", "value": "8"}]},
        {"TP": "8"},
        (),
    ),
    (
        "valueFrom-overrides-literal",
        {"env": [{"name": "TP", "value": "8"},
                 {"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
        {},
        ("TP",),
    ),
    (
        "envFrom-described",
        {"envFrom": [{"configMapRef": {"name": "llm"}}, {"secretRef": {"name": "creds"}, "prefix": "X_"}]},
        {},
        ("envFrom configMap llm", "envFrom secret creds (prefix X_)"),
    ),
    (
        "malformed-entries",
        {"env": ["junk", 7, None, {"value": "x"}, {"name": 5, "value": "x"}, {"name": "N", "value": 8},
                 {"name": "B", "value": True}, {"name": "E"}, {"name": "L", "value": [1]}]},
        {"N": "8", "B": "true", "E": "", "L": ""},
        (),
    ),
    (
        "env-as-dict",
        {"env": {"TP": "4", "PP": 2}},
        {"TP": "4", "PP": "2"},
        (),
    ),
    (
        "refs-earlier-entries",
        {"env": [{"name": "A", "value": "4"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "9"}]},
        {"A": "4", "B": "4-$(C)", "C": "9"},
        (),
    ),
    (
        "env-not-a-list",
        {"env": "TP=4", "envFrom": "x"},
        {},
        (),
    ),
]


@pytest.mark.parametrize(
    ("container", "literal", "hidden"), [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES]
)
def test_container_env(container: dict[str, Any], literal: dict[str, str], hidden: tuple[str, ...]) -> None:
    assert container_env(container) == (literal, hidden)


@pytest.mark.parametrize("container", [None, [], "sh", 5, {"env": None}], ids=["none", "list", "str", "int", "env-none"])
def test_container_env_never_raises(container: Any) -> None:
    literal, hidden = container_env(container)
    assert literal == {} and hidden == ()


# --------------------------------------------------------------------------- invocations

VLLM = ("vllm", "serve", "m", "--tp", "4")

INVOCATION_CASES = [
    ("exec-form", {"command": ["vllm", "serve", "m"], "args": ["--tp", "4"]}, [VLLM]),
    ("args-only", {"args": ["--model-id", "x"]}, [("--model-id", "x")]),
    ("sh-c-in-command", {"command": ["sh", "-c", "vllm serve m --tp 4"]}, [VLLM]),
    ("sh-c-script-in-args", {"command": ["sh", "-c"], "args": ["vllm serve m --tp 4"]}, [VLLM]),
    ("bash-lc", {"command": ["/bin/bash", "-lc", "vllm serve m --tp 4"]}, [VLLM]),
    ("sh-ec", {"command": ["/bin/sh", "-ec"], "args": ["vllm serve m --tp 4"]}, [VLLM]),
    ("bash-o-pipefail", {"command": ["bash", "-o", "pipefail", "-c", "vllm serve m --tp 4"]}, [VLLM]),
    ("bash-login-long", {"command": ["bash", "--login", "-c", "vllm serve m --tp 4"]}, [VLLM]),
    ("busybox-sh", {"command": ["busybox", "sh", "-c", "vllm serve m --tp 4"]}, [VLLM]),
    ("and-and", {"command": ["sh", "-c", "pip install x && vllm serve m --tp 4"]},
     [("pip", "install", "x"), VLLM]),
    ("semicolon", {"command": ["sh", "-c", "cd /w; vllm serve m --tp 4"]}, [("cd", "/w"), VLLM]),
    ("or-or-pipe-amp", {"command": ["sh", "-c", "a || b | c & vllm serve m --tp 4"]},
     [("a",), ("b",), ("c",), VLLM]),
    ("newlines", {"command": ["sh", "-c", "set -e\nvllm serve m --tp 4\n"]}, [("set", "-e"), VLLM]),
    ("backslash-newline", {"command": ["bash", "-c", "vllm serve m \\\n  --tp \\\n  4"]}, [VLLM]),
    ("comment", {"command": ["sh", "-c", "# don't; run ' this\nvllm serve m --tp 4 # trailing"]}, [VLLM]),
    ("quoted-operators", {"command": ["sh", "-c", "echo 'a && b; c' && vllm serve m --tp 4"]},
     [("echo", "a && b; c"), VLLM]),
    ("double-quotes", {"command": ["sh", "-c", 'vllm serve "m" --tp "4"']}, [VLLM]),
    ("exec-prefix", {"command": ["sh", "-c", "exec vllm serve m --tp 4"]}, [VLLM]),
    ("nohup-time", {"command": ["sh", "-c", "nohup time -p vllm serve m --tp 4"]}, [VLLM]),
    ("env-prefix", {"command": ["env", "A=1", "B=2", "vllm", "serve", "m", "--tp", "4"]}, [VLLM]),
    ("tini-wrapper", {"command": ["/usr/bin/tini", "--", "sh", "-c", "vllm serve m --tp 4"]}, [VLLM]),
    ("timeout", {"command": ["sh", "-c", "timeout 3600 vllm serve m --tp 4"]}, [VLLM]),
    ("redirections", {"command": ["sh", "-c", "vllm serve m --tp 4 > /tmp/log 2>&1"]}, [VLLM]),
    ("subshell", {"command": ["sh", "-c", "(cd /w && vllm serve m --tp 4)"]}, [("cd", "/w"), VLLM]),
    ("if-then", {"command": ["sh", "-c", "if true; then vllm serve m --tp 4; fi"]}, [("true",), VLLM]),
    ("assignment-recorded", {"command": ["sh", "-c", "TP=4; vllm serve m --tp $TP"]}, [VLLM]),
    ("export-recorded", {"command": ["sh", "-c", "export TP=4 && vllm serve m --tp ${TP}"]}, [VLLM]),
    ("env-var-braces", {"command": ["sh", "-c", "vllm serve m --tp ${TP}"], "env": [{"name": "TP", "value": "4"}]},
     [VLLM]),
    ("env-var-plain", {"command": ["sh", "-c", "vllm serve m --tp $TP"], "env": [{"name": "TP", "value": "4"}]},
     [VLLM]),
    ("default-used-when-unset", {"command": ["sh", "-c", "vllm serve m --tp ${TP:-4}"]}, [VLLM]),
    ("default-ignored-when-set",
     {"command": ["sh", "-c", "vllm serve m --tp ${TP:-2}"], "env": [{"name": "TP", "value": "4"}]}, [VLLM]),
    ("default-kept-when-valueFrom",
     {"command": ["sh", "-c", "vllm serve m --tp ${TP:-2}"],
      "env": [{"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}}]},
     [("vllm", "serve", "m", "--tp", "${TP:-2}")]),
    ("unknown-kept-as-written", {"command": ["sh", "-c", "vllm serve m --tp ${TP}"]},
     [("vllm", "serve", "m", "--tp", "${TP}")]),
    ("kubelet-before-shell", {"command": ["sh", "-c", "vllm serve m --tp $(TP)"], "env": [{"name": "TP", "value": "4"}]},
     [VLLM]),
    ("kubelet-escape-then-shell",
     {"command": ["sh", "-c", "vllm serve m --tp $${TP}"], "env": [{"name": "TP", "value": "4"}]}, [VLLM]),
    ("kubelet-in-exec-args", {"command": ["vllm", "serve", "m"], "args": ["--tp", "$(TP)"],
                              "env": [{"name": "TP", "value": "4"}]}, [VLLM]),
    ("exec-form-no-shell-expansion", {"command": ["vllm", "serve", "m", "--tp", "${TP}"],
                                      "env": [{"name": "TP", "value": "4"}]},
     [("vllm", "serve", "m", "--tp", "${TP}")]),
    ("unquoted-expansion-splits", {"command": ["sh", "-c", "vllm serve m $EXTRA"],
                                   "env": [{"name": "EXTRA", "value": "--tp 4"}]}, [VLLM]),
    ("quoted-expansion-does-not-split", {"command": ["sh", "-c", 'echo "$EXTRA"'],
                                         "env": [{"name": "EXTRA", "value": "--tp 4"}]}, [("echo", "--tp 4")]),
    ("dollar-at", {"command": ["sh", "-c", 'exec vllm serve "$@"', "--", "m", "--tp", "4"]}, [VLLM]),
    ("positional-one", {"command": ["sh", "-c", "vllm serve $1 --tp $2", "sh", "m", "4"]}, [VLLM]),
    ("nested-shell", {"command": ["sh", "-c", "bash -c 'vllm serve m --tp 4'"]}, [VLLM]),
    ("unbalanced-quote", {"command": ["sh", "-c", "vllm serve m --tp 4 'oops"]},
     [("vllm", "serve", "m", "--tp", "4", "oops")]),
    ("args-plain-string", {"command": ["vllm", "serve"], "args": "m --tp 4"}, [VLLM]),
    ("command-plain-string", {"command": "sh -c 'vllm serve m --tp 4'"}, [VLLM]),
    ("string-script-after-sh-c", {"command": ["sh", "-c"], "args": "vllm serve m --tp 4"}, [VLLM]),
    ("scalars-stringified", {"command": ["vllm", "serve", "m", "--tp", 4, None, {"x": 1}, ["y"]]}, [VLLM]),
    ("bool-stringified", {"command": ["x", True, False, 1.5]}, [("x", "true", "false", "1.5")]),
    ("ray-then-vllm", {"command": ["sh", "-c"], "args": [
        "ray start --head --port=6379 --dashboard-host=0.0.0.0 && vllm serve m --tp 4"]},
     [("ray", "start", "--head", "--port=6379", "--dashboard-host=0.0.0.0"), VLLM]),
    ("empty", {}, []),
    ("sh-file-not-script", {"command": ["bash", "/start.sh"]}, [("bash", "/start.sh")]),
]


@pytest.mark.parametrize(
    ("container", "expected"), [c[1:] for c in INVOCATION_CASES], ids=[c[0] for c in INVOCATION_CASES]
)
def test_invocations(container: dict[str, Any], expected: list[tuple[str, ...]]) -> None:
    assert argvs(container) == expected


def test_prefix_assignment_is_only_for_that_command() -> None:
    """``NUM_SHARD=2 cmd`` puts NUM_SHARD in cmd's env, not in later commands'."""
    runs, _ = invocations({"command": ["sh", "-c", "NUM_SHARD=2 text-generation-launcher; other"]}, {})
    assert runs[0] == Invocation(("text-generation-launcher",), (("NUM_SHARD", "2"),))
    assert runs[1].env == ()


def test_exported_variables_reach_later_commands_env() -> None:
    runs, _ = invocations({"command": ["sh", "-c", "export NUM_SHARD=4; PLAIN=1; text-generation-launcher"]}, {})
    assert runs[-1].env_map() == {"NUM_SHARD": "4"}


def test_secret_named_variables_are_never_expanded_or_recorded() -> None:
    container = {
        "command": ["sh", "-c", "export API_KEY=sk_live_1 && serve --key $HF_TOKEN --other $API_KEY $(HF_TOKEN)"],
        "env": [{"name": "HF_TOKEN", "value": "hf_secret123"}],
    }
    runs, _ = invocations(container, container_env(container)[0])
    flat = repr(runs)
    assert "hf_secret123" not in flat and "sk_live_1" not in flat
    assert runs[0].argv == ("serve", "--key", "$HF_TOKEN", "--other", "$API_KEY", "$(HF_TOKEN)")


@pytest.mark.parametrize(
    ("name", "secret"),
    [("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True),
     ("OPENAI_API_KEY", True), ("DB_PASSWORD", True), ("KEY", True), ("TENSOR_PARALLEL_SIZE", False),
     ("MODEL_ID", False), ("MONKEY", False)],
    ids=lambda v: str(v),
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_ignored_positionals_note() -> None:
    """``command: [sh, -c], args: [vllm, serve, m]`` runs only ``vllm``: say so."""
    assert any("only its first argument" in n for n in notes_of({"command": ["sh", "-c"], "args": ["vllm", "serve", "m"]}))


def test_split_commands_keeps_redirection_ampersand() -> None:
    assert split_commands("a 2>&1 && b &> log & c") == ["a 2>&1 ", " b &> log ", " c"]


def test_split_words_without_state_does_not_expand() -> None:
    assert split_words("--tp $TP 'a b' \"c d\"") == ["--tp", "$TP", "a b", "c d"]


# --------------------------------------------------------------------------- caps and hostile input

CAP_CASES = [
    ("items", {"command": ["x"] * 600}, "container args cut at 512 items"),
    ("characters", {"command": ["x" * 70000]}, "cut at 65536 characters"),
    ("script-words", {"command": ["sh", "-c", "echo " + "w " * 600]}, "container script cut at 512 words"),
]


@pytest.mark.parametrize(("container", "note"), [c[1:] for c in CAP_CASES], ids=[c[0] for c in CAP_CASES])
def test_caps_add_notes(container: dict[str, Any], note: str) -> None:
    assert any(note in n for n in notes_of(container))


def test_custom_caps() -> None:
    runs, notes = invocations({"command": ["a", "b", "c", "d"]}, {}, max_tokens=2)
    assert runs[0].argv == ("a", "b") and notes == ("container args cut at 2 items",)


HOSTILE = [
    ("100k-char-arg", {"command": ["sh", "-c", "vllm serve " + "x" * 100_000]}),
    ("10k-args", {"command": ["vllm", "serve"] + ["--tp", "2"] * 5_000}),
    ("brace-bomb", {"command": ["sh", "-c", "${" * 50_000]}),
    ("paren-bomb", {"command": ["sh", "-c", "$(" * 50_000]}),
    ("kubelet-paren-bomb", {"command": ["x", "$(" * 50_000]}),
    ("quote-soup", {"command": ["sh", "-c", "'\"`\\" * 20_000]}),
    ("operators", {"command": ["sh", "-c", "&&;|" * 20_000]}),
    ("nested-defaults", {"command": ["sh", "-c", "${A:-${A:-${A:-${A:-${A:-x}}}}} " * 2_000]}),
    ("deep-shells", {"command": ["sh", "-c", "sh -c 'sh -c \"sh -c \\\"sh -c vllm\\\"\"'"]}),
    ("huge-env", {"command": ["sh", "-c", "$A"], "env": [{"name": f"V{i}", "value": "$(V0)" * 50} for i in range(2_000)]}),
]


@pytest.mark.parametrize("container", [c[1] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_input_is_fast(container: dict[str, Any]) -> None:
    start = time.perf_counter()
    invocations(container, container_env(container)[0])
    assert time.perf_counter() - start < 1.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
shellish = st.lists(
    st.sampled_from(["sh", "-c", "bash", "-lc", "&&", ";", "|", "'", '"', "$(", "${", "}", ")", "$A", "${A:-1}",
                     "exec", "env", "A=1", "export", "\\\n", "#", "vllm", "serve", "$@", "$1", " "]),
    max_size=30,
).map("".join)


@settings(max_examples=examples(200), deadline=None)
@given(json_values)
def test_invocations_never_raise_on_json(value: Any) -> None:
    invocations(value, {})
    if isinstance(value, dict):
        invocations(value, container_env(value)[0])


@settings(max_examples=examples(200), deadline=None)
@given(st.fixed_dictionaries({"command": st.just(["sh", "-c"]), "args": st.lists(shellish, max_size=3)}),
       st.dictionaries(st.sampled_from(["A", "B", "TP"]), st.text(max_size=10), max_size=3))
def test_scripts_never_raise(container: dict[str, Any], env: dict[str, str]) -> None:
    runs, notes = invocations(container, env)
    assert all(isinstance(run.argv, tuple) for run in runs)
    assert all(isinstance(n, str) for n in notes)
