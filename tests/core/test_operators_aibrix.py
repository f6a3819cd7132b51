"""AIBrix orchestration kinds: a RayClusterFleet judged as one of its RayClusters (each replica is its
own group), a StormService's roles (RoleSets x replicas x podGroupSize pods, grouped by PodSet), a
PodSet; the PodSet label as a group, and hostile shapes. Objects are the shipped examples and inline
objects written from the API types' fields."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.operators import aibrix

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()
API = aibrix.API_VERSION


def example(name: str) -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all((ROOT / "examples" / name).read_text()) if d)


FLEET = example("aibrix-rayclusterfleet-qwen2.5-72b.yaml")
STORM = example("aibrix-stormservice-llama-405b-pd.yaml")
PODSET = example("aibrix-podset-deepseek-v3.yaml")
GPU4 = {"limits": {"nvidia.com/gpu": "4"}}


def pod(gpus: int = 4, name: str = "main") -> dict[str, Any]:
    return {"spec": {"containers": [{"name": name, "image": "vllm/vllm-openai:v0.10.1",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def storm(*roles: dict[str, Any], replicas: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "s"}},
                            "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"roles": list(roles)}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": API, "kind": "StormService", "metadata": {"name": "s", "namespace": "n"}, "spec": spec}


def fleet(replicas: Any) -> dict[str, Any]:
    obj = copy.deepcopy(FLEET)
    obj["spec"]["replicas"] = replicas
    return obj


def with_replicas(replicas: Any) -> dict[str, Any]:
    obj = copy.deepcopy(FLEET)
    obj["spec"]["template"]["spec"]["workerGroupSpecs"][0]["replicas"] = replicas
    obj["spec"]["template"]["spec"]["workerGroupSpecs"][0]["minReplicas"] = replicas
    return obj


CASES = [
    # object, [(role, template pointer, GPUs per pod, pods in the group)]
    pytest.param(FLEET, [("head", "/spec/template/spec/headGroupSpec/template", 4, 2),
                         ("gpu-workers", "/spec/template/spec/workerGroupSpecs/0/template", 4, 2)],
                 id="fleet-example-one-cluster"),
    pytest.param(fleet(10), [("head", "/spec/template/spec/headGroupSpec/template", 4, 2),
                             ("gpu-workers", "/spec/template/spec/workerGroupSpecs/0/template", 4, 2)],
                 id="fleet-replicas-are-independent-clusters"),
    pytest.param(with_replicas(3), [("head", "/spec/template/spec/headGroupSpec/template", 4, 4),
                                    ("gpu-workers", "/spec/template/spec/workerGroupSpecs/0/template", 4, 4)],
                 id="fleet-cluster-of-1-head-3-workers"),
    pytest.param(STORM, [("prefill", "/spec/template/spec/roles/0/template", 8, 1),
                         ("decode", "/spec/template/spec/roles/1/template", 8, 2)], id="storm-example-pd"),
    pytest.param(storm({"name": "worker", "replicas": 2, "podGroupSize": 4, "template": pod()}, replicas=3),
                 [("worker", "/spec/template/spec/roles/0/template", 4, 4)], id="storm-podgroupsize-4"),
    pytest.param(storm({"name": "worker", "replicas": 2, "podGroupSize": 1, "template": pod()}),
                 [("worker", "/spec/template/spec/roles/0/template", 4, 1)], id="storm-podgroupsize-1-independent"),
    pytest.param(storm({"replicas": 1, "template": pod()}), [("roles[0]", "/spec/template/spec/roles/0/template", 4, 1)],
                 id="storm-unnamed-role"),
    pytest.param(PODSET, [("podset", "/spec/template", 8, 2)], id="podset-example"),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_aibrix_templates_and_groups(obj: dict[str, Any], expected: list[tuple[str, str, int, int]]) -> None:
    results = [r for r in judge(obj, S) if r.profile.gpus_per_pod > 0]
    got = [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results]
    assert got == expected
    assert all(r.template.patchable for r in results)  # the templates are the object's own


@pytest.mark.parametrize(("obj", "expected"), [
    # object, [(role, pods the template makes, pods per group)]
    pytest.param(fleet(5), [("head", 1, None), ("gpu-workers", 1, None)], id="fleet-counts-one-cluster"),
    pytest.param(fleet(0), [("head", 0, None), ("gpu-workers", 0, None)], id="fleet-zero-replicas-no-pods"),
    pytest.param(storm({"name": "p", "replicas": 2, "template": pod()},
                       {"name": "d", "replicas": 3, "podGroupSize": 2, "template": pod()}, replicas=2),
                 [("p", 4, 1), ("d", 12, 2)], id="storm-rolesets-x-replicas-x-size"),
    pytest.param(storm({"name": "p", "template": pod()}), [("p", 0, 1)], id="storm-role-replicas-unset-is-0"),
    pytest.param(storm({"name": "p", "replicas": -1, "template": pod()}), [("p", 0, 1)], id="storm-negative-replicas"),
    pytest.param(storm({"name": "p", "replicas": "2", "podGroupSize": "3", "template": pod()}), [("p", 6, 3)],
                 id="storm-counts-as-strings"),
    pytest.param(storm({"name": "p", "replicas": 1, "podGroupSize": 0, "template": pod()}), [("p", 1, 1)],
                 id="storm-podgroupsize-0-is-1"),
    pytest.param(storm({"name": "p", "replicas": 1}), [], id="storm-role-without-template"),
])
def test_pods_each_template_makes(obj: dict[str, Any], expected: list[tuple[str, int, int | None]]) -> None:
    got = [(f.role, f.pods, f.group) for f in operators.templates(obj)]
    assert got == expected


@pytest.mark.parametrize("obj", [
    pytest.param({"apiVersion": API, "kind": "StormService", "spec": {"template": {"spec": {"roles": "x"}}}},
                 id="roles-not-a-list"),
    pytest.param({"apiVersion": API, "kind": "StormService", "spec": {"template": None}}, id="template-null"),
    pytest.param({"apiVersion": API, "kind": "StormService", "spec": {"template": {"spec": {"roles": [1, None]}}}},
                 id="roles-not-objects"),
    pytest.param({"apiVersion": API, "kind": "RayClusterFleet", "spec": {"template": []}}, id="fleet-template-list"),
    pytest.param({"apiVersion": API, "kind": "PodSet", "spec": []}, id="podset-spec-list"),
])
def test_hostile_shapes_read_nothing(obj: dict[str, Any]) -> None:
    assert operators.templates(obj) == []


@pytest.mark.parametrize(("labels", "identity"), [
    pytest.param({aibrix.PODSET_NAME: "pd-roleset-abcde-decode-7f9c-0", aibrix.POD_GROUP_INDEX: "1"},
                 "aibrix-podset/pd-roleset-abcde-decode-7f9c-0", id="podset-pod"),
    pytest.param({"ray.io/cluster": "qwen-72b-fleet-6d4f-x2k9p"}, "ray/qwen-72b-fleet-6d4f-x2k9p", id="fleet-cluster-pod"),
    pytest.param({aibrix.ROLESET_NAME: "pd-roleset-abcde", "role-name": "prefill"}, None, id="single-pod-role-no-group"),
])
def test_the_pod_labels_name_the_group(labels: dict[str, str], identity: str | None) -> None:
    found = operators.REGISTRY.membership(labels, {})
    assert (found.identity if found else None) == identity


def test_per_copy_labels_are_skipped_by_the_verdict_memo_but_not_the_group_label() -> None:
    assert {aibrix.POD_GROUP_INDEX, aibrix.ROLE_REPLICA_INDEX} <= operators.REGISTRY.per_copy_labels
    assert aibrix.PODSET_NAME not in operators.REGISTRY.per_copy_labels
