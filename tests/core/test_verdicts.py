"""The verdict memo's key (``webhook.core.verdicts.key``) and the property the server's memo rests on:
the pods one controller makes from one template, differing only in what the controller and the
apiserver stamp per copy, get the same verdict, so a cached verdict always equals a fresh one.

The pods are every template of ``examples/`` stamped as their controllers stamp them (a ReplicaSet's
generateName suffix and pod-template-hash, an Indexed Job's completion index and hostname, a
JobSet's job indexes, a StatefulSet's pod name and revision), with the fields kube-apiserver
defaults before webhooks run (the projected token volume with its random suffix). The replies are
compared whole (patch, warnings, audit annotations, message), through the server's admission path, in
tests/server/test_verdict_replies.py (the core tests import no server).
"""

from __future__ import annotations

import copy
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core import verdicts
from webhook.core.settings import default as default_settings
from tests import judging

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SETTINGS = default_settings()


def _templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    kind = obj.get("kind")
    if kind == "Pod":
        return [{"metadata": obj.get("metadata", {}), "spec": spec}]
    if kind == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    if kind == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if t]
    if kind == "JobSet":
        return [r["template"]["spec"]["template"] for r in spec.get("replicatedJobs", [])]
    template = spec.get("template")
    return [template] if isinstance(template, dict) and isinstance(template.get("spec"), dict) else []


def _example_templates() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict):
                for j, template in enumerate(_templates(doc)):
                    out.append((f"{path.stem}#{i}.{j}", doc, template))
    return out


TEMPLATES = _example_templates()


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def stamped(owner: dict[str, Any], template: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One pod of ``template`` as its controller and kube-apiserver make it (random per-copy fields)."""
    meta = copy.deepcopy(template.get("metadata") or {})
    spec = copy.deepcopy(template["spec"])
    owner_meta = owner.get("metadata", {})
    name = owner_meta.get("name", "pod")
    labels = meta.setdefault("labels", {})
    annotations = meta.setdefault("annotations", {})
    kind = owner.get("kind")
    index = rng.randrange(0, 256)
    if kind in ("Deployment", "ReplicaSet"):
        rs_hash = _suffix(random.Random(name), 10)  # one ReplicaSet: the template's hash
        labels["pod-template-hash"] = rs_hash
        meta["generateName"] = f"{name}-{rs_hash}-"
        meta["name"] = meta["generateName"] + _suffix(rng)
        owner_kind, owner_name = "ReplicaSet", f"{name}-{rs_hash}"
    elif kind in ("Job", "CronJob", "JobSet"):
        owner_kind, owner_name = "Job", name
        labels["batch.kubernetes.io/job-name"] = labels["job-name"] = name
        labels["batch.kubernetes.io/controller-uid"] = labels["controller-uid"] = "5e1c0de0-0000-4000-8000-000000000001"
        if kind == "JobSet" or random.Random(name).random() < 0.5:  # an Indexed Job (all its pods, or none)
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
            annotations["batch.kubernetes.io/job-completion-index"] = str(index)
            spec["hostname"] = f"{name}-{index}"
        if kind == "JobSet":
            labels.update({"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                           "jobset.sigs.k8s.io/job-index": str(index % 4),
                           "jobset.sigs.k8s.io/job-global-index": str(index % 4),
                           "jobset.sigs.k8s.io/restart-attempt": "0"})
            annotations.update({"jobset.sigs.k8s.io/job-index": str(index % 4),
                                "jobset.sigs.k8s.io/job-global-index": str(index % 4)})
            spec["subdomain"] = name
        meta["generateName"] = f"{name}-{index}-"
        meta["name"] = meta["generateName"] + _suffix(rng)
    elif kind in ("StatefulSet", "LeaderWorkerSet"):
        owner_kind, owner_name = "StatefulSet", name
        labels["controller-revision-hash"] = f"{name}-{_suffix(rng, 10)}"
        meta["name"] = labels["statefulset.kubernetes.io/pod-name"] = f"{name}-{index}"
    else:
        owner_kind, owner_name = kind or "Pod", name
        meta["name"] = f"{name}-{_suffix(rng)}"
    meta["namespace"] = owner_meta.get("namespace", "ai-serving")
    meta["uid"] = str(uuid.UUID(int=rng.getrandbits(128)))
    meta["creationTimestamp"] = f"2026-12-02T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z"
    if kind != "Pod":
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name,
                                    "uid": str(uuid.UUID(int=rng.getrandbits(128))), "controller": True,
                                    "blockOwnerDeletion": True}]
    volume = f"kube-api-access-{_suffix(rng)}"
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        c.setdefault("volumeMounts", []).append({"name": volume, "readOnly": True,
                                                 "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    spec.setdefault("volumes", []).append({"name": volume, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}})
    spec.setdefault("tolerations", []).append({"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                               "effect": "NoExecute", "tolerationSeconds": 300})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(("owner", "template"), [(o, t) for _, o, t in TEMPLATES], ids=[i for i, _, _ in TEMPLATES])
def test_copies_of_one_template_share_a_key_and_a_verdict(owner: dict[str, Any], template: dict[str, Any]) -> None:
    rng = random.Random(20261202)
    first, second = stamped(owner, template, rng), stamped(owner, template, rng)
    assert verdicts.key(first) == verdicts.key(second)
    assert _verdict(first) == _verdict(second)


def _verdict(pod: dict[str, Any]) -> list[Any]:
    """What the engine says of ``pod`` (both endpoints' judgements), without the template objects."""
    from webhook.core import engine

    out = []
    for mutate in (True, False):
        judged = judging.judge_review(pod, SETTINGS, mutate=mutate)
        out.append([(r.profile, r.decision, r.patch, r.template.role, r.template.found, r.template.notes,
                     r.template.pointer) for r in judged.results])
        out.append(judged.secrets)
    return out


def _pod(**spec: Any) -> dict[str, Any]:
    base = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "uid": "u-1", "namespace": "ns",
                         "labels": {"app": "x", "pod-template-hash": "abc"}},
            "spec": {"hostname": "job-1", "containers": [{"name": "c", "image": "vllm/vllm-openai", "command": ["vllm", "serve", "m"],
                                     "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    base["spec"].update(spec)
    return base


def _with(pod: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    *parents, last = path.split("/")
    node = out
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


@pytest.mark.parametrize(("path", "value", "same"), [
    pytest.param("metadata/name", "b", True, id="name-per-copy"),
    pytest.param("metadata/uid", "u-2", True, id="uid-per-copy"),
    pytest.param("metadata/labels/pod-template-hash", "def", True, id="template-hash-per-copy"),
    pytest.param("spec/hostname", "job-3", True, id="hostname-per-copy"),
    pytest.param("metadata/labels/app", "y", False, id="other-label-counts"),
    pytest.param("metadata/labels/apps.kubernetes.io~pod-index", "1", False, id="pod-index-counts"),
    pytest.param("metadata/namespace", "other", False, id="namespace-counts"),
    pytest.param("spec/nodeSelector", {"nvidia.com/gpu.product": "NVIDIA-L40S"}, False, id="selector-counts"),
    pytest.param("spec/containers/0/command", ["vllm", "serve", "m", "-tp", "2"], False, id="command-counts"),
    pytest.param("spec/containers/0/env", [{"name": "TP", "value": "2"}], False, id="env-counts"),
    pytest.param("spec/volumes", [{"name": "models", "persistentVolumeClaim": {"claimName": "m"}}], False,
                 id="real-volume-counts"),
])
def test_key_replaces_only_per_copy_fields(path: str, value: Any, same: bool) -> None:
    pod = _pod()
    if "~" in path:  # a label key with a slash
        changed = copy.deepcopy(pod)
        changed["metadata"]["labels"][path.rsplit("/", 1)[1].replace("~", "/")] = value
    else:
        changed = _with(pod, path, value)
    assert (verdicts.key(pod) == verdicts.key(changed)) is same


def test_key_keeps_presence_of_per_copy_fields() -> None:
    """An Indexed Job's pod is told apart by the completion-index annotation being there at all."""
    pod = _pod()
    indexed = copy.deepcopy(pod)
    indexed["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": "3"}
    other = copy.deepcopy(indexed)
    other["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = "7"
    assert verdicts.key(pod) != verdicts.key(indexed) == verdicts.key(other)


def test_token_volume_names_are_per_copy_and_other_volume_names_are_not() -> None:
    def with_volume(name: str) -> dict[str, Any]:
        pod = _pod(volumes=[{"name": name, "projected": {"sources": []}}])
        pod["spec"]["containers"][0]["volumeMounts"] = [{"name": name, "mountPath": "/var/run/secrets"}]
        return pod
    assert verdicts.key(with_volume("kube-api-access-abcde")) == verdicts.key(with_volume("kube-api-access-xyz12"))
    assert verdicts.key(with_volume("models-abcde")) != verdicts.key(with_volume("models-xyz12"))


@pytest.mark.parametrize("obj", [None, [], "pod", 3], ids=["none", "list", "string", "number"])
def test_no_key_for_what_is_not_an_object(obj: Any) -> None:
    assert verdicts.key(obj) is None


def test_key_tells_types_apart() -> None:
    """``1``, ``"1"``, ``1.0`` and ``True`` are different GPU counts or flags to the engine."""
    keys = {verdicts.key(_pod(priority=value)) for value in (1, "1", 1.0, True)}
    assert len(keys) == 4


def test_no_key_for_what_cannot_be_serialized() -> None:
    assert verdicts.key({"spec": {"containers": [lambda: None]}}) is None


@pytest.mark.parametrize(("metadata", "made"), [
    pytest.param({"name": "a"}, False, id="by-hand"),
    pytest.param({"generateName": "llama-7d9f-"}, True, id="generate-name"),
    pytest.param({"name": "w-0", "ownerReferences": [{"kind": "StatefulSet", "name": "w", "controller": True}]}, True,
                 id="controller-owner"),
    pytest.param({"name": "a", "ownerReferences": [{"kind": "ConfigMap", "name": "c"}]}, False, id="owner-not-controller"),
    pytest.param({"generateName": ""}, False, id="empty-generate-name"),
    pytest.param("x", False, id="odd-metadata"),
])
def test_controller_made(metadata: Any, made: bool) -> None:
    assert verdicts.controller_made({"kind": "Pod", "metadata": metadata}) is made


