"""Pod specs of unknown kinds found by shape, and GPU requests found anywhere (webhook/core/unknown_kinds.py):
one row per shape seen in real CRDs, then hostile documents (deep, wide, cyclic-looking, wrong types)
that must cost a bounded time and never raise."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import settings as settings_mod, unknown_kinds
from tests.judging import judge
from webhook.core.workloads import pod_templates

S = settings_mod.default()
GPU = {"limits": {"nvidia.com/gpu": 2}}
C = {"name": "c", "image": "vllm/vllm-openai:v0.10.1", "resources": GPU,
     "command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]}


def obj(spec: Any, kind: str = "Thing") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "x", "namespace": "ai"}, "spec": spec}


SHAPES = [
    # spec, [(template name, spec pointer, patchable)]
    pytest.param({"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [C]}}},
                 [("spec/template", "/spec/template/spec", True)], id="pod-template"),
    pytest.param({"podSpec": {"containers": [C]}}, [("spec/podSpec", "/spec/podSpec", True)], id="inline-podspec"),
    pytest.param({"roles": [{"name": "a", "template": {"metadata": {}, "spec": {"containers": [C]}}},
                            {"name": "b", "template": {"metadata": {}, "spec": {"containers": [C]}}}]},
                 [("spec/roles/0/template", "/spec/roles/0/template/spec", True),
                  ("spec/roles/1/template", "/spec/roles/1/template/spec", True)], id="list-of-templates"),
    pytest.param({"templates": [{"name": "step", "container": C}]}, [("step", "/spec/templates/0", False)],
                 id="argo-single-container"),
    pytest.param({"containers": [{"name": "no-image"}]}, [], id="containers-without-image"),
    pytest.param({"containers": "nope"}, [], id="containers-not-a-list"),
    pytest.param({"note": "containers: [{image: x}]"}, [], id="yaml-in-a-string-is-not-read"),
]


@pytest.mark.parametrize(("spec", "expected"), SHAPES)
def test_shapes(spec: Any, expected: list[tuple[str, str, bool]]) -> None:
    found = pod_templates(obj(spec))
    assert [(t.role, t.spec_pointer, t.patchable) for t in found] == expected
    assert all(t.found == "generic" for t in found)


def test_a_generic_template_is_judged_like_a_pod() -> None:
    (r,) = judge(obj({"template": {"metadata": {}, "spec": {"containers": [C]}}}), S)
    assert r.profile.gpus_per_pod == 2 and r.profile.tensor_parallel == 2 and r.decision.placement is not None


def test_known_kinds_are_not_read_generically() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [C]}}
    assert [t.found for t in pod_templates(pod)] == ["kind"]
    assert pod_templates({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "p"},
                          "template": {"spec": {"containers": [C]}}}) == ()


@pytest.mark.parametrize(("document", "where"), [
    pytest.param(obj({"resources": GPU}), ("/spec/resources/limits/nvidia.com~1gpu",), id="resources"),
    pytest.param(obj({"resourcesPerNode": {"limits": {"amd.com/gpu": "1"}}}), ("/spec/resourcesPerNode/limits/amd.com~1gpu",),
                 id="amd"),
    pytest.param(obj({"services": {"w": {"resources": {"limits": {"gpu": "4"}}}}}),
                 ("/spec/services/w/resources/limits/gpu",), id="dynamo-style-gpu"),
    pytest.param({"kind": "X", "metadata": {"annotations": {"hami.io/gpu-number": "2"}}},
                 ("/metadata/annotations/hami.io~1gpu-number",), id="gpu-sharing-annotation"),
    pytest.param(obj({"resources": {"limits": {"nvidia.com/gpu": 0}}}), (), id="zero-gpus"),
    pytest.param(obj({"resources": {"limits": {"cpu": 4}}}), (), id="cpu-only"),
    pytest.param({"kind": "X", "metadata": {"annotations": {"gpu-admission.io/tier": "x"}}}, (), id="our-own-annotation"),
])
def test_gpu_requests(document: Any, where: tuple[str, ...]) -> None:
    assert unknown_kinds.gpu_requests(document) == where


def nested(depth: int) -> Any:
    value: Any = {"containers": [C]}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize("document", [
    pytest.param(obj(nested(5000)), id="5000-deep"),
    pytest.param(obj({f"k{i}": {"containers": [C]} for i in range(5000)}), id="5000-podspecs"),
    pytest.param(obj([[[[[]]]]] * 20000), id="wide-lists"),
    pytest.param(obj({"a": [1, "s", None, 2.5, True] * 20000}), id="scalars"),
    pytest.param(obj({"containers": [{"image": 3}, None, "x", [C]]}), id="wrong-types"),
])
def test_hostile_documents_are_bounded_and_never_raise(document: Any) -> None:
    found = pod_templates(document)
    unknown_kinds.gpu_requests(document)
    judge(document, S)
    assert len(found) <= unknown_kinds.MAX_FOUND


def test_the_walk_visits_a_bounded_number_of_values() -> None:
    """The bound that keeps a hostile document cheap, asserted as a count (times belong in bench/)."""
    visited = sum(1 for _ in unknown_kinds._walk(obj([[[[[]]]]] * 20000)))
    assert visited == unknown_kinds.MAX_NODES
    assert max(len(path) for path, _ in unknown_kinds._walk(obj(nested(5000)))) <= unknown_kinds.MAX_DEPTH


@pytest.mark.parametrize("kind", [[], ["J", "o", "b"], {"value": "Workspace"}, 3, None],
                         ids=["empty-list", "list", "mapping", "int", "none"])
def test_a_kind_that_is_not_a_string_never_raises(kind: Any) -> None:
    """Found by the mutation fuzzer: an unhashable kind reached a frozenset lookup (a 500)."""
    document = obj({"resources": GPU}, kind="x")
    document["kind"] = kind
    judge(document, S)
    from webhook.core.engine import runtime_context
    assert runtime_context([document]) == {}
