"""Bypass attempts in enforce mode: each way a user might try to get a multi-GPU pod past the tier
pin, through both stages of the webhook.

A pod reaches ``/validate`` after the mutating webhook, but mutation may be off (``mutate: false``,
an audit namespace that is later switched, the mutating webhook removed, a later mutating webhook
rewriting the affinity). So for every trick:

1. ``/validate`` of the pod *as written* denies it (that is what arrives when mutation did not run);
2. ``/mutate`` pins it: after its patch every path through the node selection requires the product
   label ``In`` the tier's values (no trick survives mutation), and ``/validate`` of the patched pod
   has nothing left to say about the selection.

Tricks that mutation cannot repair (``nodeName``, an explicit wrong pin, the mode annotation where
the policy forbids it, a tier annotation naming a single-GPU tier) are denied before and after.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
from flask.testing import FlaskClient

from webhook.core import settings as settings_mod
from webhook.core.selection import pinned_values, term_values
from webhook.server.app import create_app

KEY = "nvidia.com/gpu.product"
A100, L40S, L4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-L4"
SETTINGS = settings_mod.default()
HBM = {o.value for o in SETTINGS.catalog.options(SETTINGS.tier("hbm-nvlink").products, SETTINGS.label_scheme)}
SELECTION_CODES = {"missing-homogeneous-selector", "tier-mismatch"}


def vllm(*, gpus: int | None = 4, **spec: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
                         "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    meta = spec.pop("metadata", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llama", "namespace": "ai", **meta},
            "spec": {"containers": [c], **spec}}


def terms(*exprs_per_term: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": e} for e in exprs_per_term]}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def review(obj: dict[str, Any], uid: str = "uid-bypass") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "llama", "namespace": "ai",
        "operation": "CREATE", "userInfo": {"username": "mallory"}, "object": obj, "dryRun": False}}


@pytest.fixture()
def client() -> FlaskClient:
    return create_app(SETTINGS).test_client()


def call(client: FlaskClient, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(path, json=review(obj))
    assert resp.status_code == 200, resp.get_data()
    return resp.get_json()["response"]


def codes(response: dict[str, Any]) -> set[str]:
    return set(response.get("auditAnnotations", {}).get("violations", "").split(",")) - {""}


def mutated(client: FlaskClient, obj: dict[str, Any]) -> dict[str, Any]:
    r = call(client, "/mutate", obj)
    assert r["allowed"] is True
    if "patch" not in r:
        return obj
    return jsonpatch.apply_patch(copy.deepcopy(obj), json.loads(base64.b64decode(r["patch"])))


def assert_pinned(obj: dict[str, Any]) -> None:
    """Every nodeSelectorTerm (they are ORed) requires the product label In tier values only."""
    spec = obj["spec"]
    pinned = pinned_values(spec, KEY)
    assert pinned.values is not None and pinned.values <= HBM and pinned.values, pinned
    terms_ = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    for term in terms_:  # the In expressions of one term are ANDed: their intersection is what it allows
        allowed = term_values(term, KEY)
        assert allowed is not None and allowed and allowed <= HBM, term


# (id, pod as written, codes /validate must report as written)
FIXABLE = [
    ("preferred-affinity-only", vllm(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [expr(KEY, "In", L40S)]}}]}}),
     "product chosen only through a preference: the scheduler may ignore it"),
    ("notin-trick", vllm(affinity=terms([expr(KEY, "NotIn", L4)])),
     "NotIn excludes one product and allows every other, L40S included"),
    ("doesnotexist-trick", vllm(affinity=terms([expr(KEY, "DoesNotExist")])),
     "nodes without the label: any GPU at all"),
    ("exists-trick", vllm(affinity=terms([expr(KEY, "Exists")])), "any labelled product"),
    ("widening-second-term", vllm(affinity=terms([expr(KEY, "In", A100)], [expr("kubernetes.io/os", "In", "linux")])),
     "terms are ORed: the second term lets the pod land anywhere"),
    ("widening-matchfields-term", vllm(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr(KEY, "In", A100)]},
                              {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["l40s-node-7"]}]}]}}}),
     "a second term naming an L40S node by name"),
    ("widening-empty-term", vllm(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr(KEY, "In", A100)]}, {"matchExpressions": []}]}}}),
     "an empty second term"),
    ("in-plus-outside-value", vllm(affinity=terms([expr(KEY, "In", A100, L40S)])),
     "an In list that includes a product outside the tier"),
    ("gpu-only-in-init-container", dict(vllm(gpus=None), spec={**vllm(gpus=None)["spec"], "initContainers": [
        {"name": "warm", "image": "busybox", "command": ["true"], "resources": {"limits": {"nvidia.com/gpu": 4}}}]}),
     "GPUs requested by an init container still count (Kubernetes' effective request)"),
    ("gpu-only-in-sidecar", dict(vllm(gpus=None), spec={**vllm(gpus=None)["spec"], "initContainers": [
        {"name": "side", "image": "busybox", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": 4}}}]}),
     "a restartable (sidecar) init container"),
    ("gpu-only-in-requests", dict(vllm(gpus=None), spec={"containers": [dict(vllm(gpus=None)["spec"]["containers"][0],
                                                                            resources={"requests": {"nvidia.com/gpu": "4"}})]}),
     "requests without limits"),
]


@pytest.mark.parametrize(("obj", "why"), [c[1:] for c in FIXABLE], ids=[c[0] for c in FIXABLE])
def test_selection_tricks_are_denied_as_written_and_pinned_by_mutation(client: FlaskClient, obj: dict[str, Any],
                                                                      why: str) -> None:
    as_written = call(client, "/validate", obj)
    assert as_written["allowed"] is False, why
    assert as_written["status"]["code"] == 403 and codes(as_written) & SELECTION_CODES, as_written
    pinned = mutated(client, obj)
    assert_pinned(pinned)
    after = call(client, "/validate", pinned)
    assert after["allowed"] is True and not codes(after) & SELECTION_CODES, after
    assert "patch" not in call(client, "/mutate", pinned)  # and the pin is stable under reinvocation


UNFIXABLE = [
    ("nodename-on-multi-gpu", vllm(nodeName="l40s-node-7"), "missing-homogeneous-selector",
     "nodeName skips the scheduler, so no affinity can hold it"),
    ("nodename-with-correct-pin", vllm(nodeName="l40s-node-7", nodeSelector={KEY: A100}),
     "missing-homogeneous-selector", "the kubelet does not check node affinity against nodeName's node"),
    # a pin to a GPU that cannot hold the model (Llama-3.1-70B bf16 at TP4: 33 GiB of weights per GPU on a
    # 24 GB L4) is denied in every spelling; a pin that only leaves the tier (L40S) is a misplacement:
    # admitted with a warning offline, denied when the cluster offers NVLink GPUs (tests/core/test_verdict_kinds.py)
    ("explicit-unfit-pin", vllm(nodeSelector={KEY: L4}), "model-does-not-fit", "never silently overridden"),
    ("other-label-only", vllm(nodeSelector={"node.kubernetes.io/instance-type": "g6.12xlarge"}), "model-does-not-fit",
     "an instance type (4x L4) is read as the product pin it is (issue 15): pinning the product label beside it "
     "made a pod no node could take"),
    ("unfit-pin-in-affinity", vllm(affinity=terms([expr(KEY, "In", L4)])), "model-does-not-fit", ""),
    ("audit-annotation-not-allowed", vllm(nodeSelector={KEY: L4}, metadata={"annotations": {
        "gpu-admission.io/mode": "audit"}}), "model-does-not-fit", "allowAuditAnnotation is false by default"),
    ("off-annotation", vllm(nodeSelector={KEY: L4}, metadata={"annotations": {"gpu-admission.io/mode": "off"}}),
     "model-does-not-fit", "there is no 'off' for pods"),
    ("tier-annotation-naming-no-tier", vllm(metadata={"annotations": {"gpu-admission.io/tier": "gold"}}),
     "invalid-annotation", "a tier that does not exist is not a way around the policy"),
]


@pytest.mark.parametrize(("obj", "code", "why"), [c[1:] for c in UNFIXABLE], ids=[c[0] for c in UNFIXABLE])
def test_unfixable_tricks_are_denied_before_and_after_mutation(client: FlaskClient, obj: dict[str, Any], code: str,
                                                               why: str) -> None:
    as_written = call(client, "/validate", obj)
    assert as_written["allowed"] is False and code in codes(as_written), (why, as_written)
    after = call(client, "/validate", mutated(client, obj))
    assert after["allowed"] is False and code in codes(after), (why, after)


def test_audit_annotation_softens_only_where_the_policy_allows_it() -> None:
    obj = vllm(nodeSelector={KEY: L4}, metadata={"annotations": {"gpu-admission.io/mode": "audit"}})
    strict = create_app(SETTINGS).test_client()
    r = call(strict, "/validate", obj)
    assert r["allowed"] is False and any("gpu-admission.io/mode=audit ignored" in w for w in r["warnings"]), r
    lenient = create_app(settings_mod.from_mapping({"allowAuditAnnotation": True})).test_client()
    assert call(lenient, "/validate", obj)["allowed"] is True


def test_a_later_mutating_webhook_that_widens_the_pin_is_caught(client: FlaskClient) -> None:
    """Mutating webhooks run in sequence and validation comes last: if another webhook appends a
    term after ours pinned the pod, the validating webhook sees the widened pod and denies it."""
    pinned = mutated(client, vllm())
    assert_pinned(pinned)
    widened = copy.deepcopy(pinned)
    widened["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"].append({"matchExpressions": [expr("team", "In", "ml")]})
    r = call(client, "/validate", widened)
    assert r["allowed"] is False and "missing-homogeneous-selector" in codes(r)
    # reinvocation (reinvocationPolicy: IfNeeded) pins the new term too
    assert_pinned(mutated(client, widened))


def test_workload_templates_are_judged_as_their_pods_will_be(client: FlaskClient) -> None:
    """A Deployment whose template uses a fixable trick is admitted (its pods will be pinned by
    /mutate at creation), an unfixable one is denied at apply time."""
    def deployment(pod: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
                "spec": {"selector": {"matchLabels": {"a": "b"}},
                         "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod["spec"]}}}

    def judge(obj: dict[str, Any]) -> dict[str, Any]:
        body = review(obj)
        body["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
        return client.post("/validate", json=body).get_json()["response"]

    assert judge(deployment(vllm(affinity=terms([expr(KEY, "NotIn", L4)]))))["allowed"] is True
    assert judge(deployment(vllm(nodeSelector={KEY: L4})))["allowed"] is False
    assert judge(deployment(vllm(nodeName="l40s-node-7")))["allowed"] is False
