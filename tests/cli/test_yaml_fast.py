"""``webhook.cli.yaml_fast.load_all`` gives exactly what ``yaml.load_all`` (CSafeLoader) gives, or raises
the same error: on the shipped examples, on every YAML construct it hands back to PyYAML, and on
generated streams."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from webhook.cli import yaml_fast

ROOT = Path(__file__).resolve().parents[2]


def reference(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=yaml_fast.LOADER))


CASES = [
    ("mapping", "a: 1\nb: two\n"),
    ("scalars", "i: 42\nneg: -7\nhex: 0x1F\noct: 0o17\nf: 1.5\nexp: 1e3\ninf: .inf\nt: true\ny: yes\nOff: off\n"
                "n: null\ntilde: ~\nempty:\nq: '42'\ndq: \"true\"\nsexa: 1:30\nunder: 1_000\n"),
    ("timestamps", "d: 2026-11-29\nts: 2026-11-29T20:00:00Z\n"),
    ("sequences", "- a\n- [b, c]\n- {d: e}\n-\n  - nested\n"),
    ("multi-doc-with-empties", "---\na: 1\n---\n---\n# only a comment\n---\nb: 2\n"),
    ("scalar-roots", "--- just text\n--- 5\n--- null\n"),
    ("leading-comment", "# header\n\n---\nkind: Pod\n"),
    ("anchors-and-aliases", "base: &b {x: 1}\ncopy: *b\nlist: &l [1, 2]\nagain: *l\ns: &s str\nt: *s\n"),
    ("merge-key", "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n"),
    ("quoted-merge-spelling", "'<<': literal\n"),
    ("explicit-tags", "a: !!str 5\nb: !!int '7'\nc: !!float 1\nd: !!binary aGVsbG8=\n"),
    ("tagged-collections", "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}]\n"),
    ("duplicate-keys", "a: 1\nb: 2\na: 3\n"),
    ("block-scalars", "lit: |\n  line1\n  ---\n  line3\nfold: >-\n  a\n  b\n"),
    ("non-specific-tag", "a: ! 0\nb: ! text\nc: ! [1]\n"),
    ("non-string-keys", "1: one\ntrue: yes\nnull: none\n1.5: x\n"),
    ("flow-everything", "{a: [1, {b: c}], d: 'e'}\n"),
    ("json", '{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "x", "args": ["-tp", 4]}]}}\n'),
    ("unicode", "name: caf\u00e9\nemoji: \"\\U0001F600\"\n"),
    ("document-end-markers", "a: 1\n...\n---\nb: 2\n...\n"),
    ("directives", "%YAML 1.1\n---\na: 1\n"),
    ("empty", ""),
]


@pytest.mark.parametrize("text", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_same_documents_as_pyyaml(text: str) -> None:
    assert yaml_fast.load_all(text) == reference(text)


def test_aliases_share_objects_like_pyyaml() -> None:
    docs = yaml_fast.load_all("a: &x {k: [1]}\nb: *x\n")
    assert docs[0]["a"] is docs[0]["b"]


def test_types_are_pyyaml_types() -> None:
    doc = yaml_fast.load_all("d: 2026-11-29\nb: !!binary aGVsbG8=\ni: 0x10\n")[0]
    assert doc == {"d": datetime.date(2026, 11, 29), "b": b"hello", "i": 16}


ERRORS = [
    ("custom-tag", "a: !mytag 1\n"),
    ("undefined-alias", "a: *nope\n"),
    ("alias-across-documents", "a: &x 1\n---\nb: *x\n"),
    ("unhashable-key", "? {a: 1}\n: v\n"),
    ("sequence-key", "? [a, b]\n: tuple-key\n"),
    ("root-block-scalar-at-column-0", "--- |\nfoo\n---\nbar\n"),
    ("bad-indent", "a:\n  b: 1\n c: 2\n"),
    ("unclosed-quote", "a: 'x\n"),
    ("tab-indent", "a:\n\tb: 1\n"),
    ("stray-marker-in-flow", "[a,\n---\n]\n"),
]


@pytest.mark.parametrize("text", [e[1] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_same_error_as_pyyaml(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as expected:
        reference(text)
    with pytest.raises(yaml.YAMLError) as got:
        yaml_fast.load_all(text)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "manifests").rglob("*.yaml")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_manifests(path: Path) -> None:
    text = path.read_text()
    assert yaml_fast.load_all(text) == reference(text)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20),
                     st.sampled_from(["yes", "no", "on", "off", "~", "null", "1:20", "0x1f", "1e3", ".inf", "<<",
                                      "2026-01-01", "---", "...", "- a", "a: b", "#c", "'q'", "&a", "*a", "!t"]))
_data = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=4), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.lists(_data, min_size=1, max_size=4), st.sampled_from([None, True, False]), st.booleans())
def test_generated_streams(docs: list[Any], flow: bool | None, explicit: bool) -> None:
    text = yaml.dump_all(docs, default_flow_style=flow, explicit_start=explicit, allow_unicode=True)
    assert yaml_fast.load_all(text) == reference(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab: -[]{},'\"\n&*!|>#?%.0123~", max_size=60))
def test_arbitrary_text_same_outcome(text: str) -> None:
    try:
        expected: Any = reference(text)
    except yaml.YAMLError as exc:
        expected = ("error", str(exc))
    try:
        got: Any = yaml_fast.load_all(text)
    except yaml.YAMLError as exc:
        got = ("error", str(exc))
    assert got == expected
