"""One meaning of audit (issue 26, point 3): admitted, warned, never mutated, however audit is reached.

The four ways in are the policy's ``mode: audit`` (every entry), an audit namespace (its entries call
``/validate/audit``; the mutating entry does not select it), a pod's ``gpu-admission.io/mode: audit``
annotation where ``allowAuditAnnotation`` allows it, and ``gpu-admission check --mode audit`` offline.
Each is driven through the same functions the server's routes call (``webhook.server.admission``) and
the CLI's ``main``: no patch comes back, and the template is judged as written, so what the pin would
have fixed (a multi-GPU pod without a product selector) is a warning rather than silently assumed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.cli.main import main
from webhook.core import settings as settings_mod
from webhook.server import admission, review

TP4 = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]


def policy(**doc: Any) -> settings_mod.Settings:
    return settings_mod.parse_text(yaml.safe_dump({"apiVersion": "gpu-admission.io/v1alpha1", "kind": "Policy",
                                                   **doc}), source="test")


ENFORCE = policy()
AUDIT = policy(mode="audit")
ANNOTATED = policy(allowAuditAnnotation=True)


def pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A 70B TP4 pod with no product selector: in enforce it is pinned to NVLink and admitted."""
    meta: dict[str, Any] = {"name": "llama", "namespace": "ai"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": TP4,
        "resources": {"limits": {"nvidia.com/gpu": 4}}}]}}


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llama", "namespace": "ai"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llama"}},
                     "template": {"metadata": {"labels": {"app": "llama"}}, "spec": pod()["spec"]}}}


def claim() -> dict[str, Any]:
    requests = [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ai"},
            "spec": {"devices": {"requests": requests}}}


def request(obj: dict[str, Any]) -> review.Request:
    group, _, version = obj["apiVersion"].rpartition("/")
    body = {"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {
        "uid": "u-1", "kind": {"group": group, "version": version, "kind": obj["kind"]}, "operation": "CREATE",
        "name": obj["metadata"]["name"], "namespace": "ai", "object": obj}}
    return review.parse(json.dumps(body).encode(), "application/json")


def test_enforce_pins_the_pod_the_audit_cases_leave_alone() -> None:
    """The control: without audit the same pod is pinned, so the cases below can fail."""
    out = admission.mutate(request(pod()), ENFORCE)
    assert out.review["response"].get("patchType") == "JSONPatch"
    assert admission.validate(request(deployment()), ENFORCE, mode="enforce").allowed


@pytest.mark.parametrize(("obj", "settings"), [
    pytest.param(pod(), AUDIT, id="policy-mode-audit"),
    pytest.param(pod({"gpu-admission.io/mode": "audit"}), ANNOTATED, id="pod-annotation"),
    pytest.param(claim(), AUDIT, id="dra-claim-under-policy-audit"),
])
def test_audit_mutates_nothing(obj: dict[str, Any], settings: settings_mod.Settings) -> None:
    out = admission.mutate(request(obj), settings)
    response = out.review["response"]
    assert response["allowed"] is True
    assert "patch" not in response and "patchType" not in response, response


@pytest.mark.parametrize(("settings", "mode"), [
    pytest.param(AUDIT, AUDIT.mode, id="policy-mode-audit"),
    pytest.param(ENFORCE, "audit", id="audit-namespace-entry"),
])
def test_audit_judges_the_template_as_written(settings: settings_mod.Settings, mode: str) -> None:
    """Nothing will pin the pods, so the missing selector is said, and the object is admitted."""
    out = admission.validate(request(deployment()), settings, mode=mode)
    response = out.review["response"]
    assert response["allowed"] is True
    warnings = response.get("warnings", [])
    assert any(w.startswith("missing-homogeneous-selector") for w in warnings), warnings


def test_check_mode_audit_says_what_an_audit_namespace_says(tmp_path: Path) -> None:
    manifest = tmp_path / "llama.yaml"
    manifest.write_text(yaml.safe_dump(deployment()))
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["check", str(manifest), "--mode", "audit", "--output", "json"], out=stdout, err=stderr)
    assert code == 0, stderr.getvalue()
    (result,) = json.loads(stdout.getvalue())["results"]
    cluster = admission.validate(request(deployment()), ENFORCE, mode="audit").review["response"]
    # the cluster's reply leads with the line naming the workload and where the full text is
    assert cluster["warnings"][0].endswith(admission.DETAILS) and cluster["warnings"][1:] == result["warnings"]
    assert result["allowed"] is True and not result.get("patch")


def _pod_of(command: list[str], gpus: int = 4) -> dict[str, Any]:
    obj = pod()
    obj["spec"]["containers"][0].update(command=command, resources={"limits": {"nvidia.com/gpu": gpus}})
    return obj


LONG = "some-organisation-with-a-long-name/Llama-3.1-70B-Instruct-abliterated-finetuned-for-long-context-v2"


@pytest.mark.parametrize(("obj", "lead"), [
    pytest.param(deployment(), "Llama-3.1-70B-Instruct (70.6B) at TP4 on 4 GPUs; ", id="model-size-tp-gpus"),
    pytest.param(_pod_of(["vllm", "serve", LONG, "--tensor-parallel-size", "4"]), "Llama-3.1-70B-Instruct-abliterated",
                 id="a-long-id-is-cut-not-the-pointer"),
    pytest.param(_pod_of(["sleep", "infinity"]), "this workload on 4 GPUs; ", id="nothing-read"),
])
def test_an_audit_reply_leads_with_what_was_judged_and_where_the_full_text_is(obj: dict[str, Any], lead: str) -> None:
    """Each finding's line is ``code: fix``; the lead line names the workload once and says where
    the whole texts are, within kubectl's 120 characters."""
    warnings = admission.validate(request(obj), ENFORCE, mode="audit").review["response"]["warnings"]
    first = warnings[0]
    assert len(first) <= review.WARNING_MAX_CHARS, first
    assert first.endswith(admission.DETAILS), first
    assert first.startswith(lead), first


def test_a_reply_without_warnings_has_no_lead_line() -> None:
    fitted = deployment()
    fitted["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    response = admission.validate(request(fitted), ENFORCE, mode="audit").review["response"]
    assert "warnings" not in response, response
