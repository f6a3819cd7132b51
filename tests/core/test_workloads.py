"""Where pod templates are found, GPU counting as Kubernetes does it, and node-selection reading."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.resources import QuantityError, gpu_count, pod_gpus
from webhook.core.selection import pinned_values
from webhook.core.workloads import documents, pod_templates

SPEC = {"containers": [{"name": "c", "image": "x"}]}
TPL = {"metadata": {"annotations": {"a": "b"}}, "spec": SPEC}


@pytest.mark.parametrize(("obj", "pointers", "group"), [
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": SPEC}, [""], 1, id="pod"),
    pytest.param({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": TPL}}, ["/spec/template"], 1,
                 id="deployment"),
    pytest.param({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"template": TPL}}, ["/spec/template"], 1,
                 id="replicaset"),
    pytest.param({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": TPL}}, ["/spec/template"], 1,
                 id="statefulset"),
    pytest.param({"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {"template": TPL}}, ["/spec/template"], 1,
                 id="daemonset"),
    pytest.param({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": TPL}}, ["/spec/template"], 1, id="job"),
    pytest.param({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": TPL}}}},
                 ["/spec/jobTemplate/spec/template"], 1, id="cronjob"),
    pytest.param({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {
        "leaderWorkerTemplate": {"size": 4, "leaderTemplate": TPL, "workerTemplate": TPL}}},
        ["/spec/leaderWorkerTemplate/leaderTemplate", "/spec/leaderWorkerTemplate/workerTemplate"], 4, id="lws"),
    pytest.param({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": {
        "leaderWorkerTemplate": {"size": 2, "workerTemplate": TPL}}},
        ["/spec/leaderWorkerTemplate/workerTemplate"], 2, id="lws-worker-only"),
    pytest.param({"apiVersion": "example.com/v1", "kind": "LeaderWorkerSet", "spec": {}}, [], 1,
                 id="lws-wrong-group"),
    pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "data": {}}, [], 1, id="configmap-passes"),
    pytest.param({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": "garbage"}}, [], 1,
                 id="malformed-template"),
    pytest.param(["not", "an", "object"], [], 1, id="not-a-mapping"),
    pytest.param({"kind": 5}, [], 1, id="kind-not-a-string"),
])
def test_pod_templates(obj: Any, pointers: list[str], group: int) -> None:
    found = pod_templates(obj)
    assert [t.pointer for t in found] == pointers
    assert all(t.group_size == group for t in found)


def test_lws_template_names_and_annotations() -> None:
    obj = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "spec": {"leaderWorkerTemplate": {"size": "3", "leaderTemplate": TPL, "workerTemplate": TPL}}}
    leader, worker = pod_templates(obj)
    assert (leader.role, worker.role) == ("leader", "worker")
    assert leader.annotations == {"a": "b"} and leader.group_size == 3


def test_list_items_get_pointers() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": SPEC}
    doc = {"apiVersion": "v1", "kind": "List", "items": [pod, {"apiVersion": "v1", "kind": "Service"}]}
    items = documents(doc)
    assert [p for p, _ in items] == ["/items/0", "/items/1"]
    assert pod_templates(items[0][1], items[0][0])[0].pointer == "/items/0"
    assert documents(pod) == (("", pod),)


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param(4, 4, id="int"), pytest.param("4", 4, id="string"), pytest.param("1000m", 1, id="milli"),
    pytest.param(" 2 ", 2, id="spaces"), pytest.param("0", 0, id="zero"), pytest.param(2.0, 2, id="float-whole"),
])
def test_gpu_count(value: Any, expected: int) -> None:
    assert gpu_count(value) == expected


@pytest.mark.parametrize("value", [
    pytest.param("abc", id="word"), pytest.param("1.5", id="fraction"), pytest.param(-1, id="negative"),
    pytest.param(None, id="null"), pytest.param(True, id="bool"), pytest.param([4], id="list"),
    pytest.param("500m", id="half-milli"), pytest.param("1e3", id="exponent"), pytest.param(float("nan"), id="nan"),
])
def test_gpu_count_rejects(value: Any) -> None:
    with pytest.raises(QuantityError):
        gpu_count(value)


def c(name: str, gpus: Any = None, *, section: str = "limits", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "x", **extra}
    if gpus is not None:
        out["resources"] = {section: {"nvidia.com/gpu": gpus}}
    return out


@pytest.mark.parametrize(("spec", "gpus"), [
    pytest.param({"containers": [c("a", 4)]}, 4, id="one-container"),
    pytest.param({"containers": [c("a", 2), c("b", "2")]}, 4, id="sum-app-containers"),
    pytest.param({"containers": [c("a", 1)], "initContainers": [c("i", 8)]}, 8, id="init-max"),
    pytest.param({"containers": [c("a", 2)], "initContainers": [c("i", 1)]}, 2, id="app-bigger-than-init"),
    pytest.param({"containers": [c("a", 2)], "initContainers": [c("s", 1, restartPolicy="Always")]}, 3,
                 id="sidecar-adds"),
    pytest.param({"containers": [c("a", 2, section="requests")]}, 2, id="requests-only"),
    pytest.param({"containers": [c("a")]}, 0, id="no-gpus"),
    pytest.param({"containers": "garbage"}, 0, id="garbage-containers"),
])
def test_pod_gpus(spec: dict[str, Any], gpus: int) -> None:
    got = pod_gpus(spec, "/spec", ("nvidia.com/gpu",))
    assert got.gpus == gpus and not got.problems


def test_malformed_quantity_is_a_violation_with_path() -> None:
    got = pod_gpus({"containers": [c("a", "four")]}, "/spec/template/spec", ("nvidia.com/gpu",))
    assert [p.code for p in got.problems] == ["invalid-gpu-request"]
    assert got.problems[0].path == "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu"


KEY = "nvidia.com/gpu.product"


def term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(exprs)}


def aff(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}}


IN_A = {"key": KEY, "operator": "In", "values": ["A"]}
IN_AB = {"key": KEY, "operator": "In", "values": ["A", "B"]}


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({}, None, id="nothing"),
    pytest.param({"nodeSelector": {KEY: "A"}}, {"A"}, id="node-selector"),
    pytest.param(aff(term(IN_AB)), {"A", "B"}, id="affinity-in"),
    pytest.param(aff(term(IN_AB), term(IN_A)), {"A", "B"}, id="terms-union"),
    pytest.param(aff(term(IN_AB), term({"key": "zone", "operator": "In", "values": ["z"]})), None,
                 id="one-unpinned-term-widens"),
    pytest.param(aff(term(IN_AB, IN_A)), {"A"}, id="expressions-intersect"),
    pytest.param(aff(term({"key": KEY, "operator": "NotIn", "values": ["C"]})), None, id="notin-does-not-pin"),
    pytest.param(aff(term({"key": KEY, "operator": "Exists"})), None, id="exists-does-not-pin"),
    pytest.param({"nodeSelector": {KEY: "B"}, **aff(term(IN_A))}, set(), id="selector-and-affinity-disjoint"),
    pytest.param({"nodeSelector": {KEY: "A"}, **aff(term(IN_AB))}, {"A"}, id="selector-and-affinity"),
])
def test_pinned_values(spec: dict[str, Any], expected: set[str] | None) -> None:
    got = pinned_values(spec, KEY).values
    assert (None if got is None else set(got)) == expected
