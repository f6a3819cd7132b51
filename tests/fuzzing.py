"""Mutation fuzzing of the admission endpoints: a corpus of realistic AdmissionReviews, seeded
mutators (structural and byte-level), and the contract every answer must keep.

Used by ``tests/test_fuzz.py`` (CI: 20,000+ reviews in well under a minute) and by ``make fuzz``
(``FUZZ_REVIEWS=300000``, a fresh seed, the figures written to a JSON report for RELIABILITY.md).

The invariants (``Checker.check``):

- never a 5xx, for anything;
- a well-formed AdmissionReview envelope (UTF-8 JSON object, ``kind: AdmissionReview``,
  ``apiVersion: admission.k8s.io/v1``, a ``request`` object with a non-empty string ``uid``) gets
  HTTP 200; anything else gets HTTP 400 with a JSON ``error`` (or 413 over the body limit). The one
  principled exception: a body nested so deeply that Python's parser gives up is a 400 even when
  the envelope would be fine (kube-apiserver never sends one: Pod and workload schemas are shallow);
- every 200 is a valid AdmissionReview: same apiVersion/kind, ``response.uid`` equal to the
  request's, ``allowed`` a bool, only known response fields, a denial carries ``status.code`` and a
  non-empty message, ``/mutate`` never denies, warnings are one line of at most 120 characters and
  within the 4 KiB total, audit annotation keys are valid names and values at most 1 KiB (the whole-text ``message``: 8 KiB);
- every patch is base64 JSON Patch that applies to the object it was made for (``jsonpatch``),
  changes only node/pod affinity, and yields a schema-valid Pod (``kubernetes_validate``, strict)
  whenever the pod it patched was one; re-sending the patched pod to ``/mutate`` adds nothing
  (the patch is idempotent, as ``reinvocationPolicy: IfNeeded`` needs);
- no planted credential (token-shaped strings in args, annotations, node names; values of
  secret-named env variables) appears in any message, warning or audit annotation;
- every review is answered within ``LATENCY_LIMIT`` CPU seconds (in process, no TLS).

The alphabets are not ASCII-only: :data:`STRINGS` and :data:`COUNT_TEXTS` hold other scripts'
digits (``"²"`` passes ``str.isdigit()`` and makes ``int()`` raise), other Unicode (combining marks,
right-to-left controls, emoji, non-ASCII spaces) and NUL, and ``Mutator._count`` writes them where
the engine reads a count. With ASCII-only alphabets the fuzzer could not find issue 25's 500s.
"""

from __future__ import annotations

import base64
import json
import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import jsonpatch
import kubernetes_validate
import yaml

from webhook.core.workloads import pod_templates
from webhook.server.review import AUDIT_MESSAGE_MAX, WARNING_MAX_CHARS, WARNINGS_MAX_TOTAL

ROOT = Path(__file__).resolve().parents[1]
KEY = "nvidia.com/gpu.product"
K8S_VERSION = "1.37"
LATENCY_LIMIT = 2.5
"""CPU seconds one review may take; the webhook's timeoutSeconds is 3. Typical: about a millisecond."""
MAX_MUTANT = 256 * 1024
"""Bytes; bigger mutants are skipped (the body limit and multi-MiB bodies are the live tests' job)."""
DEEP = 400
"""Nesting depth beyond which a 400 'nested too deeply' is an acceptable answer to a good envelope."""

# Credentials planted in the corpus; none may come back in a message, warning or audit annotation.
PLANTED = {
    "hf": "hf_FuzzPlantedTokenAbCdEfGhIjKlMnOpQr12",
    "openai": "sk-proj-FuzzPlanted0123456789abcdefXYZ",
    "github": "ghp_FuzzPlanted0123456789abcdefghijKLMN",
    "ngc": "nvapi-FuzzPlanted0123456789abcdefghijkl",
    "password": "Fuzz-Pl@nted-Passw0rd!",
}
RESPONSE_FIELDS = {"uid", "allowed", "status", "patchType", "patch", "warnings", "auditAnnotations"}
_ANNOTATION_KEY = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
AFFINITY_PATH = re.compile(r"^(/[^/]+)*/spec/affinity(/|$)"
                           # a group member's own label and its size, the pinned note, nothing else of the metadata
                           r"|^(/[^/]+)*/metadata(/labels(/gpu-admission\.io~1gpu-group)?"
                           r"|/annotations(/gpu-admission\.io~1(group-size|pinned))?)?$")


# ----------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Seed:
    name: str
    endpoint: str  # "/mutate", "/validate", "/validate/audit"
    review: dict[str, Any]


def envelope(obj: Any, *, kind: str | None = None, group: str = "", version: str = "v1",
             operation: str = "CREATE", uid: str = "seed", dry_run: bool = False,
             sub_resource: str | None = None) -> dict[str, Any]:
    """The AdmissionReview kube-apiserver sends for ``obj``."""
    kind = kind or (obj.get("kind") if isinstance(obj, dict) else "Pod")
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    request: dict[str, Any] = {
        "uid": uid, "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "name": meta.get("name"), "namespace": meta.get("namespace", "ai"), "operation": operation,
        "userInfo": {"username": "system:serviceaccount:ai:deployer", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": obj if operation == "UPDATE" else None, "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def container(command: list[Any] | None = None, gpus: Any = 4, *, name: str = "main",
              image: str = "vllm/vllm-openai:v0.10.1", args: list[Any] | None = None,
              env: list[dict[str, Any]] | None = None, requests: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    if command is not None:
        c["command"] = command
    if args is not None:
        c["args"] = args
    if env:
        c["env"] = env
    if gpus is not None:
        c["resources"] = {("requests" if requests else "limits"): {"nvidia.com/gpu": gpus},
                          **({} if requests else {"requests": {"cpu": "4", "memory": "64Gi"}})}
    c["volumeMounts"] = [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "readOnly": True}]
    return c


def pod(*containers: dict[str, Any], name: str = "p", annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ai", "uid": "0c6a3e4e-0000-4000-8000-000000000001"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    body: dict[str, Any] = {"containers": list(containers), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                            "serviceAccountName": "default", "schedulerName": "default-scheduler",
                            "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
                            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                             "effect": "NoExecute", "tolerationSeconds": 300}],
                            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}]}
    if init:
        body["initContainers"] = init
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def _secret_env() -> list[dict[str, Any]]:
    return [{"name": "HF_TOKEN", "value": PLANTED["hf"]}, {"name": "OPENAI_API_KEY", "value": PLANTED["openai"]},
            {"name": "DB_PASSWORD", "value": PLANTED["password"]},
            {"name": "NGC_API_KEY", "valueFrom": {"secretKeyRef": {"name": "ngc", "key": "key"}}}]


def hand_pods() -> list[tuple[str, dict[str, Any]]]:
    llama70, llama8, l405 = ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
                             "meta-llama/Llama-3.1-405B-Instruct")
    vllm = ["vllm", "serve"]
    a100, l40s = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S"
    return [
        ("vllm-70b-tp4", pod(container([*vllm, llama70, "--tensor-parallel-size", "4"], 4, env=_secret_env()))),
        ("vllm-70b-l40s", pod(container([*vllm, llama70, "-tp", "4"], "4"), nodeSelector={KEY: l40s})),
        ("vllm-70b-a100", pod(container([*vllm, llama70, "-tp", "4"], 4), affinity=required([expr(KEY, "In", a100)]))),
        ("vllm-8b-1gpu", pod(container([*vllm, llama8], 1))),
        ("vllm-token-args", pod(container([*vllm, llama70, "-tp", "4", "--api-key", PLANTED["openai"],
                                           "--hf-token", PLANTED["hf"]], 4))),
        ("token-as-model", pod(container([*vllm, PLANTED["hf"], "-tp", "2", "--quantization", PLANTED["ngc"]], 2))),
        ("widening-term", pod(container([*vllm, llama70, "-tp", "4"], 4),
                              affinity=required([expr(KEY, "In", a100)], [expr("kubernetes.io/os", "In", "linux")]))),
        ("notin-trick", pod(container([*vllm, llama70, "-tp", "4"], 4), affinity=required([expr(KEY, "NotIn", l40s)]))),
        ("preferred-only", pod(container([*vllm, llama70, "-tp", "4"], 4), affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [expr(KEY, "In", a100)]}}]}})),
        ("nodename", pod(container([*vllm, llama70, "-tp", "4"], 4), nodeName=PLANTED["github"].lower()[:40])),
        ("init-gpu", pod(container([*vllm, llama70, "-tp", "4"], None),
                         init=[container(["sh", "-c", "nvidia-smi"], 4, name="warm", image="busybox")])),
        ("sidecar-gpu", pod(container([*vllm, llama70, "-tp", "4"], None), init=[
            dict(container(["sleep", "inf"], 4, name="side", image="busybox"), restartPolicy="Always")])),
        ("requests-only", pod(container([*vllm, llama70, "-tp", "4"], "4", requests=True))),
        ("sh-script", pod(container(["sh", "-c"], 8, args=[
            f"export HF_TOKEN={PLANTED['hf']}; TP=${{TP:-8}} && exec vllm serve {l405} --tensor-parallel-size $TP "
            "--quantization fp8 --max-model-len 8192"], env=[{"name": "TP", "value": "8"}]))),
        ("kubelet-vars", pod(container([*vllm, "$(MODEL)", "-tp", "$(TP)"], 4, env=[
            {"name": "MODEL", "value": llama70}, {"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "tp"}}},
            *_secret_env()]))),
        ("tgi-env", pod(container(None, 2, image="ghcr.io/huggingface/text-generation-inference:2.4", env=[
            {"name": "MODEL_ID", "value": "mistralai/Mixtral-8x7B-Instruct-v0.1"}, {"name": "NUM_SHARD", "value": "2"},
            {"name": "HUGGING_FACE_HUB_TOKEN", "value": PLANTED["hf"]}]))),
        ("nim", pod(container(None, 8, image="nvcr.io/nim/meta/llama-3.1-405b-instruct:1.3.0",
                              env=[{"name": "NGC_API_KEY", "value": PLANTED["ngc"]}]))),
        ("torchrun", pod(container(["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "train.py",
                                    "--model", llama70], 8, image="pytorch/pytorch:2.4.0"))),
        ("deepspeed", pod(container(["deepspeed", "--num_gpus", "4", "train.py", "--deepspeed", "ds.json"], 4,
                                    image="deepspeed/deepspeed:latest"))),
        ("ollama", pod(container(None, 1, image="ollama/ollama:0.3.12"))),
        ("sglang", pod(container(["python3", "-m", "sglang.launch_server", "--model-path", llama70, "--tp", "4"], 4,
                                 image="lmsysorg/sglang:v0.4.0"))),
        ("annotations", pod(container([*vllm, "/models/custom", "-tp", "4"], 4, env=_secret_env()), annotations={
            "gpu-admission.io/model": PLANTED["github"], "gpu-admission.io/params": PLANTED["openai"],
            "gpu-admission.io/tier": "cost", "gpu-admission.io/tensor-parallel": PLANTED["password"],
            "gpu-admission.io/mode": "audit"})),
        ("group-member", pod(container([*vllm, llama70, "-tp", "4"], 4),
                             labels={"gpu-admission.io/group": "llama", "app": "x"},
                             annotations={"gpu-admission.io/group-size": "2"})),
        ("lws-pod", pod(container([*vllm, l405, "-tp", "8", "-pp", "2"], 8), labels={
            "leaderworkerset.sigs.k8s.io/group-key": "abc123", "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            annotations={"leaderworkerset.sigs.k8s.io/size": "2"})),
        ("cpu-pod", pod(container(["nginx"], None, image="nginx:1.27"))),
        ("garbage-quantity", pod(container([*vllm, llama70, "-tp", "4"], PLANTED["openai"]))),
    ]


def hand_pod(name: str) -> dict[str, Any]:
    return dict(hand_pods())[name]


def _claim(count: int, constraints: bool = False) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                         "count": count}}]}
    if constraints:
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/productName"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpus", "namespace": "ai"}, "spec": {"devices": devices}}


def _api_group(obj: dict[str, Any]) -> tuple[str, str]:
    api = obj.get("apiVersion", "v1")
    group, _, version = api.rpartition("/")
    return group, version


CONTROLLER_LABELS: dict[str, dict[str, str]] = {
    # the labels each operator's controller puts on the pods it creates, so the pods of the examples
    # take the gpu-group path of the mutating webhook as in a cluster. Set in: kubeflow/training-operator
    # pkg/controller.v1/common (GenLabels, createNewPod); kubeflow/mpi-operator
    # pkg/controller/mpi_job_controller.go defaultLabels; kubernetes-sigs/jobset
    # pkg/controllers/jobset_controller.go labelAndAnnotateObject (a TrainJob's JobSet is named after
    # it: kubeflow/trainer pkg/runtime/framework/plugins/jobset); ray-project/kuberay
    # ray-operator/controllers/ray/common/pod.go labelPod; volcano-sh/volcano
    # pkg/controllers/job/job_controller_util.go createJobPod; kserve/kserve
    # pkg/controller/v1beta1/inferenceservice/components/predictor.go; LWS: the StatefulSet controller's
    # apps.kubernetes.io/pod-index plus kubernetes-sigs/lws pkg/webhooks/pod_webhook.go.
    "PyTorchJob": {"training.kubeflow.org/job-name": "job", "training.kubeflow.org/replica-type": "worker"},
    "MPIJob": {"training.kubeflow.org/job-name": "job", "training.kubeflow.org/job-role": "worker"},
    "JobSet": {"jobset.sigs.k8s.io/jobset-name": "js", "batch.kubernetes.io/job-name": "js-w-0"},
    "TrainJob": {"jobset.sigs.k8s.io/jobset-name": "tj"},
    "RayCluster": {"ray.io/cluster": "rc", "ray.io/node-type": "worker", "ray.io/group": "g"},
    "RayService": {"ray.io/cluster": "rs-abcde", "ray.io/node-type": "worker"},
    "RayJob": {"ray.io/cluster": "rj-abcde", "ray.io/node-type": "worker"},
    "Job": {"volcano.sh/job-name": "vj", "volcano.sh/task-spec": "worker"},
    "InferenceService": {"serving.kserve.io/inferenceservice": "isvc", "component": "predictor"},
    "LeaderWorkerSet": {"leaderworkerset.sigs.k8s.io/name": "lws", "apps.kubernetes.io/pod-index": "0"},
}


def corpus() -> list[Seed]:
    """Realistic reviews: the examples (as workloads and as the pods their controllers create, both
    before and after the mutating patch), hand-made pods covering every launcher and selection shape,
    DRA claims, and requests that are allowed at once (other operations, kinds, subresources)."""
    seeds: list[Seed] = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            group, version = _api_group(doc)
            seeds.append(Seed(f"{path.stem}#{i}", "/validate", envelope(doc, group=group, version=version)))
            seeds.append(Seed(f"{path.stem}#{i}-update", "/validate",
                              envelope(doc, group=group, version=version, operation="UPDATE")))
            for t, tpl in enumerate(pod_templates(doc)):
                labels = {**tpl.labels, **CONTROLLER_LABELS.get(str(doc.get("kind")), {})}
                p = pod(*tpl.spec.get("containers", []), name=f"{path.stem}-{t}",
                        labels=labels or None, annotations=dict(tpl.annotations) or None,
                        **{k: v for k, v in tpl.spec.items() if k != "containers"})
                seeds.append(Seed(f"{path.stem}#{i}-pod{t}", "/mutate", envelope(p)))
                seeds.append(Seed(f"{path.stem}#{i}-pod{t}", "/validate", envelope(p)))
    for name, p in hand_pods():
        seeds.append(Seed(name, "/mutate", envelope(p)))
        seeds.append(Seed(name, "/validate", envelope(p)))
        seeds.append(Seed(name + "-audit", "/validate/audit", envelope(p)))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                           "template": {"metadata": {"labels": {"a": "b"}}, "spec": hand_pod("vllm-70b-l40s")["spec"]}}}
    seeds.append(Seed("deployment-l40s", "/validate", envelope(deployment, group="apps")))
    for n, (count, constraints) in enumerate([(1, False), (4, False), (4, True)]):
        claim = _claim(count, constraints)
        seeds.append(Seed(f"claim-{n}", "/mutate", envelope(claim, group="resource.k8s.io")))
        seeds.append(Seed(f"claim-{n}", "/validate", envelope(claim, group="resource.k8s.io")))
    tp4 = hand_pod("vllm-70b-tp4")
    seeds.append(Seed("delete", "/validate", envelope(tp4, operation="DELETE")))
    seeds.append(Seed("status", "/validate", envelope(tp4, operation="UPDATE", sub_resource="status")))
    seeds.append(Seed("configmap", "/validate", envelope({"apiVersion": "v1", "kind": "ConfigMap",
                                                           "metadata": {"name": "c"}, "data": {"a": "b"}})))
    seeds.append(Seed("dry-run", "/validate", envelope(hand_pod("vllm-70b-l40s"), dry_run=True)))
    # kinds the webhook does not know: read by shape, or answered with a not-judged warning
    workflow = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "w", "namespace": "ai"},
                "spec": {"templates": [{"name": "t", "container": hand_pod("vllm-70b-l40s")["spec"]["containers"][0]},
                                       {"name": "u", "podSpecPatch": "x", "steps": [[{"name": "s"}]]}]}}
    seeds.append(Seed("argo-workflow", "/validate", envelope(workflow, group="argoproj.io", version="v1alpha1")))
    mystery = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "namespace": "ai"},
               "spec": {"resources": {"limits": {"nvidia.com/gpu": 8}}}}
    seeds.append(Seed("unknown-gpu-kind", "/validate", envelope(mystery, group="example.com")))
    return seeds


# ----------------------------------------------------------------------------- mutators

FIELD_NAMES = [
    "resources", "limits", "requests", "nvidia.com/gpu", "command", "args", "env", "envFrom", "value", "valueFrom",
    "name", "image", "containers", "initContainers", "restartPolicy", "nodeSelector", "nodeName", "affinity",
    "nodeAffinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
    "matchExpressions", "key", "operator", "values", "metadata", "annotations", "labels", "spec", "template",
    "kind", "apiVersion", "uid", "operation", "object", "subResource", "dryRun", "devices", "count", "exactly",
    "constraints", "leaderWorkerTemplate", "size", "gpu-admission.io/model", "gpu-admission.io/params",
    "gpu-admission.io/tier", "gpu-admission.io/tensor-parallel", "gpu-admission.io/mode", "gpu-admission.io/group",
    "gpu-admission.io/group-size", KEY, "", "~", "/", "a/b~1c", "\u00e9", "\U0001f600",
]
STRINGS = [
    "", " ", "4", "8", "0", "-4", "4.5", "1e3", "4Gi", "1000m", "9" * 30, "9" * 400, "four", " 4 ", "0x4", "\u0664",
    "NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", "In", "NotIn", "Exists",
    "DoesNotExist", "Gt", "audit", "enforce", "off", "cost", "hbm-nvlink", "Pod", "Deployment", "List",
    "LeaderWorkerSet", "CREATE", "UPDATE", "DELETE", "CONNECT", "v1", "apps/v1", "admission.k8s.io/v1beta1",
    "meta-llama/Llama-3.1-405B-Instruct", "Qwen/Qwen2.5-72B-Instruct-AWQ", "70B", "1.5T", "560M", "-70B",
    "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 8", "sh", "-c", "bash -lc 'vllm serve m -tp $(TP)'",
    "--tensor-parallel-size", "--tensor-parallel-size=16", "-tp", "--pipeline-parallel-size", "$(TP)", "${TP:-4}",
    "$(", "${", "$$", "'", '"', "\\", "&&", ";", "|", "#", "\n", "\t", "\x00", "\ud800", "\U0001f600" * 20,
    "~0~1/", "a" * 253, "x" * 5000, "$(" * 2000, "${" * 2000, "'\"`\\" * 500, "a/" * 300,
    PLANTED["hf"], PLANTED["openai"], PLANTED["github"], PLANTED["ngc"],
]
NOT_ASCII_DIGITS = [
    "\u00b2", "\u0663", "\u0661\u0662", "\uff11\uff12", "\uff14", "\u07c4", "\U0001d7d2", "\u2163", "\u00bd", "\u2464",
]
"""Digits of other scripts and digit-like signs: ``str.isdigit`` is true for all but the Roman four and
the half, and ``int()`` takes the decimal ones (Arabic-Indic, fullwidth, NKo, mathematical) but raises
on the superscript two and the circled five. A count reader built on ``isdigit`` + ``int`` gave a 500
for "²" (issue 25); one that takes ``int()``'s word reads "１２" as 12."""
OTHER_UNICODE = [
    "4\u0301", "\u0301", "\u202e4", "\u200f8\u200e", "4\ufe0f\u20e3", "\U0001f600", "\u00a04", "4\u2003", "\u200b",
    "\u05d0", "\ufeff4",
]
"""Combining marks, right-to-left and invisible controls, emoji, non-ASCII spaces (``str.strip`` takes them
away), a Hebrew letter, a byte-order mark."""
NUL = ["\x00", "4\x00", "\x004", "\x00" * 64]
COUNT_LOOKALIKES = ["1_000", "+3", " 12 ", "\t4\n", "0012", "-0", "4.", "0x10", "1e2", "9" * 5000]
"""ASCII spellings ``int()`` or ``float()`` take that are no count (or one past Python's 4,300-digit
limit, where ``int()`` raises)."""
COUNT_TEXTS = ["4", "2", *NOT_ASCII_DIGITS, *OTHER_UNICODE, *NUL, *COUNT_LOOKALIKES]
"""What the targeted mutator writes where the engine reads a count (issue 25, point 4)."""
STRINGS += [*NOT_ASCII_DIGITS, *OTHER_UNICODE, *NUL, *COUNT_LOOKALIKES[:-1]]


def clone(value: Any) -> Any:
    """A deep copy through JSON: one C stack frame per level where ``copy.deepcopy`` takes two, so
    the 900-deep values the mutator makes can be copied."""
    return json.loads(json.dumps(value))


def depth_of(value: Any) -> int:
    """Maximum nesting depth of a JSON value, iteratively (no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)
    return deepest


class Mutator:
    """Seeded mutations of AdmissionReviews: at a random place, a value of the wrong type, a
    pathological value, a missing or extra field, a multiplied list, a renamed kind..."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    # values -----------------------------------------------------------------
    def scalar(self) -> Any:
        r = self.rng
        return r.choice([
            lambda: None, lambda: True, lambda: False, lambda: 0, lambda: -1, lambda: 1, lambda: 4, lambda: 8,
            lambda: 2**31, lambda: 2**63, lambda: 10**30, lambda: -(10**30), lambda: 10**400, lambda: 0.5, lambda: 4.0,
            lambda: 1e308, lambda: -0.0, lambda: math.nan, lambda: math.inf, lambda: r.choice(STRINGS),
            lambda: r.choice(STRINGS), lambda: r.choice(STRINGS), lambda: r.choice(FIELD_NAMES),
        ])()

    def value(self, depth: int = 0) -> Any:
        r = self.rng
        roll = r.random()
        if depth > 3 or roll < 0.55:
            return self.scalar()
        if roll < 0.70:
            return [self.value(depth + 1) for _ in range(r.randint(0, 4))]
        if roll < 0.85:
            return {r.choice(FIELD_NAMES): self.value(depth + 1) for _ in range(r.randint(0, 4))}
        if roll < 0.90:
            return self.deep(r.choice([50, 200, 600, 900]))
        if roll < 0.95:  # many items: of one short scalar, so the mutant stays small enough to be cheap
            item = r.choice([None, 4, "4", "x", "NVIDIA-L40S", {"name": "c"}, ["-tp", "4"]])
            return [item] * r.choice([100, 1000])
        return {f"k{i}": i for i in range(r.choice([100, 1000]))}

    def deep(self, depth: int) -> Any:
        node: Any = self.scalar()
        for _ in range(depth):
            node = [node] if self.rng.random() < 0.5 else {"a": node}
        return node

    # places -----------------------------------------------------------------
    @staticmethod
    def places(doc: Any) -> list[tuple[Any, Any]]:
        """(container, key) for every value inside ``doc`` (dict keys and list indexes), bounded."""
        out: list[tuple[Any, Any]] = []
        stack = [doc]
        while stack and len(out) < 5000:
            node = stack.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for k, v in items:
                out.append((node, k))
                if isinstance(v, (dict, list)):
                    stack.append(v)
        return out

    def mutate(self, review: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A mutated deep copy of ``review`` and the names of the mutations applied."""
        r = self.rng
        doc = clone(review)
        applied: list[str] = []
        for _ in range(r.choice([1, 1, 1, 2, 2, 3, 4])):
            op = r.choices(["replace", "insert", "delete", "retype", "multiply", "targeted", "envelope"],
                           weights=[25, 15, 10, 10, 5, 30, 5])[0]
            applied.append(getattr(self, "_" + op)(doc))
        return doc, applied

    def _inner(self, doc: dict[str, Any]) -> Any:
        request = doc.get("request")
        if isinstance(request, dict) and self.rng.random() < 0.85 and isinstance(request.get("object"), (dict, list)):
            return request["object"]
        return request if isinstance(request, (dict, list)) else doc

    def _replace(self, doc: dict[str, Any]) -> str:
        places = self.places(self._inner(doc))
        if not places:
            return "replace:none"
        holder, key = self.rng.choice(places)
        holder[key] = self.value()
        return f"replace:{key}"

    def _insert(self, doc: dict[str, Any]) -> str:
        dicts = [v for h, k in self.places(self._inner(doc)) for v in [h[k]] if isinstance(v, dict)]
        if not dicts:
            return "insert:none"
        target = self.rng.choice(dicts)
        key = self.rng.choice(FIELD_NAMES)
        target[key] = self.value()
        return f"insert:{key}"

    def _delete(self, doc: dict[str, Any]) -> str:
        places = self.places(self._inner(doc))
        if not places:
            return "delete:none"
        holder, key = self.rng.choice(places)
        del holder[key]
        return f"delete:{key}"

    def _retype(self, doc: dict[str, Any]) -> str:
        places = self.places(self._inner(doc))
        if not places:
            return "retype:none"
        holder, key = self.rng.choice(places)
        v = holder[key]
        if isinstance(v, list):
            holder[key] = (" ".join(str(x) for x in v) if self.rng.random() < 0.5 else
                           (v[0] if v else None))  # args as a string; a list collapsed to its item
        elif isinstance(v, dict):
            holder[key] = list(v.values()) if self.rng.random() < 0.5 else [v]
        elif isinstance(v, str):
            holder[key] = self.rng.choice([list(v[:50]), [v], {"value": v}, len(v), v.encode("utf-8", "surrogatepass").hex()])
        elif isinstance(v, bool) or v is None:
            holder[key] = self.rng.choice(["true", 1, [], {}])
        else:
            holder[key] = self.rng.choice([lambda: str(v)[:100], lambda: [v], lambda: {"v": v}, lambda: -v,
                                           lambda: v * 1.5 if abs(v) < 1e300 else v])()
        return f"retype:{key}"

    def _multiply(self, doc: dict[str, Any]) -> str:
        lists = [v for h, k in self.places(self._inner(doc)) for v in [h[k]] if isinstance(v, list) and v]
        if not lists:
            return "multiply:none"
        target = self.rng.choice(lists)
        times = self.rng.choice([2, 10, 100, 300])
        target[:] = [x for x in target[:5] for _ in range(times)][:3000]  # shared items, encoded apart
        return f"multiply:{times}"

    def _targeted(self, doc: dict[str, Any]) -> str:
        """Wrong types exactly where the engine reads: GPU quantities, env entries, args, selectors."""
        r = self.rng
        containers = [c for h, k in self.places(self._inner(doc)) for c in [h[k]]
                      if isinstance(c, dict) and ("image" in c or "command" in c)]
        specs = [s for h, k in self.places(self._inner(doc)) for s in [h[k]]
                 if isinstance(s, dict) and "containers" in s]
        if r.random() < 0.2:
            return self._count(doc, containers, specs)
        choice = r.randrange(12)
        if containers and choice < 6:
            c = r.choice(containers)
            if choice == 0:
                c["resources"] = {"limits": {"nvidia.com/gpu": r.choice(
                    [4, "4", 4.0, 4.5, -4, "-1", [4], {"n": 4}, None, True, "4Gi", "1000m", "0.5", 10**30, "1e3", math.nan])}}
                return "targeted:limits"
            if choice == 1:
                c["env"] = r.choice([[{"name": "TP"}], [{"name": "TP", "value": None}], [{"value": "4"}],
                                     [{"name": 4, "value": 4}], {"TP": "4"}, "TP=4", [None, 1, "x"],
                                     [{"name": "HF_TOKEN", "value": PLANTED["hf"]}, {"name": "M", "value": "$(HF_TOKEN)"}],
                                     [{"name": f"V{i}", "value": "$(V0)" * 20} for i in range(300)]])
                return "targeted:env"
            if choice == 2:
                c["args"] = r.choice(["--tensor-parallel-size 8", "-tp=4 --model m", 8, [["-tp"], ["4"]],
                                      ["--tensor-parallel-size"], ["-tp", None], ["-tp", {"x": 1}],
                                      ["-tp", "4"] * 1000, ["x" * 70000]])
                return "targeted:args"
            if choice == 3:
                c["command"] = r.choice(["vllm serve m -tp 4", ["sh", "-c"], ["sh", "-c", "${" * 5000],
                                         ["bash", "-c", "vllm serve $(M) --tp ${TP:-$(X)}"], [], None, {"vllm": 1}])
                return "targeted:command"
            if choice == 4:
                c["envFrom"] = r.choice([[{"configMapRef": {"name": "c"}}] * 50, [{"secretRef": None}], "x", [1]])
                return "targeted:envFrom"
            c.pop(r.choice(["name", "image", "resources", "command"]), None)
            return "targeted:drop"
        if specs and choice < 10:
            s = r.choice(specs)
            if choice == 6:
                s["nodeSelector"] = r.choice([{KEY: "NVIDIA-L40S"}, {KEY: ["NVIDIA-L40S"]}, {KEY: None}, [KEY],
                                              "NVIDIA-L40S", {KEY: 4}])
                return "targeted:nodeSelector"
            if choice == 7:
                s["affinity"] = r.choice([
                    required([expr(KEY, r.choice(["In", "NotIn", "Exists", "DoesNotExist", "in"]), "NVIDIA-L40S")]),
                    required([expr(KEY, "In", "NVIDIA-A100-SXM4-80GB")], [expr("x", "Exists")]),
                    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
                    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [None, 4]}}},
                    {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}},
                    {"nodeAffinity": []}, [], "x", None,
                    {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"x": 1}}},
                ])
                return "targeted:affinity"
            if choice == 8:
                s["initContainers"] = r.choice([[container(["sh"], 8, name="i")], "x", [None], [{"resources": 4}]])
                return "targeted:initContainers"
            s["containers"] = r.choice([None, [], "x", {"c": {}}, [container(["vllm", "serve", "m"], 2, name=f"c{i}")
                                                                   for i in range(r.choice([2, 70, 300]))]])
            return "targeted:containers"
        obj = self._inner(doc)
        if isinstance(obj, dict):
            meta = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata", {}), dict) else obj
            if isinstance(meta, dict):
                meta[r.choice(["annotations", "labels"])] = r.choice([
                    {"gpu-admission.io/" + r.choice(["model", "params", "tier", "tensor-parallel", "mode", "group",
                                                     "group-size"]): self.scalar()},
                    "x", [1], None, {"gpu-admission.io/params": 4}])
                return "targeted:metadata"
        return "targeted:none"

    def _count(self, doc: dict[str, Any], containers: list[Any], specs: list[Any]) -> str:
        """A spelling of :data:`COUNT_TEXTS` where the engine turns text into a count: the
        tensor-parallel and group-size annotations, the LWS size label, a launcher flag, a shell
        positional parameter, ``mpirun -n``, a controller's replicas, a GPU quantity, a node
        affinity's ``Gt`` value."""
        r = self.rng
        text = r.choice(COUNT_TEXTS)
        obj = self._inner(doc)
        choice = r.randrange(9)
        if specs and choice == 8:
            r.choice(specs)["affinity"] = required([expr("example.com/gpu-memory-gib", r.choice(["Gt", "Lt"]), text)])
            return "count:affinity"
        if containers and choice < 4:
            c = r.choice(containers)
            if choice == 0:
                c["command"] = ["vllm", "serve", "m", "--tensor-parallel-size", text]
            elif choice == 1:
                c["command"] = ["sh", "-c", f"exec vllm serve m -tp ${text} -pp $1", "sh", text]
            elif choice == 2:
                c["command"] = ["mpirun", r.choice(["-n", "-np"]), text, "python", "train.py"]
            else:
                c["resources"] = {"limits": {"nvidia.com/gpu": text}}
            return f"count:{choice}"
        if isinstance(obj, dict) and isinstance(obj.get("spec"), dict) and choice < 6:
            obj["spec"][r.choice(["replicas", "parallelism"])] = text
            return "count:replicas"
        if isinstance(obj, dict):
            meta = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata", {}), dict) else None
            if isinstance(meta, dict):
                key = r.choice(["gpu-admission.io/tensor-parallel", "gpu-admission.io/group-size",
                                "leaderworkerset.sigs.k8s.io/size"])
                meta["annotations"] = {**(meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}),
                                       key: text}
                return "count:annotation"
        return "count:none"

    def _envelope(self, doc: dict[str, Any]) -> str:
        r = self.rng
        request = doc.get("request") if isinstance(doc.get("request"), dict) else None
        choice = r.randrange(10)
        if choice == 0:
            doc["apiVersion"] = r.choice(["admission.k8s.io/v1beta1", "v1", None, 1, ""])
        elif choice == 1:
            doc["kind"] = r.choice(["Review", None, ["AdmissionReview"], "admissionreview"])
        elif choice == 2:
            doc.pop("request", None)
        elif choice == 3 and request is not None:
            request["uid"] = r.choice([None, "", 7, ["u"], {"u": 1}, "u" * 10000, "\ud800", "uid-" + "\u00e9"])
        elif choice == 4 and request is not None:
            request["kind"] = r.choice([{"group": "", "version": "v1", "kind": "Secret"}, {"kind": 7}, "Pod", None,
                                        {"group": "unknown.example.com", "version": "v9", "kind": "Pod"},
                                        {"group": "apps", "version": "v1", "kind": "Deployment"}])
        elif choice == 5 and request is not None:
            request["operation"] = r.choice(["create", "PATCH", "", None, 1, ["CREATE"]])
        elif choice == 6 and request is not None:
            request["dryRun"] = r.choice(["true", 1, None, [True]])
        elif choice == 7 and request is not None:
            request["subResource"] = r.choice(["status", "", None, 4, "ephemeralcontainers", "binding"])
        elif choice == 8:
            doc["request"] = r.choice([None, [], "x", 1, {}])
        else:
            obj = request.get("object") if request is not None else None
            if isinstance(obj, dict):
                obj["kind"] = r.choice(["List", "Pod", "Deployment", "Unknown", None, 3])
                obj["apiVersion"] = r.choice(["v1", "v2", "leaderworkerset.x-k8s.io/v1", None])
        return f"envelope:{choice}"

    # bytes ------------------------------------------------------------------
    def bytes_mutant(self, body: bytes) -> tuple[bytes, str, str]:
        """A byte-level mutant: (body, content type, what was done)."""
        r = self.rng
        ctype = "application/json"
        choice = r.randrange(12)
        data = bytearray(body)
        if choice == 0:
            data = data[: r.randrange(len(data))]
            what = "truncate"
        elif choice == 1:
            for _ in range(r.randint(1, 5)):
                i = r.randrange(len(data))
                data[i] = r.randrange(256)
            what = "flip"
        elif choice == 2:
            i = r.randrange(len(data))
            data[i:i] = r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf4\x90\x80\x80", b"\x00"])
            what = "invalid-utf8"
        elif choice == 3:
            i = r.randrange(len(data))
            data[i:i] = r.choice([b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"NaN", b"Infinity", b"-",
                                  b"9" * 5000])
            what = "syntax"
        elif choice == 4:
            data = bytearray(b"\xef\xbb\xbf") + data
            what = "bom"
        elif choice == 5:
            data += r.choice([b"garbage", b"{}", b"\n", b" ", b"\x00"])
            what = "trailing"
        elif choice == 6:
            # duplicate keys: a second uid, a second object (the last one wins in Python and in Go)
            data = bytearray(bytes(data).replace(b'"request":{', b'"request":{"uid":"first",', 1))
            what = "duplicate-key"
        elif choice == 7:
            ctype = r.choice(["text/plain", "", "application/jsonx", "application/x-www-form-urlencoded",
                              "APPLICATION/JSON", "application/json; charset=utf-8", "application/json;charset=latin-1"])
            what = "content-type"
        elif choice == 8:
            data = bytearray(r.choice([b"", b"null", b"[]", b'"x"', b"1", b"{}", b"[" * 100000, b'{"a":' * 50000]))
            what = "small"
        elif choice == 9:
            data = bytearray(bytes(data).decode("utf-8", "replace").encode("utf-16"))
            what = "utf-16"
        elif choice == 10:
            data = bytearray(bytes(data).replace(b'"', b"'", r.randint(1, 3)))
            what = "quotes"
        elif r.random() < 0.5:
            data = bytearray(bytes(data).replace(b":", b":" + b"[" * 5 + b"1" + b"]" * 5 + b",\"x\":", 1))
            what = "splice"
        else:  # a number past Python's 4,300-digit int limit (a ValueError, not a JSONDecodeError)
            data = bytearray(re.sub(rb":([0-9])", lambda m: b":" + m.group(1) * r.choice([400, 5000]), bytes(data),
                                    count=r.randint(1, 3)))
            what = "long-number"
        return bytes(data), ctype, what


# ----------------------------------------------------------------------------- the contract


class ContractError(AssertionError):
    """A broken invariant; ``body`` is the whole request that broke it (for a reproduction file)."""

    def __init__(self, message: str, endpoint: str = "", body: bytes = b"") -> None:
        super().__init__(message)
        self.endpoint, self.body = endpoint, body


def expected_envelope(body: bytes, ctype: str) -> tuple[bool, Any, str]:
    """(well-formed?, the decoded document or None, uid) by the rules of admission.k8s.io/v1."""
    if ctype.split(";", 1)[0].strip().lower() != "application/json" or not body:
        return False, None, ""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False, None, ""
    ok = (isinstance(doc, dict) and doc.get("kind") == "AdmissionReview"
          and doc.get("apiVersion") == "admission.k8s.io/v1" and isinstance(doc.get("request"), dict)
          and isinstance(doc["request"].get("uid"), str) and bool(doc["request"]["uid"]))
    return ok, doc, doc["request"]["uid"] if ok else ""


@dataclass
class Stats:
    reviews: int = 0
    statuses: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    mutations: Counter = field(default_factory=Counter)
    patched: int = 0
    patches_applied: int = 0
    schema_checked: int = 0
    idempotence_checked: int = 0
    slowest: float = 0.0
    slowest_what: str = ""
    seconds: float = 0.0

    def merge(self, other: "Stats") -> None:
        self.reviews += other.reviews
        self.statuses.update(other.statuses)
        self.verdicts.update(other.verdicts)
        self.mutations.update(other.mutations)
        self.patched += other.patched
        self.patches_applied += other.patches_applied
        self.schema_checked += other.schema_checked
        self.idempotence_checked += other.idempotence_checked
        if other.slowest > self.slowest:
            self.slowest, self.slowest_what = other.slowest, other.slowest_what
        self.seconds += other.seconds

    def as_dict(self) -> dict[str, Any]:
        return {"reviews": self.reviews, "statuses": dict(self.statuses), "verdicts": dict(self.verdicts),
                "patched": self.patched, "patches_applied": self.patches_applied,
                "schema_checked": self.schema_checked, "idempotence_checked": self.idempotence_checked,
                "slowest_cpu_ms": round(self.slowest * 1000, 1), "slowest_what": self.slowest_what,
                "seconds": round(self.seconds, 1), "mutations": dict(self.mutations.most_common(12))}

    def line(self, label: str) -> str:
        s = self.statuses
        return (f"fuzz[{label}]: {self.reviews} reviews in {self.seconds:.1f} s: HTTP 200 x{s.get(200, 0)}, "
                f"400 x{s.get(400, 0)}, 413 x{s.get(413, 0)}, 5xx x{sum(v for k, v in s.items() if k >= 500)}; "
                f"allowed {self.verdicts.get('allowed', 0)}, denied {self.verdicts.get('denied', 0)}; "
                f"{self.patched} patches applied, {self.schema_checked} patched pods schema-validated, "
                f"{self.idempotence_checked} re-mutated; slowest {self.slowest * 1000:.0f} ms CPU")


class SchemaCache:
    """``kubernetes_validate`` (strict, 1.37) takes ~15 ms a pod, so the question asked is the one
    the patch can change: is this pod's ``spec.affinity`` valid? A minimal Pod carrying only that
    affinity is validated once per distinct affinity."""

    def __init__(self) -> None:
        self._seen: dict[str, bool] = {}

    def affinity_ok(self, affinity: Any) -> bool:
        key = json.dumps(affinity, sort_keys=True, default=str)
        if key not in self._seen:
            probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}}
            if affinity is not None:
                probe["spec"]["affinity"] = affinity
            try:
                kubernetes_validate.validate(probe, K8S_VERSION, strict=True)
                self._seen[key] = True
            except Exception:  # noqa: BLE001 - ValidationError and friends: not valid
                self._seen[key] = False
        return self._seen[key]


def _fail(what: str, endpoint: str, body: bytes, detail: Any) -> ContractError:
    return ContractError(f"{what} on {endpoint}: {detail!r:.600}\nrequest body (first 600 bytes): {body[:600]!r}",
                         endpoint, body)


class Checker:
    """Posts reviews to an app's test client and checks the contract."""

    def __init__(self, client: Any, *, idempotence_every: int = 3) -> None:
        self.client = client
        self.schema = SchemaCache()
        self.idempotence_every = idempotence_every

    def post(self, endpoint: str, body: bytes, ctype: str) -> tuple[int, bytes, float]:
        """(status, body, CPU seconds the request took: in process, so a busy machine does not count)."""
        started = time.process_time()
        resp = self.client.post(endpoint, data=body, content_type=ctype) if ctype else \
            self.client.post(endpoint, data=body, headers={"Content-Type": ""})
        return resp.status_code, resp.get_data(), time.process_time() - started

    def check(self, endpoint: str, body: bytes, ctype: str, stats: Stats, what: str = "") -> None:
        status, raw, took = self.post(endpoint, body, ctype)
        stats.reviews += 1
        stats.statuses[status] += 1
        if took > stats.slowest:
            stats.slowest, stats.slowest_what = took, what
        if took > LATENCY_LIMIT:
            raise _fail(f"slow answer ({took:.2f} s)", endpoint, body, what)
        if status >= 500:
            raise _fail(f"HTTP {status}", endpoint, body, raw[:300])
        well_formed, doc, uid = expected_envelope(body, ctype)
        if status == 413:
            if len(body) <= 4 * 1024 * 1024:
                raise _fail("413 under the limit", endpoint, body, raw[:300])
            return
        if status == 400:
            error = json.loads(raw).get("error")
            if not isinstance(error, str) or not error:
                raise _fail("400 without a reason", endpoint, body, raw[:300])
            if well_formed and not ("nested too deeply" in error and depth_of(doc) > DEEP):
                raise _fail("400 for a well-formed envelope", endpoint, body, error)
            return
        if status != 200:
            raise _fail(f"unexpected HTTP {status}", endpoint, body, raw[:300])
        if not well_formed:
            raise _fail("200 for a malformed envelope", endpoint, body, raw[:300])
        self.check_review(endpoint, body, doc, uid, json.loads(raw), stats)

    def check_review(self, endpoint: str, body: bytes, sent: dict[str, Any], uid: str, got: Any,
                     stats: Stats) -> None:
        if not isinstance(got, dict) or got.get("apiVersion") != "admission.k8s.io/v1" \
                or got.get("kind") != "AdmissionReview" or not isinstance(got.get("response"), dict):
            raise _fail("not an AdmissionReview", endpoint, body, got)
        r = got["response"]
        if set(r) - RESPONSE_FIELDS:
            raise _fail("unknown response fields", endpoint, body, set(r) - RESPONSE_FIELDS)
        if r.get("uid") != uid:
            raise _fail("uid not echoed", endpoint, body, (uid[:80], str(r.get("uid"))[:80]))
        if not isinstance(r.get("allowed"), bool):
            raise _fail("allowed is not a bool", endpoint, body, r)
        stats.verdicts["allowed" if r["allowed"] else "denied"] += 1
        if endpoint == "/mutate" and not r["allowed"]:
            raise _fail("/mutate denied", endpoint, body, r)
        if not r["allowed"]:
            st = r.get("status")
            if not (isinstance(st, dict) and isinstance(st.get("code"), int) and 400 <= st["code"] < 500
                    and isinstance(st.get("message"), str) and st["message"]):
                raise _fail("denial without status", endpoint, body, st)
        elif "status" in r:
            raise _fail("status on an allowed response", endpoint, body, r["status"])
        warnings = r.get("warnings", [])
        if not isinstance(warnings, list) or not all(isinstance(w, str) and w and len(w) <= WARNING_MAX_CHARS
                                                     and "\n" not in w for w in warnings) \
                or sum(len(w) for w in warnings) > WARNINGS_MAX_TOTAL:
            raise _fail("warnings break the caps", endpoint, body, warnings)
        annotations = r.get("auditAnnotations", {})
        if not isinstance(annotations, dict) or not all(
                isinstance(k, str) and _ANNOTATION_KEY.match(k) and isinstance(v, str)
                and len(v) <= (AUDIT_MESSAGE_MAX if k == "message" else 1024)
                for k, v in annotations.items()):
            raise _fail("bad audit annotations", endpoint, body, annotations)
        text = json.dumps([r.get("status"), warnings, annotations])
        for name, secret in PLANTED.items():
            # the password has no token shape: it is a secret only while DB_PASSWORD holds it, which
            # a mutation may have undone (tests/test_secrets.py covers it with the variable intact)
            if name != "password" and (secret in text or secret.lower() in text.lower()):
                raise _fail(f"planted credential {name} echoed", endpoint, body, text[:400])
        if ("patch" in r) != ("patchType" in r) or r.get("patchType", "JSONPatch") != "JSONPatch":
            raise _fail("patch without patchType or the other way round", endpoint, body, r)
        if "patch" in r:
            self.check_patch(endpoint, body, sent, r["patch"], stats)

    def check_patch(self, endpoint: str, body: bytes, sent: dict[str, Any], patch_b64: str, stats: Stats) -> None:
        stats.patched += 1
        try:
            ops = json.loads(base64.b64decode(patch_b64, validate=True))
        except ValueError as exc:
            raise _fail("patch is not base64 JSON", endpoint, body, exc) from None
        if not isinstance(ops, list) or not ops or not all(
                isinstance(op, dict) and op.get("op") in ("add", "replace") and isinstance(op.get("path"), str)
                for op in ops):
            raise _fail("patch is not a list of add/replace ops", endpoint, body, ops)
        request = sent["request"]
        obj = request.get("object")
        claim = isinstance(obj, dict) and obj.get("kind") in ("ResourceClaim", "ResourceClaimTemplate")
        for op in ops:
            if not claim and not AFFINITY_PATH.match(op["path"]):
                raise _fail("patch touches more than the affinity and the group label", endpoint, body, op["path"])
        try:
            patched = jsonpatch.apply_patch(clone(obj), ops, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
            raise _fail("patch does not apply to the object it was made for", endpoint, body, (exc, ops)) from None
        stats.patches_applied += 1
        if claim or not isinstance(patched, dict) or patched.get("kind") != "Pod":
            return
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        if self.schema.affinity_ok(spec.get("affinity")):
            stats.schema_checked += 1
            new_affinity = patched["spec"].get("affinity")
            if not self.schema.affinity_ok(new_affinity):
                raise _fail("patched pod is not schema-valid", endpoint, body, new_affinity)
        if stats.patched % self.idempotence_every == 0:
            stats.idempotence_checked += 1
            again = dict(sent, request=dict(sent["request"]))
            again["request"]["object"] = patched
            status, raw, _ = self.post("/mutate", json.dumps(again).encode(), "application/json")
            if status != 200 or "patch" in json.loads(raw)["response"]:
                raise _fail("patch is not idempotent (re-mutating the patched pod patches again)", endpoint,
                            body, (ops, json.loads(raw).get("response", {}).get("patch")))


def encode(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def run(client: Any, *, reviews: int, seed: int, byte_fraction: float = 0.2,
        seeds: list[Seed] | None = None, on_progress: Callable[[Stats], None] | None = None) -> Stats:
    """Post ``reviews`` mutated reviews (``byte_fraction`` of them byte-level mutants, the rest
    structural); the first pass sends every seed unmutated. Raises ``ContractError`` on the first
    broken invariant (with the request that broke it)."""
    seeds = seeds or corpus()
    checker = Checker(client)
    mutator = Mutator(seed)
    stats = Stats()
    started = time.perf_counter()
    for s in seeds:
        checker.check(s.endpoint, encode(s.review), "application/json", stats, f"seed {s.name}")
    n = 0
    while stats.reviews < reviews:
        s = mutator.rng.choice(seeds)
        if mutator.rng.random() < byte_fraction:
            body, ctype, what = mutator.bytes_mutant(encode(s.review))
            stats.mutations["bytes:" + what] += 1
        else:
            try:
                doc, applied = mutator.mutate(s.review)
                body = encode(doc)
            except (RecursionError, OverflowError, ValueError):  # a mutant the fuzzer itself cannot build
                continue                                              # (too deep to copy, 10^400 as a float)
            if len(body) > MAX_MUTANT:
                continue
            ctype, what = "application/json", ",".join(applied)
            stats.mutations.update(a.split(":")[0] for a in applied)
        checker.check(s.endpoint, body, ctype, stats, f"seed {s.name}: {what}")
        n += 1
        if on_progress and n % 10000 == 0:
            stats.seconds = time.perf_counter() - started
            on_progress(stats)
    stats.seconds = time.perf_counter() - started
    return stats


def iter_seed_bodies() -> Iterator[tuple[str, str, bytes]]:
    for s in corpus():
        yield s.name, s.endpoint, encode(s.review)
