"""Issue 28: inference that a training launcher runs (webhook/core/launchers/inference_scripts.py)
and a model loaded by inline code (webhook/core/launchers/fallback.py), read as inference.

xDiT under torchrun, DeepSpeed-Inference under deepspeed, and ``from_pretrained(...,
device_map="auto")`` in ``python -c`` were judged as training (gradients, optimizer state, a
training strategy) or not at all; a 70B model split by ``device_map`` over 4 GPUs was sized whole
on one GPU, pinning it to the largest cards only."""

from __future__ import annotations

from typing import Any

import pytest

from tests.judging import judge
from webhook.core import settings as settings_mod

S = settings_mod.default()
FLUX = "black-forest-labs/FLUX.1-dev"
LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"


def pod(command: list[str], gpus: int, image: str = "acme/runner:1", pin: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": image, "command": command,
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if pin:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": pin}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ai"}, "spec": spec}


def xdit(*degrees: str, nproc: int = 8) -> list[str]:
    return ["torchrun", f"--nproc_per_node={nproc}", "examples/flux_example.py", "--model", FLUX, *degrees,
            "--height", "1024", "--width", "1024"]


INLINE = ("from transformers import AutoModelForCausalLM\n"
          f"m = AutoModelForCausalLM.from_pretrained('{LLAMA_70B}', device_map='auto', torch_dtype='bfloat16')")

CASES = [
    # file, command, GPUs -> framework, role, TP, PP, DP, GPUs used, fragment of a note
    pytest.param(xdit("--pipefusion_parallel_degree", "2", "--ulysses_degree", "2", "--ring_degree", "2"), 8,
                 ("xdit", "inference", 1, 1, 8, 8, "Ulysses 2 x Ring 2 x PipeFusion 2 = 8 rank(s)"),
                 id="xdit-pipefusion-ulysses-ring"),
    pytest.param(xdit("--use-cfg-parallel", "--ulysses-degree", "2", nproc=4), 4,
                 ("xdit", "inference", 1, 1, 4, 4, "CFG 2 x Ulysses 2 = 4 rank(s)"), id="xdit-dashes-and-cfg"),
    pytest.param(xdit("--ulysses_degree=2", "--tensor_parallel_degree", "2", nproc=4), 4,
                 ("xdit", "inference", 2, 1, 2, 4, "Ulysses 2 x TP 2 = 4 rank(s)"), id="xdit-own-tp-is-tp"),
    pytest.param(["deepspeed", "--num_gpus", "4", "inference-test.py", "--model", LLAMA_70B, "--dtype", "float16"],
                 4, ("deepspeed-inference", "inference", 4, 1, None, 4, "split tensor-parallel"),
                 id="deepspeed-inference-by-script-name"),
    pytest.param(["deepspeed", "run.py", "--model_name_or_path", LLAMA_70B, "--ds_inference"], 8,
                 ("deepspeed-inference", "inference", 8, 1, None, 8, "split tensor-parallel"),
                 id="deepspeed-inference-flag-all-gpus"),
    pytest.param(["python", "-c", INLINE], 4,
                 ("transformers", "inference", 1, 4, None, 4, "device_map='auto'"), id="device-map-auto-inline"),
]


@pytest.mark.parametrize(("command", "gpus", "expected"), CASES)
def test_inference_under_a_training_launcher_is_read_as_inference(command: list[str], gpus: int,
                                                                  expected: tuple[Any, ...]) -> None:
    (r,) = judge(pod(command, gpus), S)
    p = r.profile
    framework, role, tp, pp, dp, used, said = expected
    assert (p.framework, p.role, p.tensor_parallel, p.pipeline_parallel, p.data_parallel, p.gpus_used) == \
        (framework, role, tp, pp, dp, used)
    warnings = r.decision.warnings
    assert any(said in w for w in warnings), warnings
    assert not any("training strategy" in w or "trains every weight" in w for w in warnings), warnings
    assert r.decision.allowed and r.decision.tier


@pytest.mark.parametrize(("command", "gpus"), [
    pytest.param(["deepspeed", "--num_gpus", "8", "train.py", "--model_name_or_path", LLAMA_70B], 8,
                 id="deepspeed-train-script"),
    pytest.param(["torchrun", "--nproc_per_node=8", "train.py", "--model", FLUX, "--tensor_parallel_degree", "2"], 8,
                 id="torchrun-without-xdit-flags"),
])
def test_training_scripts_stay_training(command: list[str], gpus: int) -> None:
    (r,) = judge(pod(command, gpus), S)
    assert r.profile.role == "training"


def test_a_device_map_split_is_sized_over_the_pods_gpus_and_a_pcie_pin_is_kept() -> None:
    """70.6B in bf16 (about 141 GB) over 4 x L40S (48 GB): fits layer by layer; no tensor
    parallelism, so the pin is kept (a warning names the faster tier, nothing is denied)."""
    (r,) = judge(pod(["python", "-c", INLINE], 4, pin="NVIDIA-L40S"), S)
    assert r.decision.allowed and not r.decision.violations
    assert r.profile.pipeline_parallel == 4 and r.profile.tensor_parallel == 1
    assert not any("does-not-fit" in w for w in r.decision.warnings), r.decision.warnings


def test_a_model_in_inline_code_without_device_map_is_only_the_model() -> None:
    code = f"from transformers import pipeline, AutoModel\nm = AutoModel.from_pretrained(\"{LLAMA_70B}\")"
    (r,) = judge(pod(["python", "-c", code], 1), S)
    assert r.profile.model == LLAMA_70B and r.profile.framework is None
    assert any("framework and parallelism unknown" in w for w in r.decision.warnings)
