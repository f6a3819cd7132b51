"""Issue 24, point 6: which places make an object a template (``webhook.core.templating.find``), and
that the admission path does not ask (the engine still denies ``invalid-gpu-request``).

Each row is a pod spec (or a whole object) and the markers ``find`` must report, as
``field "text" at pointer`` descriptions; ``[]`` rows prove a place is NOT looked at (Kubernetes'
own ``$(VAR)`` expansion, a shell's ``${VAR}``, a chat template's ``{{ }}``) or that an object
asking for no GPUs is left to the engine.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core import engine, settings as settings_mod, templating
from tests import judging

GPU = ("nvidia.com/gpu", "amd.com/gpu")
LIMIT = "/spec/containers/0/resources/limits/nvidia.com~1gpu"


def pod(limits: dict[str, Any] | None = None, *, kind: str = "Pod", **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "vllm/vllm-openai:v0.10.1",
                                 "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]}
    container.update(spec.pop("container", {}))
    if limits is not None:
        container["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def deployment(replicas: Any, gpus: Any = 1) -> dict[str, Any]:
    template = pod({"nvidia.com/gpu": gpus})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": replicas, "template": {"metadata": {}, "spec": template["spec"]}}}


ROWS = [
    # GPU quantities: any marker, or empty
    pytest.param(pod({"nvidia.com/gpu": "$GPU_PER_NODE"}), [f'GPU quantity "$GPU_PER_NODE" at {LIMIT}'], id="$VAR"),
    pytest.param(pod({"nvidia.com/gpu": "${GPUS}"}), [f'GPU quantity "${{GPUS}}" at {LIMIT}'], id="${VAR}"),
    pytest.param(pod({"nvidia.com/gpu": "${GPUS:-4}"}), [f'GPU quantity "${{GPUS:-4}}" at {LIMIT}'],
                 id="${VAR:-default}"),
    pytest.param(pod({"nvidia.com/gpu": "$(GPUS)"}), [f'GPU quantity "$(GPUS)" at {LIMIT}'], id="$(VAR)-kustomize"),
    pytest.param(pod({"nvidia.com/gpu": "{{ .Values.gpus }}"}), [f'GPU quantity "{{{{ .Values.gpus }}}}" at {LIMIT}'],
                 id="{{ .Values }}"),
    pytest.param(pod({"nvidia.com/gpu": "{{- .Values.gpus | default 1 -}}"}),
                 [f'GPU quantity "{{{{- .Values.gpus | default 1 -}}}}" at {LIMIT}'], id="{{- pipeline -}}"),
    pytest.param(pod({"nvidia.com/gpu": None}), [f"empty GPU quantity at {LIMIT}"], id="null"),
    pytest.param(pod({"nvidia.com/gpu": ""}), [f"empty GPU quantity at {LIMIT}"], id="empty-string"),
    pytest.param(pod({"nvidia.com/gpu": "  "}), [f"empty GPU quantity at {LIMIT}"], id="blank"),
    pytest.param(pod({"amd.com/gpu": "$N"}), ['GPU quantity "$N" at /spec/containers/0/resources/limits/amd.com~1gpu'],
                 id="amd"),
    pytest.param(pod({"example.com/gpu-large": "$N"}),
                 ['GPU quantity "$N" at /spec/containers/0/resources/limits/example.com~1gpu-large'],
                 id="any-name-with-gpu"),
    pytest.param({"kind": "Trainer", "metadata": {"name": "t"}, "spec": {"resources": {"gpu": "${G}"}}},
                 ['GPU quantity "${G}" at /spec/resources/gpu'], id="dynamo-style-resources-gpu"),
    # not templates: the apiserver judges these quantities as written (the engine's invalid-gpu-request)
    pytest.param(pod({"nvidia.com/gpu": "4"}), [], id="a-number"),
    pytest.param(pod({"nvidia.com/gpu": "four"}), [], id="a-word-is-invalid-not-templated"),
    pytest.param(pod({"nvidia.com/gpu": "$"}), [], id="a-lone-dollar"),
    pytest.param(pod({"nvidia.com/gpu": "0.5"}), [], id="a-fraction"),
    # other places, in an object that asks for GPUs
    pytest.param(pod({"nvidia.com/gpu": 1, "memory": "${MEM}"}),
                 ['quantity "${MEM}" at /spec/containers/0/resources/limits/memory'], id="memory-quantity"),
    pytest.param(pod({"nvidia.com/gpu": 1, "cpu": None}),
                 ["empty quantity at /spec/containers/0/resources/limits/cpu"], id="empty-cpu-quantity"),
    pytest.param(pod({"nvidia.com/gpu": 1}, nodeSelector={"nvidia.com/gpu.product": "{{ .Values.product }}"}),
                 ['nodeSelector "{{ .Values.product }}" at /spec/nodeSelector/nvidia.com~1gpu.product'],
                 id="nodeSelector-value"),
    pytest.param(pod({"nvidia.com/gpu": 1}, nodeSelector={"${LABEL}": "NVIDIA-H100-80GB-HBM3"}),
                 ['nodeSelector "${LABEL}" at /spec/nodeSelector/${LABEL}'], id="nodeSelector-key"),
    pytest.param(pod({"nvidia.com/gpu": 1}, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                                      "values": ["$PRODUCT"]}]}]}}}),
                 ['affinity "$PRODUCT" at /spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/'
                  'nodeSelectorTerms/0/matchExpressions/0/values/0'], id="affinity-value"),
    pytest.param(deployment("${REPLICAS}"), ['replicas "${REPLICAS}" at /spec/replicas'], id="replicas"),
    pytest.param({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
                  "spec": {"leaderWorkerTemplate": {"size": "{{ .Values.nodes }}",
                                                    "workerTemplate": {"spec": pod({"nvidia.com/gpu": 8})["spec"]}}}},
                 ['size "{{ .Values.nodes }}" at /spec/leaderWorkerTemplate/size'], id="lws-size"),
    # the same places in an object that asks for no GPUs: nothing gpu-admission judges depends on them
    pytest.param(pod(None, nodeSelector={"pool": "{{ .Values.pool }}"}), [], id="cpu-pod-nodeSelector"),
    pytest.param(deployment("${REPLICAS}", gpus=0), [], id="cpu-deployment-replicas"),
    pytest.param(pod({"cpu": "${CPU}"}), [], id="cpu-quantity-of-a-cpu-pod"),
    pytest.param(pod(None, nodeSelector={"pool": "{{ .Values.pool }}"}, kind="Pod") | {
        "metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5"}}},
                 ['nodeSelector "{{ .Values.pool }}" at /spec/nodeSelector/pool'], id="gpu-sharing-annotation-asks"),
    # places never looked at: the kubelet's, a shell's or a program's own expansion
    pytest.param(pod({"nvidia.com/gpu": 1}, container={"command": ["vllm", "serve"], "args": ["$(MODEL_ID)"],
                                                       "env": [{"name": "MODEL_ID", "value": "meta-llama/x"}]}),
                 [], id="kubelet-$(VAR)-in-args"),
    pytest.param(pod({"nvidia.com/gpu": 1}, container={"env": [{"name": "URL", "value": "http://$(HOST):8000"}]}),
                 [], id="kubelet-$(VAR)-in-env-value"),
    pytest.param(pod({"nvidia.com/gpu": 1}, container={"command": ["sh", "-c", "vllm serve ${MODEL} --port $PORT"]}),
                 [], id="shell-in-command"),
    pytest.param(pod({"nvidia.com/gpu": 1}, container={"args": ["--chat-template", "{{ messages[0]['content'] }}"]}),
                 [], id="chat-template-in-args"),
    pytest.param(pod({"nvidia.com/gpu": 1}) | {"metadata": {"name": "p", "annotations": {"note": "{{ .Release }}"}}},
                 [], id="annotation-text"),
    pytest.param({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                  "template": {"spec": pod({"nvidia.com/gpu": "$N"})["spec"]}}, [], id="not-a-workload"),
]


@pytest.mark.parametrize(("obj", "expected"), ROWS)
def test_find(obj: dict[str, Any], expected: list[str]) -> None:
    assert [m.describe() for m in templating.find(obj, GPU)] == expected


def test_policy_gpu_resources_count() -> None:
    """A GPU resource the policy names (without ``gpu`` in it) is a GPU quantity too."""
    obj = pod({"habana.ai/gaudi": "$N"})
    assert templating.find(obj, GPU) == ()
    (marker,) = templating.find(obj, (*GPU, "habana.ai/gaudi"))
    assert marker.field == "GPU quantity" and marker.text == "$N"


def test_prefix_and_bounds() -> None:
    many = pod({f"nvidia.com/gpu-{i}": f"${{G{i}}}" for i in range(20)})
    found = templating.find(many, GPU, prefix="/items/2")
    assert len(found) == templating.MAX_MARKERS and found[0].pointer.startswith("/items/2/spec/")
    assert templating.reason(found).endswith(f"(and {templating.MAX_MARKERS - templating.SHOWN} more)")
    assert templating.reason(found[:1]) == found[0].describe()
    assert templating.find(pod({"nvidia.com/gpu": "x" * 500 + "$N"}), GPU)[0].text == "x" * 60


def test_the_engine_result_is_admitted_and_says_why() -> None:
    obj = pod({"nvidia.com/gpu": "$GPU_PER_NODE"})
    result = engine.templated(obj, "", templating.find(obj, GPU), "enforce")
    assert result.template.found == "templated" and result.decision.allowed and not result.patch
    assert result.decision.warnings == (
        f'templated: render it first (helm template / envsubst / kustomize): GPU quantity "$GPU_PER_NODE" at {LIMIT}',)


@pytest.mark.parametrize("gpus", ["$GPU_PER_NODE", "{{ .Values.gpus }}", None])
def test_admission_still_denies_what_check_reports_templated(gpus: Any) -> None:
    """The server's path (judge_review) never asks templating: kube-apiserver refuses these itself,
    and whatever reaches the webhook is judged as written."""
    judgement = judging.judge_review(pod({"nvidia.com/gpu": gpus}), settings_mod.default())
    (result,) = judgement.results
    assert result.template.found == "kind" and not result.decision.allowed
    assert [v.code for v in result.decision.violations] == ["invalid-gpu-request"]
