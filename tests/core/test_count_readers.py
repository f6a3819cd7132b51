"""Every reader that turns text into a count, through the engine (issue 25, point 4).

Each row writes one spelling where one reader reads a count: an ASCII count is read as before, a
digit of another script (``"²"`` made ``int()`` raise: HTTP 500 and a ``check`` traceback; ``"１２"``
was read as 12) is no count, and nothing raises. These tests import nothing of
``webhook.core.counts``: run against a tree without the fix, the crash rows fail with the
``ValueError`` of issue 25 and the fullwidth rows with the old reading.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import engine, hardware, inventory, models, node_match, numa, settings as settings_mod
from webhook.core.engine import TemplateResult
from webhook.core.workloads import resolve
from tests import judging

S = settings_mod.default()
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
VLLM = ["vllm", "serve", LLAMA_70B]
TRITON = "nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3"


def pod(command: list[str], gpus: Any = 4, *, image: str = "vllm/vllm-openai:v0.10.1",
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ai"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [
        {"name": "c", "image": image, "command": command, "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def deployment(replicas: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
            "spec": {"replicas": replicas, "template": {"metadata": {}, "spec": pod([*VLLM, "-tp", "4"])["spec"]}}}


def pytorchjob(replicas: Any) -> dict[str, Any]:
    torchrun = pod(["torchrun", "--nproc-per-node", "4", "train.py"])
    worker = {"replicas": replicas, "template": {"spec": torchrun["spec"]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ai"},
            "spec": {"pytorchReplicaSpecs": {"Worker": worker}}}


def kubeai(profile: str) -> dict[str, Any]:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m", "namespace": "ai"},
            "spec": {"url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM", "resourceProfile": profile,
                     "minReplicas": 1}}


def one(obj: Any) -> TemplateResult:
    (result,) = judging.judge(obj, S)
    return result


def codes(r: TemplateResult) -> list[str]:
    return [v.code for v in r.decision.violations]


# (id, object, what the reader must have read): fact(result) == expected
def tp_annotation(value: str) -> dict[str, Any]:
    return pod([*VLLM], annotations={"gpu-admission.io/tensor-parallel": value})


def group_size(value: str) -> dict[str, Any]:
    return pod([*VLLM, "-tp", "4"], labels={"gpu-admission.io/group": "g"},
               annotations={"gpu-admission.io/group-size": value})


def lws_size(value: str) -> dict[str, Any]:
    return pod([*VLLM, "-tp", "4"], labels={"leaderworkerset.sigs.k8s.io/group-key": "k"},
               annotations={"leaderworkerset.sigs.k8s.io/size": value})


def positional(value: str) -> dict[str, Any]:
    return pod(["sh", "-c", f"exec vllm serve {LLAMA_70B} -tp ${value}", "sh", "4"])


def mpirun(value: str) -> dict[str, Any]:
    return pod(["mpirun", "--allow-run-as-root", "-n", value, "tritonserver", "--model-repository=/models"],
               image=TRITON)


def zero_stage(value: str) -> dict[str, Any]:
    return pod(["accelerate", "launch", "--use_deepspeed", "--zero_stage", value, "train.py",
                "--model_name_or_path", "meta-llama/Llama-3.1-8B"], 8, image="huggingface/accelerate:gpu-nightly")


def tp_flag(value: str) -> dict[str, Any]:
    return pod([*VLLM, "-tp", value])


def tp(r: TemplateResult) -> Any:
    return r.profile.tensor_parallel


def tp_and_codes(r: TemplateResult) -> Any:
    return r.profile.tensor_parallel, codes(r)


def pods(r: TemplateResult) -> Any:
    return r.profile.pods


def strategy(r: TemplateResult) -> Any:
    return r.profile.training_strategy


def framework_and_tp(r: TemplateResult) -> Any:
    return r.profile.framework, r.profile.tensor_parallel


def replicas(r: TemplateResult) -> Any:
    return r.template.replicas


def kubeai_gpus(r: TemplateResult) -> Any:
    return r.profile.gpus_per_pod


def gpu_codes(r: TemplateResult) -> Any:
    return r.profile.gpus_per_pod, codes(r)


READERS = [
    # gpu-admission.io/tensor-parallel: inference._tp_annotation
    pytest.param(tp_annotation("4"), tp_and_codes, (4, []), id="tp-annotation-ascii"),
    pytest.param(tp_annotation(" 4 "), tp_and_codes, (4, []), id="tp-annotation-padded"),
    pytest.param(tp_annotation("\u00b2"), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-superscript"),
    pytest.param(tp_annotation("\uff14"), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-fullwidth"),
    pytest.param(tp_annotation("1_0"), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-underscore"),
    pytest.param(tp_annotation("+4"), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-sign"),
    pytest.param(tp_annotation("4\x00"), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-nul"),
    pytest.param(tp_annotation("9" * 5000), tp_and_codes, (1, ["invalid-annotation"]), id="tp-annotation-huge"),
    # gpu-admission.io/group-size and the LWS size: groups.declared_size
    pytest.param(group_size("4"), pods, 4, id="group-size-ascii"),
    pytest.param(group_size("\u00b2"), pods, 1, id="group-size-superscript"),
    pytest.param(group_size("\uff14"), pods, 1, id="group-size-fullwidth"),
    pytest.param(group_size("9" * 5000), pods, 1, id="group-size-huge"),
    pytest.param(lws_size("2"), pods, 2, id="lws-size-ascii"),
    pytest.param(lws_size("\u2464"), pods, 1, id="lws-size-circled"),
    # sh -c '... $N': shell positional parameters
    pytest.param(positional("1"), tp, 4, id="shell-positional-ascii"),
    pytest.param(positional("\u00b2"), tp, 1, id="shell-positional-superscript"),
    pytest.param(positional("\u0661"), tp, 1, id="shell-positional-arabic-indic"),
    # mpirun -n N: launchers.programs.mpi_program
    pytest.param(mpirun("2"), framework_and_tp, ("triton-trtllm", 2), id="mpirun-ascii"),
    pytest.param(mpirun("\u00b2"), framework_and_tp, ("triton", None), id="mpirun-superscript"),
    pytest.param(mpirun("\uff12"), framework_and_tp, ("triton", None), id="mpirun-fullwidth"),
    # a launcher flag: launchers.values
    pytest.param(tp_flag("4"), tp, 4, id="flag-ascii"),
    pytest.param(tp_flag("+4"), tp, 4, id="flag-plus-as-argparse-reads-it"),
    pytest.param(tp_flag("\uff14"), tp, 1, id="flag-fullwidth"),
    pytest.param(tp_flag("\u00a04"), tp, 1, id="flag-no-break-space"),
    # a ZeRO stage: launchers.strategy
    pytest.param(zero_stage("2"), strategy, "zero-2", id="zero-stage-ascii"),
    pytest.param(zero_stage("\u00b2"), strategy, None, id="zero-stage-superscript"),
    pytest.param(zero_stage("\uff12"), strategy, None, id="zero-stage-fullwidth"),
    # replicas as a string: workloads (controllers) and operators (job kinds)
    pytest.param(deployment("3"), replicas, 3, id="replicas-ascii"),
    pytest.param(deployment(" 3 "), replicas, 3, id="replicas-padded"),
    pytest.param(deployment("\u00b2"), replicas, 1, id="replicas-superscript"),
    pytest.param(deployment("\uff13"), replicas, 1, id="replicas-fullwidth"),
    pytest.param(deployment("3\x00"), replicas, 1, id="replicas-nul"),
    pytest.param(pytorchjob("2"), pods, 2, id="operator-replicas-ascii"),
    pytest.param(pytorchjob("\u00b2"), pods, 1, id="operator-replicas-superscript"),
    pytest.param(pytorchjob("\uff12"), pods, 1, id="operator-replicas-fullwidth"),
    # KubeAI's resourceProfile <name>:<count>: operators.model_servers
    pytest.param(kubeai("nvidia-gpu-l4:2"), kubeai_gpus, 2, id="kubeai-profile-ascii"),
    pytest.param(kubeai("nvidia-gpu-l4:\u00b2"), kubeai_gpus, 0, id="kubeai-profile-superscript"),
    pytest.param(kubeai("nvidia-gpu-l4:\u00a02"), kubeai_gpus, 0, id="kubeai-profile-no-break-space"),
    # a GPU quantity: resources (already ASCII; Kubernetes trims the spaces around it)
    pytest.param(pod([*VLLM], "4"), gpu_codes, (4, []), id="quantity-ascii"),
    pytest.param(pod([*VLLM], "\uff14"), gpu_codes, (0, ["invalid-gpu-request"]), id="quantity-fullwidth"),
    pytest.param(pod([*VLLM], "\u00b2"), gpu_codes, (0, ["invalid-gpu-request"]), id="quantity-superscript"),
]


@pytest.mark.parametrize(("obj", "fact", "expected"), READERS)
def test_each_reader_reads_ascii_counts_only(obj: dict[str, Any], fact: Any, expected: Any) -> None:
    assert fact(one(obj)) == expected


def _node(count_label: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S",
                                                 "nvidia.com/gpu.count": count_label}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}


@pytest.mark.parametrize(("label", "mislabeled"), [
    pytest.param("4", True, id="ascii"),
    pytest.param("8", False, id="ascii-matching"),
    pytest.param("\u00b2", False, id="superscript"),
    pytest.param("\uff14", False, id="fullwidth"),
])
def test_a_node_count_label_is_read_by_the_same_rule(label: str, mislabeled: bool) -> None:
    """``check --inventory nodes.yaml``: a Node's ``nvidia.com/gpu.count`` label ("²" raised)."""
    inv = inventory.from_nodes([_node(label)], label_key=S.label_key, scheme=S.label_scheme, catalog=S.catalog,
                               gpu_resources=S.gpu_resources)
    assert any("is less than its 8 GPUs" in a for a in inv.nodes["n"].anomalies) is mislabeled


@pytest.mark.parametrize(("pointer", "expected"), [
    pytest.param("/spec/containers/0", "a", id="ascii-index"),
    pytest.param("/spec/containers/1", None, id="past-the-end"),
    pytest.param("/spec/containers/\u00b2", None, id="superscript-index"),
    pytest.param("/spec/containers/\uff10", None, id="fullwidth-index"),
])
def test_a_json_pointer_index_is_ascii(pointer: str, expected: Any) -> None:
    assert resolve({"spec": {"containers": ["a"]}}, pointer) == expected


def _guaranteed(cpu: str) -> dict[str, Any]:
    both = {"nvidia.com/gpu": 4, "cpu": cpu, "memory": "64Gi"}
    return {"containers": [{"name": "c", "image": "x", "resources": {"limits": both, "requests": dict(both)}}]}


@pytest.mark.parametrize(("cpu", "aligned"), [
    pytest.param("16", True, id="ascii"),
    pytest.param("1.6e1", True, id="exponent-form"),
    pytest.param("\uff11\uff16", False, id="fullwidth"),
    pytest.param("1_6", False, id="underscore"),
])
def test_numa_reads_cpu_quantities_in_ascii(cpu: str, aligned: bool) -> None:
    """``Decimal()`` took "１６" and "1_6" as 16 CPUs: a Guaranteed, aligned pod, which kube-apiserver
    would refuse to create."""
    assert (numa.numa_warning(_guaranteed(cpu), 4) is None) is aligned


@pytest.mark.parametrize(("name", "params_b"), [
    pytest.param("70B", 70.0, id="ascii"),
    pytest.param("\uff17\uff10B", None, id="fullwidth"),
    pytest.param("\u0667\u0660B", None, id="arabic-indic"),
    pytest.param("\u00a070B", None, id="no-break-space"),
])
def test_the_params_annotation_is_ascii(name: str, params_b: float | None) -> None:
    """``gpu-admission.io/params``: a ``\\d`` pattern read "７０B" as 70 billion parameters."""
    assert models.parse_params(name) == params_b



@pytest.mark.parametrize(("cc", "expected"), [
    pytest.param("8.9", (8, 9), id="ascii"),
    pytest.param(" 10.0", (10, 0), id="padded"),
    pytest.param("\uff18.\uff19", None, id="fullwidth"),
    pytest.param("gfx942", None, id="amd-target"),
])
def test_a_compute_capability_is_ascii(cc: str, expected: tuple[int, int] | None) -> None:
    """A policy's catalog entry: a ``\\d`` pattern read "８.９" as Ada Lovelace."""
    assert hardware.compute_capability(cc) == expected


def _gt(value: str) -> dict[str, Any]:
    obj = pod([*VLLM, "-tp", "4"])
    term = {"matchExpressions": [{"key": "example.com/gpu-memory-gib", "operator": "Gt", "values": [value]}]}
    obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}
    return obj


@pytest.mark.parametrize(("value", "expected"), [
    pytest.param("40", 40, id="ascii"),
    pytest.param("+40", 40, id="plus-as-go-reads-it"),
    pytest.param("-40", -40, id="negative"),
    pytest.param(str(2**63 - 1), 2**63 - 1, id="int64-max"),
    pytest.param(str(-(2**63)), -(2**63), id="int64-min"),
    pytest.param(str(2**63), None, id="int64-over"),
    pytest.param("\u0664\u0660", None, id="arabic-indic"),
    pytest.param("9" * 5000, None, id="huge-past-int-limit"),
])
def test_a_gt_lt_value_is_read_as_go_reads_it(value: str, expected: int | None) -> None:
    """``strconv.ParseInt``: a 5,000-digit ``Gt`` value made ``int()`` raise (a 500 at admission)."""
    assert node_match.parse_int(value) == expected
    assert one(_gt(value)).profile.tensor_parallel == 4  # the pod is judged whatever the value
