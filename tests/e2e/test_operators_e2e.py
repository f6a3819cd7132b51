"""Real operators (issue 14): multi-pod GPU jobs made by their own controllers, placed by
kube-scheduler on a fake fleet of A100 and H100 nodes, through the installed webhook.

Running here (operators_plane.py): the JobSet controller (sigs.k8s.io/jobset v0.10.1) and the
LeaderWorkerSet controller (sigs.k8s.io/lws v0.8.0), built from their modules, with their own
webhooks (LWS's pod webhook is what labels a leader pod with its group-key); kube-controller-manager
(the Job and StatefulSet controllers make the pods) and kwok (bound pods become Running).

(a) A JobSet of 4 pods x 8 GPUs, a torchrun job for Llama-3.1-70B (tier hbm-nvlink), 10 runs, in
    two shapes taken in turn: 1 replicated Job of parallelism 4, and 4 Jobs of 1 pod. With the webhook,
    every run lands on one GPU product; without it (namespace labelled gpu-admission.io/mode=off, which
    no configuration sends) at least one run straddles A100 and H100.
(b) A LeaderWorkerSet of 3 groups of 2 pods x 8 GPUs (vLLM Llama-3.1-405B TP8 x PP2): each group on
    one product.
(c) A RayCluster with a CPU-only head and 2 GPU workers: KubeRay is not run (see the test).
(d) A Kubeflow PyTorchJob for a 70B model pinned to L4: `kubectl apply --dry-run=server` is denied
    with the fix (a stand-in CRD: the training operator is not run).

The fleet: 8 x A100-SXM4-80GB and 8 x H100-80GB-HBM3 nodes of 8 GPUs, interleaved (kube-scheduler
breaks ties in node-list order), with a taint only this module's pods tolerate. Pods request 8 CPUs
and 64 GiB per GPU like test_scheduling's (``_pod``), so each 8-GPU pod takes a node of its own.
Job pods carry kwok's ``pod-complete.stage.kwok.x-k8s.io/delay: 1h``: without it kwok's fast stages
complete a Job's pod at once, and kube-scheduler forgets succeeded pods, so a group's pod affinity to
its first pod would stop counting before the second pod is scheduled (a training pod runs for hours).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from control_plane import ROOT, ControlPlane, Installed, create_nodes, gpu_node
from objects import PRODUCT_LABEL, stand_in_crd
from operators_plane import Operators, running_operators, wait_established
from test_scheduling import _pod, lws_group

pytestmark = pytest.mark.e2e

A100, H100, L40S, L4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S", "NVIDIA-L4"
NODES_PER_PRODUCT = 8
TAINT = {"key": "gpu-admission.io/e2e-fleet", "value": "operators", "effect": "NoSchedule"}
ENFORCE, OFF = "ops-enforce", "ops-off"
RUNS = 10
SHAPES = ((1, 4), (4, 1))
"""(replicas, parallelism) of the JobSet's one replicated Job, taken in turn: 4 pods either way."""
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
BIND_TIMEOUT = 45.0
GPU_GROUP = "gpu-admission.io/gpu-group"
LWS = "leaderworkerset.sigs.k8s.io"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


# --- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def operators(installed: Installed, control_plane_bin: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operators]:
    with running_operators(installed.cp, control_plane_bin, tmp_path_factory.mktemp("operators")) as ops:
        yield ops


@pytest.fixture(scope="module")
def fleet(installed: Installed) -> Iterator[dict[str, str]]:
    """node name -> product of this module's nodes; the two namespaces."""
    cp = installed.cp
    nodes = [gpu_node(f"ops-{kind}-{i}", product, taints=[TAINT])
             for i in range(NODES_PER_PRODUCT) for kind, product in (("a100", A100), ("h100", H100))]
    create_nodes(cp, nodes)
    cp.namespace(ENFORCE)
    cp.namespace(OFF, {"gpu-admission.io/mode": "off"})
    yield {n["metadata"]["name"]: n["metadata"]["labels"][PRODUCT_LABEL] for n in nodes}
    cp.run("delete", "nodes", *(n["metadata"]["name"] for n in nodes), "--wait=false", check=False)


# --- objects --------------------------------------------------------------------------------------

def template(container: dict, gpus: int, *, labels: dict | None = None, annotations: dict | None = None) -> dict:
    """A pod template with test_scheduling's resources (8 CPUs and 64 GiB per GPU) tolerating this
    module's fleet."""
    spec = _pod("template", "unused", container, gpus)["spec"]
    spec["tolerations"] = [dict(TAINT, operator="Equal")]
    return {"metadata": {"labels": labels or {}, "annotations": annotations or {}}, "spec": spec}


TORCHRUN = {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.08-py3",
            "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "train.py",
                        "--model_name_or_path=meta-llama/Llama-3.1-70B", "--bf16", "--fsdp=full_shard"]}


def jobset(name: str, namespace: str, replicas: int, parallelism: int) -> dict:
    tpl = template(TORCHRUN, 8, annotations=KEEP_RUNNING)
    tpl["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
                "parallelism": parallelism, "completions": parallelism, "backoffLimit": 0, "template": tpl}}}]}}


# --- placement ------------------------------------------------------------------------------------

@dataclass
class Placement:
    label: str
    pods: list[dict]
    node_product: dict[str, str]
    expected: int
    groups: dict[str, list[str]] = field(default_factory=dict)
    """group -> its pods' names (one group unless told otherwise)."""

    def product(self, pod: dict) -> str | None:
        node = pod["spec"].get("nodeName")
        return self.node_product.get(node, f"?{node}") if node else None

    @property
    def pending(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods if not p["spec"].get("nodeName")]

    def products(self, names: list[str] | None = None) -> set[str]:
        return {self.product(p) for p in self.pods
                if self.product(p) and (names is None or p["metadata"]["name"] in names)}

    @property
    def split(self) -> list[str]:
        groups = self.groups or {self.label: [p["metadata"]["name"] for p in self.pods]}
        return [f"{g}@{'+'.join(sorted(self.products(names)))}" for g, names in groups.items()
                if len(self.products(names)) > 1]

    def describe(self) -> str:
        rows = []
        for p in sorted(self.pods, key=lambda p: p["metadata"]["name"]):
            labels = p["metadata"].get("labels", {})
            affinity = p["spec"].get("affinity", {}).get("podAffinity", {})
            topo = [t.get("topologyKey") for t in affinity.get("requiredDuringSchedulingIgnoredDuringExecution", [])]
            rows.append(f"    {p['metadata']['name']:<34} {str(self.product(p) or 'pending'):<24} "
                        f"{GPU_GROUP}={labels.get(GPU_GROUP, '-')} podAffinity topologyKeys={topo or '-'}")
        return f"  {self.label}: {len(self.pods)}/{self.expected} pods\n" + "\n".join(rows)


def wait_bound(cp: ControlPlane, namespace: str, selector: str, expected: int,
               timeout: float = BIND_TIMEOUT) -> list[dict]:
    """The pods matching ``selector`` once ``expected`` of them exist and all are bound, or once the
    unbound ones have been reported unschedulable with nothing changing for 2 s, or at ``timeout``."""
    deadline, last, stable = time.monotonic() + timeout, None, 0
    while True:
        pods = cp.get("pods", None, namespace, "-l", selector)["items"]
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        if len(pods) >= expected and all(nodes.values()):
            return pods
        stuck = len(pods) >= expected and all(
            nodes[p["metadata"]["name"]] or any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                                                for c in p["status"].get("conditions", [])) for p in pods)
        stable = stable + 1 if stuck and nodes == last else 0
        if stable >= 4 or time.monotonic() > deadline:
            return pods
        last = nodes
        time.sleep(0.5)


def delete_and_wait(cp: ControlPlane, kind: str, name: str, namespace: str, selector: str) -> None:
    """Foreground deletion (the garbage collector removes the Jobs or StatefulSets and their pods
    before the object itself), then wait until no pod of it is left, so the next run finds the
    fleet empty."""
    cp.run("delete", kind, name, "-n", namespace, "--cascade=foreground", "--wait=true", "--timeout=60s",
           check=False, timeout=90)
    deadline = time.monotonic() + 30
    while cp.get("pods", None, namespace, "-l", selector)["items"]:
        if time.monotonic() > deadline:
            cp.run("delete", "pods", "-l", selector, "-n", namespace, "--grace-period=0", "--force", check=False)
            raise AssertionError(f"pods of {kind} {namespace}/{name} still there 30 s after its deletion")
        time.sleep(0.3)


def run_jobsets(cp: ControlPlane, namespace: str, node_product: dict[str, str], tag: str) -> list[Placement]:
    """RUNS JobSets one after the other, each deleted (with its Jobs and pods) before the next; checks
    on each that the JobSet controller made the Jobs and the Job controller the pods."""
    out = []
    for i in range(RUNS):
        replicas, parallelism = SHAPES[i % len(SHAPES)]
        name = f"llama-70b-{tag}-{i}"
        selector = f"{JOBSET_NAME}={name}"
        created = cp.apply([jobset(name, namespace, replicas, parallelism)], check=False)
        try:
            assert created.returncode == 0, f"JobSet {name} refused:\n{created.stderr}"
            pods = wait_bound(cp, namespace, selector, replicas * parallelism)
            jobs = cp.get("jobs", None, namespace, "-l", selector)["items"]
            assert len(jobs) == replicas, f"{name}: {len(jobs)} Jobs, expected {replicas}"
            for job in jobs:
                owner = job["metadata"]["ownerReferences"][0]
                assert owner["kind"] == "JobSet" and owner["name"] == name and owner.get("controller"), owner
            for pod in pods:
                owner = pod["metadata"]["ownerReferences"][0]
                assert owner["kind"] == "Job" and owner.get("controller"), owner
            out.append(Placement(f"{name} ({replicas} Job(s) x {parallelism} pod(s))", pods, node_product,
                                 replicas * parallelism))
        finally:
            delete_and_wait(cp, "jobset", name, namespace, selector)
    return out


def report(tmp_path: Path, capsys: pytest.CaptureFixture, record_property, title: str,
           placements: list[Placement]) -> str:
    lines = [f"{title}: {sum(1 for p in placements if p.split)}/{len(placements)} runs split across products, "
             f"{sum(1 for p in placements if p.pending)} with pods pending"]
    lines += [p.describe() for p in placements]
    text = "\n".join(lines)
    (tmp_path / "placements.txt").write_text(text + "\n")
    record_property("placements", lines[0])
    with capsys.disabled():
        print(f"\n{lines[0]} ({tmp_path / 'placements.txt'})")
    return text


# --- (a) JobSet -----------------------------------------------------------------------------------

def test_a_jobset_with_the_webhook_lands_on_one_product_every_run(
        operators: Operators, fleet: dict[str, str], tmp_path: Path, capsys, record_property) -> None:
    cp = operators.cp
    placements = run_jobsets(cp, ENFORCE, fleet, "on")
    operators.check()
    text = report(tmp_path, capsys, record_property, "JobSet with the webhook   ", placements)
    assert not [p.label for p in placements if p.pending], f"pods left pending with the webhook:\n{text}"
    assert not [p.split for p in placements if p.split], f"JobSets split across GPU products with the webhook:\n{text}"
    assert all(p.products() <= {A100, H100} for p in placements), text


def test_a_jobset_without_the_webhook_lands_on_both_products(
        operators: Operators, fleet: dict[str, str], tmp_path: Path, capsys, record_property) -> None:
    """The control: the same JobSets in a namespace the webhook never sees. kube-scheduler cannot tell
    one nvidia.com/gpu from another, so a 4-pod job straddles A100 and H100 in some run."""
    cp = operators.cp
    placements = run_jobsets(cp, OFF, fleet, "off")
    text = report(tmp_path, capsys, record_property, "JobSet without the webhook", placements)
    assert not [p.label for p in placements if p.pending], f"pods left pending without the webhook:\n{text}"
    assert any(p.split for p in placements), f"no run straddled two products without the webhook:\n{text}"


# --- (b) LeaderWorkerSet --------------------------------------------------------------------------

LWS_GROUPS, LWS_SIZE = 3, 2


def leader_worker_set(name: str, namespace: str) -> dict:
    """vLLM Llama-3.1-405B at TP8 x PP2 over groups of 2 pods: test_scheduling's leader and worker
    containers (examples/lws-vllm-405b.yaml), without the env the LWS pod webhook injects itself."""
    leader, worker = (copy.deepcopy(w.pod["spec"]["containers"][0]) for w in lws_group(namespace))
    for c in (leader, worker):
        c.pop("env", None)
        c.pop("resources", None)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": LWS_GROUPS, "leaderWorkerTemplate": {
                "size": LWS_SIZE, "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template(leader, 8, labels={"role": "leader"}),
                "workerTemplate": template(worker, 8)}}}


def test_b_leaderworkerset_groups_each_land_on_one_product(
        operators: Operators, fleet: dict[str, str], tmp_path: Path, capsys, record_property) -> None:
    cp, name = operators.cp, "vllm-405b"
    selector = f"{LWS}/name={name}"
    created = cp.apply([leader_worker_set(name, ENFORCE)], check=False)
    assert created.returncode == 0, f"LeaderWorkerSet refused:\n{created.stderr}"
    try:
        pods = wait_bound(cp, ENFORCE, selector, LWS_GROUPS * LWS_SIZE, timeout=60)
        groups: dict[str, list[str]] = {}
        for pod in pods:
            labels = pod["metadata"]["labels"]
            groups.setdefault(labels.get(f"{LWS}/group-key", "<none>"), []).append(pod["metadata"]["name"])
        placement = Placement(f"LeaderWorkerSet {name}", pods, fleet, LWS_GROUPS * LWS_SIZE, groups)
        text = report(tmp_path, capsys, record_property, "LeaderWorkerSet with the webhook", [placement])

        assert len(pods) == LWS_GROUPS * LWS_SIZE, f"the LWS controller made {len(pods)} pods:\n{text}"
        leaders = [p for p in pods if p["metadata"]["labels"].get(f"{LWS}/worker-index") == "0"]
        assert len(leaders) == LWS_GROUPS, text
        for leader in leaders:
            # set by LWS's own pod webhook (pod_webhook.go: sha1 of namespace/leader name), not by a template
            key = hashlib.sha1(f"{ENFORCE}/{leader['metadata']['name']}".encode()).hexdigest()
            assert leader["metadata"]["labels"].get(f"{LWS}/group-key") == key, leader["metadata"]["labels"]
            assert leader["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"
        assert len(groups) == LWS_GROUPS and all(len(v) == LWS_SIZE for v in groups.values()), text
        assert not placement.pending, f"pods left pending:\n{text}"
        assert not placement.split, f"LWS groups split across GPU products:\n{text}"
    finally:
        delete_and_wait(cp, "leaderworkerset", name, ENFORCE, selector)


# --- (c) RayCluster -------------------------------------------------------------------------------

def install_stand_in(cp: ControlPlane, crd: dict) -> None:
    cp.apply([crd])
    wait_established(cp, (crd["metadata"]["name"],))


def ray_pod(cluster: dict, node_type: str, group: str, tpl: dict, start: str) -> dict:
    """A Ray node pod labelled as KubeRay's labelPod() labels it (ray-operator/controllers/ray/common/
    pod.go labelPod; keys in utils/constant.go): the template's
    labels merged under ray.io/cluster, node-type, group, identifier (<cluster>-<node-type>),
    is-ray-node, app.kubernetes.io/name=kuberay and created-by=kuberay-operator; owned by the
    RayCluster (controller reference), named with KubeRay's generateName (<cluster>-head-,
    <cluster>-<group>-worker-) and started with a `ray start` command of the shape KubeRay builds."""
    name = cluster["metadata"]["name"]
    labels = {**tpl.get("metadata", {}).get("labels", {}),
              "ray.io/cluster": name, "ray.io/node-type": node_type, "ray.io/group": group,
              "ray.io/identifier": f"{name}-{node_type}", "ray.io/is-ray-node": "yes",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    spec = copy.deepcopy(tpl["spec"])
    spec["tolerations"] = [dict(TAINT, operator="Equal")]
    spec["terminationGracePeriodSeconds"] = 0
    container = spec["containers"][0]
    container["command"] = ["/bin/bash", "-lc", "--"]
    container["args"] = [f"ulimit -n 65536; {start}"]
    prefix = f"{name}-head-" if node_type == "head" else f"{name}-{group}-worker-"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": prefix, "namespace": cluster["metadata"]["namespace"], "labels": labels,
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name,
                                              "uid": cluster["metadata"]["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": spec}


@pytest.fixture(scope="module")
def ray_cluster(installed: Installed, fleet: dict[str, str]) -> Iterator[tuple[dict, list[dict]]]:
    """examples/ray-cluster-gpu-workers.yaml (a CPU head, 2 workers of 4 GPUs) created under a
    stand-in CRD, and the 3 pods KubeRay would make for it, bound (or given up on)."""
    cp = installed.cp
    install_stand_in(cp, stand_in_crd("ray.io", "v1", "RayCluster", "rayclusters"))
    doc = yaml.safe_load((ROOT / "examples/ray-cluster-gpu-workers.yaml").read_text())
    doc["metadata"]["namespace"] = ENFORCE
    created = cp.apply([doc], check=False)
    assert created.returncode == 0, f"RayCluster refused:\n{created.stderr}"
    cluster = cp.get("raycluster", doc["metadata"]["name"], ENFORCE)
    name, head = cluster["metadata"]["name"], cluster["spec"]["headGroupSpec"]
    pods = [ray_pod(cluster, "head", "headgroup", head["template"],
                    "ray start --head --block --dashboard-host=0.0.0.0 --metrics-export-port=8080 --num-gpus=0")]
    for group in cluster["spec"]["workerGroupSpecs"]:
        gpus = group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        pods += [ray_pod(cluster, "worker", group["groupName"], group["template"],
                         f"ray start --address={name}-head-svc.{ENFORCE}.svc.cluster.local:6379 --block "
                         f"--metrics-export-port=8080 --num-gpus={gpus}")
                 for _ in range(int(group["replicas"]))]
    made = [cp.run("create", "-f", "-", stdin=json.dumps(p), check=False) for p in pods]
    refused = [m.stderr for m in made if m.returncode != 0]
    assert not refused, f"Ray pods refused:\n{refused}"
    bound = wait_bound(cp, ENFORCE, f"ray.io/cluster={name}", len(pods))
    # kwok turns bound pods Running
    deadline = time.monotonic() + 30
    while any(p["status"].get("phase") != "Running" for p in bound) and time.monotonic() < deadline:
        time.sleep(0.5)
        bound = cp.get("pods", None, ENFORCE, "-l", f"ray.io/cluster={name}")["items"]
    yield cluster, bound
    cp.run("delete", "pods", "-l", f"ray.io/cluster={name}", "-n", ENFORCE, "--grace-period=0", "--force",
           check=False)
    cp.run("delete", "raycluster", name, "-n", ENFORCE, "--wait=false", check=False)


def test_c_raycluster_head_and_gpu_workers_all_run(ray_cluster, fleet: dict[str, str]) -> None:
    """The KubeRay operator cannot run here: it is not built by build-control-plane.sh (no module
    version was fetched for it) and its pods would need its head Service and the Ray runtime anyway.
    So its CRD is a stand-in (x-kubernetes-preserve-unknown-fields) and the 3 pods are created as
    KubeRay's labelPod() labels them. The CPU-only head never reaches the webhook (matchConditions:
    no nvidia.com/gpu) and must not be tied to the GPU workers by a pod affinity: all three run."""
    _, pods = ray_cluster
    placement = Placement("RayCluster", pods, fleet, 3)
    text = placement.describe()
    assert len(pods) == 3, text
    assert not placement.pending, f"Ray pods left pending:\n{text}"
    assert all(p["status"].get("phase") == "Running" for p in pods), \
        f"not all Running: {[(p['metadata']['name'], p['status'].get('phase')) for p in pods]}\n{text}"
    (head,) = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert "podAffinity" not in head["spec"].get("affinity", {}), head["spec"]["affinity"]
    assert GPU_GROUP not in head["metadata"]["labels"]


def test_c_raycluster_gpu_workers_land_on_one_product(ray_cluster, fleet: dict[str, str], tmp_path: Path,
                                                      capsys, record_property) -> None:
    """The two GPU workers of one worker group are one job: one product."""
    _, pods = ray_cluster
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    placement = Placement("RayCluster workers", workers, fleet, 2)
    text = report(tmp_path, capsys, record_property, "RayCluster GPU workers with the webhook", [placement])
    assert len(workers) == 2 and not placement.pending, text
    assert not placement.split, f"Ray GPU workers split across GPU products:\n{text}"


# --- (d) PyTorchJob -------------------------------------------------------------------------------

def pytorchjob(pin: str | None) -> dict:
    doc = yaml.safe_load((ROOT / "examples/kubeflow-pytorchjob-llama-70b.yaml").read_text())
    doc["metadata"]["namespace"] = ENFORCE
    for replica in doc["spec"]["pytorchReplicaSpecs"].values():
        if pin:
            replica["template"]["spec"]["nodeSelector"] = {PRODUCT_LABEL: pin}
    return doc


@pytest.fixture(scope="module")
def pytorchjob_crd(installed: Installed) -> ControlPlane:
    """A stand-in for the Kubeflow training operator's PyTorchJob CRD (the operator is not run: only
    admission of the object is tested here)."""
    install_stand_in(installed.cp, stand_in_crd("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"))
    return installed.cp


def test_d_pytorchjob_pinned_to_l4_is_denied_with_the_fix(pytorchjob_crd: ControlPlane, fleet) -> None:
    """FSDP of a 70B model over 4 x 8 GPUs holds 35 GiB per GPU: it cannot work on 24 GB L4s."""
    cp = pytorchjob_crd
    ok = cp.apply([pytorchjob(None)], "--dry-run=server", check=False)
    assert ok.returncode == 0, f"the unpinned PyTorchJob was refused:\n{ok.stderr}"
    done = cp.apply([pytorchjob(L4)], "--dry-run=server", check=False)
    assert done.returncode != 0, f"a 70B PyTorchJob pinned to L4 was admitted:\n{done.stdout}{done.stderr}"
    assert "denied the request" in done.stderr and "model-does-not-fit" in done.stderr, done.stderr
    # the fix: the products that hold it, and where the pin is
    assert "it fits [" in done.stderr and A100 in done.stderr and H100 in done.stderr, done.stderr
    assert "/spec/pytorchReplicaSpecs/" in done.stderr and "nodeSelector" in done.stderr, done.stderr
    assert cp.get("pytorchjob", "llama-70b-fsdp", ENFORCE) is None
