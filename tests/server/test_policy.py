"""A policy is all or nothing and the same everywhere (issue 25, point 5), in process: the reload
of broken files, the last good copy the workers share, a worker with no policy at all, and the
webhook's judgement of its own ConfigMap (``POST /validate/policy``). The same with a real gunicorn
server is in test_server_live.py."""

from __future__ import annotations

import base64
import os
import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from webhook.core import settings as settings_mod
from webhook.server.app import create_app
from webhook.server.live_settings import LastGood, LiveSettings, PolicyUnavailable

from test_app import TP4_L4, post, review
from webhook.server.probes import LISTENER, PROBE

PROBE_ENV = {LISTENER: PROBE}  # /metrics answers on the probe port only (its listener's environ key)

HEADER = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
ENFORCE = HEADER + "mode: enforce\n"
AUDIT = HEADER + "mode: audit\n"
EMBEDDED = settings_mod.embedded_policy_text()

BROKEN = [
    pytest.param("", "the policy file is empty", id="empty"),
    pytest.param("".join(EMBEDDED.splitlines(keepends=True)[:3]), "the policy file is empty", id="first-three-lines"),
    pytest.param("mode: audit\n", "apiVersion: missing", id="no-header"),
    pytest.param(HEADER.splitlines(keepends=True)[0], "kind: missing", id="cut-after-apiversion"),
    pytest.param(HEADER[:30], "apiVersion: must be", id="cut-mid-apiversion"),
    pytest.param(HEADER + "mode: aud", "mode", id="cut-mid-value"),
    pytest.param(HEADER + "tiers: 42\n", "tiers", id="schema-invalid"),
    pytest.param(HEADER + "mode: [audit\n", "invalid YAML", id="invalid-yaml"),
    pytest.param("- a\n- list\n", "mapping", id="not-a-mapping"),
]


def write(path: Path, text: str) -> None:
    """Replace the file atomically with a new inode, as a ConfigMap update does (the watch sees it at once)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def allowed(client: FlaskClient) -> bool:
    """The verdict on a pod that cannot work: denied in enforce, admitted in audit."""
    status, doc = post(client, "/validate", review(TP4_L4))
    assert status == 200, doc
    return doc["response"]["allowed"]


def worker(cfg: Path, copy: LastGood) -> tuple[LiveSettings, FlaskClient]:
    """One server worker: its own LiveSettings and app, sharing the server's last good copy."""
    live = LiveSettings(cfg, interval=0.0, last_good=copy)
    return live, create_app(live).test_client()


# ----------------------------------------------------------------------------- broken files

@pytest.mark.parametrize(("broken", "reason"), BROKEN)
def test_a_broken_file_keeps_the_last_good_policy(tmp_path: Path, broken: str, reason: str) -> None:
    """Empty or truncated files used to be valid policies (the embedded default: enforce)."""
    cfg = tmp_path / "policy.yaml"
    write(cfg, AUDIT)
    live, client = worker(cfg, LastGood.for_config(cfg, tmp_path / "state"))
    assert allowed(client) is True
    write(cfg, broken)
    assert allowed(client) is True  # still audit, not the default's enforce
    resp = client.get("/readyz")
    body = resp.get_json()
    assert resp.status_code == 200 and reason in body["policy_reload_error"], body
    assert body["generation"] == settings_mod.generation_of(AUDIT)
    assert "gpu_admission_config_valid 0.0" in client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)


# ----------------------------------------------------------------------------- the same policy in every worker

def test_a_worker_started_after_a_failed_reload_serves_the_last_good_policy(tmp_path: Path) -> None:
    """Regression: a worker forked after the file broke served the policy the master had loaded at
    start-up (enforce) while its sibling served the last good one (audit): verdicts alternated."""
    cfg = tmp_path / "policy.yaml"
    copy = LastGood.for_config(cfg, tmp_path / "state")
    write(cfg, ENFORCE)
    first, first_client = worker(cfg, copy)
    write(cfg, AUDIT)
    assert allowed(first_client) is True
    write(cfg, "")
    assert allowed(first_client) is True
    respawned, respawned_client = worker(cfg, copy)  # gunicorn's replacement of a killed sibling
    assert respawned.current().generation == first.current().generation == settings_mod.generation_of(AUDIT)
    assert allowed(respawned_client) is True
    body = respawned_client.get("/readyz").get_json()
    assert body["generation"] == settings_mod.generation_of(AUDIT) and "empty" in body["policy_reload_error"]
    assert "last good copy" in body["policy"]


def test_a_worker_that_missed_a_version_catches_up_with_its_siblings(tmp_path: Path) -> None:
    """The file was good (audit) only briefly: one worker loaded it, the other only ever saw it
    broken. Both serve the audit policy, from the copy, once the file is broken."""
    cfg = tmp_path / "policy.yaml"
    copy = LastGood.for_config(cfg, tmp_path / "state")
    write(cfg, ENFORCE)
    quick, quick_client = worker(cfg, copy)
    slow, slow_client = worker(cfg, copy)
    assert allowed(quick_client) is False and allowed(slow_client) is False
    write(cfg, AUDIT)
    assert allowed(quick_client) is True  # the slow one never looks while it is there
    write(cfg, HEADER + "tiers: 42\n")
    assert allowed(slow_client) is True
    assert slow.current().generation == quick.current().generation == settings_mod.generation_of(AUDIT)


def test_the_copy_is_kept_atomically_and_only_when_it_changes(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    copy = LastGood.for_config(cfg, tmp_path / "state")
    assert copy.load() is None
    write(cfg, AUDIT)
    worker(cfg, copy)
    assert copy.path.read_text() == AUDIT
    stamp = copy.path.stat().st_mtime_ns, copy.path.stat().st_ino
    time.sleep(0.01)
    worker(cfg, copy)  # the same bytes: not written again
    assert (copy.path.stat().st_mtime_ns, copy.path.stat().st_ino) == stamp
    assert [p.name for p in copy.path.parent.iterdir()] == [copy.path.name]  # no temporary file left
    assert LastGood.for_config(tmp_path / "other.yaml", tmp_path / "state").path != copy.path


def test_a_broken_copy_is_never_served(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    copy = LastGood.for_config(cfg, tmp_path / "state")
    copy.path.parent.mkdir()
    copy.path.write_text("mode: audit\n")  # not a whole policy: validated like the file itself
    write(cfg, "")
    live, client = worker(cfg, copy)
    assert live.peek() is None
    assert client.get("/readyz").status_code == 503


def test_an_unwritable_state_directory_costs_only_the_copy(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.yaml"
    blocker = tmp_path / "state"
    blocker.write_text("a file where the directory should be")
    write(cfg, AUDIT)
    live, client = worker(cfg, LastGood.for_config(cfg, blocker))
    assert allowed(client) is True and live.last_error is None


# ----------------------------------------------------------------------------- no policy at all

def test_no_policy_and_no_copy_is_unready_then_ready_once_the_file_loads(tmp_path: Path) -> None:
    """A pod that starts with a broken ConfigMap and no last good copy: no exit (a crash loop), but
    unready with the reason; reviews get a 503 (kube-apiserver applies the failurePolicy)."""
    cfg = tmp_path / "policy.yaml"
    write(cfg, "")
    live, client = worker(cfg, LastGood.for_config(cfg, tmp_path / "state"))
    with pytest.raises(PolicyUnavailable, match="empty"):
        live.current()
    assert client.get("/healthz").status_code == 200
    resp = client.get("/readyz")
    assert resp.status_code == 503 and resp.get_json()["generation"] is None
    assert any("no policy" in r and "empty" in r for r in resp.get_json()["reasons"])
    status, doc = post(client, "/validate", review(TP4_L4))
    assert status == 503 and "no policy to judge with" in doc["error"]
    status, doc = post(client, "/mutate", review(TP4_L4))
    assert status == 503
    status, doc = post(client, "/validate/policy", review(configmap(AUDIT)))  # needs no policy to answer
    assert status == 200 and doc["response"]["allowed"] is True
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert "gpu_admission_config_valid 0.0" in text and 'gpu_admission_errors_total{status="503"} 2.0' in text
    assert "gpu_admission_policy_info{" not in text
    write(cfg, ENFORCE)
    assert client.get("/readyz").status_code == 200
    assert allowed(client) is False
    text = client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    assert f'gpu_admission_policy_info{{generation="{settings_mod.generation_of(ENFORCE)}"}} 1.0' in text


# ----------------------------------------------------------------------------- POST /validate/policy

def configmap(text: str | None, *, name: str = "gpu-admission-policy", binary: bool = False,
              key: str = "policy.yaml") -> dict[str, Any]:
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": name, "namespace": "gpu-admission"}}
    if text is not None:
        if binary:
            cm["binaryData"] = {key: base64.b64encode(text.encode()).decode()}
        else:
            cm["data"] = {key: text}
    return cm


@pytest.fixture()
def client() -> FlaskClient:
    return create_app(settings_mod.default()).test_client()


@pytest.mark.parametrize(("broken", "reason"), [
    *BROKEN,
    pytest.param(HEADER + "tiers:\n  - name: cost\n    products: [L40Z]\n", "tiers[0].products[0]", id="unknown-product"),
    pytest.param(HEADER + "rules:\n  largeModelTier: gold\n", "rules.largeModelTier", id="rule-names-no-tier"),
])
def test_the_policy_configmap_is_refused_with_the_reason(client: FlaskClient, broken: str, reason: str) -> None:
    status, doc = post(client, "/validate/policy", review(configmap(broken), operation="UPDATE"))
    response = doc["response"]
    assert status == 200 and response["allowed"] is False and response["status"]["code"] == 403
    message = response["status"]["message"]
    assert "ConfigMap gpu-admission/gpu-admission-policy data.policy.yaml" in message and reason in message, message
    assert "gpu-admission policy check" in message
    assert 'gpu_admission_violations_total{code="invalid-policy",mode="enforce"} 1.0' in client.get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)


@pytest.mark.parametrize(("obj", "operation", "judged"), [
    pytest.param(configmap(EMBEDDED), "CREATE", True, id="the-default"),
    pytest.param(configmap(AUDIT), "UPDATE", True, id="an-audit-policy"),
    pytest.param(configmap(AUDIT, binary=True), "CREATE", True, id="binary-data"),
    pytest.param(configmap("", name="another-configmap"), "CREATE", False, id="another-configmap"),
    pytest.param(configmap(""), "DELETE", False, id="delete"),
])
def test_a_good_policy_configmap_and_anything_else_is_allowed(client: FlaskClient, obj: dict[str, Any],
                                                              operation: str, judged: bool) -> None:
    status, doc = post(client, "/validate/policy", review(obj, operation=operation))
    response = doc["response"]
    assert status == 200 and response["allowed"] is True and "status" not in response
    notes = response.get("auditAnnotations", {})
    if judged:
        text = obj.get("data", {}).get("policy.yaml") or base64.b64decode(obj["binaryData"]["policy.yaml"]).decode()
        assert notes["policy-generation"] == settings_mod.generation_of(text)
    else:
        assert "policy-generation" not in notes


@pytest.mark.parametrize(("obj", "reason"), [
    pytest.param(configmap(None), "data.policy.yaml: missing", id="no-data"),
    pytest.param(configmap(AUDIT, key="policy.yml"), "data.policy.yaml: missing", id="misnamed-key"),
    pytest.param({**configmap(None), "binaryData": {"policy.yaml": "not base64!"}}, "not base64", id="bad-base64"),
    pytest.param({**configmap(None), "data": {"policy.yaml": 42}}, "must be a string", id="not-a-string"),
])
def test_a_configmap_without_a_readable_policy_is_refused(client: FlaskClient, obj: dict[str, Any],
                                                          reason: str) -> None:
    status, doc = post(client, "/validate/policy", review(obj))
    assert status == 200 and doc["response"]["allowed"] is False
    assert reason in doc["response"]["status"]["message"]
