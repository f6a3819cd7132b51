"""Real controllers (issue 13): kube-controller-manager makes the pods and runs the rollouts, kwok
is the kubelet of the fake GPU nodes, and every pod and ReplicaSet the controllers write goes
through the installed webhook.

- A Deployment of 3 replicas yields 3 stored pods, each with the product affinity the webhook
  injected, all Running and Ready (the rollout finishes).
- Updates judge the change (``updates: judgeChange``): a non-compliant Deployment created in an
  audit namespace keeps working once the namespace enforces: ``kubectl scale``, ``kubectl annotate``
  and ``kubectl rollout restart`` are admitted (with a pre-existing warning); an UPDATE that raises its
  replicas, or a ``kubectl scale`` up, is admitted with a warning that its new pods will be denied, and
  they are; a patch that fixes the
  template rolls out to completion (the controller scales the old, non-compliant ReplicaSet to 0
  with full UPDATEs, which today's webhook denied); an update that makes a compliant Deployment
  non-compliant is still denied with the usual message.

The module's nodes (4 x A100-SXM4-80GB, 2 x L4) carry a taint only its pods tolerate.
"""

from __future__ import annotations

import itertools
import json
import time

from typing import Iterator

import pytest

from control_plane import (ControlPlane, Installed, create_nodes, free_port, gpu_node, kubeconfig_env, register,
                           running_webhook, wait_until_served)
from objects import PRODUCT_LABEL, deployment, product_affinity

pytestmark = pytest.mark.e2e

ENFORCE, AUDIT = "ctrl-enforce", "ctrl-audit"
TAINT = {"key": "gpu-admission.io/e2e-fleet", "value": "controllers", "effect": "NoSchedule"}
ROLLOUT_TIMEOUT = "120s"
_NAMESPACES = itertools.count()


def tolerating(obj: dict, replicas: int = 1) -> dict:
    obj["spec"]["replicas"] = replicas
    spec = obj["spec"]["template"]["spec"]
    spec["tolerations"] = [dict(TAINT, operator="Equal")]
    spec["terminationGracePeriodSeconds"] = 0
    return obj


@pytest.fixture(scope="module")
def cluster(installed: Installed) -> Iterator[ControlPlane]:
    cp = installed.cp
    cp.namespace(ENFORCE)
    cp.namespace(AUDIT, {"gpu-admission.io/mode": "audit"})
    nodes = [gpu_node(f"ctrl-a100-{i}", "NVIDIA-A100-SXM4-80GB", taints=[TAINT]) for i in range(4)]
    nodes += [gpu_node(f"ctrl-l4-{i}", "NVIDIA-L4", taints=[TAINT]) for i in range(2)]
    create_nodes(cp, nodes)
    yield cp
    cp.run("delete", "nodes", *(n["metadata"]["name"] for n in nodes), "--wait=false", check=False)


def pinned_to_hbm(pod: dict) -> bool:
    """The injected required affinity offers the HBM/NVLink products (A100 among them), never L40S."""
    values = product_affinity(pod) or []
    return "NVIDIA-A100-SXM4-80GB" in values and "NVIDIA-L40S" not in values


def pods(cp: ControlPlane, namespace: str, selector: str = "app=llm") -> list[dict]:
    return cp.get("pods", None, namespace, "-l", selector)["items"]


def rollout(cp: ControlPlane, namespace: str, name: str) -> None:
    done = cp.run("rollout", "status", f"deployment/{name}", "-n", namespace, f"--timeout={ROLLOUT_TIMEOUT}",
                  check=False, timeout=150)
    assert done.returncode == 0, f"rollout of {namespace}/{name} did not finish:\n{done.stdout}\n{done.stderr}\n" \
                                 f"{cp.run('get', 'rs,pods', '-n', namespace, '-o', 'wide').stdout}"


def replica_sets(cp: ControlPlane, namespace: str) -> list[dict]:
    return cp.get("rs", None, namespace)["items"]


def delete(cp: ControlPlane, namespace: str, name: str) -> None:
    cp.run("delete", "deployment", name, "-n", namespace, "--wait=true", "--timeout=60s", check=False, timeout=90)


def test_deployment_pods_are_made_by_the_controller_and_mutated(cluster: ControlPlane) -> None:
    name = "three"
    cluster.apply([tolerating(deployment(name, ENFORCE), replicas=3)])
    try:
        rollout(cluster, ENFORCE, name)
        items = pods(cluster, ENFORCE)
        assert len(items) == 3
        for pod in items:
            assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
            assert pinned_to_hbm(pod), pod["spec"].get("affinity")
            assert pod["status"]["phase"] == "Running"
            node = cluster.get("node", pod["spec"]["nodeName"])
            assert node["metadata"]["labels"][PRODUCT_LABEL] == "NVIDIA-A100-SXM4-80GB"
    finally:
        delete(cluster, ENFORCE, name)


def set_mode(cp: ControlPlane, namespace: str, mode: str | None) -> None:
    label = f"gpu-admission.io/mode={mode}" if mode else "gpu-admission.io/mode-"
    cp.run("label", "namespace", namespace, label, "--overwrite")
    time.sleep(1)  # the apiserver's namespace informer behind the webhooks' namespaceSelector


@pytest.fixture()
def bad_deployment(cluster: ControlPlane):
    """A Llama-70B TP4 Deployment pinned to L4 (33 GiB of weights per 24 GB GPU: it cannot work),
    created in a namespace that audits (admitted with warnings, its pod Running on an L4 node: kwok
    does not load models), after which the namespace switches to enforce."""
    namespace, name = f"ctrl-switch-{next(_NAMESPACES)}", "bad"
    cluster.namespace(namespace, {"gpu-admission.io/mode": "audit"})
    created = cluster.apply([tolerating(deployment(name, namespace, pin="NVIDIA-L4"))])
    assert "model-does-not-fit" in created.stderr  # the audit warning
    rollout(cluster, namespace, name)
    set_mode(cluster, namespace, None)  # enforce from now on
    probe = cluster.apply([tolerating(deployment("probe", namespace, pin="NVIDIA-L4"))], "--dry-run=server",
                          check=False)
    assert probe.returncode != 0 and "model-does-not-fit" in probe.stderr, "the namespace does not enforce yet"
    yield namespace, name
    delete(cluster, namespace, name)


@pytest.mark.parametrize("command", [
    pytest.param(("annotate", "deployment/bad", "team=inference"), id="annotate"),
    pytest.param(("rollout", "restart", "deployment/bad"), id="rollout-restart"),
])
def test_updates_of_a_bad_deployment_are_admitted_once_enforcing(cluster: ControlPlane, bad_deployment,
                                                                 command: tuple[str, ...]) -> None:
    namespace, _ = bad_deployment
    done = cluster.run(*command, "-n", namespace, check=False)
    assert done.returncode == 0, done.stderr
    assert "pre-existing model-does-not-fit" in done.stderr


def test_scaling_a_bad_deployment_down_reaches_its_pods(cluster: ControlPlane, bad_deployment) -> None:
    """``kubectl scale`` goes through the scale subresource (a scale-down is answered at once); what
    used to jam is the controller's full UPDATE of the old ReplicaSet that follows it."""
    namespace, name = bad_deployment
    done = cluster.run("scale", f"deployment/{name}", "--replicas=0", "-n", namespace, check=False)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 60
    while pods(cluster, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pods(cluster, namespace), cluster.run("get", "events", "-n", namespace).stdout
    (rs,) = replica_sets(cluster, namespace)
    assert rs["spec"]["replicas"] == 0


def test_a_scale_up_of_a_bad_deployment_says_its_new_pods_will_be_denied(cluster: ControlPlane,
                                                                         bad_deployment) -> None:
    """An UPDATE that raises ``spec.replicas`` (``kubectl patch``, ``apply``, ``edit``) is admitted: a
    scale-up is never blocked. But the pods it asks for are new objects, judged on create, so the
    warning says first that they will be denied; and so they are (the ReplicaSet's FailedCreate)."""
    namespace, name = bad_deployment
    done = cluster.run("patch", f"deployment/{name}", "-n", namespace, "--type=merge",
                       "-p", json.dumps({"spec": {"replicas": 2}}), check=False)
    assert done.returncode == 0, done.stderr
    assert "scale-up: the new pods will be denied, pre-existing model-does-not-fit" in done.stderr, done.stderr
    deadline = time.monotonic() + 60
    while True:
        events = json.loads(cluster.run("get", "events", "-n", namespace, "--field-selector", "reason=FailedCreate",
                                        "-o", "json").stdout)["items"]
        if any("model-does-not-fit" in (e.get("message") or "") for e in events):
            break
        assert time.monotonic() < deadline, cluster.run("get", "events", "-n", namespace).stdout
        time.sleep(0.5)


def test_kubectl_scale_of_a_bad_deployment_warns_that_its_new_pods_will_be_denied(
        cluster: ControlPlane, installed: Installed, bad_deployment, tmp_path) -> None:
    """``kubectl scale`` sends the scale subresource (entry ``warn-scale``): admitted, and the server
    reads the Deployment (one GET) to say the new pods will be denied. Its own webhook here, started
    with this control plane's kubeconfig as the in-cluster service account would be (the admin's
    credentials: RBAC is not exercised, the shipped role is checked by the manifests' dry run)."""
    namespace, name = bad_deployment
    port = free_port()
    try:
        with kubeconfig_env(cluster.kubeconfig), \
                running_webhook(installed.docs, installed.certs_dir, tmp_path / "hook", port=port) as hook:
            register(cluster, installed.docs, port)
            wait_until_served(cluster, hook)
            up = cluster.run("scale", f"deployment/{name}", "--replicas=3", "-n", namespace, check=False)
            assert up.returncode == 0, up.stderr
            assert "scale-up: the new pods will be denied, pre-existing model-does-not-fit" in up.stderr, up.stderr
            down = cluster.run("scale", f"deployment/{name}", "--replicas=1", "-n", namespace, check=False)
            assert down.returncode == 0 and "Warning" not in down.stderr, down.stderr
    finally:
        installed.reinstall()


def test_a_fix_rolls_out_to_completion(cluster: ControlPlane, bad_deployment) -> None:
    namespace, name = bad_deployment
    fixed = cluster.run("patch", f"deployment/{name}", "-n", namespace, "--type=json",
                        "-p", json.dumps([{"op": "remove", "path": "/spec/template/spec/nodeSelector"}]), check=False)
    assert fixed.returncode == 0, fixed.stderr
    rollout(cluster, namespace, name)
    sets = replica_sets(cluster, namespace)
    old = [rs for rs in sets if rs["spec"]["template"]["spec"].get("nodeSelector")]
    new = [rs for rs in sets if not rs["spec"]["template"]["spec"].get("nodeSelector")]
    assert old and all(rs["spec"]["replicas"] == 0 for rs in old), "the old ReplicaSet was not scaled down"
    assert new and new[0]["status"].get("readyReplicas") == 1
    running = [p for p in pods(cluster, namespace) if p["status"]["phase"] == "Running"
               and not p["metadata"].get("deletionTimestamp")]
    assert running and all(pinned_to_hbm(p) for p in running)


def test_an_update_that_adds_a_violation_is_denied(cluster: ControlPlane) -> None:
    name = "good"
    cluster.apply([tolerating(deployment(name, ENFORCE))])
    try:
        rollout(cluster, ENFORCE, name)
        done = cluster.run("patch", f"deployment/{name}", "-n", ENFORCE, "--type=merge",
                           "-p", json.dumps({"spec": {"template": {"spec": {"nodeSelector": {
                               PRODUCT_LABEL: "NVIDIA-L4"}}}}}), check=False)
        assert done.returncode != 0
        assert "denied the request" in done.stderr and "model-does-not-fit" in done.stderr
        assert "/spec/template/spec/nodeSelector" in done.stderr
    finally:
        delete(cluster, ENFORCE, name)
