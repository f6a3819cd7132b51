"""Serving operators whose pods the operator writes (issue 14, part 1, kinds): KubeAI Model, NIM
NIMService, Kaito Workspace, llm-d ModelService, Dynamo DynamoGraphDeployment; and a RayService's
serveConfigV2 read into its worker templates. Rows are the facts of public samples (tests/data/operators,
each naming the source it describes) and the shipped examples; then the facts of each reader; then hostile input."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any, Iterator

import jsonpatch
import pytest
import yaml

from webhook.core import operators, settings as settings_mod, tiering
from tests.judging import judge
from webhook.core.hardware import default_catalog
from webhook.core.nodepools import INSTANCE_FAMILIES
from webhook.core.operators import model_servers, ray
from webhook.core.workloads import WORKLOAD_KINDS, pod_templates

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "operators"
S = settings_mod.default()
GFD = "nvidia.com/gpu.product"


def load(name: str, kind: str | None = None, folder: Path = DATA) -> dict[str, Any]:
    """The (first) document of ``kind`` in a sample file."""
    docs = [d for d in yaml.safe_load_all((folder / name).read_text()) if isinstance(d, dict)]
    return next(d for d in docs if kind is None or d.get("kind") == kind)


def example(name: str) -> dict[str, Any]:
    return load(name, folder=ROOT / "examples")


CASES = [
    # object, [(role, pointer, GPUs per pod, pods in the group)]
    pytest.param(load("kubeai-model-llama-3.1-70b-fp8-h100.yaml"), [("server", "", 2, 1)], id="kubeai-vllm-h100x2"),
    pytest.param(load("kubeai-model-gemma-3-27b-ollama-l4.yaml"), [("server", "", 1, 1)], id="kubeai-ollama-l4"),
    pytest.param(example("kubeai-model-qwen2.5-7b-l4.yaml"), [("server", "", 1, 1)], id="kubeai-example"),
    pytest.param(load("nim-multi-node-nimservice-size.yaml"), [("service", "", 8, 2)], id="nim-multinode-size"),
    pytest.param(load("nim-multi-node-nimservice-ray.yaml", "NIMService"), [("service", "", 2, 1)],
                 id="nim-multinode-parallelism-pp1"),
    pytest.param(example("nimservice-llama-3.1-8b-instruct.yaml"), [("service", "", 1, 1)], id="nim-example"),
    pytest.param(load("kaito-workspace-llama-3.3-70b-instruct.yaml", "Workspace"), [("inference", "", 2, 2)],
                 id="kaito-preset-2-nodes-nc48-a100"),
    pytest.param(load("kaito-workspace-custom-template.yaml"), [("inference", "/inference/template", 1, 1)],
                 id="kaito-template-v1alpha1"),
    pytest.param(example("kaito-workspace-llama-3.3-70b-h100.yaml"), [("inference", "", 8, 1)], id="kaito-example"),
    pytest.param(load("llmd-modelservice-llama4.yaml"), [("decode", "/spec/decode", 8, 1),
                                                         ("prefill", "/spec/prefill", 8, 1)], id="llmd-llama4"),
    pytest.param(load("llmd-modelservice-xpyd.yaml"), [("decode", "/spec/decode", 0, 1),
                                                       ("prefill", "/spec/prefill", 0, 1)], id="llmd-base-config-gpus"),
    pytest.param(example("llmd-modelservice-llama-3.1-8b.yaml"), [("decode", "/spec/decode", 1, 1),
                                                                 ("prefill", "/spec/prefill", 1, 1)], id="llmd-example"),
    pytest.param(load("dynamo-vllm-disagg-multinode.yaml"), [
        ("Frontend", "/spec/services/Frontend", 0, 1), ("decode", "/spec/services/decode", 1, 2),
        ("prefill", "/spec/services/prefill", 1, 2)], id="dynamo-multinode"),
    pytest.param(load("dynamo-vllm-disagg.yaml"), [
        ("Frontend", "/spec/services/Frontend", 0, 1), ("VllmDecodeWorker", "/spec/services/VllmDecodeWorker", 1, 1),
        ("VllmPrefillWorker", "/spec/services/VllmPrefillWorker", 1, 1)], id="dynamo-disagg"),
    pytest.param(example("dynamo-graph-llama-3.3-70b-disagg.yaml"), [
        ("Frontend", "/spec/services/Frontend", 0, 1), ("VllmDecodeWorker", "/spec/services/VllmDecodeWorker", 4, 1),
        ("VllmPrefillWorker", "/spec/services/VllmPrefillWorker", 4, 1)], id="dynamo-example"),
    pytest.param(load("rayservice-llm-serve.yaml", "RayService"), [
        ("head", "/spec/rayClusterConfig/headGroupSpec/template", 0, 1),
        ("gpu-group", "/spec/rayClusterConfig/workerGroupSpecs/0/template", 4, 1)], id="rayservice-llm-serve"),
    pytest.param(example("rayservice-llm-qwen2.5-32b-tp2.yaml"), [
        ("head", "/spec/rayClusterConfig/headGroupSpec/template", 0, 1),
        ("gpu-group", "/spec/rayClusterConfig/workerGroupSpecs/0/template", 2, 1)], id="rayservice-example"),
]


@pytest.mark.parametrize(("obj", "expected"), CASES)
def test_serving_templates_and_groups(obj: dict[str, Any], expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S)
    got = [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results]
    assert got == expected
    for r in results:
        if r.profile.gpus_per_pod > 0 and r.profile.pods > 1:
            # a multi-pod GPU group goes where its weights say (issue 24): NVLink when they need it
            # (or are unknown), the cost tier when one cost card holds them
            want, _ = tiering.multi_gpu_tier(r.profile, S)
            assert r.decision.tier == want and r.decision.tier is not None, r.template.role


def test_every_kind_is_registered_and_judged_by_the_webhook() -> None:
    keys = {("kubeai.org/v1", "Model"), ("apps.nvidia.com/v1alpha1", "NIMService"), ("kaito.sh/v1beta1", "Workspace"),
            ("kaito.sh/v1alpha1", "Workspace"), ("llm-d.ai/v1alpha1", "ModelService"),
            ("nvidia.com/v1alpha1", "DynamoGraphDeployment")}
    assert keys <= set(operators.REGISTRY.readers)
    assert {k for _, k in keys} <= WORKLOAD_KINDS


def test_shipped_examples_are_admitted() -> None:
    for name in ("kubeai-model-qwen2.5-7b-l4.yaml", "nimservice-llama-3.1-8b-instruct.yaml",
                 "kaito-workspace-llama-3.3-70b-h100.yaml", "llmd-modelservice-llama-3.1-8b.yaml",
                 "dynamo-graph-llama-3.3-70b-disagg.yaml", "rayservice-llm-qwen2.5-32b-tp2.yaml"):
        # synthesized specs cannot be patched, so those examples are admitted as written too; the
        # RayService's worker template is the object's own and gets its pin from the patch
        for mutate in (True,) if name.startswith("rayservice") else (True, False):
            results = judge(example(name), S, mutate=mutate)
            gpu = [r for r in results if r.profile.gpus_per_pod]
            assert gpu and all(r.decision.allowed for r in results), (name, mutate)
            assert all(r.profile.model for r in gpu), name


def test_synthesized_specs_are_never_patched_but_ray_templates_are() -> None:
    for obj in (load("kubeai-model-llama-3.1-70b-fp8-h100.yaml"), load("nim-multi-node-nimservice-size.yaml"),
                load("kaito-workspace-custom-template.yaml"), load("llmd-modelservice-llama4.yaml"),
                load("dynamo-vllm-disagg-multinode.yaml")):
        for template in pod_templates(obj):
            assert not template.patchable, (obj["kind"], template.role)
        assert all(r.patch == () for r in judge(obj, S))
    ray_results = judge(load("rayservice-llm-serve.yaml", "RayService"), S)
    assert [r.template.patchable for r in ray_results] == [True, True]
    assert ray_results[1].patch  # the unpinned worker group is pinned as before


# ---------------------------------------------------------------- KubeAI


def kubeai(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m"},
            "spec": {"url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM",
                     "resourceProfile": "nvidia-gpu-l4:1", **spec}}


def test_kubeai_vllm_container_is_read_by_the_vllm_launcher() -> None:
    r = judge(load("kubeai-model-llama-3.1-70b-fp8-h100.yaml"), S)[0]
    assert (r.profile.framework, r.profile.model, r.profile.tensor_parallel) == (
        "vllm", "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", 2)
    container = r.template.spec["containers"][0]
    assert container["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert container["args"][:2] == ["--model=neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
                                     "--served-model-name=llama-3.1-70b-instruct-fp8-h100"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_kubeai_profile_pins_its_product_in_every_label_scheme() -> None:
    spec = judge(load("kubeai-model-llama-3.1-70b-fp8-h100.yaml"), S)[0].template.spec
    assert spec["nodeSelector"] == {GFD: "NVIDIA-H100-80GB-HBM3", "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                                    "karpenter.k8s.aws/instance-gpu-name": "h100",
                                    "gpu.nvidia.com/class": "H100_NVLINK_80GB"}


def test_kubeai_profile_pin_is_the_users_pin() -> None:
    """A 70B bf16 model on four L4s: the profile says L4, 33 GiB of weights per 24 GB GPU cannot work:
    denied, with the path of the (synthesized) node selector."""
    obj = kubeai(url="hf://meta-llama/Llama-3.3-70B-Instruct", args=["--tensor-parallel-size=4"],
                 resourceProfile="nvidia-gpu-l4:4")
    r = judge(obj, S)[0]
    assert [v.code for v in r.decision.violations] == ["model-does-not-fit"]
    assert r.decision.violations[0].path == "/spec/nodeSelector"
    assert not r.decision.allowed


def test_kubeai_ollama_model_comes_from_the_pull() -> None:
    r = judge(load("kubeai-model-gemma-3-27b-ollama-l4.yaml"), S)[0]
    assert (r.profile.framework, r.profile.model) == ("ollama", "gemma3:27b")


@pytest.mark.parametrize(("engine", "url", "model"), [
    pytest.param("Infinity", "hf://BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5", id="infinity"),
    pytest.param("FasterWhisper", "hf://Systran/faster-whisper-medium-en", "Systran/faster-whisper-medium-en",
                 id="faster-whisper"),
])
def test_kubeai_engines_no_launcher_reads_carry_the_model_as_a_hint(engine: str, url: str, model: str) -> None:
    template = pod_templates(kubeai(engine=engine, url=url))[0]
    assert template.annotations["gpu-admission.io/model"] == model
    assert judge(kubeai(engine=engine, url=url), S)[0].profile.model == model


def test_kubeai_users_own_annotation_wins_over_the_hint() -> None:
    obj = kubeai(engine="Infinity", url="hf://BAAI/bge-small-en-v1.5")
    obj["metadata"]["annotations"] = {"gpu-admission.io/model": "BAAI/bge-m3", "other": "x"}
    template = pod_templates(obj)[0]
    assert template.annotations == {"gpu-admission.io/model": "BAAI/bge-m3"}


@pytest.mark.parametrize(("spec", "pods"), [
    pytest.param({"replicas": 3, "minReplicas": 1}, 3, id="replicas"),
    pytest.param({"minReplicas": 2}, 2, id="unset-replicas-is-min"),
    pytest.param({}, 0, id="scale-from-zero"),
])
def test_kubeai_replicas(spec: dict[str, Any], pods: int) -> None:
    found = operators.templates(kubeai(**spec))
    assert [(f.pods, f.group, f.synthesized) for f in found] == [(pods, 1, True)]


@pytest.mark.parametrize(("profile", "gpus", "pinned", "noted"), [
    pytest.param("nvidia-gpu-l4:2", {"nvidia.com/gpu": "2"}, "NVIDIA-L4", False, id="l4x2"),
    pytest.param("nvidia-gpu-a100-80gb:8", {"nvidia.com/gpu": "8"}, "NVIDIA-A100-SXM4-80GB", False, id="a100-80gb"),
    pytest.param("amd-gpu-mi300x:1", {"amd.com/gpu": "1"}, None, False, id="mi300x-amd-resource"),
    pytest.param("nvidia-gpu-a16:1", {"nvidia.com/gpu": "1"}, None, True, id="not-in-catalog"),
    pytest.param("nvidia-gpu-custom:2", {"nvidia.com/gpu": "2"}, None, True, id="custom-profile"),
    pytest.param("cpu:1", None, None, False, id="cpu"),
    pytest.param("nvidia-gpu-l4", None, None, True, id="no-count"),
    pytest.param("nvidia-gpu-l4:x", None, None, True, id="count-not-a-number"),
    pytest.param("a:b:c", None, None, True, id="three-parts"),
    pytest.param(7, None, None, True, id="not-a-string"),
])
def test_kubeai_profiles(profile: Any, gpus: dict[str, str] | None, pinned: str | None, noted: bool) -> None:
    found = operators.templates(kubeai(resourceProfile=profile))[0]
    container = found.holder["spec"]["containers"][0]
    assert (container.get("resources") or {}).get("limits") == gpus
    assert found.holder["spec"].get("nodeSelector", {}).get(GFD) == pinned
    if noted:
        assert found.notes


# ---------------------------------------------------------------- NIM


def nim(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService", "metadata": {"name": "n"},
            "spec": {"image": {"repository": "nvcr.io/nim/meta/llama-3.1-70b-instruct", "tag": "1.8.4"}, **spec}}


def test_nim_model_and_parallelism_from_image_and_env() -> None:
    r = judge(load("nim-multi-node-nimservice-size.yaml"), S)[0]
    assert (r.profile.framework, r.profile.model, r.profile.tensor_parallel, r.profile.pipeline_parallel) == (
        "nim", "deepseek-ai/deepseek-r1", 8, 2)
    assert r.template.spec["containers"][0]["image"] == "nvcr.io/nim/deepseek-ai/deepseek-r1:1.7.3"
    assert r.template.spec["containers"][0]["name"] == "deepseek-r1-ctr"


@pytest.mark.parametrize(("multi", "resources", "gpus", "group", "tp"), [
    pytest.param({"parallelism": {"tensor": 8, "pipeline": 2}}, None, 8, 2, "8", id="tensor-pipeline"),
    pytest.param({"parallelism": {"pp": 2}}, {"limits": {"nvidia.com/gpu": 8}}, 8, 2, None, id="pp-spelling"),
    pytest.param({"size": 3, "gpusPerPod": 4}, None, 4, 3, None, id="size-gpus-per-pod"),
    pytest.param({"size": "2"}, {"limits": {"nvidia.com/gpu": "8"}}, 8, 2, None, id="size-string"),
    pytest.param(None, None, 1, 1, None, id="single-node-no-gpu-count"),
])
def test_nim_multi_node(multi: Any, resources: Any, gpus: int, group: int, tp: str | None) -> None:
    spec: dict[str, Any] = {"replicas": 2}
    if multi is not None:
        spec["multiNode"] = multi
    if resources is not None:
        spec["resources"] = resources
    found = operators.templates(nim(**spec))[0]
    limits = found.holder["spec"]["containers"][0]["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) == gpus
    assert (found.group, found.pods) == (group, 2 * group)
    assert found.holder["metadata"]["annotations"].get("gpu-admission.io/tensor-parallel") == tp


def test_nim_keeps_the_users_placement() -> None:
    obj = nim(nodeSelector={GFD: "NVIDIA-L40S"}, tolerations=[{"key": "gpu", "operator": "Exists"}],
              podAffinity={"preferredDuringSchedulingIgnoredDuringExecution": []},
              resources={"limits": {"nvidia.com/gpu": 4}})
    r = judge(obj, S)[0]
    assert r.template.spec["nodeSelector"] == {GFD: "NVIDIA-L40S"}
    assert r.template.spec["affinity"] == {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    # 70B bf16 at TP4 over PCIe is the seed's trap; with no inventory known it is admitted as pinned
    assert r.decision.allowed and [v.code for v in r.decision.misplaced] == ["tier-mismatch"]


# ---------------------------------------------------------------- Kaito


def workspace(resource: dict[str, Any], inference: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"apiVersion": "kaito.sh/v1beta1", "kind": "Workspace", "metadata": {"name": "w"}, "resource": resource,
            "inference": inference if inference is not None else {"preset": {"name": "phi-4"}}, **top}


def test_kaito_sku_tables_name_catalog_products() -> None:
    catalog = default_catalog()
    for sku, (gpus, product_id) in model_servers.AZURE_SKUS.items():
        assert gpus > 0 and (product_id is None or product_id in catalog.products), sku
    for sku in model_servers.AWS_GPUS:
        assert sku.split(".", 1)[0] in INSTANCE_FAMILIES, sku
    for profile, product_id in model_servers.KUBEAI_PROFILES.items():
        assert product_id is None or product_id in catalog.products, profile


@pytest.mark.parametrize(("instance_type", "gpus", "product_label"), [
    pytest.param("Standard_NC80adis_H100_v5", 2, "NVIDIA-H100-NVL", id="nc80adis-h100-nvl"),
    pytest.param("Standard_ND96isr_H100_v5", 8, "NVIDIA-H100-80GB-HBM3", id="nd96isr-h100-sxm"),
    pytest.param("Standard_ND96amsr_A100_v4", 8, "NVIDIA-A100-SXM4-80GB", id="nd96amsr-a100-80gb"),
    pytest.param("Standard_NC24ads_A100_v4", 1, "NVIDIA-A100-80GB-PCIe", id="nc24ads-a100-pcie"),
    pytest.param("p5.48xlarge", 8, "NVIDIA-H100-80GB-HBM3", id="aws-p5"),
    pytest.param("g6.12xlarge", 4, "NVIDIA-L4", id="aws-g6"),
    pytest.param("Standard_NV12s_v3", 1, None, id="m60-not-in-catalog"),
    pytest.param("Standard_D4s_v3", 1, None, id="unknown-sku"),
])
def test_kaito_instance_type(instance_type: str, gpus: int, product_label: str | None) -> None:
    obj = workspace({"instanceType": instance_type, "labelSelector": {"matchLabels": {"apps": "phi"}}})
    found = operators.templates(obj)[0]
    spec = found.holder["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": str(gpus)}
    exprs = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": "apps", "operator": "In", "values": ["phi"]} in exprs
    assert {e["key"]: e["values"][0] for e in exprs}.get(GFD) == product_label
    assert found.notes  # what was read, or what is not known


def test_kaito_preset_runs_vllm_tensor_parallel_per_node_and_pipeline_across_nodes() -> None:
    r = judge(load("kaito-workspace-llama-3.3-70b-instruct.yaml", "Workspace"), S)[0]
    assert (r.profile.framework, r.profile.model, r.profile.tensor_parallel, r.profile.pipeline_parallel) == (
        "vllm", "meta-llama/Llama-3.3-70B-Instruct", 2, 2)
    # the SKU's A100 PCIe is the user's pin: TP2 runs over the cards' NVLink bridge, on HBM2e at
    # least as fast as the tier's slowest card, so it is neither the trap nor misplaced (issue 24)
    assert r.decision.allowed and not r.decision.violations and not r.decision.misplaced


def test_kaito_status_target_node_count_wins() -> None:
    obj = workspace({"count": 1, "instanceType": "Standard_NC24ads_A100_v4"}, status={"targetNodeCount": 3})
    assert [(f.pods, f.group) for f in operators.templates(obj)] == [(3, 3)]


def test_kaito_template_affinity_is_replaced_by_the_label_selector_without_touching_the_input() -> None:
    obj = load("kaito-workspace-custom-template.yaml")
    obj["inference"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": GFD, "operator": "In", "values": ["NVIDIA-H200"]}]}]}}}
    before = copy.deepcopy(obj)
    found = operators.templates(obj)[0]
    exprs = found.holder["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"]
    assert {e["key"]: e["values"] for e in exprs} == {"apps": ["llm-inference"], GFD: ["NVIDIA-A100-80GB-PCIe"],
                                                      "gpu.nvidia.com/class": ["A100_PCIE_80GB"]}
    assert found.synthesized and found.path == ("inference", "template")
    assert obj == before


def test_kaito_template_without_label_selector_has_no_affinity() -> None:
    obj = workspace({}, {"template": {"spec": {"affinity": {"podAffinity": {}}, "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}})
    assert "affinity" not in operators.templates(obj)[0].holder["spec"]


def test_kaito_tuning_preset_carries_the_model_as_a_hint() -> None:
    obj = workspace({"instanceType": "Standard_NC24ads_A100_v4"}, {},
                    tuning={"preset": {"name": "phi-3-mini-128k-instruct"}, "method": "qlora"})
    obj.pop("inference")
    found = operators.templates(obj)[0]
    assert found.role == "tuning"
    assert found.holder["metadata"]["annotations"]["gpu-admission.io/model"] == "phi-3-mini-128k-instruct"


def test_kaito_without_preset_or_template_has_no_pods() -> None:
    assert operators.templates(workspace({"count": 2}, {"config": "x"})) == []


# ---------------------------------------------------------------- llm-d


def test_llmd_accelerator_types_pin_and_model_hint() -> None:
    r = judge(load("llmd-modelservice-llama4.yaml"), S)[0]
    term = r.template.spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": GFD, "operator": "In", "values": ["NVIDIA-H100"]}]
    assert r.template.annotations["gpu-admission.io/model"] == "meta-llama/Llama-4-Scout-17B-16E"  # routing.modelName
    assert any("base ConfigMap universal-base-config-pvc" in n for n in r.template.notes)
    assert any("parallelism.tensor=8" in n for n in r.template.notes)


def test_llmd_hf_uri_names_the_model_and_container_resources_win() -> None:
    r = judge(example("llmd-modelservice-llama-3.1-8b.yaml"), S)[0]
    assert r.template.annotations["gpu-admission.io/model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert r.template.spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert not any("parallelism" in n for n in r.template.notes)


# ---------------------------------------------------------------- Dynamo


def dynamo(**service: Any) -> dict[str, Any]:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"},
            "spec": {"services": {"worker": service}}}


def test_dynamo_multinode_is_one_group_per_replica() -> None:
    found = operators.templates(dynamo(replicas=3, multinode={"nodeCount": 2}, resources={"limits": {"gpu": "8"}}))
    assert [(f.pods, f.group) for f in found] == [(6, 2)]
    assert found[0].holder["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


@pytest.mark.parametrize(("resources", "limits"), [
    pytest.param({"requests": {"gpu": 2}}, {"nvidia.com/gpu": "2"}, id="requests-only"),
    pytest.param({"limits": {"gpu": "1", "gpuType": "gpu.intel.com/xe"}}, {"gpu.intel.com/xe": "1"}, id="gpu-type"),
    pytest.param({"limits": {"cpu": "4"}}, None, id="no-gpu"),
])
def test_dynamo_resources_shape(resources: dict[str, Any], limits: dict[str, str] | None) -> None:
    found = operators.templates(dynamo(resources=resources))[0]
    assert (found.holder["spec"]["containers"][0].get("resources") or {}).get("limits") == limits


def test_dynamo_model_and_tp_from_a_shell_string_and_env_merged() -> None:
    obj = dynamo(resources={"limits": {"gpu": "4"}}, envs=[{"name": "B", "value": "2"}],
                 extraPodSpec={"mainContainer": {"image": "x", "command": ["/bin/sh", "-c"], "args": [
                     "python3 -m dynamo.sglang --model-path deepseek-ai/DeepSeek-R1-Distill-Llama-8B --tp 4 | tee log"]}})
    obj["spec"]["envs"] = [{"name": "A", "value": "1"}]
    found = operators.templates(obj)[0]
    assert found.holder["metadata"]["annotations"] == {
        "gpu-admission.io/model": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "gpu-admission.io/tensor-parallel": "4"}
    assert [e["name"] for e in found.holder["spec"]["containers"][0]["env"]] == ["A", "B"]


def test_dynamo_pin_in_extra_pod_spec_is_read() -> None:
    r = judge(example("dynamo-graph-llama-3.3-70b-disagg.yaml"), S)[1]
    assert r.decision.placement is not None and r.decision.placement.values == ("NVIDIA-H100-80GB-HBM3",)
    assert r.profile.tensor_parallel == 4


# ---------------------------------------------------------------- RayService serveConfigV2


def rayservice(config: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "rs"},
            "spec": {"serveConfigV2": config, "rayClusterConfig": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}},
                "workerGroupSpecs": [{"groupName": "g", "replicas": 1, "template": {
                    "metadata": {"annotations": {"keep": "me"}},
                    "spec": {"containers": [{"name": "w", "image": "ray",
                                             "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}]}}}


LLM_CONFIG = """
applications:
- name: llms
  import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs:
    - model_loading_config: {model_id: llama, model_source: meta-llama/Llama-3.1-70B-Instruct}
      engine_kwargs: {tensor_parallel_size: 4, pipeline_parallel_size: 1}
"""


def test_serve_config_puts_model_and_tp_on_worker_copies_only() -> None:
    obj = rayservice(LLM_CONFIG)
    before = copy.deepcopy(obj)
    results = judge(obj, S)
    head, worker = results
    assert "gpu-admission.io/model" not in head.template.annotations
    assert worker.template.annotations == {"gpu-admission.io/model": "meta-llama/Llama-3.1-70B-Instruct",
                                           "gpu-admission.io/tensor-parallel": "4", "keep": "me"}
    assert (worker.profile.model, worker.profile.tensor_parallel) == ("meta-llama/Llama-3.1-70B-Instruct", 4)
    assert worker.template.patchable and worker.patch  # still the object's own spec
    assert obj == before


@pytest.mark.parametrize("metadata", [
    pytest.param(None, id="no-metadata"),
    pytest.param({"labels": {"gpu-admission.io/group": "g1"}}, id="group-label-no-annotations"),
    pytest.param({"labels": {"gpu-admission.io/group": "g1"}, "annotations": {"a": "b"}}, id="group-label-annotations"),
    pytest.param({"annotations": {}}, id="empty-annotations"),
])
def test_serve_config_hints_never_break_the_patch(metadata: dict[str, Any] | None) -> None:
    """The patch is built from the judged (hinted) copy but applied to the object as written: it must
    apply, whatever metadata the worker template has (a group label brings label and annotation ops)."""
    obj = rayservice(LLM_CONFIG)
    worker = obj["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    worker["replicas"] = 2
    worker["template"].pop("metadata")
    if metadata is not None:
        worker["template"]["metadata"] = metadata
    for r in judge(obj, S):
        patched = jsonpatch.apply_patch(copy.deepcopy(obj), list(r.patch))
        assert patched["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    worker_result = judge(obj, S)[1]
    if metadata is None or "annotations" in metadata:
        assert worker_result.profile.model == "meta-llama/Llama-3.1-70B-Instruct"
    else:  # labels but no annotations map: no hint (it could not ride safely), a note instead
        assert "gpu-admission.io/model" not in worker_result.template.annotations
        assert any("annotate the worker template" in n for n in worker_result.template.notes)


@pytest.mark.parametrize(("config", "hints", "noted"), [
    pytest.param(LLM_CONFIG, {"gpu-admission.io/model": "meta-llama/Llama-3.1-70B-Instruct",
                              "gpu-admission.io/tensor-parallel": "4"}, False, id="llm-configs"),
    pytest.param("applications:\n- args:\n    llm_configs:\n    - model_loading_config: {model_id: Qwen/Qwen2.5-7B-Instruct}\n",
                 {"gpu-admission.io/model": "Qwen/Qwen2.5-7B-Instruct"}, False, id="model-id-is-the-source"),
    pytest.param("applications:\n- runtime_env:\n    env_vars: {MODEL_ID: meta-llama/Meta-Llama-3-8B-Instruct, "
                 "TENSOR_PARALLELISM: '2', PIPELINE_PARALLELISM: '2'}\n",
                 {"gpu-admission.io/model": "meta-llama/Meta-Llama-3-8B-Instruct",
                  "gpu-admission.io/tensor-parallel": "2", "gpu-admission.io/pipeline-parallel": "2"}, False,
                 id="env-vars-tp-pp"),
    pytest.param("applications:\n- args: {llm_configs: [{model_loading_config: {model_id: a/b}}, "
                 "{model_loading_config: {model_id: c/d}}]}\n", {}, True, id="two-models-not-attributed"),
    pytest.param("applications:\n- args: {llm_configs: [configs/llama.yaml]}\n", {}, True, id="config-file-path-not-shown"),
    pytest.param("applications: [unclosed", {}, True, id="malformed-yaml"),
    pytest.param("[" * 100_000, {}, True, id="deep-nesting"),
    pytest.param("a: " + "x" * (ray.MAX_SERVE_CONFIG + 1), {}, True, id="oversize"),
    pytest.param({"applications": []}, {}, True, id="not-a-string"),
    pytest.param("just text", {}, False, id="scalar-document"),
    pytest.param("applications: {llm_configs: 3}", {}, False, id="applications-not-a-list"),
    pytest.param("applications:\n- args: {llm_configs: [{engine_kwargs: {tensor_parallel_size: -3}, "
                 "model_loading_config: {model_id: [1]}}]}\n", {}, False, id="wrong-types"),
    pytest.param("!!python/object/apply:os.system ['true']", {}, True, id="unsafe-tag-refused"),
])
def test_serve_config_shapes(config: Any, hints: dict[str, str], noted: bool) -> None:
    got, notes = ray.serve_config_hints(config)
    assert got == hints
    assert bool(notes) == noted


def test_serve_config_yaml_bomb_is_cheap() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 20)]
    lines.append("applications: [*a19, *a19]")
    start = time.perf_counter()
    assert ray.serve_config_hints("\n".join(lines)) == ({}, ())
    assert time.perf_counter() - start < 1.0


# ---------------------------------------------------------------- hostile input


HOSTILE: tuple[Any, ...] = (None, "", "x", "-5", -5, 10**30, "9" * 400, True, 2.5, [], {}, [1, "a"], {"a": {"b": 1}})


def _paths(obj: Any, base: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    if depth > 6:
        return
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in list(items)[:24]:
        yield (*base, key)
        yield from _paths(value, (*base, key), depth + 1)


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(obj)
    cur = out
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return out


SAMPLES = [
    pytest.param(load("kubeai-model-llama-3.1-70b-fp8-h100.yaml"), id="kubeai"),
    pytest.param(load("nim-multi-node-nimservice-size.yaml"), id="nim-size"),
    pytest.param(load("nim-multi-node-nimservice-ray.yaml", "NIMService"), id="nim-parallelism"),
    pytest.param(load("kaito-workspace-llama-3.3-70b-instruct.yaml", "Workspace"), id="kaito-preset"),
    pytest.param(load("kaito-workspace-custom-template.yaml"), id="kaito-template"),
    pytest.param(load("llmd-modelservice-llama4.yaml"), id="llmd"),
    pytest.param(load("dynamo-vllm-disagg-multinode.yaml"), id="dynamo"),
    pytest.param(rayservice(LLM_CONFIG), id="rayservice"),
]


@pytest.mark.parametrize("obj", SAMPLES)
def test_hostile_fields_never_raise(obj: dict[str, Any]) -> None:
    """Every field of a real sample replaced, one at a time, by a value of the wrong type, a
    negative, huge or string count: judged without an exception, no group over MAX_PODS."""
    paths = [p for p in _paths(obj) if p[0] not in ("apiVersion", "kind")]
    assert len(paths) > 5
    for path in paths:
        for value in HOSTILE:
            for r in judge(_set(obj, path, value), S):
                assert 0 <= r.profile.pods <= operators.MAX_PODS, (path, value)
                assert r.template.replicas is None or 0 <= r.template.replicas <= operators.MAX_PODS


@pytest.mark.parametrize("obj", SAMPLES)
@pytest.mark.parametrize("top", ["spec", "resource", "inference", "metadata"])
def test_hostile_top_level_fields_never_raise(obj: dict[str, Any], top: str) -> None:
    for value in HOSTILE:
        judge({**obj, top: value}, S)


@pytest.mark.parametrize(("obj", "pods", "group"), [
    pytest.param(kubeai(replicas=10**12), operators.MAX_PODS, 1, id="kubeai-huge-replicas"),
    pytest.param(kubeai(replicas="-4"), 0, 1, id="kubeai-negative-string"),
    pytest.param(nim(replicas=10**9, multiNode={"size": 10**9}), operators.MAX_PODS, operators.MAX_PODS,
                 id="nim-huge-group"),
    pytest.param(workspace({"count": "3"}), 3, 3, id="kaito-string-count"),
    pytest.param(workspace({"count": -3}), 0, 1, id="kaito-negative-count"),
    pytest.param(dynamo(replicas=2, multinode={"nodeCount": "x"}), 4, 2, id="dynamo-nodecount-default"),
    pytest.param(dynamo(replicas=2, multinode={"nodeCount": 0}), 2, 1, id="dynamo-nodecount-zero"),
])
def test_hostile_counts(obj: dict[str, Any], pods: int, group: int) -> None:
    assert [(f.pods, f.group) for f in operators.templates(obj)] == [(pods, group)]


@pytest.mark.parametrize(("status", "pods"), [
    pytest.param({}, 2, id="estimated-before-kaito-sets-the-count"),
    pytest.param({"status": {"targetNodeCount": 5}}, 5, id="the-controllers-count-wins"),
])
def test_kaito_presets_node_count_is_the_estimators_not_the_deprecated_count(status: dict[str, Any],
                                                                             pods: int) -> None:
    """resource.count is deprecated: Kaito sizes the nodes from the preset's memory need, so a 70B
    bf16 preset on one-A100 nodes is a multi-node group (~145 GiB over 80 GiB nodes: 2), not a model
    denied as too big for one GPU."""
    obj = workspace({"count": 1, "instanceType": "Standard_NC24ads_A100_v4"},
                    {"preset": {"name": "meta-llama/Llama-3.3-70B-Instruct"}}, **status)
    (r,) = judge(obj, S)
    assert r.profile.pods == pods and r.decision.allowed, r.decision
    assert bool(status) is not any("node estimator" in w for w in r.decision.warnings)
