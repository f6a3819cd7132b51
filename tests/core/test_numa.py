"""Single-NUMA binding (issue 15, point 6): a multi-GPU pod that the kubelet's CPU and Topology
Managers cannot give exclusive CPUs next to its GPUs gets a warning that names the fix, on the
workloads where the alignment pays (issue 26, point 7: training and multi-pod groups, not every
serving pod on NVLink)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core import engine, settings
from webhook.core.numa import FIX, MAX_FINDINGS, numa_findings, numa_warning
from tests import judging


def gpu_container(cpu_limit: Any = "16", memory_limit: Any = "200Gi", *, name: str = "vllm", gpus: Any = 8,
                  cpu_request: Any = None, memory_request: Any = None,
                  resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    limits: dict[str, Any] = {resource: gpus}
    if cpu_limit is not None:
        limits["cpu"] = cpu_limit
    if memory_limit is not None:
        limits["memory"] = memory_limit
    requests: dict[str, Any] = {}
    if cpu_request is not None:
        requests["cpu"] = cpu_request
    if memory_request is not None:
        requests["memory"] = memory_request
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {"name": name, "image": "vllm/vllm-openai", "resources": resources}


def sidecar(cpu: Any = "100m", memory: Any = "64Mi", *, name: str = "proxy",
            requests_only: bool = False) -> dict[str, Any]:
    values = {"cpu": cpu, "memory": memory}
    resources = {"requests": values} if requests_only else {"limits": values, "requests": dict(values)}
    return {"name": name, "image": "envoy", "resources": resources}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers), **extra}
    if init:
        spec["initContainers"] = list(init)
    return spec


@pytest.mark.parametrize(
    ("spec", "gpus", "findings"),
    [
        # aligned: Guaranteed with whole CPUs for the GPU container
        pytest.param(pod(gpu_container()), 8, [], id="limits-only-whole-cpus"),
        pytest.param(pod(gpu_container(cpu_request="16", memory_request="200Gi")), 8, [], id="requests-equal-limits"),
        pytest.param(pod(gpu_container(cpu_limit="16000m", cpu_request="16", memory_limit="1Gi",
                                       memory_request="1024Mi")), 8, [], id="equal-in-other-units"),
        pytest.param(pod(gpu_container(cpu_limit=16, memory_limit="200G")), 8, [], id="yaml-integer-cpu"),
        pytest.param(pod(gpu_container(cpu_limit="1e1", cpu_request="10")), 8, [], id="exponent-quantity"),
        pytest.param(pod(gpu_container(), sidecar()), 8, [], id="guaranteed-fractional-sidecar-is-fine"),
        pytest.param(pod(gpu_container(), init=(sidecar(cpu="1", name="fetch"),)), 8, [], id="guaranteed-init"),
        pytest.param(pod(gpu_container(resource="amd.com/gpu")), 8, [], id="amd-guaranteed"),
        # not Guaranteed
        pytest.param(pod(gpu_container(cpu_limit=None, memory_limit=None)), 8,
                     ['container "vllm" sets no cpu limit', 'container "vllm" sets no memory limit',
                      'container "vllm" requests no CPU of its own'], id="gpu-limit-only"),
        pytest.param(pod(gpu_container(memory_limit=None)), 8, ['container "vllm" sets no memory limit'],
                     id="no-memory-limit"),
        pytest.param(pod(gpu_container(cpu_request="8")), 8,
                     ['container "vllm" requests cpu 8 but limits it to 16'], id="cpu-request-below-limit"),
        pytest.param(pod(gpu_container(memory_request="100Gi")), 8,
                     ['container "vllm" requests memory 100Gi but limits it to 200Gi'],
                     id="memory-request-below-limit"),
        pytest.param(pod(gpu_container(cpu_limit="0")), 8,
                     ['container "vllm" sets no cpu limit', 'container "vllm" requests 0 CPUs, not a whole number'],
                     id="zero-cpu-limit"),
        pytest.param(pod(gpu_container(), sidecar(requests_only=True)), 8,
                     ['container "proxy" sets no cpu limit', 'container "proxy" sets no memory limit'],
                     id="burstable-sidecar"),
        pytest.param(pod(gpu_container(), init=({"name": "download", "image": "x"},)), 8,
                     ['init container "download" sets no cpu limit', 'init container "download" sets no memory limit'],
                     id="init-container-counts"),
        pytest.param(pod({"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 4}}}, sidecar()), 4,
                     ['container "vllm" sets no cpu limit', 'container "vllm" sets no memory limit',
                      'container "vllm" requests no CPU of its own'], id="gpu-container-without-cpu"),
        # Guaranteed, but the GPU container's CPUs are fractional: shared pool
        pytest.param(pod(gpu_container(cpu_limit="7500m")), 8,
                     ['container "vllm" requests 7.5 CPUs, not a whole number'],
                     id="fractional-millicores"),
        pytest.param(pod(gpu_container(cpu_limit="1.5", cpu_request="1.5")), 2,
                     ['container "vllm" requests 1.5 CPUs, not a whole number'], id="fractional-decimal"),
        pytest.param(pod(gpu_container(cpu_limit="zero")), 8,
                     ['container "vllm" sets no cpu limit', 'container "vllm" requests zero CPUs, not a whole number'],
                     id="unreadable-cpu"),
        # pod-level resources decide the QoS class when set
        pytest.param(pod({"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "16"}}},
                         resources={"limits": {"cpu": "32", "memory": "400Gi"}}), 8, [], id="pod-level-guaranteed"),
        pytest.param(pod({"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 8}}},
                         resources={"limits": {"cpu": "32", "memory": "400Gi"}}), 8,
                     ['container "vllm" requests no CPU of its own'], id="pod-level-gpu-container-without-cpu"),
        pytest.param(pod(gpu_container(), resources={"requests": {"cpu": "32"}}), 8,
                     ["the pod's spec.resources sets no cpu limit", "the pod's spec.resources sets no memory limit"],
                     id="pod-level-burstable"),
        pytest.param(pod(gpu_container(), resources={}), 8, [], id="empty-pod-level-ignored"),
        # GPU counted by name
        pytest.param(pod(gpu_container(cpu_limit="2.5", resource="amd.com/gpu")), 8,
                     ['container "vllm" requests 2.5 CPUs, not a whole number'], id="amd-fractional"),
        pytest.param(pod(gpu_container(cpu_limit="2.5", resource="example.com/npu")), 8, [],
                     id="unknown-resource-is-not-a-gpu"),
    ],
)
def test_numa_findings(spec: dict[str, Any], gpus: int, findings: list[str]) -> None:
    assert list(numa_findings(spec)) == findings
    warning = numa_warning(spec, gpus)
    if findings:
        assert warning is not None and warning.startswith(FIX)
        for finding in findings[:MAX_FINDINGS]:
            assert finding in warning
    else:
        assert warning is None


@pytest.mark.parametrize("gpus", [0, 1, -3], ids=["no-gpu", "one-gpu", "negative"])
def test_fewer_than_two_gpus_get_no_warning(gpus: int) -> None:
    assert numa_warning(pod(gpu_container(cpu_limit=None, memory_limit=None, gpus=1)), gpus) is None


def test_gpu_resource_names_are_the_callers() -> None:
    spec = pod(gpu_container(cpu_limit="2.5", resource="example.com/npu"))
    assert numa_findings(spec, ("example.com/npu",)) == ('container "vllm" requests 2.5 CPUs, not a whole number',)
    assert numa_warning(spec, 8, gpu_resources=("example.com/npu",)) is not None


def test_fix_leads_and_fits_a_kubectl_warning() -> None:
    assert len(FIX) <= 110
    assert "[" not in FIX and "<" not in FIX
    warning = numa_warning(pod(gpu_container(memory_limit=None)), 8)
    assert warning == f'{FIX} (container "vllm" sets no memory limit)'


def test_many_findings_are_counted_not_listed() -> None:
    spec = pod(gpu_container(cpu_limit=None, memory_limit=None), *(sidecar(name=f"s{i}", requests_only=True)
                                                                     for i in range(3)))
    warning = numa_warning(spec, 8)
    assert warning is not None
    total = len(numa_findings(spec))
    assert total == 9
    assert warning.endswith(f"; {total - MAX_FINDINGS} more)")


def test_container_names_are_cut_and_unnamed_ones_numbered() -> None:
    long_name = "x" * 200
    findings = numa_findings(pod({"name": long_name, "resources": {}}, {"resources": {}}))
    assert findings[0] == f'container "{"x" * 63}" sets no cpu limit'
    assert "container #1 sets no cpu limit" in findings


def test_following_the_advice_clears_the_warning() -> None:
    before = pod(gpu_container(cpu_limit="7500m", memory_limit=None, cpu_request="4"), sidecar(requests_only=True))
    assert numa_warning(before, 8) is not None
    after = pod(gpu_container(cpu_limit="8", memory_limit="200Gi", cpu_request="8"), sidecar())
    assert numa_warning(after, 8) is None


_junk = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                         st.sampled_from(["containers", "initContainers", "resources", "limits", "requests", "cpu",
                                          "memory", "nvidia.com/gpu", "name"]), inner, max_size=5),
                     max_leaves=25)


@given(_junk, st.integers(-2, 16))
def test_hostile_specs_never_raise(spec: Any, gpus: int) -> None:
    result = numa_warning(spec, gpus)
    assert result is None or result.startswith(FIX)


def _workload(kind: str, command: list[str], gpus: int = 4, replicas: int = 1) -> dict[str, Any]:
    """A workload whose one container is not Guaranteed (no memory limit, fractional CPU)."""
    container = {"name": "main", "image": "vllm/vllm-openai:v0.10.1", "command": command,
                 "resources": {"limits": {"nvidia.com/gpu": gpus, "cpu": "7500m"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "ai"}, "spec": spec}
    if kind == "LeaderWorkerSet":
        template = {"metadata": {}, "spec": spec}
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": "w", "namespace": "ai"},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": replicas, "workerTemplate": template}}}
    raise AssertionError(kind)


SERVE_70B_TP4 = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]
SERVE_70B_TP4_PP2 = ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4",
                     "--pipeline-parallel-size", "2"]
TRAIN_8B = ["torchrun", "--nproc-per-node=4", "train.py", "--model_name_or_path=meta-llama/Llama-3.1-8B"]
TRAIN_8B_8 = ["torchrun", "--nproc-per-node=8", "train.py", "--model_name_or_path=meta-llama/Llama-3.1-8B"]


@pytest.mark.parametrize(("obj", "warned"), [
    pytest.param(_workload("Pod", SERVE_70B_TP4), False, id="one-serving-pod-on-nvlink-is-not-held-to-it"),
    pytest.param(_workload("Pod", TRAIN_8B), True, id="training-pays"),
    pytest.param(_workload("LeaderWorkerSet", SERVE_70B_TP4_PP2, replicas=2), True, id="a-multi-node-group-pays"),
    pytest.param(_workload("Pod", TRAIN_8B_8, gpus=8), False, id="a-pod-over-both-sockets-cannot-be-aligned"),
])
def test_numa_unaligned_only_where_alignment_pays(obj: dict[str, Any], warned: bool) -> None:
    results = judging.judge(obj, settings.default())
    lines = [w for r in results for w in r.decision.warnings if w.startswith("numa-unaligned")]
    assert bool(lines) == warned, [w for r in results for w in r.decision.warnings]
    assert all(r.decision.tier == "hbm-nvlink" for r in results if r.profile.gpus_per_pod)
