"""Node selection matching with the kube-scheduler's semantics (component-helpers nodeaffinity.go and
apimachinery labels/selector.go): every operator, ORed terms, matchFields, and malformed input, which
never raises and never admits a node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from tests.properties import examples

from webhook.core import node_match
from webhook.core.node_match import NodeSelection, Requirement, parse, parse_int, valid_label_key, valid_label_value

LABELS = {"kubernetes.io/hostname": "n1", "gpu": "a10g", "count": "8", "zone": "z1", "empty": "", "padded": "08"}
NAME = "n1"


def expr(key: str, op: str, *values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def terms(*items: Any) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(items)}}}}


def one(*exprs: dict[str, Any]) -> dict[str, Any]:
    """A spec with one term holding these matchExpressions."""
    return terms({"matchExpressions": list(exprs)})


def fields(*exprs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return terms({"matchFields": list(exprs), **extra})


CASES = [
    # no selection, nodeSelector
    pytest.param({}, True, id="no-selection"),
    pytest.param({"nodeSelector": {"gpu": "a10g"}}, True, id="node-selector-equal"),
    pytest.param({"nodeSelector": {"gpu": "l4"}}, False, id="node-selector-differs"),
    pytest.param({"nodeSelector": {"pool": "a"}}, False, id="node-selector-key-missing"),
    pytest.param({"nodeSelector": {"gpu": "a10g", "zone": "z2"}}, False, id="node-selector-every-key"),
    pytest.param({"nodeSelector": {}}, True, id="node-selector-empty-map"),
    pytest.param({"nodeSelector": {"empty": ""}}, True, id="node-selector-empty-value-present"),
    pytest.param({"nodeSelector": {"absent": ""}}, False, id="node-selector-empty-value-absent"),
    pytest.param({"nodeSelector": None}, True, id="node-selector-null"),
    # In / NotIn
    pytest.param(one(expr("gpu", "In", "l4", "a10g")), True, id="in-listed"),
    pytest.param(one(expr("gpu", "In", "l4")), False, id="in-not-listed"),
    pytest.param(one(expr("pool", "In", "a")), False, id="in-key-absent"),
    pytest.param(one(expr("gpu", "NotIn", "l4")), True, id="notin-not-listed"),
    pytest.param(one(expr("gpu", "NotIn", "a10g")), False, id="notin-listed"),
    pytest.param(one(expr("pool", "NotIn", "a")), True, id="notin-key-absent"),
    pytest.param(one(expr("gpu", "In")), False, id="in-without-values-refused"),
    pytest.param(one(expr("gpu", "NotIn")), False, id="notin-without-values-refused"),
    # Exists / DoesNotExist
    pytest.param(one(expr("gpu", "Exists")), True, id="exists-present"),
    pytest.param(one(expr("empty", "Exists")), True, id="exists-empty-value"),
    pytest.param(one(expr("pool", "Exists")), False, id="exists-absent"),
    pytest.param(one(expr("pool", "DoesNotExist")), True, id="doesnotexist-absent"),
    pytest.param(one(expr("gpu", "DoesNotExist")), False, id="doesnotexist-present"),
    pytest.param(one(expr("gpu", "Exists", "a10g")), False, id="exists-with-values-refused"),
    pytest.param(one(expr("pool", "DoesNotExist", "a")), False, id="doesnotexist-with-values-refused"),
    # Gt / Lt
    pytest.param(one(expr("count", "Gt", "4")), True, id="gt-greater"),
    pytest.param(one(expr("count", "Gt", "8")), False, id="gt-equal-is-not-greater"),
    pytest.param(one(expr("count", "Lt", "16")), True, id="lt-less"),
    pytest.param(one(expr("count", "Lt", "8")), False, id="lt-equal-is-not-less"),
    pytest.param(one(expr("count", "Gt", "04")), True, id="gt-leading-zero-is-base-10"),
    pytest.param(one(expr("padded", "Gt", "7")), True, id="gt-node-value-leading-zero"),
    pytest.param(one(expr("pool", "Gt", "1")), False, id="gt-key-absent"),
    pytest.param(one(expr("zone", "Gt", "1")), False, id="gt-node-value-not-integer"),
    pytest.param(one(expr("count", "Gt", "four")), False, id="gt-value-not-integer-refused"),
    pytest.param(one(expr("count", "Gt", "4.0")), False, id="gt-value-decimal-refused"),
    pytest.param(one(expr("count", "Gt", "1", "2")), False, id="gt-two-values-refused"),
    pytest.param(one(expr("count", "Gt")), False, id="gt-no-value-refused"),
    pytest.param(one(expr("count", "Gt", "-1")), False, id="gt-negative-is-not-a-label-value"),
    pytest.param(one(expr("count", "Lt", "99999999999999999999")), False, id="lt-beyond-int64-refused"),
    # operators and keys the scheduler refuses
    pytest.param(one(expr("gpu", "Equals", "a10g")), False, id="unknown-operator-refused"),
    pytest.param(one(expr("gpu", "in", "a10g")), False, id="operator-is-case-sensitive"),
    pytest.param(one(expr("bad key", "Exists")), False, id="invalid-key-refused"),
    pytest.param(one(expr("gpu", "In", "a b")), False, id="invalid-value-refused"),
    pytest.param(one(expr("gpu", "In", "a10g", "x" * 64)), False, id="value-over-63-refused"),
    # ANDed expressions, ORed terms, empty terms
    pytest.param(one(expr("gpu", "In", "a10g"), expr("zone", "In", "z1")), True, id="and-both-hold"),
    pytest.param(one(expr("gpu", "In", "a10g"), expr("zone", "In", "z2")), False, id="and-one-fails"),
    pytest.param(terms({"matchExpressions": [expr("gpu", "In", "l4")]},
                       {"matchExpressions": [expr("zone", "In", "z1")]}), True, id="or-second-term"),
    pytest.param(terms({"matchExpressions": [expr("gpu", "In", "l4")]},
                       {"matchExpressions": [expr("zone", "In", "z2")]}), False, id="or-no-term"),
    pytest.param(terms({"matchExpressions": [expr("gpu", "Bogus")]},
                       {"matchExpressions": [expr("gpu", "In", "a10g")]}), True, id="refused-term-spares-others"),
    pytest.param(terms({}), False, id="empty-term-matches-nothing"),
    pytest.param(terms({"matchExpressions": [], "matchFields": []}), False, id="term-with-empty-lists"),
    pytest.param(terms({}, {"matchExpressions": [expr("gpu", "Exists")]}), True, id="empty-term-then-match"),
    pytest.param(terms(), False, id="no-terms-matches-nothing"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}, False,
                 id="required-without-terms"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": None}}}}, False, id="required-terms-null"),
    pytest.param({"affinity": None}, True, id="affinity-null"),
    pytest.param({"affinity": {"nodeAffinity": {}}}, True, id="no-required-affinity"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}}, True,
                 id="required-null"),
    pytest.param({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [expr("gpu", "In", "l4")]}}]}}}, True,
                 id="preferred-is-not-required"),
    # nodeSelector AND affinity
    pytest.param({"nodeSelector": {"zone": "z2"}, **one(expr("gpu", "In", "a10g"))}, False,
                 id="selector-fails-affinity-holds"),
    pytest.param({"nodeSelector": {"zone": "z1"}, **one(expr("gpu", "In", "l4"))}, False,
                 id="selector-holds-affinity-fails"),
    pytest.param({"nodeSelector": {"zone": "z1"}, **one(expr("gpu", "In", "a10g"))}, True, id="selector-and-affinity"),
    # matchFields
    pytest.param(fields(expr("metadata.name", "In", "n1")), True, id="fields-name-in"),
    pytest.param(fields(expr("metadata.name", "In", "n2")), False, id="fields-name-not-in"),
    pytest.param(fields(expr("metadata.name", "NotIn", "n1")), False, id="fields-name-notin-self"),
    pytest.param(fields(expr("metadata.name", "NotIn", "n2")), True, id="fields-name-notin-other"),
    pytest.param(fields(expr("metadata.name", "In", "n1", "n2")), False, id="fields-two-values-refused"),
    pytest.param(fields(expr("metadata.name", "Exists")), False, id="fields-exists-refused"),
    pytest.param(fields(expr("metadata.uid", "In", "x")), False, id="fields-unknown-field-is-empty"),
    pytest.param(fields(expr("metadata.uid", "NotIn", "x")), True, id="fields-unknown-field-notin"),
    pytest.param(fields(expr("metadata.name", "In", "n1"), matchExpressions=[expr("gpu", "In", "l4")]), False,
                 id="fields-and-expressions-both-hold"),
    pytest.param(fields(expr("metadata.name", "In", "n1"), matchExpressions=[expr("gpu", "In", "a10g")]), True,
                 id="fields-and-expressions"),
    # malformed shapes: never raise, admit nothing in the part they are in
    pytest.param("spec", False, id="spec-not-a-mapping"),
    pytest.param({"nodeSelector": ["gpu=a10g"]}, False, id="node-selector-list"),
    pytest.param({"nodeSelector": {"gpu": True}}, False, id="node-selector-bool-value"),
    pytest.param({"nodeSelector": {1: "a10g"}}, False, id="node-selector-int-key"),
    pytest.param({"affinity": "gpu"}, False, id="affinity-string"),
    pytest.param({"affinity": {"nodeAffinity": []}}, False, id="node-affinity-list"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"matchExpressions": [expr("gpu", "Exists")]}]}}}, False, id="required-a-list"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": {"matchExpressions": []}}}}}, False, id="terms-a-mapping"),
    pytest.param(terms("junk"), False, id="term-a-string"),
    pytest.param(terms("junk", {"matchExpressions": [expr("gpu", "Exists")]}), True, id="junk-term-spares-others"),
    pytest.param(terms({"matchExpressions": {"key": "gpu", "operator": "Exists"}}), False, id="expressions-a-mapping"),
    pytest.param(one(expr("gpu", "In", "a10g") | {"values": "a10g"}), False, id="values-a-string"),
    pytest.param(one(expr("gpu", "In", 1)), False, id="values-not-strings"),
    pytest.param(one({"key": None, "operator": "Exists"}), False, id="key-missing"),
    pytest.param(one("gpu"), False, id="expression-a-string"),
    pytest.param(fields({"key": "metadata.name", "operator": "In", "values": [1]}), False, id="field-value-not-string"),
]


@pytest.mark.parametrize(("spec", "admitted"), CASES)
def test_admits(spec: Any, admitted: bool) -> None:
    assert node_match.admits(spec, LABELS, NAME) is admitted


@pytest.mark.parametrize(("spec", "admitted"), [
    pytest.param(fields(expr("metadata.name", "In", "n2")), True, id="nameless-node-ignores-fields"),
    pytest.param(fields(expr("metadata.name", "In", "n2"), matchExpressions=[expr("gpu", "In", "l4")]), False,
                 id="nameless-node-still-checks-labels"),
])
def test_node_without_a_name_ignores_match_fields(spec: Any, admitted: bool) -> None:
    """``len(nodeFields) > 0`` in nodeSelectorTerm.match: a nameless node has no fields to check."""
    assert node_match.admits(spec, LABELS, "") is admitted


def test_parse_once_match_many() -> None:
    selection = parse({"nodeSelector": {"pool": "gpu"}, **one(expr("gpu", "In", "a10g", "l4"))})
    nodes = {"a": {"pool": "gpu", "gpu": "a10g"}, "b": {"pool": "gpu", "gpu": "h100"}, "c": {"gpu": "l4"},
             "d": {"pool": "gpu", "gpu": "l4"}}
    assert [n for n, labels in nodes.items() if selection.admits(labels, n)] == ["a", "d"]
    assert selection.requirements() == (Requirement("pool", "In", ("gpu",)), Requirement("gpu", "In", ("a10g", "l4")))


def test_requirements_in_spec_order_and_refused_terms_left_out() -> None:
    selection = parse(terms({"matchExpressions": [expr("gpu", "Bogus")]},
                            {"matchExpressions": [expr("zone", "NotIn", "z9")],
                             "matchFields": [expr("metadata.name", "In", "n1")]}))
    assert selection.requirements() == (Requirement("zone", "NotIn", ("z9",)),
                                        Requirement("metadata.name", "In", ("n1",), field=True))
    assert parse("junk") == node_match.NOTHING and not node_match.NOTHING.admits({}, "n")
    assert parse({}) == NodeSelection() and NodeSelection().admits({}, "")


@pytest.mark.parametrize(("key", "valid"), [
    pytest.param("gpu", True, id="name"), pytest.param("nvidia.com/gpu.product", True, id="prefixed"),
    pytest.param("NodeGroupType", True, id="upper-case-name"), pytest.param("a/b/c", False, id="two-slashes"),
    pytest.param("/gpu", False, id="empty-prefix"), pytest.param("Nvidia.com/gpu", False, id="upper-case-prefix"),
    pytest.param("gpu-", False, id="ends-with-dash"), pytest.param("x" * 64, False, id="name-over-63"),
    pytest.param("", False, id="empty"), pytest.param(7, False, id="not-a-string"),
])
def test_label_keys(key: Any, valid: bool) -> None:
    assert valid_label_key(key) is valid


@pytest.mark.parametrize(("value", "valid"), [
    pytest.param("", True, id="empty"), pytest.param("ml.g5.8xlarge", True, id="instance-type"),
    pytest.param("BM.GPU.H100.8", True, id="oci-shape"), pytest.param("-1", False, id="leading-dash"),
    pytest.param("a b", False, id="space"), pytest.param("x" * 63, True, id="63"),
    pytest.param("x" * 64, False, id="64"),
])
def test_label_values(value: str, valid: bool) -> None:
    assert valid_label_value(value) is valid


@pytest.mark.parametrize(("text", "number"), [
    pytest.param("8", 8, id="digits"), pytest.param("+8", 8, id="plus"), pytest.param("-8", -8, id="minus"),
    pytest.param("08", 8, id="leading-zero"), pytest.param(" 8", None, id="space"),
    pytest.param("8_0", None, id="underscore"), pytest.param("\u0663", None, id="non-ascii-digit"),
    pytest.param("9223372036854775807", 2 ** 63 - 1, id="int64-max"),
    pytest.param("9223372036854775808", None, id="int64-overflow"), pytest.param("", None, id="empty"),
])
def test_parse_int_is_go_parse_int(text: str, number: int | None) -> None:
    assert parse_int(text) == number


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12)
KEYS = st.sampled_from(["nodeSelector", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                        "nodeSelectorTerms", "matchExpressions", "matchFields", "key", "operator", "values"])
SHAPED = st.recursive(JSON, lambda inner: st.dictionaries(KEYS, inner, max_size=4) | st.lists(inner, max_size=3),
                      max_leaves=20)


@hsettings(max_examples=examples(300), deadline=None)
@given(SHAPED)
def test_malformed_input_never_raises(spec: Any) -> None:
    assert node_match.admits(spec, LABELS, NAME) in (True, False)
