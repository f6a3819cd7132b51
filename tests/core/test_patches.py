"""The placement patch: table cases for each shape of node selection, and properties over random
pods: the patch applies, is idempotent, only narrows node selection, pins the placement, and yields
a Pod that is valid against the Kubernetes OpenAPI schema."""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping

import jsonpatch
import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.properties import examples

from webhook.core.domain import GroupAffinity, Placement
from webhook.core import patches
from webhook.core.patches import build, has_group_term, narrowed, with_group_term
from webhook.core.selection import pinned_values
from webhook.core.workloads import escape, join

KEY = "nvidia.com/gpu.product"
A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
L40S = "NVIDIA-L40S"
L4 = "NVIDIA-L4"
PLACEMENT = Placement(KEY, (A100, H100))
REQ = {"key": KEY, "operator": "In", "values": [A100, H100]}
K8S_VERSION = kubernetes_validate.latest_version()


def pod(spec_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "vllm/vllm-openai:v0.10.1"}]}
    spec.update(copy.deepcopy(dict(spec_extra or {})))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def required(*terms: Any) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


def matches_expr(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values", [])
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels or not labels[key].isdigit():
            return False
        return int(labels[key]) > int(values[0]) if op == "Gt" else int(labels[key]) < int(values[0])
    raise AssertionError(op)


def schedulable(spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Kubernetes node selection semantics, written independently of webhook.core.selection."""
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(all(matches_expr(e, labels) for e in t.get("matchExpressions", [])) for t in terms)


CASES = [
    pytest.param({}, [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [REQ]}]}}}}],
        id="no-affinity"),
    pytest.param({"affinity": {"podAntiAffinity": {}}}, [{"op": "add", "path": "/spec/affinity/nodeAffinity",
        "value": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [REQ]}]}}}], id="affinity-without-node-affinity"),
    pytest.param({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": KEY, "operator": "In", "values": [L40S]}]}}]}}},
        [{"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
          "value": {"nodeSelectorTerms": [{"matchExpressions": [REQ]}]}}], id="preferred-only-is-not-pinning"),
    pytest.param(required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                          {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}),
                 [{"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
                   "/nodeSelectorTerms/0/matchExpressions/1", "value": REQ},
                  {"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
                   "/nodeSelectorTerms/1/matchExpressions/1", "value": REQ}], id="and-into-every-term"),
    pytest.param(required({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}),
                 [{"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
                   "/nodeSelectorTerms/0/matchExpressions", "value": [REQ]}], id="term-with-only-matchFields"),
    pytest.param(required({"matchExpressions": [{"key": KEY, "operator": "In", "values": [A100]}]}), [],
                 id="already-pinned-subset"),
    pytest.param(required({"matchExpressions": [{"key": KEY, "operator": "In", "values": [A100, L40S]}]}),
                 [{"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
                   "/nodeSelectorTerms/0/matchExpressions/1", "value": REQ}], id="narrow-user-selector"),
    pytest.param({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": []}}}},
        [{"op": "add", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
          "/nodeSelectorTerms/0", "value": {"matchExpressions": [REQ]}}], id="empty-terms-list"),
    pytest.param({"affinity": None}, [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [REQ]}]}}}}],
        id="null-affinity"),
    pytest.param(required("not-a-term", {"matchExpressions": [REQ]}),
                 [{"op": "replace", "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"
                   "/nodeSelectorTerms/0", "value": {"matchExpressions": [REQ]}}], id="a-term-that-is-not-an-object"),
]


@pytest.mark.parametrize(("extra", "expected"), CASES)
def test_patch_shapes(extra: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    doc = pod(extra)
    ops = build("", doc["spec"], PLACEMENT)
    assert ops == expected
    patched = jsonpatch.apply_patch(doc, ops)
    assert build("", patched["spec"], PLACEMENT) == []


@pytest.mark.parametrize(("extra", "expected"), CASES)
def test_remembered_ops_are_fresh_and_the_callers_own(extra: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    """The diff memo (:data:`patches.DIFFS`) answers what ``jsonpatch.make_patch`` answers, and every
    caller gets ops of its own: changing one answer leaves the next intact."""
    patches.DIFFS.clear()
    first = build("", pod(extra)["spec"], PLACEMENT)
    remembered = len(patches.DIFFS)
    for op in first:
        op["path"] = "/changed"
        if isinstance(op.get("value"), dict):
            op["value"]["changed"] = True
    again = build("", pod(extra)["spec"], PLACEMENT)
    assert again == expected
    assert len(patches.DIFFS) == remembered  # answered from the memo, nothing new kept


def test_a_pair_too_large_for_the_memo_is_diffed_without_it() -> None:
    terms = [{"matchExpressions": [{"key": f"zone-{i}", "operator": "In", "values": ["x" * 40]}]} for i in range(400)]
    doc = pod(required(*terms))
    patches.DIFFS.clear()
    ops = build("", doc["spec"], PLACEMENT)
    assert len(ops) == 400 and len(patches.DIFFS) == 0
    assert build("", jsonpatch.apply_patch(doc, ops)["spec"], PLACEMENT) == []


def test_pointer_prefix_for_templates() -> None:
    deploy = {"spec": {"template": pod()}}
    ops = build("/spec/template", deploy["spec"]["template"]["spec"], PLACEMENT)
    assert ops[0]["path"] == "/spec/template/spec/affinity"
    assert jsonpatch.apply_patch(deploy, ops)["spec"]["template"]["spec"]["affinity"]


@pytest.mark.parametrize(("token", "escaped"), [
    pytest.param("nvidia.com/gpu", "nvidia.com~1gpu", id="slash"),
    pytest.param("a~b", "a~0b", id="tilde"),
    pytest.param("~/", "~0~1", id="tilde-then-slash-order"),
    pytest.param("plain", "plain", id="plain"),
])
def test_escape(token: str, escaped: str) -> None:
    assert escape(token) == escaped
    assert join("/metadata/annotations", token) == "/metadata/annotations/" + escaped
    doc = {"metadata": {"annotations": {token: "x"}}}
    assert jsonpatch.JsonPointer(join("/metadata/annotations", token)).resolve(doc) == "x"


def test_deterministic_bytes() -> None:
    doc = pod(required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}))
    first = json.dumps(build("", doc["spec"], PLACEMENT))
    assert all(json.dumps(build("", copy.deepcopy(doc)["spec"], PLACEMENT)) == first for _ in range(5))


# ----------------------------------------------------------------------------- properties

PRODUCTS = [A100, H100, L40S, L4, "NVIDIA-H200"]
OTHER_KEYS = ["zone", "pool", "nvidia.com/gpu.count"]

values_st = st.lists(st.sampled_from(PRODUCTS), min_size=1, max_size=3, unique=True)
expr_st = st.one_of(
    st.builds(lambda v: {"key": KEY, "operator": "In", "values": v}, values_st),
    st.builds(lambda v: {"key": KEY, "operator": "NotIn", "values": v}, values_st),
    st.builds(lambda k: {"key": k, "operator": "Exists"}, st.sampled_from([KEY, *OTHER_KEYS])),
    st.builds(lambda k: {"key": k, "operator": "DoesNotExist"}, st.sampled_from(OTHER_KEYS)),
    st.builds(lambda k, v: {"key": k, "operator": "In", "values": v}, st.sampled_from(OTHER_KEYS[:2]),
              st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True)),
)
term_st = st.builds(lambda e: {"matchExpressions": e}, st.lists(expr_st, min_size=1, max_size=3))
affinity_st = st.one_of(
    st.just({}),
    st.just({"affinity": {}}),
    st.just({"affinity": {"nodeAffinity": {}}}),
    st.builds(lambda ts: required(*ts), st.lists(term_st, min_size=1, max_size=3)),
)
selector_st = st.one_of(st.just({}), st.builds(lambda v: {"nodeSelector": {KEY: v}}, st.sampled_from(PRODUCTS)),
                        st.just({"nodeSelector": {"zone": "a"}}))
spec_extra_st = st.builds(lambda a, s: {**a, **s}, affinity_st, selector_st)
placement_st = st.builds(lambda v: Placement(KEY, tuple(v)), values_st)
node_st = st.fixed_dictionaries({}, optional={
    KEY: st.sampled_from(PRODUCTS), "zone": st.sampled_from(["a", "b"]), "pool": st.just("x"),
    "nvidia.com/gpu.count": st.sampled_from(["4", "8"])})


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=spec_extra_st, placement=placement_st, nodes=st.lists(node_st, min_size=1, max_size=12))
def test_patch_properties(extra: dict[str, Any], placement: Placement, nodes: list[dict[str, str]]) -> None:
    doc = pod(extra)
    ops = build("", doc["spec"], placement)
    patched = jsonpatch.apply_patch(doc, ops)               # applies
    assert build("", patched["spec"], placement) == []      # idempotent
    assert doc == pod(extra)                                 # input untouched
    for labels in nodes:
        if schedulable(patched["spec"], labels):
            assert schedulable(doc["spec"], labels)          # only narrows
            assert labels.get(KEY) in placement.values       # lands only on the placement
    pinned = pinned_values(patched["spec"], KEY)
    assert pinned.values is not None and pinned.values <= set(placement.values)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=spec_extra_st, placement=placement_st)
def test_patched_pod_is_schema_valid(extra: dict[str, Any], placement: Placement) -> None:
    patched = jsonpatch.apply_patch(pod(extra), build("", pod(extra)["spec"], placement))
    kubernetes_validate.validate(patched, K8S_VERSION, strict=True)


group_st = st.builds(lambda v: GroupAffinity("gpu-admission.io/group", v, KEY), st.sampled_from(["g1", "g2"]))
pod_affinity_st = st.one_of(st.just({}), st.just({"podAffinity": {}}), st.just({"podAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"gpu-admission.io/group": "g1"}}, "topologyKey": KEY}]}}))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=spec_extra_st, placement=st.one_of(st.none(), placement_st), group=group_st, pod_aff=pod_affinity_st)
def test_group_patch_properties(extra: dict[str, Any], placement: Placement | None, group: GroupAffinity,
                                pod_aff: dict[str, Any]) -> None:
    if pod_aff:
        extra = copy.deepcopy(extra)
        affinity = extra.get("affinity") or {}
        extra["affinity"] = {**affinity, **pod_aff}
    doc = pod(extra)
    ops = build("", doc["spec"], placement, group, metadata=doc["metadata"])
    patched = jsonpatch.apply_patch(doc, ops)
    assert build("", patched["spec"], placement, group, metadata=patched["metadata"]) == []
    assert has_group_term(patched["spec"], group)
    assert patched["metadata"]["labels"][group.label_key] == group.label_value
    kubernetes_validate.validate(patched, K8S_VERSION, strict=True)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=spec_extra_st, placement=placement_st, group=st.one_of(st.none(), group_st))
def test_the_patch_applied_is_the_wanted_copy(extra: dict[str, Any], placement: Placement,
                                              group: GroupAffinity | None) -> None:
    """The patch is the diff of the pod and the copy built to be wanted: applied, it gives that copy
    (and the pod it was built from is untouched)."""
    doc = pod(extra)
    wanted = narrowed(doc["spec"].get("affinity"), placement)
    if group is not None:
        wanted = with_group_term(wanted, group)
    patched = jsonpatch.apply_patch(doc, build("", doc["spec"], placement, group, metadata=doc["metadata"]))
    assert patched["spec"].get("affinity") == wanted
    assert doc == pod(extra)


def test_a_deeply_nested_affinity_costs_only_the_change() -> None:
    """Hostile nesting beside the change (900 levels, near the recursion limit) is shared by the
    wanted copy and set aside before the diff: no RecursionError, the ops name only the change."""
    deep: Any = "x"
    for _ in range(900):
        deep = {"n": deep}
    doc = pod()
    doc["spec"]["affinity"] = {"podAntiAffinity": deep}  # not through pod(): its deepcopy would recurse
    ops = build("", doc["spec"], PLACEMENT)
    assert [op["path"] for op in ops] == ["/spec/affinity/nodeAffinity"]
