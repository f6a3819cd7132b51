"""The kube-scheduler extender on the admission server, through ``app.test_client()``: the wire
shapes of k8s.io/kube-scheduler/extender/v1 (Go field names, capitalised), the filter and score
rules, malformed arguments, and the shipped KubeSchedulerConfiguration snippet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from webhook.core import scheduling, settings as settings_mod
from webhook.server.app import create_app

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "manifests/scheduler/kube-scheduler-config.yaml"
A100, L40S, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"


def node(name: str, product: str | None, gpus: int, *, count_label: int | None = None,
         allocatable: int | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if product is not None:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus if count_label is None else count_label)
    alloc = gpus if allocatable is None else allocatable
    return {"metadata": {"name": name, "labels": labels},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": str(gpus)},
                       "allocatable": {"cpu": "64", "nvidia.com/gpu": str(alloc)}}}


MIXED = node("mixed", A100, 8, count_label=4)  # GFD's flipping labels: 4 of one model, 8 GPUs
UNLABELLED = node("bare", None, 8)
A100_1 = node("a100-1", A100, 8)
A100_2 = node("a100-2", "A100-SXM4-80GB", 8)  # legacy spelling, same product and pool
L40S_1 = node("l40s-1", L40S, 4)
NODES = [MIXED, UNLABELLED, A100_1, A100_2, L40S_1]


def pod(gpus: int, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        init_gpus: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x",
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if init_gpus:
        spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": init_gpus}}}]
    meta: dict[str, Any] = {"name": "p", "namespace": "ai", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def args(p: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Pod": p, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


@pytest.fixture()
def client() -> FlaskClient:
    return create_app(settings_mod.default()).test_client()


def filter_(client: FlaskClient, body: Any) -> dict[str, Any]:
    resp = client.post("/scheduler/filter", json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return resp.get_json()


def scores(client: FlaskClient, body: Any) -> dict[str, int]:
    resp = client.post("/scheduler/prioritize", json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    out = resp.get_json()
    assert isinstance(out, list) and all(set(h) == {"Host", "Score"} for h in out)
    return {h["Host"]: h["Score"] for h in out}


def kept(result: dict[str, Any]) -> list[str]:
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]


# ----------------------------------------------------------------------------- filter


def test_filter_drops_mixed_and_unlabelled_nodes_for_a_4_gpu_pod(client: FlaskClient) -> None:
    result = filter_(client, args(pod(4), NODES))
    assert set(result) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert kept(result) == ["a100-1", "a100-2", "l40s-1"]
    assert result["NodeNames"] is None and result["Error"] == "" and result["FailedNodes"] == {}
    failed = result["FailedAndUnresolvableNodes"]
    assert set(failed) == {"mixed", "bare"}
    assert "nvidia.com/gpu.count=4" in failed["mixed"] and "8 GPUs" in failed["mixed"]
    assert "no nvidia.com/gpu.product label" in failed["bare"]
    # kept nodes are echoed exactly as received (the scheduler uses them as the node objects)
    assert result["Nodes"]["items"][0] == A100_1


def test_filter_keeps_every_node_for_a_1_gpu_pod(client: FlaskClient) -> None:
    result = filter_(client, args(pod(1), NODES))
    assert kept(result) == [n["metadata"]["name"] for n in NODES]
    assert result["FailedAndUnresolvableNodes"] == {}


@pytest.mark.parametrize("p,dropped", [
    (pod(1, labels={"gpu-admission.io/group": "llama"}), True),  # a group member, even with one GPU
    (pod(1, labels={"leaderworkerset.sigs.k8s.io/group-key": "abc"}), True),
    (pod(1, init_gpus=2), True),  # an init container's GPUs count, as Kubernetes counts them
    (pod(2), True),
    (pod(0), False),
])
def test_filter_who_is_strict(client: FlaskClient, p: dict[str, Any], dropped: bool) -> None:
    result = filter_(client, args(p, [MIXED, A100_1]))
    assert ("mixed" in result["FailedAndUnresolvableNodes"]) is dropped
    assert "a100-1" in kept(result)


@pytest.mark.parametrize("n,trusted", [
    (node("shared", "NVIDIA-A100-SXM4-80GB-SHARED", 8), False),  # time-sliced replicas
    (node("no-count", A100, 8, count_label=None), True),
    (node("more-count", A100, 4, count_label=8), True),
])
def test_filter_node_readings(client: FlaskClient, n: dict[str, Any], trusted: bool) -> None:
    if n["metadata"]["name"] == "no-count":
        del n["metadata"]["labels"]["nvidia.com/gpu.count"]
    assert (kept(filter_(client, args(pod(4), [n]))) == [n["metadata"]["name"]]) is trusted


def test_filter_empty_node_list(client: FlaskClient) -> None:
    assert filter_(client, {"Pod": pod(4), "Nodes": {"items": None}})["Nodes"] == {"items": []}


# ----------------------------------------------------------------------------- prioritize


def test_prioritize_single_gpu_is_neutral(client: FlaskClient) -> None:
    assert scores(client, args(pod(1), NODES)) == {n["metadata"]["name"]: scheduling.NEUTRAL for n in NODES}


def test_prioritize_multi_gpu(client: FlaskClient) -> None:
    got = scores(client, args(pod(4), NODES))
    assert got["mixed"] == 0 and got["bare"] == 0
    # the A100 pool (16 GPUs, both spellings) is the largest with room: 10; L40S (4 GPUs) has room too
    assert got["a100-1"] == got["a100-2"] == 10
    assert got["l40s-1"] == 7 + round(3 * 4 / 16) == 8
    assert all(6 <= got[n] <= 10 for n in ("a100-1", "a100-2", "l40s-1"))


def test_prioritize_group_prefers_the_pool_that_holds_the_group(client: FlaskClient) -> None:
    member = pod(4, labels={"gpu-admission.io/group": "llama"}, annotations={"gpu-admission.io/group-size": "3"})
    h100 = node("h100-1", H100, 4)
    got = scores(client, args(member, [A100_1, A100_2, L40S_1, h100, MIXED]))
    # 3 pods x 4 GPUs = 12: only the A100 pool (16) holds the whole group
    assert got == {"a100-1": 10, "a100-2": 10, "l40s-1": scheduling.SHORT_POOL,
                   "h100-1": scheduling.SHORT_POOL, "mixed": 0}


def test_prioritize_order_and_range(client: FlaskClient) -> None:
    resp = client.post("/scheduler/prioritize", json=args(pod(8), NODES))
    hosts = resp.get_json()
    assert [h["Host"] for h in hosts] == [n["metadata"]["name"] for n in NODES]
    assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in hosts)


def test_heterogeneous_risk_mirrors_the_seed() -> None:
    assert scheduling.heterogeneous_risk(["A100"] * 4) == 100
    assert scheduling.heterogeneous_risk(["A100", "A100", "L40S", "L40S"]) == 0
    assert scheduling.heterogeneous_risk([]) == 100


def test_policy_label_key_is_used() -> None:
    s = settings_mod.from_mapping({"productLabel": "cloud.google.com/gke-accelerator"})
    app = create_app(s).test_client()
    gke = {"metadata": {"name": "g", "labels": {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}
    assert kept(filter_(app, args(pod(4), [gke, A100_1]))) == ["g"]  # A100_1 has no GKE label


# ----------------------------------------------------------------------------- malformed


@pytest.mark.parametrize("path", ["/scheduler/filter", "/scheduler/prioritize"])
@pytest.mark.parametrize("body,needle", [
    (b"", "not JSON"),
    (b"{not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"Nodes": {"items": []}}', "Pod"),
    (b'{"Pod": "x", "Nodes": {"items": []}}', "Pod"),
    (b'{"Pod": {}}', "Nodes"),
    (b'{"Pod": {}, "NodeNames": ["a"]}', "nodeCacheCapable: false"),
    (b'{"Pod": {}, "Nodes": []}', "items"),
    (b'{"Pod": {}, "Nodes": {"items": {}}}', "items"),
    (b'{"Pod": {}, "Nodes": {"items": [1]}}', "items[0]"),
    (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}', "metadata.name"),
    (b"[" * 100000, "not JSON"),
])
def test_malformed_args_are_400(client: FlaskClient, path: str, body: bytes, needle: str) -> None:
    resp = client.post(path, data=body, content_type="application/json")
    assert resp.status_code == 400
    assert needle in resp.get_json()["error"]


@pytest.mark.parametrize("p", [{}, {"spec": None}, {"spec": {"containers": "x"}}, {"metadata": [], "spec": {}},
                               {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}}])
def test_odd_pods_never_500(client: FlaskClient, p: dict[str, Any]) -> None:
    weird = {"metadata": {"name": "w", "labels": "x"}, "status": {"capacity": []}}
    for path in ("/scheduler/filter", "/scheduler/prioritize"):
        assert client.post(path, json=args(p, [A100_1, weird])).status_code == 200


def test_large_node_lists_are_read(client: FlaskClient) -> None:
    """More than the admission routes' 4 MiB: a big cluster's full Node objects."""
    padding = {"x-padding/" + str(i): "v" * 50 for i in range(200)}
    nodes = []
    for i in range(500):
        n = node(f"n{i}", A100, 8)
        n["metadata"]["annotations"] = padding
        nodes.append(n)
    result = filter_(client, args(pod(4), nodes))
    assert len(result["Nodes"]["items"]) == 500


def test_get_is_not_allowed(client: FlaskClient) -> None:
    assert client.get("/scheduler/filter").status_code == 405


# ----------------------------------------------------------------------------- shipped configuration


def test_scheduler_config_snippet() -> None:
    doc = yaml.safe_load(CONFIG.read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    (ext,) = doc["extenders"]
    assert ext["urlPrefix"] == "https://gpu-admission.gpu-admission.svc:443/scheduler"
    assert (ext["filterVerb"], ext["prioritizeVerb"]) == ("filter", "prioritize")
    assert ext["weight"] == 5 and ext["enableHTTPS"] is True
    assert ext["nodeCacheCapable"] is False and ext["ignorable"] is True
    # every GPU resource the default policy counts
    assert ext["managedResources"] == [{"name": r, "ignoredByScheduler": False}
                                       for r in settings_mod.default().gpu_resources]
    assert set(ext["tlsConfig"]) & {"caData", "caFile"} and "insecure" not in ext["tlsConfig"]
    assert not {"bindVerb", "preemptVerb"} & set(ext)
    # configures the scheduler, not the cluster: never part of a kustomization
    assert not (CONFIG.parent / "kustomization.yaml").exists()
    assert (CONFIG.parent / "README.md").exists()
    for kustomization in (ROOT / "manifests").rglob("kustomization.yaml"):
        text = kustomization.read_text()
        assert "kube-scheduler-config" not in text and "scheduler/" not in text, kustomization


def test_scheduler_config_url_matches_the_routes(client: FlaskClient) -> None:
    ext = yaml.safe_load(CONFIG.read_text())["extenders"][0]
    prefix = ext["urlPrefix"].split(":443", 1)[1]
    for verb in (ext["filterVerb"], ext["prioritizeVerb"]):
        assert client.post(f"{prefix}/{verb}", json=args(pod(1), [A100_1])).status_code == 200


def test_prioritize_a_controller_pod_as_the_mutating_webhook_left_it(client: FlaskClient) -> None:
    """A Kubeflow worker pod after /mutate: the webhook's gpu-group label and group-size annotation
    are what the extender reads, so the first member of a 3 x 4-GPU job goes to the pool that holds
    the whole job (issue 14: prefer a product with room for the group)."""
    from webhook.core import engine
    import jsonpatch

    raw = pod(4, labels={"training.kubeflow.org/job-name": "llama", "training.kubeflow.org/replica-type": "worker"})
    raw.update(apiVersion="v1", kind="Pod")
    raw["spec"]["containers"][0]["command"] = ["torchrun", "--nnodes=3", "--nproc-per-node=4", "train.py",
                                               "--model_name_or_path=meta-llama/Llama-3.1-8B"]
    (result,) = engine.judge(raw, settings_mod.default())
    member = jsonpatch.apply_patch(raw, list(result.patch))
    assert member["metadata"]["annotations"]["gpu-admission.io/group-size"] == "3"
    got = scores(client, args(member, [A100_1, A100_2, L40S_1, node("h100-1", H100, 4), MIXED]))
    assert got == {"a100-1": 10, "a100-2": 10, "l40s-1": scheduling.SHORT_POOL,
                   "h100-1": scheduling.SHORT_POOL, "mixed": 0}
