"""DRA claims through the server's routes (moved from tests/core: core tests import no server)."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
from flask.testing import FlaskClient

from webhook.core import dra, settings as settings_mod
from webhook.server.app import create_app
from tests.core.test_dra import ATTR, claim, exactly, match, template  # the core tests' builders


@pytest.fixture()
def client() -> FlaskClient:
    return create_app(settings_mod.default()).test_client()


def test_mutate_off_in_policy() -> None:
    app = create_app(settings_mod.from_mapping({"mutate": False})).test_client()
    resp = post(app, "/mutate", review(claim(exactly("gpus", 4))))
    assert resp["allowed"] is True and "patch" not in resp


def review(obj: Any, *, operation: str = "CREATE", sub_resource: str | None = None) -> dict[str, Any]:
    kind = obj["kind"]
    req: dict[str, Any] = {
        "uid": "uid-dra", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": kind},
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": kind.lower() + "s"},
        "name": obj["metadata"]["name"], "namespace": "ai", "operation": operation,
        "userInfo": {"username": "alice"}, "object": obj, "oldObject": None, "dryRun": False}
    if sub_resource:
        req["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def post(client: FlaskClient, path: str, body: Any) -> dict[str, Any]:
    resp = client.post(path, json=body)
    assert resp.status_code == 200
    return resp.get_json()["response"]


@pytest.mark.parametrize("obj", [claim(exactly("gpus", 4)), template(exactly("gpus", 4))], ids=["claim", "template"])
def test_mutate_adds_the_constraint(client: FlaskClient, obj: dict[str, Any]) -> None:
    resp = post(client, "/mutate", review(obj))
    assert resp["allowed"] is True and resp["uid"] == "uid-dra" and resp["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(resp["patch"])))
    kubernetes_validate.validate(patched, "1.37", strict=True)
    assert ATTR in resp["warnings"][0]
    # the mutated claim is what /validate then sees: admitted, nothing to say
    after = post(client, "/validate", review(patched))
    assert after["allowed"] is True and "warnings" not in after
    # re-invocation changes nothing
    again = post(client, "/mutate", review(patched))
    assert "patch" not in again and "patchType" not in again


@pytest.mark.parametrize("obj,operation,sub", [
    (claim(exactly("gpu")), "CREATE", None),
    (claim(exactly("gpus", 4), constraints=[match("gpus")]), "CREATE", None),
    (claim(exactly("gpus", 4)), "UPDATE", None),
    (claim(exactly("gpus", 4)), "CREATE", "status"),
    (claim(exactly("gpus", 4), api="resource.k8s.io/v1beta2"), "CREATE", None),
])
def test_mutate_leaves_alone(client: FlaskClient, obj: dict[str, Any], operation: str, sub: str | None) -> None:
    resp = post(client, "/mutate", review(obj, operation=operation, sub_resource=sub))
    assert resp["allowed"] is True and "patch" not in resp and "patchType" not in resp


@pytest.mark.parametrize("obj", [claim(exactly("gpus", 4)), template(exactly("gpus", 2), exactly("more", 2))],
                         ids=["claim", "template"])
def test_validate_denies_in_enforce(client: FlaskClient, obj: dict[str, Any]) -> None:
    resp = post(client, "/validate", review(obj))
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert dra.MISSING_CONSTRAINT in resp["status"]["message"]
    assert "/devices/constraints" in resp["status"]["message"]
    assert resp["auditAnnotations"]["violations"] == dra.MISSING_CONSTRAINT
    assert "patch" not in resp


def test_validate_warns_in_audit(client: FlaskClient) -> None:
    resp = post(client, "/validate/audit", review(claim(exactly("gpus", mode="All"))))
    assert resp["allowed"] is True and "status" not in resp
    assert resp["warnings"][0].startswith(dra.MISSING_CONSTRAINT)
    assert resp["auditAnnotations"]["gpu-devices"] == "all"


def test_validate_update_only_warns(client: FlaskClient) -> None:
    """The spec is immutable: denying a metadata update (a finalizer) would fix nothing."""
    resp = post(client, "/validate", review(claim(exactly("gpus", 4)), operation="UPDATE"))
    assert resp["allowed"] is True and resp["warnings"][0].startswith(dra.MISSING_CONSTRAINT)


@pytest.mark.parametrize("obj,operation,sub", [
    (claim(exactly("gpus", 4)), "DELETE", None),
    (claim(exactly("gpus", 4)), "UPDATE", "status"),
    (claim(exactly("gpus", 4), api="resource.k8s.io/v1beta1"), "CREATE", None),
])
def test_validate_passes_through(client: FlaskClient, obj: dict[str, Any], operation: str, sub: str | None) -> None:
    resp = post(client, "/validate", review(obj, operation=operation, sub_resource=sub))
    assert resp["allowed"] is True and "warnings" not in resp and "auditAnnotations" not in resp
