"""What a user sees from `kubectl apply` against a real kube-apiserver with the webhook installed from
the manifests (issue 5, scenarios 1-6). Every verdict is read back from the apiserver: a pinned pod
is stored with the node affinity, a denied or dry-run object is NotFound.

1. A 4-GPU Llama-3.1-70B TP4 pod without node selection, in an enforcing namespace, is stored with
   the node affinity of its tier (the one `gpu-admission check` computes offline).
2. The same pod pinned to L4 (33 GiB of weights per 24 GB GPU: it cannot work) is refused, with the
   webhook's message on stderr; nothing is stored. (L40S is the seed's trap, refused where the
   cluster offers NVLink GPUs: test_verdicts_e2e.py.)
3. In a namespace labelled gpu-admission.io/mode=audit it is admitted, with `Warning:` lines.
4. `kubectl apply --dry-run=server` gives the verdicts of 1-3 and stores nothing.
5. A Deployment of that pod is judged at apply time, on the Deployment (create and update).
6. CPU pods and kube-system pods never reach the webhook (its own request counter); with the webhook
   down, GPU pods get what the shipped failurePolicy says and CPU pods are still created.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from control_plane import WEBHOOK_KINDS, ControlPlane, Installed, Webhook, register, running_webhook, wait_until_served
from objects import deployment, product_affinity, vllm_pod

pytestmark = pytest.mark.e2e

ENFORCE, AUDIT = "scenario-enforce", "scenario-audit"
L40S, L4 = "NVIDIA-L40S", "NVIDIA-L4"
HBM_NVLINK = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")


@pytest.fixture(scope="module")
def env(installed: Installed) -> Installed:
    installed.cp.namespace(ENFORCE)
    installed.cp.namespace(AUDIT, {"gpu-admission.io/mode": "audit"})
    return installed


def apply(cp: ControlPlane, obj: dict, *extra: str) -> subprocess.CompletedProcess:
    return cp.apply([obj], *extra, check=False)


def warnings(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("Warning: ")]


def cpu_pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "1d"],
                                     "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}


def offline_products(obj: dict, docs: list[dict], tmp_path: Path) -> list[str]:
    """The products `gpu-admission check` (the CI door of the same engine) pins the object to, under
    the policy the server runs (the rendered ConfigMap's)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["policy.yaml"])
    done = subprocess.run([str(Path(sys.executable).parent / "gpu-admission"), "check", "-", "--output", "json",
                           "--config", str(policy)], input=json.dumps(obj), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    return result["products"]


# the three verdicts of scenarios 1-3, checked the same way for a real apply and a server dry run

def assert_pinned(done: subprocess.CompletedProcess, pod: dict, expected: list[str]) -> None:
    assert done.returncode == 0, done.stderr
    # the mutating webhook says what it did, and nothing else is wrong
    assert warnings(done) == ["Warning: gpu-admission pinned this pod to GPU tier hbm-nvlink "
                              f"(nvidia.com/gpu.product In {len(expected)} value{'s' if len(expected) != 1 else ''})"
                              ], done.stderr
    products = product_affinity(pod)
    assert products == expected, f"stored/returned affinity {products}, `gpu-admission check` says {expected}"
    assert all(p in products for p in HBM_NVLINK) and L40S not in products


def assert_denied(done: subprocess.CompletedProcess, webhook: str = "validate-pods") -> None:
    assert done.returncode != 0, done.stdout
    assert f'admission webhook "{webhook}.gpu-admission.io" denied the request' in done.stderr, done.stderr
    assert "model-does-not-fit" in done.stderr and "NVIDIA-A100-SXM4-80GB" in done.stderr, done.stderr  # the fix


def assert_warned(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stderr
    assert any("model-does-not-fit" in w and "hbm-nvlink" in w for w in warnings(done)), done.stderr


# --- 1-3 ------------------------------------------------------------------------------------------

def test_1_apply_pins_a_multi_gpu_pod_without_node_selection_to_its_tier(env: Installed, tmp_path: Path) -> None:
    pod = vllm_pod("llama-70b", ENFORCE)
    done = apply(env.cp, pod)
    assert "pod/llama-70b created" in done.stdout, done.stderr
    stored = env.cp.get("pod", "llama-70b", ENFORCE)
    assert stored is not None
    assert_pinned(done, stored, offline_products(pod, env.docs, tmp_path))


def test_2_apply_of_a_pod_pinned_to_the_wrong_tier_fails_and_stores_nothing(env: Installed) -> None:
    done = apply(env.cp, vllm_pod("llama-70b-l4", ENFORCE, pin=L4))
    assert_denied(done)
    assert "gpu-admission denied Pod scenario-enforce/llama-70b-l4" in done.stderr
    assert env.cp.get("pod", "llama-70b-l4", ENFORCE) is None


def test_3_audit_namespace_admits_the_wrong_tier_with_warnings(env: Installed) -> None:
    done = apply(env.cp, vllm_pod("llama-70b-l4", AUDIT, pin=L4))
    assert_warned(done)
    assert "pod/llama-70b-l4 created" in done.stdout
    stored = env.cp.get("pod", "llama-70b-l4", AUDIT)
    assert stored is not None
    assert stored["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": L4}
    assert product_affinity(stored) is None  # audit changes nothing


# --- 4 --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["1-pinned", "2-denied", "3-warned"])
def test_4_server_dry_run_gives_the_same_verdicts_and_stores_nothing(env: Installed, tmp_path: Path,
                                                                     case: str) -> None:
    namespace, pin = {"1-pinned": (ENFORCE, None), "2-denied": (ENFORCE, L4), "3-warned": (AUDIT, L4)}[case]
    pod = vllm_pod(f"dry-run-{case}", namespace, pin=pin)
    with env.hook.counting() as sent:
        done = apply(env.cp, pod, "--dry-run=server", "-o", "json")
    if case == "1-pinned":
        assert_pinned(done, json.loads(done.stdout), offline_products(pod, env.docs, tmp_path))
    elif case == "2-denied":
        assert_denied(done)
    else:
        assert_warned(done)
    assert sent == [1 if namespace == AUDIT else 2]  # the dry run did reach the webhook
    assert env.cp.get("pod", pod["metadata"]["name"], namespace) is None


# --- 5 --------------------------------------------------------------------------------------------

def test_5_a_deployment_whose_pods_would_be_denied_is_judged_at_apply_time(env: Installed) -> None:
    cp = env.cp
    denied = apply(cp, deployment("llama-70b-l4", ENFORCE, pin=L4))
    assert_denied(denied, "validate-workloads")
    assert cp.get("deployment", "llama-70b-l4", ENFORCE) is None

    warned = apply(cp, deployment("llama-70b-l4", AUDIT, pin=L4))
    assert_warned(warned)
    assert cp.get("deployment", "llama-70b-l4", AUDIT) is not None

    # an admitted Deployment, then an update that would move its pods to L4: the update is refused
    assert apply(cp, deployment("llama-70b", ENFORCE)).returncode == 0
    update = apply(cp, deployment("llama-70b", ENFORCE, pin=L4))
    assert_denied(update, "validate-workloads")
    stored = cp.get("deployment", "llama-70b", ENFORCE)
    assert "nodeSelector" not in stored["spec"]["template"]["spec"]


# --- 6 --------------------------------------------------------------------------------------------

@pytest.fixture
def own_webhook(env: Installed, tmp_path: Path) -> Iterator[Webhook]:
    """A second server from the same manifests, with the webhook configurations pointed at it (the
    test may stop it); afterwards they point at the session's server again."""
    try:
        with running_webhook(env.docs, env.certs_dir, tmp_path / "webhook") as hook:
            register(env.cp, env.docs, hook.port)
            wait_until_served(env.cp, hook)
            yield hook
    finally:
        env.reinstall()


def test_6_cpu_and_system_pods_never_reach_the_webhook_and_its_outage_follows_the_failure_policy(
        env: Installed, own_webhook: Webhook) -> None:
    cp, hook = env.cp, own_webhook
    policy = {w["name"].split(".")[0]: w["failurePolicy"]
              for d in env.docs if d["kind"] in WEBHOOK_KINDS for w in d["webhooks"]}
    assert policy["mutate-pods"] == policy["validate-pods"] == "Fail" and policy["audit-pods"] == "Ignore"

    with hook.counting() as sent:
        assert apply(cp, cpu_pod("cpu", ENFORCE)).returncode == 0
        assert apply(cp, vllm_pod("llama-70b-l4", "kube-system", pin=L4)).returncode == 0
    assert sent == [0]
    with hook.counting() as sent:  # the counter does move for a GPU pod: /mutate, then /validate
        assert apply(cp, vllm_pod("llama-70b-up", ENFORCE)).returncode == 0
    assert sent == [2]

    hook.stop()
    # enforce entries fail closed: the GPU pod is refused by the apiserver, naming the webhook
    refused = apply(cp, vllm_pod("llama-70b-down", ENFORCE))
    assert refused.returncode != 0
    assert 'failed calling webhook "mutate-pods.gpu-admission.io"' in refused.stderr, refused.stderr
    assert cp.get("pod", "llama-70b-down", ENFORCE) is None
    # audit entries fail open: admitted as it is, without the webhook's warnings
    admitted = apply(cp, vllm_pod("llama-70b-l4-down", AUDIT, pin=L4))
    assert admitted.returncode == 0 and "model-does-not-fit" not in admitted.stderr, admitted.stderr
    assert cp.get("pod", "llama-70b-l4-down", AUDIT) is not None
    # never sent, so untouched by the outage
    for pod in (cpu_pod("cpu-down", ENFORCE), vllm_pod("llama-70b-down", "kube-system")):
        done = apply(cp, pod)
        assert done.returncode == 0, done.stderr
        assert cp.get("pod", pod["metadata"]["name"], pod["metadata"]["namespace"]) is not None
