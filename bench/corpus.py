"""The realistic mix every benchmark uses: the ``examples/`` manifests, the pods their controllers
create from them, and generated variants (launchers, models, parallelism, pins), each wrapped in the
AdmissionReview kube-apiserver would send.

Pods are given the fields the apiserver has set by the time a webhook sees a CREATE (defaulting and
the ServiceAccount admission plugin run before the webhooks): ``imagePullPolicy``,
``terminationMessagePath``, the ``kube-api-access`` projected volume and its mount, tolerations,
``dnsPolicy``, ``schedulerName``, ... so the JSON floor is measured on reviews of the size the
webhook really parses, not on a hand-trimmed object. Workload objects (Deployments, Jobs, ...) are
sent to ``/validate`` as written, plus ``metadata.uid``/``creationTimestamp``.

:func:`controller_traffic` is the other kind of traffic: the pods a Deployment, an Indexed Job and a
JobSet make from one template each, as kube-apiserver sends them to ``/mutate`` and then (patched,
named) to ``/validate``, interleaved with unique pods.

Deterministic: the same seed gives the same corpus, so runs compare.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PRODUCT_KEY = "nvidia.com/gpu.product"

MODELS = [
    "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mistralai/Mistral-Small-24B-Instruct-2501", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen3-4B", "codellama/CodeLlama-34b-Instruct-hf",
    "meta-llama/Llama-3.2-3B-Instruct",
]
PINS = [None, None, None, "NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"]


@dataclass(frozen=True)
class Item:
    """One AdmissionReview of the mix."""

    name: str
    kind: str
    endpoint: str  # "mutate" or "validate"
    review: dict[str, Any]
    body: bytes

    @property
    def obj(self) -> Any:
        return self.review["request"]["object"]


# ----------------------------------------------------------------------------- objects


def example_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict):
                docs.append(doc)
    return docs


def _templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a workload (what its controller turns into pods)."""
    spec = obj.get("spec", {})
    kind = obj.get("kind")
    if kind == "Pod":
        return [{"metadata": obj.get("metadata", {}), "spec": spec}]
    if kind == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    if kind == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if t]
    template = spec.get("template") if isinstance(spec, dict) else None
    # the built-in controllers' shape only: an operator kind's "template" may be a PodSpec (KServe's
    # LLMInferenceService) or absent (KubeAI, NIM, Kaito); such objects are reviewed as objects only
    return [template] if isinstance(template, dict) and isinstance(template.get("spec"), dict) else []


def apiserver_defaults(pod: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The pod as a webhook receives it on CREATE: defaulted and with the service account volume."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    meta.setdefault("namespace", "ai-serving")
    meta["uid"] = str(uuid.UUID(int=rng.getrandbits(128)))
    meta["creationTimestamp"] = None
    spec = pod["spec"]
    mount = {"name": "kube-api-access-" + format(rng.getrandbits(20), "05x")[:5],
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        for port in c.get("ports", []):
            port.setdefault("protocol", "TCP")
        c.setdefault("volumeMounts", []).append(dict(mount))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", "default")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}])
    spec.setdefault("volumes", []).append({"name": mount["name"], "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                       "fieldPath": "metadata.namespace"}}]}}]}})
    return pod


def pod_from_template(owner: dict[str, Any], template: dict[str, Any], index: int) -> dict[str, Any]:
    meta = copy.deepcopy(template.get("metadata", {}))
    owner_meta = owner.get("metadata", {})
    meta["generateName"] = f"{owner_meta.get('name', 'pod')}-{index}-"
    meta["namespace"] = owner_meta.get("namespace", "ai-serving")
    meta.setdefault("labels", {})["pod-template-hash"] = format(index * 7919 % 65536, "x")
    if owner.get("kind") != "Pod":
        meta["ownerReferences"] = [{"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                                    "name": owner_meta.get("name"), "uid": str(uuid.UUID(int=index + 1)),
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template["spec"])}


def _gpu_container(rng: random.Random, model: str, tp: int, gpus: int) -> dict[str, Any]:
    launcher = rng.choice(["vllm", "vllm-module", "tgi", "sglang", "torchrun"])
    limits = {"nvidia.com/gpu": str(gpus), "memory": f"{rng.choice([64, 128, 256])}Gi", "cpu": str(rng.choice([8, 16]))}
    env = [{"name": "HF_HOME", "value": "/models/hf"},
           {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    if launcher == "vllm":
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve", model],
             "args": [f"--tensor-parallel-size={tp}", "--max-model-len=8192", "--port", "8000"]}
    elif launcher == "vllm-module":
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1",
             "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
             "args": ["--model", model, "--tensor-parallel-size", str(tp), "--gpu-memory-utilization", "0.9"]}
    elif launcher == "tgi":
        c = {"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:3.3.4",
             "args": ["--model-id", model, "--num-shard", str(tp), "--max-input-tokens", "4096"]}
    elif launcher == "sglang":
        c = {"name": "sglang", "image": "lmsysorg/sglang:v0.5.2-cu126", "command": ["bash", "-c"],
             "args": [f"python3 -m sglang.launch_server --model-path {model} --tp {tp} "
                      f"--host 0.0.0.0 --port 30000 --mem-fraction-static 0.85"]}
    else:
        c = {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
             "command": ["torchrun", f"--nproc_per_node={gpus}", "train.py"],
             "args": ["--model_name_or_path", model, "--bf16", "--per_device_train_batch_size", "4"]}
        env.append({"name": "NCCL_DEBUG", "value": "WARN"})
    c["env"] = env
    c["resources"] = {"limits": limits, "requests": {k: v for k, v in limits.items() if k != "nvidia.com/gpu"}}
    c["ports"] = [{"containerPort": 8000, "name": "http"}]
    c["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10}
    c["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}, {"name": "models", "mountPath": "/models"}]
    return c


def generated_workload(rng: random.Random, i: int) -> dict[str, Any]:
    """A varied GPU Deployment (or Job, StatefulSet): model, launcher, TP, GPUs, pins, sidecars."""
    model = rng.choice(MODELS)
    tp = rng.choice([1, 1, 2, 4, 8])
    gpus = tp if rng.random() < 0.85 else tp * 2
    pin = rng.choice(PINS)
    spec: dict[str, Any] = {"containers": [_gpu_container(rng, model, tp, gpus)],
                            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                                        {"name": "models", "persistentVolumeClaim": {"claimName": "models"}}]}
    if rng.random() < 0.4:
        spec["containers"].append({"name": "metrics", "image": "prom/statsd-exporter:v0.28.0",
                                   "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}})
    if pin:
        spec["nodeSelector"] = {PRODUCT_KEY: pin}
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    name = f"gen-{i}-{model.split('/')[-1].lower()}"[:60].rstrip("-.")
    labels = {"app": name, "team": rng.choice(["search", "chat", "research"])}
    template = {"metadata": {"labels": labels, "annotations": {"prometheus.io/scrape": "true"}}, "spec": spec}
    kind = rng.choice(["Deployment", "Deployment", "Deployment", "StatefulSet", "Job"])
    body: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": template}
    if kind == "Job":
        spec["restartPolicy"] = "Never"
        body = {"template": template, "backoffLimit": 2}
    elif kind == "StatefulSet":
        body["serviceName"] = name
        body["replicas"] = rng.choice([1, 2])
    else:
        body["replicas"] = rng.choice([1, 2, 4])
    return {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "ai-serving", "labels": labels}, "spec": body}


def objects(variants: int = 60, seed: int = 7) -> Iterator[dict[str, Any]]:
    """The examples, then ``variants`` generated workloads."""
    yield from example_documents()
    rng = random.Random(seed)
    for i in range(variants):
        yield generated_workload(rng, i)


# ----------------------------------------------------------------------------- reviews


GROUPS = {"Pod": ("", "v1", "pods"), "Deployment": ("apps", "v1", "deployments"),
          "StatefulSet": ("apps", "v1", "statefulsets"), "Job": ("batch", "v1", "jobs"),
          "CronJob": ("batch", "v1", "cronjobs"),
          "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")}


def review(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    kind = obj.get("kind", "")
    group, version, resource = GROUPS.get(kind, ("", "v1", kind.lower() + "s"))
    meta = obj.get("metadata", {})
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.UUID(int=rng.getrandbits(128))),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": meta.get("name", ""), "namespace": meta.get("namespace", "ai-serving"), "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                     "uid": "6f1c0a52-6f0e-4c1e-9d3b-3f1b1f0e7a21",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def encode(doc: Any) -> bytes:
    """Compact JSON, as kube-apiserver sends it."""
    return json.dumps(doc, separators=(",", ":")).encode()


def items(variants: int = 60, seed: int = 7) -> list[Item]:
    """The review mix: every object to /validate; every pod it creates to /mutate and, once mutated
    or not, to /validate as well (a pod goes through both webhooks)."""
    rng = random.Random(seed + 1)
    out: list[Item] = []
    for n, obj in enumerate(objects(variants, seed)):
        name = obj.get("metadata", {}).get("name", f"obj-{n}")
        kind = obj.get("kind", "")
        if kind != "Pod":
            workload = copy.deepcopy(obj)
            workload["metadata"]["uid"] = str(uuid.UUID(int=rng.getrandbits(128)))
            doc = review(workload, rng)
            out.append(Item(f"{kind}/{name}", kind, "validate", doc, encode(doc)))
        for t, template in enumerate(_templates(obj)):
            pod = apiserver_defaults(pod_from_template(obj, template, t), rng)
            for endpoint in ("mutate", "validate"):
                doc = review(pod, rng)
                out.append(Item(f"Pod/{name}-{t}", "Pod", endpoint, doc, encode(doc)))
    return out


def manifest_stream(count: int, seed: int = 11) -> str:
    """A multi-document YAML of ``count`` varied objects (Deployments, StatefulSets, Jobs and bare Pods),
    as `helm template` of a large platform would give ``gpu-admission check``."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        obj = generated_workload(rng, i)
        if i % 4 == 3:  # a bare pod every fourth object
            obj = pod_from_template(obj, _templates(obj)[0], i)
            obj["metadata"]["name"] = obj["metadata"].pop("generateName").rstrip("-")
            obj["metadata"].pop("ownerReferences", None)
        docs.append(yaml.safe_dump(obj, sort_keys=False))
    return "---\n".join(docs)


# ----------------------------------------------------------------------------- controller traffic

ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of Kubernetes' random name suffixes (``k8s.io/apimachinery/pkg/util/rand``)."""
PASS = "@PASS@"
"""Filled with 6 hex digits of the pass through the request file (:func:`fill`, ``wrk_reviews.lua``):
the tail of every per-pod uid, so a pod is never sent twice with the same uid."""
PASS_CHARS = "@P2@"
"""Filled with 2 characters of :data:`ALPHABET` derived from the pass: the end of every per-pod random
5-character suffix (the generated name, the ``kube-api-access-`` volume)."""
USERS = {
    "Deployment": ("system:serviceaccount:kube-system:replicaset-controller", "6f1c0a52-6f0e-4c1e-9d3b-3f1b1f0e7a21"),
    "Job": ("system:serviceaccount:kube-system:job-controller", "0b9e5d0c-3d7a-4b59-a1f3-8a2f4c6d9e10"),
    "JobSet": ("system:serviceaccount:kube-system:job-controller", "0b9e5d0c-3d7a-4b59-a1f3-8a2f4c6d9e10"),
}
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class TrafficItem(Item):
    """One request of the controller-shaped traffic: ``body`` (and ``review``) hold the :data:`PASS`
    and :data:`PASS_CHARS` placeholders; :func:`fill` them for a given pass before sending."""

    source: str = ""  # "Deployment", "Job", "JobSet" (the controller that made the pod) or "unique"
    pod: int = 0  # the pod's position in the sequence (its /mutate and /validate share it)


def fill(text: str, pass_no: int) -> str:
    """The request text of pass ``pass_no`` (what ``wrk_reviews.lua`` sends on that pass)."""
    return (text.replace(PASS, f"{pass_no % 0x1000000:06x}")
            .replace(PASS_CHARS, ALPHABET[(pass_no // 27) % 27] + ALPHABET[pass_no % 27]))


def _chars(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _suffix(rng: random.Random) -> str:
    """A 5-character random suffix, its last two characters per pass."""
    return _chars(rng, 3) + PASS_CHARS


def _uid(rng: random.Random) -> str:
    """A uid whose last 6 hex digits are per pass."""
    return str(uuid.UUID(int=rng.getrandbits(128)))[:-6] + PASS


def _fixed_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))


def _fields_v1(node: Any, depth: int = 0) -> Any:
    """The ``fieldsV1`` set of an object (what the field manager records): maps as ``f:<key>`` (with
    ``.`` for the map itself below the top two levels), lists of keyed items as ``k:{"uid"|"name":...}``,
    every other value as a leaf."""
    if isinstance(node, dict):
        out: dict[str, Any] = {".": {}} if node and depth >= 2 else {}
        for k, v in node.items():
            out[f"f:{k}"] = _fields_v1(v, depth + 1)
        return out
    if isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        by = next((k for k in ("uid", "name") if all(k in v for v in node)), None)
        if by:
            return {".": {}, **{"k:" + json.dumps({by: v[by]}, separators=(",", ":")): _fields_v1(v, 2)
                                for v in node}}
    return {}


def _qos(spec: dict[str, Any]) -> str:
    """The pod's QoS class as kube-apiserver's create strategy computes it (requests default to limits)."""
    containers = spec.get("initContainers", []) + spec.get("containers", [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, {**(res.get("limits") or {}), **(res.get("requests") or {})}
        any_set = any_set or bool(limits) or bool(requests)
        if not all(k in limits and str(requests.get(k)) == str(limits[k]) for k in ("cpu", "memory")):
            guaranteed = False
    return "Guaranteed" if any_set and guaranteed else "Burstable" if any_set else "BestEffort"


_META_ORDER = ("name", "generateName", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels",
               "annotations", "ownerReferences", "finalizers", "managedFields")


def _ordered_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """ObjectMeta in the order Go serializes it."""
    return {**{k: meta[k] for k in _META_ORDER if k in meta}, **{k: v for k, v in meta.items() if k not in _META_ORDER}}


def _as_created(pod: dict[str, Any], rng: random.Random, timestamp: str) -> dict[str, Any]:
    """The pod as the mutating webhooks receive it: defaulted, the ServiceAccount plugin's token volume
    (``kube-api-access-<5 chars>``), the controller's ``managedFields`` entry; no name yet (kube-apiserver
    generates it from ``generateName`` after the mutating webhooks, with the uid, the creation timestamp
    and the status: :func:`_as_stored`), ``creationTimestamp: null`` and ``status: {}`` as Go sends them."""
    pod = apiserver_defaults(pod, rng)
    meta = pod["metadata"]
    meta.pop("uid", None)
    meta.pop("name", None)
    spec = pod["spec"]
    token = "kube-api-access-" + _suffix(rng)
    for v in spec.get("volumes", []):
        if v["name"].startswith("kube-api-access-"):
            old, v["name"] = v["name"], token
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        for m in c.get("volumeMounts", []):
            if m["name"] == old:
                m["name"] = token
    # what the controller sent (the field manager runs before admission: no token volume yet)
    fields = {"metadata": {k: v for k, v in meta.items() if k not in ("namespace", "creationTimestamp")},
              "spec": {**spec, "volumes": [v for v in spec.get("volumes", []) if v["name"] != token],
                       "containers": [{**c, "volumeMounts": [m for m in c.get("volumeMounts", []) if m["name"] != token]}
                                      for c in spec.get("containers", [])]}}
    meta["managedFields"] = [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                              "time": timestamp, "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(fields)}]
    pod["metadata"] = _ordered_meta(meta)
    pod["status"] = {}
    return pod


def _as_stored(mutated: dict[str, Any], rng: random.Random, timestamp: str) -> dict[str, Any]:
    """The pod as the validating webhooks receive it: the mutating webhooks' patch applied, then what
    the create strategy sets before validation (the name from ``generateName`` plus 5 random
    characters, the uid, the creation timestamp, ``status.phase`` and ``status.qosClass``)."""
    pod = copy.deepcopy(mutated)
    meta = pod["metadata"]
    meta["name"] = meta.get("generateName", "pod-") + _suffix(rng)
    meta["uid"] = _uid(rng)
    meta["creationTimestamp"] = timestamp
    pod["metadata"] = _ordered_meta(meta)
    pod["status"] = {"phase": "Pending", "qosClass": _qos(pod["spec"])}
    return pod


def _envelope(pod: dict[str, Any], rng: random.Random, source: str) -> dict[str, Any]:
    doc = review(pod, rng)
    req = doc["request"]
    req["uid"] = _uid(rng)
    req["name"] = ""  # a create by generateName: the request names no object
    username, user_uid = USERS.get(source, USERS["Deployment"])
    req["userInfo"] = {**req["userInfo"], "username": username, "uid": user_uid}
    return doc


def _example(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for d in example_documents() if d.get("metadata", {}).get("name") == name))


def _deployment_pods(rng: random.Random, replicas: int) -> Iterator[dict[str, Any]]:
    """A Deployment's pods through its ReplicaSet ``<deployment>-<pod-template-hash>``: one hash and one
    ReplicaSet uid for all of them (one revision), names ``<replicaset>-<5 chars>``."""
    deploy = _example("llama-70b")
    deploy["spec"]["replicas"] = replicas
    template = deploy["spec"]["template"]
    rs_hash = _chars(rng, 10)
    rs_name = f"{deploy['metadata']['name']}-{rs_hash}"
    rs_uid = _fixed_uid(rng)
    for _ in range(replicas):
        meta = copy.deepcopy(template.get("metadata", {}))
        meta["generateName"] = rs_name + "-"
        meta["namespace"] = deploy["metadata"]["namespace"]
        meta.setdefault("labels", {})["pod-template-hash"] = rs_hash
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name, "uid": rs_uid,
                                    "controller": True, "blockOwnerDeletion": True}]
        yield {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template["spec"])}


def _indexed_job_pod(job_name: str, job_uid: str, namespace: str, template: dict[str, Any], index: int,
                     subdomain: str | None = None) -> dict[str, Any]:
    """A pod of an Indexed Job as the Job controller makes it: the labels kube-apiserver put in the Job's
    template (``controller-uid``, ``job-name``, prefixed and legacy), the completion index as label and
    annotation, ``JOB_COMPLETION_INDEX`` in every container, hostname ``<job>-<index>``, generateName
    ``<job>-<index>-``, the tracking finalizer and the Job as owner."""
    meta = copy.deepcopy(template.get("metadata", {}))
    spec = copy.deepcopy(template["spec"])
    labels = meta.setdefault("labels", {})
    labels.update({"batch.kubernetes.io/controller-uid": job_uid, "batch.kubernetes.io/job-name": job_name,
                   "controller-uid": job_uid, "job-name": job_name, COMPLETION_INDEX: str(index)})
    meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
    meta["generateName"] = f"{job_name}-{index}-"
    meta["namespace"] = namespace
    meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": job_uid,
                                "controller": True, "blockOwnerDeletion": True}]
    meta["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        c.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}})
    spec.setdefault("hostname", f"{job_name}-{index}")
    if subdomain:
        spec["subdomain"] = subdomain
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _job_pods(rng: random.Random, completions: int) -> Iterator[dict[str, Any]]:
    """An Indexed Job of ``completions`` completions (``examples/torchrun-finetune.yaml``), in index order."""
    job = _example("llama-8b-finetune")
    job["spec"].update(completions=completions, parallelism=8, completionMode="Indexed")
    job_uid = _fixed_uid(rng)
    for index in range(completions):
        yield _indexed_job_pod(job["metadata"]["name"], job_uid, job["metadata"]["namespace"],
                               job["spec"]["template"], index)


def _jobset_pods(rng: random.Random, jobs: int, per_job: int) -> Iterator[dict[str, Any]]:
    """A JobSet (``examples/jobset-torchrun.yaml``) of ``jobs`` Jobs x ``per_job`` pods: the JobSet
    controller labels and annotates each child Job ``<jobset>-<replicatedJob>-<i>`` and its template
    (``jobset.sigs.k8s.io/*``: name, uid, replicated job, replicas, job index, job key, global index,
    restart attempt), sets the subdomain (DNS hostnames are on by default); the Job controller makes
    Indexed pods of each (completion mode defaulted to Indexed by JobSet)."""
    js = _example("llama-8b-pretrain")
    ns, js_name = js["metadata"]["namespace"], js["metadata"]["name"]
    rjob = js["spec"]["replicatedJobs"][0]
    rjob["replicas"] = jobs
    rjob["template"]["spec"].update(parallelism=per_job, completions=per_job, completionMode="Indexed")
    template = rjob["template"]["spec"]["template"]
    for c in template["spec"]["containers"]:
        c["command"] = [f"--nnodes={jobs * per_job}" if a.startswith("--nnodes=") else a for a in c["command"]]
    js_uid = _fixed_uid(rng)
    for j in range(jobs):
        job_name = f"{js_name}-{rjob['name']}-{j}"
        keys = {"jobset.sigs.k8s.io/jobset-name": js_name, "jobset.sigs.k8s.io/jobset-uid": js_uid,
                "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"], "jobset.sigs.k8s.io/restart-attempt": "0",
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(jobs), "jobset.sigs.k8s.io/global-replicas": str(jobs),
                "jobset.sigs.k8s.io/job-index": str(j),
                "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
                "jobset.sigs.k8s.io/job-global-index": str(j)}
        labelled = copy.deepcopy(template)
        meta = labelled.setdefault("metadata", {})
        meta["labels"] = {**meta.get("labels", {}), **keys}
        meta["annotations"] = {**meta.get("annotations", {}), **keys}
        job_uid = _fixed_uid(rng)
        for index in range(per_job):
            yield _indexed_job_pod(job_name, job_uid, ns, labelled, index, subdomain=js_name)


def _interleave(rng: random.Random, streams: dict[str, list[dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """The controllers' pods in one sequence, each controller's in its own order, merged at random
    (the controllers run at the same time)."""
    left = {k: list(v) for k, v in streams.items()}
    out = []
    while any(left.values()):
        names = [k for k, v in left.items() if v]
        source = rng.choices(names, weights=[len(left[k]) for k in names])[0]
        out.append((source, left[source].pop(0)))
    return out


def controller_traffic(seed: int = 17, deployment_replicas: int = 50, job_completions: int = 200,
                       jobset_jobs: int = 4, jobset_pods_per_job: int = 4, unique_every: int = 10,
                       variants: int = 20, settings: Any = None) -> list[TrafficItem]:
    """Pods as kube-apiserver sends them when controllers create them, each to ``/mutate`` then to
    ``/validate``: a Deployment of ``deployment_replicas`` (``examples/vllm-llama-70b-tp4.yaml``), an
    Indexed Job of ``job_completions`` (``examples/torchrun-finetune.yaml``), a JobSet of
    ``jobset_jobs`` x ``jobset_pods_per_job`` (``examples/jobset-torchrun.yaml``), merged, with one
    unique pod in ``unique_every`` (a pod of the :func:`items` mix whose containers carry
    ``BENCH_NONCE=u<k>-@PASS@``: new on every pass, the same in its /mutate and /validate).

    The pods of one controller share its template and differ exactly where real ones do: generated
    names, uids, the token volume suffix, creation timestamps, managedFields times, request uids
    (per pod and, through :data:`PASS`/:data:`PASS_CHARS`, per pass), the completion index, hostname
    and child Job (name, uid, ``job-key``) of Job and JobSet pods; the ReplicaSet's hash and uid and
    each Job's uid are shared by its pods, as in a cluster. The ``/validate`` object is the ``/mutate``
    object with the patch gpu-admission answers applied (computed here with its own engine and
    ``settings``, the embedded default policy unless given) plus the name, uid, creation timestamp and
    status kube-apiserver sets between the mutating and validating webhooks.

    Deterministic: the same arguments give the same bytes."""
    import base64

    import jsonpatch

    from webhook.core.settings import default as default_settings
    from webhook.server import admission
    from webhook.server import review as review_mod

    settings = settings or default_settings()
    rng = random.Random(seed)
    streams = {"Deployment": list(_deployment_pods(rng, deployment_replicas)),
               "Job": list(_job_pods(rng, job_completions)),
               "JobSet": list(_jobset_pods(rng, jobset_jobs, jobset_pods_per_job))}
    sequence = _interleave(rng, streams)
    pool = [i for i in items(variants=variants, seed=seed) if i.kind == "Pod" and i.endpoint == "mutate"
            and isinstance(i.obj["spec"].get("containers"), list)]  # not a runtime's JobSet template
    if unique_every > 1:
        mixed: list[tuple[str, dict[str, Any]]] = []
        for n, entry in enumerate(sequence):
            mixed.append(entry)
            if (n + 1) % (unique_every - 1) == 0:
                mixed.append(("unique", copy.deepcopy(rng.choice(pool).obj)))
        sequence = mixed
    out: list[TrafficItem] = []
    unique = 0
    for n, (source, pod) in enumerate(sequence):
        when = f"2026-12-02T10:{(n // 5) // 60 % 60:02d}:{(n // 5) % 60:02d}Z"  # five pods a second
        if source == "unique":
            for c in pod["spec"].get("initContainers", []) + pod["spec"].get("containers", []):
                c["env"] = [*(c.get("env") or []), {"name": "BENCH_NONCE", "value": f"u{unique}-{PASS}"}]
            unique += 1
            for v in pod["spec"].get("volumes", []):  # as _as_created will add it again
                if v["name"].startswith("kube-api-access-"):
                    token = v["name"]
            pod["spec"]["volumes"] = [v for v in pod["spec"].get("volumes", []) if v["name"] != token]
            for c in pod["spec"].get("initContainers", []) + pod["spec"].get("containers", []):
                c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] != token]
        created = _as_created(pod, rng, when)
        mutate_doc = _envelope(created, rng, source)
        reply = admission.mutate(review_mod.parse(encode(mutate_doc), "application/json"), settings).review
        patch = json.loads(base64.b64decode(reply["response"]["patch"])) if reply["response"].get("patch") else []
        stored = _as_stored(jsonpatch.apply_patch(created, patch), rng, when)
        validate_doc = _envelope(stored, rng, source)
        label = f"{source}/{created['metadata']['generateName']}"
        for endpoint, doc in (("mutate", mutate_doc), ("validate", validate_doc)):
            out.append(TrafficItem(label, "Pod", endpoint, doc, encode(doc), source=source, pod=n))
    return out
