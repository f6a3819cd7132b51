"""A denial is counted once per object generation (issue 26, point 9): a controller's retries of
the same template are not news; a changed template, another namespace or another mode is."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from webhook.server import denials
from webhook.server.app import create_app

from tests.server.test_app import PROBE_ENV


def rs_pod(name: str, *, product: str = "NVIDIA-L4", namespace: str = "ml", owner_uid: str = "rs-uid-1",
           template_hash: str = "7d9c") -> dict[str, Any]:
    """A pod as a ReplicaSet creates it: a generated name, its own uid, the owner reference."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "generateName": "llama-7d9c-", "namespace": namespace, "uid": f"uid-{name}",
        "labels": {"app": "llama", "pod-template-hash": template_hash},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "llama-7d9c",
                             "uid": owner_uid, "controller": True}]},
        "spec": {"nodeSelector": {"nvidia.com/gpu.product": product}, "containers": [{
            "name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
            "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
            "resources": {"limits": {"nvidia.com/gpu": 4}}}]}}


FIRST = rs_pod("llama-7d9c-abcde")


@pytest.mark.parametrize(("second", "mode", "news"), [
    pytest.param(rs_pod("llama-7d9c-fghij"), "enforce", False, id="a-retry-of-the-same-template"),
    pytest.param(rs_pod("llama-7d9c-klmno", owner_uid="rs-uid-2", template_hash="81ab"), "enforce", False,
                 id="a-rollout-of-the-same-template"),
    pytest.param(rs_pod("llama-7d9c-pqrst", product="NVIDIA-L40S"), "enforce", True, id="a-changed-template"),
    pytest.param(rs_pod("llama-7d9c-uvwxy", namespace="ml2"), "enforce", True, id="another-namespace"),
    pytest.param(rs_pod("llama-7d9c-fghij"), "audit", True, id="another-mode"),
])
def test_a_generation_is_news_once(second: dict[str, Any], mode: str, news: bool) -> None:
    ledger = denials.Ledger()
    assert ledger.first("Pod", FIRST, "enforce", ("model-does-not-fit",)) is True
    assert ledger.first("Pod", second, mode, ("model-does-not-fit",)) is news


def test_a_dry_run_first_does_not_hide_the_real_denial() -> None:
    ledger = denials.Ledger()
    assert ledger.first("Pod", FIRST, "enforce", ("model-does-not-fit",), dry_run=True) is True
    assert ledger.first("Pod", FIRST, "enforce", ("model-does-not-fit",), dry_run=False) is True
    assert ledger.first("Pod", FIRST, "enforce", ("model-does-not-fit",), dry_run=False) is False


def test_the_ledger_is_bounded() -> None:
    ledger = denials.Ledger(max_kept=2)
    pods = [rs_pod(f"p-{i}", namespace=f"ns-{i}") for i in range(3)]
    assert all(ledger.first("Pod", p, "enforce", ("x",)) for p in pods)
    assert ledger.first("Pod", pods[2], "enforce", ("x",)) is False
    assert ledger.first("Pod", pods[0], "enforce", ("x",)) is True  # forgotten: counted again


def review(obj: dict[str, Any], uid: str, dry_run: bool = False) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"], "object": obj,
        "dryRun": dry_run}}


def test_a_stuck_replicaset_is_one_denial_in_the_metrics() -> None:
    client = create_app().test_client()
    for i in range(5):  # the ReplicaSet controller's retries: five new pods of one template
        body = json.dumps(review(rs_pod(f"llama-7d9c-{i:05d}"), f"u-{i}"))
        doc = client.post("/validate", data=body, content_type="application/json").get_json()
        assert doc["response"]["allowed"] is False
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert 'gpu_admission_requests_total{allowed="false",dry_run="false",endpoint="validate",mode="enforce"} 5.0' in text
    assert 'gpu_admission_denials_total{mode="enforce"} 1.0' in text
    assert 'gpu_admission_violations_total{code="model-does-not-fit",mode="enforce"} 1.0' in text
    changed = copy.deepcopy(rs_pod("llama-7d9c-zzzzz", product="Tesla-T4"))
    client.post("/validate", data=json.dumps(review(changed, "u-9")), content_type="application/json")
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert 'gpu_admission_denials_total{mode="enforce"} 2.0' in text  # another template: news
