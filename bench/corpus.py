"""The realistic mix every benchmark uses: the ``examples/`` manifests, the pods their controllers
create from them, and generated variants (launchers, models, parallelism, pins), each wrapped in the
AdmissionReview kube-apiserver would send.

Pods are given the fields the apiserver has set by the time a webhook sees a CREATE (defaulting and
the ServiceAccount admission plugin run before the webhooks): ``imagePullPolicy``,
``terminationMessagePath``, the ``kube-api-access`` projected volume and its mount, tolerations,
``dnsPolicy``, ``schedulerName``, ... so the JSON floor is measured on reviews of the size the
webhook really parses, not on a hand-trimmed object. Workload objects (Deployments, Jobs, ...) are
sent to ``/validate`` as written, plus ``metadata.uid``/``creationTimestamp``.

Deterministic: the same seed gives the same corpus, so runs compare.
"""

from __future__ import annotations

import copy
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
