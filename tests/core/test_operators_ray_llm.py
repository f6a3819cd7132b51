"""Issue 28: a model named only in a script or config a KubeRay cluster reads. Ray Serve LLM
(``LLMConfig``) and Ray Data LLM (``vLLMEngineProcessorConfig``) in Python scripts, LLMConfig and
Serve config files mounted from ConfigMaps of the input, a RayJob's entrypoint and a RayService's
serveConfigV2: their model, tensor and pipeline parallelism reach the GPU worker group's profile, and
a Ray ``accelerator_type`` is reported. The scripts and configs below are written for these tests;
they carry only the field names of ray-project/ray (see webhook/core/operators/ray_llm.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.judging import judge
from webhook.core import configmaps, settings as settings_mod
from webhook.core.engine import runtime_context
from webhook.core.operators import ray, ray_llm

S = settings_mod.default()

SERVE_SCRIPT = """\
from ray import serve
from ray.serve.llm import LLMConfig, build_openai_app

llm_config = LLMConfig(
    model_loading_config=dict(model_id="qwen-72b", model_source="Qwen/Qwen2.5-72B-Instruct"),
    deployment_config=dict(autoscaling_config=dict(min_replicas=1, max_replicas=2)),
    accelerator_type="A100",
    engine_kwargs=dict(tensor_parallel_size=4, max_model_len=8192),
)
serve.run(build_openai_app({"llm_configs": [llm_config]}), blocking=True)
"""
DATA_SCRIPT = """\
import ray
from ray.data.llm import build_llm_processor, vLLMEngineProcessorConfig

config = vLLMEngineProcessorConfig(
    model_source="meta-llama/Llama-3.1-8B-Instruct",
    engine_kwargs={"max_model_len": 16384, "tensor_parallel_size": 2},
    concurrency=1,
    batch_size=64,
)
processor = build_llm_processor(config, preprocess=lambda row: row, postprocess=lambda row: row)
processor(ray.data.from_items([{"prompt": "hi"}])).show(1)
"""
CONSTANT_SCRIPT = """\
from ray.serve.llm import LLMConfig, ModelLoadingConfig

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
TP: int = 4
cfg = LLMConfig(model_loading_config=ModelLoadingConfig(model_id=MODEL),
                engine_kwargs={"tensor_parallel_size": TP, "pipeline_parallel_size": 2})
"""
ATTRIBUTE_SCRIPT = """\
import ray.data.llm as llm
llm.vLLMEngineProcessorConfig(model_source="Qwen/Qwen2.5-7B-Instruct", engine_kwargs=dict(pipeline_parallel_size=2))
"""
DICT_SCRIPT = """\
from ray.serve.llm import build_openai_app
app = build_openai_app({"llm_configs": [{"model_loading_config": {"model_id": "mistralai/Mistral-7B-Instruct-v0.3"},
                                         "accelerator_type": "A10"}]})
"""
COMPUTED_SCRIPT = """\
import os
from ray.serve.llm import LLMConfig
LLMConfig(model_loading_config=dict(model_id="served", model_source=os.environ["MODEL"]))
"""
REBOUND_SCRIPT = """\
from ray.serve.llm import LLMConfig
M = "a/b-7b"
M = "c/d-70b"
LLMConfig(model_loading_config={"model_id": M})
"""
TWO_MODELS_SCRIPT = """\
from ray.serve.llm import LLMConfig
a = LLMConfig(model_loading_config=dict(model_id="meta-llama/Llama-3.1-8B-Instruct"))
b = LLMConfig(model_loading_config=dict(model_id="Qwen/Qwen2.5-7B-Instruct"))
"""


@pytest.mark.parametrize(("source", "expected", "noted"), [
    pytest.param(SERVE_SCRIPT, ("Qwen/Qwen2.5-72B-Instruct", 4, None, ("A100",)), False, id="serve-llmconfig"),
    pytest.param(DATA_SCRIPT, ("meta-llama/Llama-3.1-8B-Instruct", 2, None, ()), False, id="data-processor"),
    pytest.param(CONSTANT_SCRIPT, ("meta-llama/Llama-3.1-70B-Instruct", 4, 2, ()), False,
                 id="module-constants-and-model-loading-config-call"),
    pytest.param(ATTRIBUTE_SCRIPT, ("Qwen/Qwen2.5-7B-Instruct", None, 2, ()), False, id="attribute-call"),
    pytest.param(DICT_SCRIPT, ("mistralai/Mistral-7B-Instruct-v0.3", None, None, ("A10G",)), False,
                 id="dict-literal-a10-is-a10g"),
    pytest.param(COMPUTED_SCRIPT, (None, None, None, ()), True, id="computed-model-source"),
    pytest.param(REBOUND_SCRIPT, (None, None, None, ()), True, id="rebound-name-is-no-constant"),
    pytest.param(TWO_MODELS_SCRIPT, (None, None, None, ()), True, id="two-models-not-attributed"),
    pytest.param("import ray\nray.init()\n", (None, None, None, ()), False, id="no-llm"),
    pytest.param("def broken(:\n", (None, None, None, ()), True, id="syntax-error"),
    pytest.param("x = " + "(" * 5000 + ")" * 5000, (None, None, None, ()), True, id="deep-nesting"),
    pytest.param("x = 1\n" * (ray_llm.MAX_TEXT // 6 + 1), (None, None, None, ()), True, id="oversize"),
    pytest.param("a\x00b", (None, None, None, ()), True, id="null-byte"),
])
def test_python_scripts(source: str, expected: tuple[Any, ...], noted: bool) -> None:
    found, notes = ray_llm.python_facts(source, "/s/app.py")
    model, tp, pp, accelerators, more = ray_llm.summary(found, "/s/app.py")
    assert (model, tp, pp, accelerators) == expected
    assert bool(notes or more) == noted


@pytest.mark.parametrize(("argvs", "expected"), [
    pytest.param([("python", "/home/ray/samples/app.py", "--x", "1")], [("python", "/home/ray/samples/app.py")],
                 id="python-script"),
    pytest.param([("/usr/bin/python3", "-u", "-W", "ignore", "app.py")], [("python", "app.py")], id="options-first"),
    pytest.param([("python", "-c", "print(1)")], [("code", "print(1)")], id="python-c"),
    pytest.param([("python", "-m", "pkg.main")], [], id="module-not-read"),
    pytest.param([("serve", "run", "--address", "auto", "/cfg/serve.yaml")], [("serve", "/cfg/serve.yaml")],
                 id="serve-run-config"),
    pytest.param([("serve", "run", "app:deployment")], [], id="serve-run-import-path"),
    pytest.param([("pip", "install", "x"), ("python3", "job.py")], [("python", "job.py")], id="second-command"),
    pytest.param([("python", "data.csv")], [], id="not-a-script"),
])
def test_entrypoint_files(argvs: list[tuple[str, ...]], expected: list[tuple[str, str]]) -> None:
    assert list(ray_llm.entrypoint_files(argvs)) == expected


# ---------------------------------------------------------------- whole objects


def configmap(name: str, data: dict[str, str], namespace: str | None = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def cluster(mount: str | None = "/home/ray/samples", cm: str = "llm-code", gpus: str = "4",
            items: list[dict[str, str]] | None = None, workdir: str | None = None,
            worker_mount: str | None = None) -> dict[str, Any]:
    """A Ray cluster spec: a CPU head mounting ConfigMap ``cm`` at ``mount``, one GPU worker group."""
    head: dict[str, Any] = {"name": "ray-head", "image": "rayproject/ray:2.46.0"}
    spec: dict[str, Any] = {"containers": [head]}
    volume = {"name": "code", "configMap": {"name": cm, **({"items": items} if items else {})}}
    if mount:
        head["volumeMounts"] = [{"name": "code", "mountPath": mount}]
        spec["volumes"] = [volume]
    if workdir:
        head["workingDir"] = workdir
    worker: dict[str, Any] = {"name": "ray-worker", "image": "rayproject/ray:2.46.0",
                              "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    worker_spec: dict[str, Any] = {"containers": [worker]}
    if worker_mount:
        worker["volumeMounts"] = [{"name": "code", "mountPath": worker_mount}]
        worker_spec["volumes"] = [volume]
    return {"headGroupSpec": {"template": {"spec": spec}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": {"spec": worker_spec}}]}


def rayjob(entrypoint: str, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "llm-job", "namespace": "ml"},
            "spec": {"entrypoint": entrypoint, "rayClusterSpec": cluster(**kw)}}


def rayservice(config: str, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"serveConfigV2": config, "rayClusterConfig": cluster(**kw)}}


LLM_CONFIG_FILE = """\
model_loading_config:
  model_id: llama-70b
  model_source: meta-llama/Llama-3.1-70B-Instruct
accelerator_type: H100
engine_kwargs:
  tensor_parallel_size: 2
  pipeline_parallel_size: 2
"""
SERVE_FILE_CONFIG = """\
applications:
- name: llms
  import_path: ray.serve.llm:build_openai_app
  args:
    llm_configs: [%s]
"""
SERVE_RUN_CONFIG = SERVE_FILE_CONFIG % "{model_loading_config: {model_id: Qwen/Qwen2.5-7B-Instruct}}"

# object, ConfigMaps in the input, expected worker (model, TP, PP, GPUs the model uses), a warning fragment
OBJECTS = [
    pytest.param(rayjob("python /home/ray/samples/serve_llm.py"), [configmap("llm-code", {"serve_llm.py": SERVE_SCRIPT})],
                 ("Qwen/Qwen2.5-72B-Instruct", 4, None, 4), "accelerator_type A100", id="rayjob-serve-script"),
    pytest.param(rayjob("pip install -q x && python /home/ray/samples/batch.py --rows 10"),
                 [configmap("llm-code", {"batch.py": DATA_SCRIPT})],
                 ("meta-llama/Llama-3.1-8B-Instruct", 2, None, 2), None, id="rayjob-data-llm-script"),
    pytest.param(rayjob("python /opt/code/job.py", mount="/opt/code", items=[{"key": "main", "path": "job.py"}]),
                 [configmap("llm-code", {"main": CONSTANT_SCRIPT})],
                 ("meta-llama/Llama-3.1-70B-Instruct", 4, 2, 8), None, id="rayjob-items-subdir-tp-pp"),
    pytest.param(rayjob("python samples/batch.py", workdir="/home/ray"),
                 [configmap("llm-code", {"batch.py": DATA_SCRIPT})],
                 ("meta-llama/Llama-3.1-8B-Instruct", 2, None, 2), None, id="rayjob-relative-to-workdir"),
    pytest.param(rayjob("python /code/batch.py", mount=None, worker_mount="/code"),
                 [configmap("llm-code", {"batch.py": DATA_SCRIPT})],
                 ("meta-llama/Llama-3.1-8B-Instruct", 2, None, 2), None, id="rayjob-worker-mount"),
    pytest.param(rayjob("serve run /home/ray/samples/serve.yaml"), [configmap("llm-code", {"serve.yaml": SERVE_RUN_CONFIG})],
                 ("Qwen/Qwen2.5-7B-Instruct", None, None, None), None, id="rayjob-serve-run-config"),
    pytest.param(rayjob("python -c 'from ray.data.llm import vLLMEngineProcessorConfig as C; "
                        "C(model_source=\"Qwen/Qwen2.5-7B-Instruct\", engine_kwargs={\"tensor_parallel_size\": 2})'"),
                 [], ("Qwen/Qwen2.5-7B-Instruct", 2, None, 2), None, id="rayjob-python-c"),
    pytest.param(rayjob("python /home/ray/samples/serve_llm.py"), [],
                 (None, None, None, None), "no known launcher or model id", id="rayjob-script-not-in-input"),
    pytest.param(rayjob("python /home/ray/samples/serve_llm.py"),
                 [configmap("llm-code", {"serve_llm.py": SERVE_SCRIPT}, namespace="other")],
                 (None, None, None, None), "no known launcher or model id", id="rayjob-configmap-other-namespace"),
    pytest.param(rayservice(SERVE_FILE_CONFIG % "/home/ray/samples/llama.yaml"),
                 [configmap("llm-code", {"llama.yaml": LLM_CONFIG_FILE})],
                 ("meta-llama/Llama-3.1-70B-Instruct", 2, 2, 4), "accelerator_type H100", id="rayservice-config-file"),
    pytest.param(rayservice(SERVE_FILE_CONFIG % "/home/ray/samples"),
                 [configmap("llm-code", {"llama.yaml": LLM_CONFIG_FILE, "README.md": "model: x/y-7b"})],
                 ("meta-llama/Llama-3.1-70B-Instruct", 2, 2, 4), None, id="rayservice-config-folder"),
    pytest.param(rayservice(SERVE_FILE_CONFIG % "/home/ray/samples/llama.yaml"), [],
                 (None, None, None, None), "no ConfigMap of the input mounts", id="rayservice-config-file-not-in-input"),
    pytest.param(rayservice(SERVE_FILE_CONFIG % "'model_loading_config: {model_id: Qwen/Qwen2.5-7B-Instruct}'"), [],
                 ("Qwen/Qwen2.5-7B-Instruct", None, None, None), None, id="rayservice-yaml-text-entry"),
]


@pytest.mark.parametrize(("obj", "maps", "expected", "warned"), OBJECTS)
def test_the_model_reaches_the_gpu_worker_group(obj: dict[str, Any], maps: list[dict[str, Any]],
                                                expected: tuple[Any, ...], warned: str | None) -> None:
    before = copy.deepcopy(obj)
    head, worker = judge(obj, S, context=runtime_context(maps))
    profile = worker.profile
    tp = profile.tensor_parallel if profile.tp_declared else None
    assert (profile.model, tp, profile.pipeline_parallel, profile.gpus_used) == expected
    assert "gpu-admission.io/model" not in head.template.annotations
    assert worker.template.patchable and obj == before  # judged on a copy, patched as written
    if warned is not None:
        assert any(warned in w for w in worker.decision.warnings), worker.decision.warnings


def test_the_users_own_annotations_win() -> None:
    obj = rayjob("python /home/ray/samples/batch.py")
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["metadata"] = {
        "annotations": {"gpu-admission.io/model": "Qwen/Qwen2.5-7B-Instruct", "gpu-admission.io/pipeline-parallel": "1"}}
    _, worker = judge(obj, S, context=runtime_context([configmap("llm-code", {"batch.py": CONSTANT_SCRIPT})]))
    assert (worker.profile.model, worker.profile.tensor_parallel, worker.profile.pipeline_parallel) == (
        "Qwen/Qwen2.5-7B-Instruct", 4, 1)


@pytest.mark.parametrize(("config", "hints", "noted"), [
    pytest.param(SERVE_FILE_CONFIG % "/c/llama.yaml", {"gpu-admission.io/model": "meta-llama/Llama-3.1-70B-Instruct",
                                                       "gpu-admission.io/tensor-parallel": "2",
                                                       "gpu-admission.io/pipeline-parallel": "2"}, True,
                 id="file-with-accelerator-noted"),
    pytest.param(SERVE_FILE_CONFIG % "/c/broken.yaml", {}, True, id="file-not-yaml"),
    pytest.param(SERVE_FILE_CONFIG % "/c/missing.yaml", {}, True, id="file-not-shown"),
    pytest.param(SERVE_FILE_CONFIG % ("{model_loading_config: {model_id: a/b-7b}, engine_kwargs: {tensor_parallel_size: 2}}, "
                                      "{model_loading_config: {model_id: a/b-7b}, engine_kwargs: {tensor_parallel_size: 4}}"),
                 {"gpu-admission.io/model": "a/b-7b"}, False, id="one-model-two-tps-no-tp"),
])
def test_serve_config_with_files(config: str, hints: dict[str, str], noted: bool) -> None:
    files = {"/c/llama.yaml": LLM_CONFIG_FILE, "/c/broken.yaml": "a: [unclosed"}
    got, notes = ray.serve_config_hints(config, files)
    assert got == hints
    assert bool(notes) == noted


def test_pod_files_and_context_lookup() -> None:
    maps = runtime_context([configmap("a", {"x.py": "1", "y.py": "2"}), configmap("b", {"z": "3"}, namespace=None)])
    lookup = configmaps.context_lookup(maps, "ml")
    assert lookup is not None and lookup("b") == {"z": "3"} and lookup("missing") is None
    assert configmaps.context_lookup(maps, "other") is not None and configmaps.context_lookup({}, "ml") is None
    spec = {"volumes": [{"name": "v", "configMap": {"name": "a"}}, {"name": "w", "configMap": {"name": "b"}}],
            "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/s"}]}],
            "initContainers": [{"name": "i", "volumeMounts": [{"name": "w", "mountPath": "/t/z", "subPath": "z"},
                                                              {"name": "v", "mountPath": "/s"}]}]}
    assert configmaps.pod_files(spec, lookup) == {"/s/x.py": "1", "/s/y.py": "2", "/t/z": "3"}
    assert configmaps.pod_files("not a spec", lookup) == {}
