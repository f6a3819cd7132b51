"""One GPU product per multi-pod job (issue 14, part 3): a pod its controller labels as a member of a
multi-pod group gets the webhook's own label ``gpu-admission.io/gpu-group`` and a required
podAffinity on it with the product label as topology key. Rows: one pod per controller (labels as
each controller writes them, see webhook/core/groups.py _CONTROLLERS), CPU members left alone, controllers
whose pods are a group only when the launch spans pods, user pins, and the group-fit check."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from webhook.core import settings as settings_mod
from webhook.core.engine import TemplateResult
from tests.judging import judge
from webhook.core.groups import GPU_GROUP, Membership, group_value, membership
from webhook.core.inventory import from_nodes

S = settings_mod.default()
KEY = "nvidia.com/gpu.product"
A100, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"
TRAIN = ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py",
         "--model_name_or_path=meta-llama/Llama-3.1-70B"]
SERVE_ONE = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "8"]


def pod(labels: dict[str, str], *, gpus: int | None = 8, command: list[str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "nvcr.io/nvidia/pytorch:25.08-py3", "command": command or TRAIN}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    meta: dict[str, Any] = {"name": "p", "namespace": "ai", "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **spec}}


def one(obj: Any, **kw: Any) -> TemplateResult:
    results = judge(obj, S, **kw)
    assert len(results) == 1
    return results[0]


def patched(obj: dict[str, Any]) -> dict[str, Any]:
    return jsonpatch.apply_patch(copy.deepcopy(obj), list(one(obj).patch))


def group_of(obj: dict[str, Any]) -> str | None:
    """The gpu-group value the mutated pod carries, checking that its affinity selects it."""
    out = patched(obj)
    value = out["metadata"].get("labels", {}).get(GPU_GROUP)
    terms = out["spec"].get("affinity", {}).get("podAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    if value is None:
        assert terms == []
        return None
    assert terms == [{"labelSelector": {"matchLabels": {GPU_GROUP: value}}, "topologyKey": KEY}]
    return value


KF = {"training.kubeflow.org/job-name": "llama", "training.kubeflow.org/operator-name": "pytorchjob-controller"}
RAY = {"ray.io/cluster": "serve-x7k2p", "ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator"}
LWS = {"leaderworkerset.sigs.k8s.io/name": "vllm"}

GROUPED = [
    # labels as the controller writes them, annotations, command; expected: grouped or not
    pytest.param({**KF, "training.kubeflow.org/replica-type": "master"}, None, TRAIN, True, id="kubeflow-master"),
    pytest.param({"training.kubeflow.org/job-name": "m", "training.kubeflow.org/job-role": "worker"}, None, TRAIN,
                 True, id="mpi-worker"),
    pytest.param({"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "w"}, None,
                 TRAIN, True, id="jobset"),
    pytest.param({**RAY, "ray.io/node-type": "worker", "ray.io/group": "gpu"}, None, TRAIN, True, id="ray-worker"),
    pytest.param({"volcano.sh/job-name": "vj", "volcano.sh/task-spec": "worker"}, None, TRAIN, True, id="volcano"),
    pytest.param({"kaito.sh/workspace": "ws"}, None, TRAIN, True, id="kaito"),
    pytest.param({**LWS, "leaderworkerset.sigs.k8s.io/group-index": "1"}, None, TRAIN, True, id="lws-worker"),
    pytest.param({"gpu-admission.io/group": "mine"}, {"gpu-admission.io/group-size": "4"}, TRAIN, True,
                 id="explicit"),
    pytest.param({"serving.kserve.io/inferenceservice": "isvc", "component": "predictor"}, None, SERVE_ONE, False,
                 id="kserve-single-node-replica"),
    pytest.param({"serving.kserve.io/inferenceservice": "isvc", "component": "predictor"}, None,
                 SERVE_ONE + ["--pipeline-parallel-size", "2"], True, id="kserve-multi-node"),
    pytest.param({"batch.kubernetes.io/job-name": "ij"}, {"batch.kubernetes.io/job-completion-index": "0"}, TRAIN,
                 True, id="indexed-job-multi-node"),
    pytest.param({"batch.kubernetes.io/job-name": "ij"}, {"batch.kubernetes.io/job-completion-index": "0"},
                 SERVE_ONE, False, id="indexed-job-single-node"),
    pytest.param({"batch.kubernetes.io/job-name": "j"}, None, TRAIN, False, id="plain-job"),
    pytest.param({"app": "x"}, None, TRAIN, False, id="no-controller"),
]


@pytest.mark.parametrize(("labels", "annotations", "command", "grouped"), GROUPED)
def test_controller_pods_are_kept_on_one_product(labels: dict[str, str], annotations: dict[str, str] | None,
                                                 command: list[str], grouped: bool) -> None:
    obj = pod(labels, annotations=annotations, command=command)
    value = group_of(obj)
    assert (value is not None) is grouped
    if value is not None:
        assert one(patched(obj)).patch == ()  # a second invocation changes nothing
        assert len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()


@pytest.mark.parametrize("labels", [
    pytest.param({"training.kubeflow.org/job-name": "m", "training.kubeflow.org/job-role": "launcher"}, id="mpi-launcher"),
    pytest.param({**RAY, "ray.io/node-type": "head", "ray.io/group": "headgroup"}, id="ray-head"),
    pytest.param({"jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "driver"},
                 id="jobset-driver"),
])
def test_cpu_members_get_neither_the_label_nor_the_affinity(labels: dict[str, str]) -> None:
    """The trap: a CPU pod carries the same controller labels; if it carried the group label, every
    GPU worker's affinity could be satisfied only next to it, on a node without the product label."""
    r = one(pod(labels, gpus=None, command=["mpirun", "-np", "32", "python", "train.py"]))
    assert r.patch == () and r.decision.group is None


def test_members_of_one_group_share_the_value_and_groups_differ() -> None:
    master = group_of(pod({**KF, "training.kubeflow.org/replica-type": "master"}))
    worker = group_of(pod({**KF, "training.kubeflow.org/replica-type": "worker",
                           "training.kubeflow.org/replica-index": "2"}))
    other = group_of(pod({**KF, "training.kubeflow.org/job-name": "other"}))
    assert master == worker != other
    assert master is not None and master.startswith("llama-")


def test_lws_leader_before_lws_own_webhook_joins_its_workers() -> None:
    """A leader pod may reach us before LWS's webhook gives it group-index: its StatefulSet pod index
    is its group index (one leader per group), so it lands in the same group as its workers."""
    leader = group_of(pod({**LWS, "apps.kubernetes.io/pod-index": "1"}))
    worker = group_of(pod({**LWS, "leaderworkerset.sigs.k8s.io/group-index": "1",
                           "leaderworkerset.sigs.k8s.io/worker-index": "3", "apps.kubernetes.io/pod-index": "3"}))
    other_group = group_of(pod({**LWS, "leaderworkerset.sigs.k8s.io/group-index": "0",
                                "leaderworkerset.sigs.k8s.io/worker-index": "1"}))
    assert leader == worker != other_group


def test_a_user_pin_is_never_contradicted() -> None:
    """Members the user pinned to different products form different groups (the pins stay)."""
    on_a100 = pod(KF, nodeSelector={KEY: A100})
    on_h100 = pod(KF, nodeSelector={KEY: H100})
    a, h = group_of(on_a100), group_of(on_h100)
    assert a and h and a != h
    assert patched(on_a100)["spec"]["nodeSelector"] == {KEY: A100}
    assert group_of(pod(KF, nodeSelector={KEY: A100})) == a


def test_a_group_label_already_there_is_kept() -> None:
    obj = pod({**KF, GPU_GROUP: "chosen-by-user"})
    assert group_of(obj) == "chosen-by-user"


def test_group_value_is_a_valid_label_value_for_any_name() -> None:
    for name in ["x" * 300, "..--__", "ünïcode/name", "a"]:
        value = group_value(Membership("JobSet", name, f"jobset/{name}"), None)
        assert 0 < len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()
        assert all(c.isascii() and (c.isalnum() or c in "-_.") for c in value)


def test_membership_of_an_unlabelled_pod_is_none() -> None:
    assert membership({}, {}) is None


def gpu_node(name: str, product: str, gpus: int = 8) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {KEY: product, "nvidia.com/gpu.count": str(gpus)}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus)}}}


def inventory(*nodes: dict[str, Any]) -> Any:
    return from_nodes(nodes, label_key=KEY, scheme=S.label_scheme, catalog=S.catalog, gpu_resources=S.gpu_resources)


@pytest.mark.parametrize(("nodes", "fits"), [
    pytest.param([gpu_node("a1", A100), gpu_node("a2", A100), gpu_node("h1", H100), gpu_node("h2", H100),
                  gpu_node("h3", H100)], False, id="3+2-nodes-for-4-pods"),
    pytest.param([gpu_node(f"h{i}", H100) for i in range(4)] + [gpu_node("a1", A100)], True, id="4-h100-nodes"),
    pytest.param([gpu_node("a1", A100, 16), gpu_node("a2", A100, 16)], True, id="2-nodes-of-16"),
])
def test_a_group_no_single_product_can_hold_is_reported_with_the_numbers(nodes: list[dict[str, Any]],
                                                                       fits: bool) -> None:
    obj = pod(KF)  # torchrun --nnodes=4 at 8 GPUs: 4 pods of 8
    inv = inventory(*nodes)
    warned = one(obj, inventory=inv)
    assert warned.decision.allowed
    assert any("group-does-not-fit" in w for w in warned.decision.warnings) is not fits
    denying = settings_mod.parse_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
                                      "inventory:\n  groupFit: deny\n", source="test")
    denied = judge(obj, denying, inventory=inv)[0]
    assert denied.decision.allowed is fits
    if not fits:
        message = denied.decision.violations[0].message
        assert denied.decision.violations[0].code == "group-does-not-fit"
        assert "4 pods x 8 GPUs" in message and "NVIDIA-H100-80GB-HBM3: 3" in message
