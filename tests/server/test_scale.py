"""Scale-ups through the ``scale`` subresource (issue 26, point 2): ``kubectl scale`` and HPAs send
an ``autoscaling/v1`` Scale, no pod template. Always admitted; a scale-up of a workload whose new
pods will be denied says so; one the server could not check says that instead, never nothing.
The object is read by ``webhook.server.parents.ParentReader``; here a stand-in for the client's
CustomObjectsApi records what it is asked (the real GET against kube-apiserver, through the real
client: tests/e2e/test_controllers.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from webhook.core import settings as settings_mod
from webhook.server import admission, review
from webhook.server.parents import ParentReader

KEY = "nvidia.com/gpu.product"


def deployment(product: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.8.5",
        "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
        "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    if product:
        spec["nodeSelector"] = {KEY: product}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}},
                     "template": {"metadata": {"labels": {"app": "llm"}}, "spec": spec}}}


def scale_review(old: int | None, new: int | None) -> review.Request:
    def scale(n: int | None) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "llm", "namespace": "ml"},
                "spec": {} if n is None else {"replicas": n}}

    doc = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "subResource": "scale",
        "operation": "UPDATE", "name": "llm", "namespace": "ml", "object": scale(new), "oldObject": scale(old)}}
    return review.parse(json.dumps(doc).encode(), "application/json")


class Calls:
    def __init__(self, obj: Any = None, error: Exception | None = None) -> None:
        self.obj, self.error, self.calls = obj, error, 0

    def __call__(self, req: review.Request) -> Any:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return copy.deepcopy(self.obj)


@pytest.mark.parametrize(("old", "new", "stored", "mode", "warned", "reads"), [
    pytest.param(1, 3, "NVIDIA-L4", "enforce", "scale-up: the new pods will be denied, pre-existing model-does-not-fit",
                 1, id="scale-up-of-a-bad-deployment-warns"),
    pytest.param(1, 3, None, "enforce", None, 1, id="scale-up-of-a-good-deployment-is-silent"),
    pytest.param(3, 1, "NVIDIA-L4", "enforce", None, 0, id="scale-down-answered-at-once"),
    pytest.param(2, 2, "NVIDIA-L4", "enforce", None, 0, id="no-change"),
    pytest.param(None, 2, "NVIDIA-L4", "enforce", "scale-up: the new pods will be denied", 1, id="from-zero"),
    pytest.param(1, 3, "NVIDIA-L4", "audit", None, 1, id="audit-admits-the-pods-so-no-denial-is-promised"),
])
def test_a_scale_is_admitted_and_a_scale_up_says_what_its_pods_meet(
        old: int | None, new: int | None, stored: str | None, mode: str, warned: str | None, reads: int) -> None:
    parent = Calls(deployment(stored))
    out = admission.validate(scale_review(old, new), settings_mod.default(), mode=mode, parent=parent)
    response = out.review["response"]
    assert out.allowed and response["allowed"] is True and "patch" not in response
    warnings = response.get("warnings", [])
    assert parent.calls == reads
    if warned is None:
        assert warnings == []
    else:
        # what the new pods meet, then the violation's own line with its fix
        assert len(warnings) == 2 and warnings[0].startswith(warned), warnings
        assert warnings[1].startswith("model-does-not-fit: pin "), warnings


@pytest.mark.parametrize(("parent", "reason"), [
    pytest.param(Calls(error=LookupError("HTTP 403 Forbidden: the ServiceAccount needs get on deployments")),
                 "HTTP 403 Forbidden: the ServiceAccount needs get on deployments", id="forbidden"),
    pytest.param(None, "this server has no Kubernetes client", id="no-client"),
    pytest.param(Calls(error=TimeoutError("read timed out")), "read timed out", id="timeout"),
])
def test_a_scale_up_that_cannot_be_checked_is_admitted_and_says_so(parent: Any, reason: str) -> None:
    out = admission.validate(scale_review(1, 4), settings_mod.default(), mode="enforce", parent=parent)
    response = out.review["response"]
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert warning.startswith(f"scale-up not checked, deployments ml/llm not read ({reason})"), warning


class FakeApi:
    """Records what ParentReader asks of kubernetes.client.CustomObjectsApi."""

    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.answer, self.error, self.asked = answer, error, []

    def get_namespaced_custom_object(self, *args: Any, **kw: Any) -> Any:
        self.asked.append((args, kw))
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.mark.parametrize(("resource", "args"), [
    pytest.param({"group": "apps", "version": "v1", "resource": "deployments"},
                 ("apps", "v1", "ml", "deployments", "llm"), id="apps"),
    pytest.param({"group": "leaderworkerset.x-k8s.io", "version": "v1", "resource": "leaderworkersets"},
                 ("leaderworkerset.x-k8s.io", "v1", "ml", "leaderworkersets", "llm"), id="a-crd"),
])
def test_the_reader_gets_the_object_the_request_names(resource: dict[str, str], args: tuple[str, ...]) -> None:
    api = FakeApi(answer={"kind": "Deployment"})
    req = review.Request(**{**scale_review(1, 2).__dict__, "resource": resource})
    assert ParentReader(api=api, timeout=1.5)(req) == {"kind": "Deployment"}
    assert api.asked == [(args, {"_request_timeout": 1.5})]


def test_the_core_group_is_not_read() -> None:
    req = review.Request(**{**scale_review(1, 2).__dict__,
                            "resource": {"group": "", "version": "v1", "resource": "replicationcontrollers"}})
    with pytest.raises(LookupError, match="names no object of an API group"):
        ParentReader(api=FakeApi())(req)


def test_the_reader_names_the_missing_permission() -> None:
    from kubernetes.client.exceptions import ApiException

    api = FakeApi(error=ApiException(status=403, reason="Forbidden"))
    with pytest.raises(LookupError, match="HTTP 403 Forbidden: the ServiceAccount needs get on deployments"):
        ParentReader(api=api)(scale_review(1, 2))


def test_a_burst_of_scale_ups_holds_at_most_two_threads_of_a_worker() -> None:
    """While two GETs wait on a slow API server, a third scale-up is answered at once ("busy"), so a
    burst of HPA scale-ups cannot take the admission threads."""
    import threading

    release = threading.Event()
    entered = threading.Semaphore(0)

    class SlowApi(FakeApi):
        def get_namespaced_custom_object(self, *args: Any, **kw: Any) -> Any:
            entered.release()
            release.wait(10)
            return {"kind": "Deployment"}

    reader = ParentReader(api=SlowApi(), concurrent=2)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(reader(scale_review(1, 2)))) for _ in range(2)]
    for t in threads:
        t.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    with pytest.raises(LookupError, match="busy"):
        reader(scale_review(1, 2))
    release.set()
    for t in threads:
        t.join(5)
    assert results == [{"kind": "Deployment"}] * 2
    assert reader(scale_review(1, 2)) == {"kind": "Deployment"}  # the slots are back
