"""The admission server's HTTP contract through ``app.test_client()``: every point of the
AdmissionReview v1 contract, including what must be absent."""

from __future__ import annotations

import base64
import copy
import json
import logging
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from flask.testing import FlaskClient

from webhook.core import settings as settings_mod
from webhook.server import admission
from webhook.server.app import create_app
from webhook.server.live_settings import LiveSettings
from webhook.server.review import WARNINGS_MAX_TOTAL
from webhook.server.probes import LISTENER, PROBE

PROBE_ENV = {LISTENER: PROBE}  # /metrics answers on the probe port only (its listener's environ key)

KEY = "nvidia.com/gpu.product"
SECRET = "hf_PlantedSecretValue123"


def vllm_pod(*flags: str, gpus: Any = 4, model: str = "meta-llama/Llama-3.1-70B-Instruct",
             annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "llama", "namespace": "ai"}
    if annotations:
        meta["annotations"] = annotations
    c: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                         "command": ["vllm", "serve", model, *flags],
                         "env": [{"name": "HF_TOKEN", "value": SECRET}]}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **spec}}


TP4 = vllm_pod("--tensor-parallel-size", "4")
TP4_L4 = vllm_pod("--tensor-parallel-size", "4", nodeSelector={KEY: "NVIDIA-L4"})  # 33 GiB of weights per 24 GB GPU: cannot work
CPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "web", "image": "nginx"}]}}


def deployment(pod: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}, **{k: v for k, v in pod["metadata"].items()
                                                                         if k == "annotations"}},
                                  "spec": pod["spec"]}}}


def review(obj: Any, *, kind: str | None = None, operation: str = "CREATE", uid: str = "uid-123",
           dry_run: bool = False, group: str = "", version: str = "v1") -> dict[str, Any]:
    kind = kind or (obj.get("kind") if isinstance(obj, dict) else "Pod")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "name": obj.get("metadata", {}).get("name") if isinstance(obj, dict) else None, "namespace": "ai",
        "operation": operation, "userInfo": {"username": "alice"}, "object": obj, "oldObject": None,
        "dryRun": dry_run, "options": None}}


@pytest.fixture()
def client() -> FlaskClient:
    return create_app(settings_mod.default()).test_client()


def post(client: FlaskClient, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    resp = client.post(path, json=body)
    return resp.status_code, resp.get_json()


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response["patch"]))


# ----------------------------------------------------------------------------- /mutate


def test_mutate_pins_pod(client: FlaskClient) -> None:
    status, body = post(client, "/mutate", review(TP4))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    r = body["response"]
    assert r["uid"] == "uid-123" and r["allowed"] is True and r["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(copy.deepcopy(TP4), patch_of(r))
    values = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert "NVIDIA-A100-SXM4-80GB" in values and "NVIDIA-L40S" not in values
    assert any("pinned" in w for w in r["warnings"])


@pytest.mark.parametrize("obj", [
    pytest.param(CPU_POD, id="cpu-pod"),
    pytest.param(vllm_pod(nodeSelector={KEY: "NVIDIA-A100-SXM4-80GB"}, *["-tp", "4"]), id="already-pinned"),
    pytest.param(TP4_L4, id="wrong-tier-not-mutated-not-denied"),
])
def test_mutate_without_change_sends_no_patch(client: FlaskClient, obj: dict[str, Any]) -> None:
    _, body = post(client, "/mutate", review(obj))
    r = body["response"]
    assert r["allowed"] is True
    assert "patch" not in r and "patchType" not in r and "status" not in r


@pytest.mark.parametrize(("obj", "kind", "operation"), [
    pytest.param(deployment(TP4), "Deployment", "CREATE", id="templates-not-mutated"),
    pytest.param(TP4, "Pod", "UPDATE", id="pod-update"),
    pytest.param(TP4, "Pod", "DELETE", id="delete"),
])
def test_mutate_only_pod_creates(client: FlaskClient, obj: dict[str, Any], kind: str, operation: str) -> None:
    _, body = post(client, "/mutate", review(obj, kind=kind, operation=operation))
    assert body["response"] == {"uid": "uid-123", "allowed": True}


def test_mutate_respects_policy_switch() -> None:
    app = create_app(settings_mod.from_mapping({"mutate": False}))
    _, body = post(app.test_client(), "/mutate", review(TP4))
    assert "patch" not in body["response"]


# ----------------------------------------------------------------------------- /validate


def test_validate_denies_wrong_tier(client: FlaskClient) -> None:
    status, body = post(client, "/validate", review(TP4_L4))
    r = body["response"]
    assert status == 200 and r["uid"] == "uid-123" and r["allowed"] is False
    assert r["status"]["code"] == 403
    msg = r["status"]["message"]
    assert "model-does-not-fit" in msg and "NVIDIA-L4]" in msg and "NVIDIA-A100-SXM4-80GB" in msg
    assert "Pod ai/llama" in msg and "/spec/nodeSelector" in msg
    assert "patch" not in r
    assert r["auditAnnotations"]["decision"] == "denied" and r["auditAnnotations"]["violations"] == "model-does-not-fit"
    assert r["auditAnnotations"]["violation-kinds"] == "model-does-not-fit=cannot-work"


def test_validate_pod_as_it_arrives(client: FlaskClient) -> None:
    _, body = post(client, "/validate", review(TP4))  # the mutating webhook did not run
    assert body["response"]["allowed"] is False
    assert "missing-homogeneous-selector" in body["response"]["status"]["message"]
    _, mutated = post(client, "/mutate", review(TP4))
    pinned = jsonpatch.apply_patch(copy.deepcopy(TP4), patch_of(mutated["response"]))
    _, body = post(client, "/validate", review(pinned))
    r = body["response"]
    assert r["allowed"] is True and "status" not in r
    assert r["auditAnnotations"]["tier"] == "hbm-nvlink" and r["auditAnnotations"]["tensor-parallel"] == "4"
    assert r["auditAnnotations"]["model"] == "meta-llama/Llama-3.1-70B-Instruct"


def test_validate_audit_mode_admits_with_warnings(client: FlaskClient) -> None:
    status, body = post(client, "/validate?mode=audit", review(TP4_L4))
    r = body["response"]
    assert status == 200 and r["allowed"] is True and "status" not in r
    assert r["warnings"][0].endswith(admission.DETAILS) and r["warnings"][1].startswith("model-does-not-fit:")
    for w in r["warnings"]:
        assert "\n" not in w and not w.lower().startswith("warning") and len(w) <= 120


def test_validate_mode_in_the_path_is_what_a_webhook_configuration_can_use(client: FlaskClient) -> None:
    """kube-apiserver rejects a query string in a webhook's path, so the audit entries call /validate/audit."""
    assert post(client, "/validate/audit", review(TP4_L4)) == post(client, "/validate?mode=audit", review(TP4_L4))
    assert post(client, "/validate/enforce", review(TP4_L4)) == post(client, "/validate", review(TP4_L4))
    status, _ = post(client, "/validate/strict", review(TP4))
    assert status == 404


def test_validate_bad_mode_is_400(client: FlaskClient) -> None:
    status, body = post(client, "/validate?mode=strict", review(TP4))
    assert status == 400 and "mode" in body["error"]


@pytest.mark.parametrize(("obj", "allowed"), [
    pytest.param(deployment(TP4), True, id="deployment-admitted-as-mutated"),
    pytest.param(deployment(TP4_L4), False, id="deployment-denied-at-apply"),
])
@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_validate_workload_templates(client: FlaskClient, obj: dict[str, Any], allowed: bool, operation: str) -> None:
    _, body = post(client, "/validate", review(obj, group="apps", operation=operation))
    r = body["response"]
    assert r["allowed"] is allowed
    if not allowed:
        assert "Deployment ai/d" in r["status"]["message"] and "/spec/template/spec/nodeSelector" in r["status"]["message"]


def update_review(obj: Any, old: Any, *, sub_resource: str | None = None) -> dict[str, Any]:
    body = review(obj, group="apps", operation="UPDATE")
    body["request"]["oldObject"] = old
    if sub_resource:
        body["request"]["subResource"] = sub_resource
    return body


def scaled(obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "replicas": replicas}}


@pytest.mark.parametrize(("new", "old", "allowed", "pre_existing"), [
    pytest.param(scaled(deployment(TP4_L4), 0), deployment(TP4_L4), True, True, id="scale-down-a-bad-deployment"),
    pytest.param(deployment(TP4_L4), deployment(TP4), False, False, id="update-that-adds-the-violation"),
    pytest.param(deployment(TP4), deployment(TP4_L4), True, False, id="update-that-fixes-it"),
    pytest.param(scaled(deployment(TP4_L4), 3), None, False, False, id="no-old-object"),
])
def test_update_judges_the_change(client: FlaskClient, new: dict[str, Any], old: Any, allowed: bool,
                                  pre_existing: bool) -> None:
    _, body = post(client, "/validate", update_review(new, old))
    r = body["response"]
    assert r["allowed"] is allowed
    assert any(w.startswith("pre-existing model-does-not-fit") for w in r.get("warnings", [])) is pre_existing
    if not allowed:
        assert "model-does-not-fit" in r["status"]["message"] and "/spec/template/spec/nodeSelector" in r["status"]["message"]


def test_status_and_scale_subresources_are_never_denied(client: FlaskClient) -> None:
    for sub in ("status", "scale"):
        _, body = post(client, "/validate", update_review(deployment(TP4_L4), deployment(TP4), sub_resource=sub))
        assert body["response"]["allowed"] is True, sub


def test_judge_object_policy_denies_the_scale_down() -> None:
    client = create_app(settings_mod.from_mapping({"updates": "judgeObject"}, source="test")).test_client()
    _, body = post(client, "/validate", update_review(scaled(deployment(TP4_L4), 0), deployment(TP4_L4)))
    assert body["response"]["allowed"] is False


def test_validate_dry_run_same_decision(client: FlaskClient) -> None:
    _, wet = post(client, "/validate", review(TP4_L4))
    _, dry = post(client, "/validate", review(TP4_L4, dry_run=True))
    assert wet == dry


@pytest.mark.parametrize(("obj", "operation", "kind"), [
    pytest.param(CPU_POD, "CREATE", "Pod", id="no-gpus"),
    pytest.param(TP4_L4, "DELETE", "Pod", id="delete"),
    pytest.param(TP4_L4, "CONNECT", "Pod", id="connect"),
    pytest.param(TP4_L4, "UPDATE", "Pod", id="pod-update-immutable-selection"),
    pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, "CREATE", "ConfigMap",
                 id="other-kind"),
    pytest.param(None, "DELETE", "Pod", id="null-object"),
])
def test_allowed_at_once(client: FlaskClient, obj: Any, operation: str, kind: str) -> None:
    _, body = post(client, "/validate", review(obj, operation=operation, kind=kind))
    assert body["response"] == {"uid": "uid-123", "allowed": True}


def test_mode_annotation_only_where_allowed() -> None:
    obj = vllm_pod("-tp", "4", nodeSelector={KEY: "NVIDIA-L4"}, annotations={"gpu-admission.io/mode": "audit"})
    strict = create_app(settings_mod.default()).test_client()
    _, body = post(strict, "/validate", review(obj))
    assert body["response"]["allowed"] is False
    lenient = create_app(settings_mod.from_mapping({"allowAuditAnnotation": True})).test_client()
    _, body = post(lenient, "/validate", review(obj))
    assert body["response"]["allowed"] is True and body["response"]["warnings"]


def test_warning_caps(client: FlaskClient) -> None:
    notes = {"gpu-admission.io/params": "70B"}
    obj = vllm_pod("--tensor-parallel-size", "$(TP)", annotations=notes, nodeSelector={KEY: "NVIDIA-L40S"})
    obj["spec"]["containers"][0]["env"] = [
        {"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}}] + [
        {"name": f"X{i}", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}} for i in range(50)]
    obj["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": f"cm-{i}"}} for i in range(200)]
    _, body = post(client, "/validate?mode=audit", review(obj))
    warnings = body["response"]["warnings"]
    assert sum(len(w) for w in warnings) <= WARNINGS_MAX_TOTAL
    assert all(len(w) <= 120 and "\n" not in w for w in warnings)


# ----------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(("kwargs", "needle"), [
    pytest.param({"data": b"{}", "content_type": "text/plain"}, "content type", id="wrong-content-type"),
    pytest.param({"data": b"", "content_type": "application/json"}, "empty", id="empty-body"),
    pytest.param({"data": b"{not json", "content_type": "application/json"}, "not JSON", id="not-json"),
    pytest.param({"data": b"\xff\xfe", "content_type": "application/json"}, "UTF-8", id="not-utf8"),
    pytest.param({"json": [1, 2]}, "JSON object", id="array"),
    pytest.param({"json": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}}, "request",
                 id="missing-request"),
    pytest.param({"json": {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}}, "uid",
                 id="missing-uid"),
    pytest.param({"json": {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                           "request": {"uid": "x"}}}, "apiVersion", id="v1beta1"),
    pytest.param({"json": {"apiVersion": "v1", "kind": "Pod"}}, "AdmissionReview", id="not-a-review"),
    pytest.param({"data": b"[" * 100000 + b"]" * 100000, "content_type": "application/json"}, "",
                 id="deeply-nested"),
])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_bad_requests_are_400(client: FlaskClient, path: str, kwargs: dict[str, Any], needle: str) -> None:
    resp = client.post(path, **kwargs)
    assert resp.status_code == 400
    assert resp.is_json and needle in resp.get_json()["error"]


def test_body_limit_is_413() -> None:
    client = create_app(settings_mod.default(), max_body=1024).test_client()
    resp = client.post("/validate", data=b"x" * 2048, content_type="application/json")
    assert resp.status_code == 413 and "1024" in resp.get_json()["error"]


def test_unexpected_exception_is_500_with_uid(client: FlaskClient, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("engine bug")
    monkeypatch.setattr(admission, "validate", boom)
    with caplog.at_level(logging.ERROR, logger="gpu_admission"):
        resp = client.post("/validate", json=review(TP4, uid="uid-boom"))
    assert resp.status_code == 500 and "uid-boom" in resp.get_json()["error"]
    assert any(getattr(r, "uid", None) == "uid-boom" for r in caplog.records)


def test_get_on_webhook_is_405(client: FlaskClient) -> None:
    resp = client.get("/mutate")
    assert resp.status_code == 405 and resp.is_json


# ----------------------------------------------------------------------------- logs, health, metrics


def test_decision_log_line_without_secrets(client: FlaskClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gpu_admission"):
        post(client, "/validate", review(TP4_L4, uid="uid-log"))
    (rec,) = [r for r in caplog.records if getattr(r, "event", None) == "decision"]
    from webhook.server.logs import JsonFormatter
    line = json.loads(JsonFormatter().format(rec))
    for field in ("uid", "namespace", "name", "kind", "operation", "mode", "allowed", "codes", "tier", "latency_ms"):
        assert field in line, field
    assert line["uid"] == "uid-log" and line["allowed"] is False and line["codes"] == ["model-does-not-fit"]
    assert line["name"] == "llama" and line["logger"] == "gpu_admission.decision"
    assert all(SECRET not in JsonFormatter().format(r) for r in caplog.records)


def test_health_and_metrics(client: FlaskClient) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    post(client, "/validate", review(TP4_L4))
    post(client, "/validate", review(TP4_L4, dry_run=True))
    post(client, "/mutate", review(TP4))
    client.post("/validate", data=b"", content_type="application/json")
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert 'gpu_admission_requests_total{allowed="false",dry_run="false",endpoint="validate",mode="enforce"} 1.0' in text
    assert 'gpu_admission_requests_total{allowed="false",dry_run="true",endpoint="validate",mode="enforce"} 1.0' in text
    # the same object twice, once as a dry run: each counted once for its violations (a dry run
    # is its own news), a denial only for the real one
    assert 'gpu_admission_violations_total{code="model-does-not-fit",mode="enforce"} 2.0' in text
    assert 'gpu_admission_denials_total{mode="enforce"} 1.0' in text
    assert 'gpu_admission_request_duration_seconds_bucket{endpoint="mutate",le="0.0005"}' in text
    assert 'le="10.0"' in text
    assert 'gpu_admission_errors_total{status="400"} 1.0' in text
    assert "gpu_admission_config_reloads_total" in text


def test_config_reload_good_and_bad(tmp_path: Path) -> None:
    header = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(header + "mode: enforce\n")
    live = LiveSettings(cfg, interval=0.0)
    client = create_app(live).test_client()
    assert post(client, "/validate", review(TP4_L4))[1]["response"]["allowed"] is False
    time.sleep(0.01)
    cfg.write_text(header + "mode: audit\n")
    assert post(client, "/validate", review(TP4_L4))[1]["response"]["allowed"] is True
    audit = settings_mod.generation_of(cfg.read_text())
    assert client.get("/readyz").get_json()["generation"] == audit
    time.sleep(0.01)
    cfg.write_text(header + "mode: [broken\n")
    assert post(client, "/validate", review(TP4_L4))[1]["response"]["allowed"] is True  # last good kept
    resp = client.get("/readyz")
    ready = resp.get_json()
    assert resp.status_code == 200 and "invalid YAML" in ready["policy_reload_error"]
    assert ready["generation"] == audit  # still the audit policy
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert 'gpu_admission_config_reloads_total{result="success"} 1.0' in text
    assert 'gpu_admission_config_reloads_total{result="failure"} 1.0' in text
    assert "gpu_admission_config_valid 0.0" in text
    assert f'gpu_admission_policy_info{{generation="{audit}"}} 1.0' in text
    time.sleep(0.01)
    cfg.write_text(header + "mode: enforce\n")
    assert post(client, "/validate", review(TP4_L4))[1]["response"]["allowed"] is False
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert "gpu_admission_config_valid 1.0" in text
    enforce = settings_mod.generation_of(cfg.read_text())
    assert f'gpu_admission_policy_info{{generation="{enforce}"}} 1.0' in text
    assert f'gpu_admission_policy_info{{generation="{audit}"}} 0.0' in text


def test_policy_watch_reloads_without_traffic(tmp_path: Path) -> None:
    header = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(header + "mode: enforce\n")
    events: list[str] = []
    live = LiveSettings(cfg, interval=0.05, on_reload=lambda result, _e: events.append(result))
    assert live.watch_in_background(0.05) is not None
    time.sleep(0.06)
    cfg.write_text(header + "mode: audit\n")
    deadline = time.monotonic() + 5
    while "success" not in events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert events == ["success"]  # nobody called current(): the watcher did
    assert live.current().mode == "audit"
    assert LiveSettings.fixed(settings_mod.default()).watch_in_background(0.05) is None
