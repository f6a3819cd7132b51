"""Kinds the webhook was not built for still get an answer about their GPUs (issue 14, part 2): a
kind a user registers on their own is read by shape, and an object that asks for GPUs where no pod
template can be read is admitted with a not-judged warning, never silently."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from tests.server.test_app import KEY, client, post, review  # noqa: F401  (client is a fixture)

WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "serve", "namespace": "ai"},
    "spec": {"entrypoint": "serve", "templates": [{
        "name": "serve", "nodeSelector": {KEY: "NVIDIA-L4"},
        "container": {"image": "vllm/vllm-openai:v0.10.1",
                      "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
                      "resources": {"limits": {"nvidia.com/gpu": 4}}}}]}}
MYSTERY = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "namespace": "ai"},
           "spec": {"workers": 4, "resources": {"limits": {"nvidia.com/gpu": 8}}}}


def test_a_registered_argo_workflow_is_judged_by_shape(client: FlaskClient) -> None:  # noqa: F811
    status, body = post(client, "/validate", review(WORKFLOW, group="argoproj.io", version="v1alpha1"))
    response = body["response"]
    assert status == 200 and response["allowed"] is False
    assert "model-does-not-fit" in response["status"]["message"]
    assert "/spec/templates/0/nodeSelector" in response["status"]["message"]


def test_an_object_whose_gpus_cannot_be_read_is_admitted_with_a_warning(client: FlaskClient) -> None:  # noqa: F811
    status, body = post(client, "/validate", review(MYSTERY, group="example.com"))
    response = body["response"]
    assert status == 200 and response["allowed"] is True
    assert any(w.startswith("not-judged:") and "/spec/resources/limits/nvidia.com~1gpu" in w
               for w in response["warnings"])


def test_a_cpu_object_of_an_unknown_kind_is_allowed_plainly(client: FlaskClient) -> None:  # noqa: F811
    obj: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"},
                           "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    _, body = post(client, "/validate", review(obj, group="example.com"))
    assert body["response"] == {"uid": "uid-123", "allowed": True}
