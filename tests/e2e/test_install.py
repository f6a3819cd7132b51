"""The manifests against a real kube-apiserver.

- Every rendered object of every kustomization is accepted by `kubectl apply --dry-run=server`
  (the apiserver's own validation, CEL compilation of matchConditions included; Pod Security
  `restricted` on the webhook's namespace, with no warning).
- The webhook configurations are registered from the rendered generated-certs overlay (these files,
  not a copy); the only change is clientConfig: the Service reference becomes a URL on loopback,
  since no cluster network exists here. The server runs with the Deployment's own command and the
  ConfigMap's policy.
- The CEL matchConditions are evaluated by the apiserver for real: a GPU object reaches the webhook,
  a CPU one does not (the server's request counter proves it), for pods, init containers, workload
  templates, CronJobs and LeaderWorkerSets (with a stand-in CRD); a MIG slice or a KAI-shared pod
  reaches the validating entry only.
- The webhook's own policy ConfigMap is judged on apply: a broken policy is refused with the reason
  (`--dry-run=server`), the shipped one passes, another ConfigMap of the namespace is not sent.
"""

from __future__ import annotations

import copy
import json
import subprocess
import time

import pytest

from control_plane import ControlPlane, Installed, Webhook
from objects import GPU, cronjob, deployment, lws_object, product_affinity, vllm_pod

pytestmark = pytest.mark.e2e


# --- the webhook, installed from the manifests (conftest.installed) ------------------------------

@pytest.fixture(scope="module")
def installed(installed: Installed) -> tuple[ControlPlane, Webhook, list[dict]]:
    """The session's installation, plus this module's namespaces and a stand-in LeaderWorkerSet CRD."""
    cp = installed.cp
    for name, labels in (("e2e-enforce", {}), ("e2e-audit", {"gpu-admission.io/mode": "audit"}),
                         ("e2e-off", {"gpu-admission.io/mode": "off"})):
        cp.namespace(name, labels)
    cp.apply([LWS_CRD])
    _wait_until_registered(cp, installed.hook)
    return cp, installed.hook, installed.docs


def _wait_until_registered(cp: ControlPlane, hook: Webhook) -> None:
    """The apiserver picks new webhook configurations (and a new CRD) up asynchronously."""
    deadline = time.monotonic() + 60
    while True:
        pod = cp.run("create", "--dry-run=server", "-o", "json", "-f", "-",
                     stdin=json.dumps(vllm_pod("probe", "e2e-enforce")), check=False)
        lws = cp.run("create", "--dry-run=server", "-f", "-", check=False,
                     stdin=json.dumps(lws_object("probe", "e2e-enforce", worker_gpus=8, leader_gpus=8)))
        if pod.returncode == 0 and "affinity" in json.loads(pod.stdout)["spec"] and lws.returncode == 0:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"webhooks never took effect:\n{pod.stderr}\n{lws.stderr}")
        time.sleep(0.5)


# --- objects --------------------------------------------------------------------------------------

LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {"group": "leaderworkerset.x-k8s.io", "scope": "Namespaced",
             "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets", "singular": "leaderworkerset",
                       "listKind": "LeaderWorkerSetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def create(cp: ControlPlane, obj: dict) -> subprocess.CompletedProcess:
    return cp.run("create", "-o", "json", "-f", "-", stdin=json.dumps(obj), check=False)


# --- the tests ------------------------------------------------------------------------------------

def test_every_rendered_object_passes_server_side_dry_run(installed, manifest_tree) -> None:
    cp, _, _ = installed
    kustomizations = sorted(str(p.parent.relative_to(manifest_tree.root))
                            for p in manifest_tree.root.rglob("kustomization.yaml")
                            if "kind: Component" not in p.read_text() and not p.parent.name.startswith("_test-"))
    assert len(kustomizations) >= 6
    for rel in kustomizations:
        docs = [d for d in manifest_tree.render(rel) if not d["apiVersion"].startswith("cert-manager.io/")]
        done = cp.apply(docs, "--dry-run=server", check=False)
        assert done.returncode == 0, f"manifests/{rel}:\n{done.stderr}"
        assert "Warning" not in done.stderr, f"manifests/{rel}:\n{done.stderr}"


def test_gpu_pod_is_sent_and_pinned_to_its_tier(installed) -> None:
    cp, hook, _ = installed
    with hook.counting() as sent:
        done = create(cp, vllm_pod("llama", "e2e-enforce"))
    assert done.returncode == 0, done.stderr
    products = product_affinity(json.loads(done.stdout))
    assert products and "NVIDIA-A100-SXM4-80GB" in products and "NVIDIA-L40S" not in products
    assert sent == [2]  # /mutate, then /validate


def test_gpu_pod_on_the_wrong_tier_is_denied(installed) -> None:
    cp, hook, _ = installed
    with hook.counting() as sent:
        done = create(cp, vllm_pod("llama-l4", "e2e-enforce", pin="NVIDIA-L4"))
    assert done.returncode != 0
    assert 'admission webhook "validate-pods.gpu-admission.io" denied the request' in done.stderr
    assert "model-does-not-fit" in done.stderr
    assert sent == [2]


def test_cpu_objects_never_reach_the_webhook(installed) -> None:
    cp, hook, _ = installed
    cpu_pod = vllm_pod("cpu", "e2e-enforce", gpus=None)
    cpu_pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    with hook.counting() as sent:
        for obj in (cpu_pod, deployment("cpu", "e2e-enforce", gpus=None), cronjob("cpu", "e2e-enforce", gpus=None),
                    lws_object("cpu", "e2e-enforce", worker_gpus=None, leader_gpus=None)):
            done = create(cp, obj)
            assert done.returncode == 0, done.stderr
    assert sent == [0]


def test_a_gpu_in_an_init_container_or_in_requests_is_enough(installed) -> None:
    cp, hook, _ = installed
    init_only = vllm_pod("init-gpu", "e2e-enforce", gpus=None, init_gpus=1)
    init_only["spec"]["containers"] = [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "1d"]}]
    with hook.counting() as sent:
        done = create(cp, init_only)
    assert done.returncode == 0, done.stderr
    assert sent == [2]
    # requests without limits: sent to the mutating webhook, then refused by the apiserver's own
    # validation (extended resources need limits), so the validating webhook never sees it
    requests_only = vllm_pod("requests-only", "e2e-enforce", gpus=None)
    requests_only["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}}
    with hook.counting() as sent:
        done = create(cp, requests_only)
    assert done.returncode != 0 and "Limit must be set" in done.stderr
    assert sent == [1]


def test_mig_slices_and_kai_shares_are_validated_with_warnings_not_pinned(installed) -> None:
    """0 whole GPUs, yet GPU work: a MIG slice and a KAI gpu-fraction pod reach /validate only (the
    apiserver's CEL), are admitted with the core's warning, and get no product pin; so does a
    Deployment whose template carries KAI's gpu-memory."""
    cp, hook, _ = installed
    mig = vllm_pod("mig-slice", "e2e-enforce", gpus=None)
    mig["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": "1"}}
    kai = vllm_pod("kai-share", "e2e-enforce", gpus=None)
    kai["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    kai["spec"]["schedulerName"] = "kai-scheduler"
    shared = deployment("kai-share", "e2e-enforce", gpus=None)
    shared["spec"]["paused"] = True
    shared["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})["gpu-memory"] = "20000"
    with hook.counting() as sent:
        done = [create(cp, obj) for obj in (mig, kai, shared)]
    for d, what in zip(done, ("MIG:", "GPU sharing", "GPU sharing")):
        assert d.returncode == 0, d.stderr
        assert "Warning:" in d.stderr and what in d.stderr, d.stderr
    assert product_affinity(json.loads(done[0].stdout)) is None and product_affinity(json.loads(done[1].stdout)) is None
    assert sent == [3]  # one /validate each, no /mutate


@pytest.mark.parametrize("kind", ["Deployment", "CronJob"])
def test_workload_templates_are_judged_at_apply_time(installed, kind: str) -> None:
    cp, hook, _ = installed
    make = {"Deployment": deployment, "CronJob": cronjob}[kind]
    good = make(f"good-{kind.lower()}", "e2e-enforce")
    if kind == "Deployment":
        # the controller-manager would create its ReplicaSet (a third review) at once; a paused
        # Deployment makes none, so only the reviews of `kubectl create` are counted
        good["spec"]["paused"] = True
    with hook.counting() as sent:
        denied = create(cp, make(f"bad-{kind.lower()}", "e2e-enforce", pin="NVIDIA-L4"))
        allowed = create(cp, good)
    assert denied.returncode != 0 and "validate-" in denied.stderr and "model-does-not-fit" in denied.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert sent == [2]  # one /validate each; templates are never mutated


def test_leaderworkersets_worker_or_leader_gpus_are_sent(installed) -> None:
    cp, hook, _ = installed
    with hook.counting() as sent:
        denied = create(cp, lws_object("bad-lws", "e2e-enforce", worker_gpus=8, leader_gpus=8, pin="NVIDIA-L4"))
        lws = lws_object("leader-gpu", "e2e-enforce", worker_gpus=None, leader_gpus=1)
        lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"] = [
            {"name": "leader", "image": "busybox:1.36", "command": ["sleep", "1d"],
             "resources": {"limits": {GPU: "1"}}}]
        leader_only = create(cp, lws)
    assert denied.returncode != 0 and "validate-leaderworkersets.gpu-admission.io" in denied.stderr
    assert leader_only.returncode == 0, leader_only.stderr
    assert sent == [2]


def test_audit_namespace_admits_with_warnings_and_no_mutation(installed) -> None:
    cp, hook, _ = installed
    with hook.counting() as sent:
        done = create(cp, vllm_pod("llama-l4", "e2e-audit", pin="NVIDIA-L4"))
    assert done.returncode == 0, done.stderr
    assert "Warning:" in done.stderr and "model-does-not-fit" in done.stderr
    assert product_affinity(json.loads(done.stdout)) is None
    assert sent == [1]  # the audit entry only


@pytest.mark.parametrize("namespace", ["e2e-off", "kube-system", "gpu-admission"])
def test_off_system_and_own_namespaces_are_never_sent(installed, namespace: str) -> None:
    cp, hook, _ = installed
    with hook.counting() as sent:
        done = create(cp, vllm_pod(f"llama-l40s-{namespace}", namespace, pin="NVIDIA-L40S"))
    assert sent == [0]
    # the webhook's own namespace enforces Pod Security "restricted": a bare pod is refused there,
    # by the apiserver and not by the webhook
    assert done.returncode == 0 or (namespace == "gpu-admission" and "PodSecurity" in done.stderr), done.stderr


def test_the_policy_configmap_is_judged_on_apply(installed) -> None:
    """Issue 25: the webhook judges its own policy ConfigMap, so `kubectl apply --dry-run=server`
    of a broken policy shows why; the shipped one passes, and no other ConfigMap is sent."""
    cp, hook, docs = installed
    configmap = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-admission-policy")
    for text, reason in (("mode: audit\n", "apiVersion: missing"),
                         ("", "the policy file is empty"),
                         ("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\nmode: enforcee\n",
                          "mode: 'enforcee' is not one of")):
        broken = copy.deepcopy(configmap)
        broken["data"]["policy.yaml"] = text
        with hook.counting() as sent:
            done = cp.apply([broken], "--dry-run=server", check=False)
        assert done.returncode != 0, done.stdout
        assert 'admission webhook "validate-policy.gpu-admission.io" denied the request' in done.stderr, done.stderr
        assert "ConfigMap gpu-admission/gpu-admission-policy data.policy.yaml" in done.stderr and reason in done.stderr
        assert sent == [1]
    with hook.counting() as sent:
        done = cp.apply([configmap], "--dry-run=server", check=False)
    assert done.returncode == 0, done.stderr
    assert sent == [1]
    other = copy.deepcopy(configmap)
    other["metadata"]["name"] = "gpu-admission-dashboard"
    other["data"] = {"policy.yaml": ""}
    with hook.counting() as sent:
        done = cp.apply([other], "--dry-run=server", check=False)
    assert done.returncode == 0, done.stderr
    assert sent == [0]
