"""Katib Experiment (issue 28): the trial template read with its own kind's reader, the trial parameters
filled from the search space, one trial per group, and every way a trial can go unread reported."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.judging import judge
from webhook.core import operators, settings as settings_mod
from webhook.core.operators import katib

ROOT = Path(__file__).resolve().parents[2]
S = settings_mod.default()
EXAMPLE = yaml.safe_load((ROOT / "examples" / "katib-experiment-llama-3.1-8b-lr.yaml").read_text())


def experiment(trial: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A small Experiment whose trial is ``trial`` (a batch Job of one 2-GPU pod by default)."""
    trial = trial or {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": [{
        "name": "train", "image": "pytorch/pytorch",
        "command": ["python", "train.py", "--model_name_or_path=${trialParameters.model}",
                    "--batch=${trialParameters.batch}"],
        "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}
    body = {"parameters": [
        {"name": "model", "parameterType": "categorical",
         "feasibleSpace": {"list": ["Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B"]}},
        {"name": "bs", "parameterType": "int", "feasibleSpace": {"min": "8", "max": "64"}}],
        "trialTemplate": {"trialParameters": [{"name": "model", "reference": "model"},
                                              {"name": "batch", "reference": "bs"}], "trialSpec": trial}}
    body.update(spec)
    return {"apiVersion": katib.API_VERSION, "kind": "Experiment", "metadata": {"name": "sweep", "namespace": "ml"},
            "spec": body}


def pytorchjob_trial(workers: int, gpus: str = "4") -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "pytorch", "image": "pytorch/pytorch",
                                    "command": ["torchrun", "--nproc-per-node=4", "train.py",
                                                "--lr=${trialParameters.model}"],
                                    "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": pod}, "Worker": {"replicas": workers, "template": copy.deepcopy(pod)}}}}


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(EXAMPLE, [("Master", "/spec/trialTemplate/trialSpec/spec/pytorchReplicaSpecs/Master/template", 4, 2),
                           ("Worker", "/spec/trialTemplate/trialSpec/spec/pytorchReplicaSpecs/Worker/template", 4, 2)],
                 id="example-pytorchjob"),
    pytest.param(experiment(), [("trial", "/spec/trialTemplate/trialSpec/spec/template", 2, 1)], id="batch-job"),
    # parallelTrialCount never multiplies into the group: 1 master + 3 workers is one trial of 4 pods
    pytest.param(experiment(pytorchjob_trial(3), parallelTrialCount=5),
                 [("Master", "/spec/trialTemplate/trialSpec/spec/pytorchReplicaSpecs/Master/template", 4, 4),
                  ("Worker", "/spec/trialTemplate/trialSpec/spec/pytorchReplicaSpecs/Worker/template", 4, 4)],
                 id="pytorchjob-parallel-5"),
])
def test_trial_read_with_its_kinds_reader(obj: dict[str, Any], expected: list[tuple[str, str, int, int]]) -> None:
    results = judge(obj, S)
    assert [(r.template.role, r.template.pointer, r.profile.gpus_per_pod, r.profile.pods) for r in results] == expected


@pytest.mark.parametrize(("parameter", "value"), [
    pytest.param({"parameterType": "int", "feasibleSpace": {"min": "8", "max": "64"}}, "64", id="int-max"),
    pytest.param({"parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.5"}}, "0.5", id="double-max"),
    pytest.param({"parameterType": "discrete", "feasibleSpace": {"list": ["2", "16", "4"]}}, "16", id="discrete-largest"),
    pytest.param({"parameterType": "categorical", "feasibleSpace": {"list": ["b", "a"]}}, "b", id="categorical-first"),
    pytest.param({"parameterType": "int", "feasibleSpace": {}}, None, id="no-space"),
    pytest.param({"parameterType": "int", "feasibleSpace": {"max": "lots"}}, None, id="max-not-a-number"),
])
def test_feasible_value(parameter: dict[str, Any], value: str | None) -> None:
    assert katib._feasible(parameter) == value


def test_placeholders_filled_as_katib_fills_them_and_said() -> None:
    obj = experiment()
    found = list(operators.templates(obj))
    command = found[0].holder["spec"]["containers"][0]["command"]
    assert command[2:] == ["--model_name_or_path=Qwen/Qwen2.5-7B", "--batch=64"]
    assert any("model=Qwen/Qwen2.5-7B" in n and "batch=64" in n for n in found[0].notes)
    assert any("3 trials run at once" in n for n in found[0].notes)  # the default parallelTrialCount
    # the input is not changed
    assert obj["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]["command"][2] \
        == "--model_name_or_path=${trialParameters.model}"
    # the model the placeholder names is the one judged
    assert judge(obj, S)[0].profile.model == "Qwen/Qwen2.5-7B"


@pytest.mark.parametrize(("reference", "expected"), [
    pytest.param("${trialSpec.Name}", "sweep-trial", id="name"),
    pytest.param("${trialSpec.Namespace}", "ml", id="namespace"),
    pytest.param("${trialSpec.Kind}", "Job", id="kind"),
    pytest.param("${trialSpec.Labels[team]}", "nlp", id="label"),
])
def test_metadata_references(reference: str, expected: str) -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialSpec"]["metadata"] = {"labels": {"team": "nlp"}}
    obj["spec"]["trialTemplate"]["trialParameters"].append({"name": "meta", "reference": reference})
    values, _ = katib.trial_values(obj, obj["spec"]["trialTemplate"]["trialSpec"])
    assert values["meta"] == expected


def test_an_unresolved_parameter_stays_and_is_said() -> None:
    obj = experiment()
    obj["spec"]["trialTemplate"]["trialParameters"].append({"name": "ghost", "reference": "nowhere"})
    found = list(operators.templates(obj))
    assert any("not resolved" in n and "ghost" in n for n in found[0].notes)


def test_a_substituted_affinity_is_judged_not_patched() -> None:
    trial = experiment()["spec"]["trialTemplate"]["trialSpec"]
    trial["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In",
                                                     "values": ["${trialParameters.model}"]}]}]}}}
    patched, judged_only = list(operators.templates(experiment())), list(operators.templates(experiment(trial)))
    assert not patched[0].synthesized and judged_only[0].synthesized


@pytest.mark.parametrize(("obj", "context", "note"), [
    pytest.param(experiment({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "spec": {}}), None,
                 "not a kind gpu-admission reads", id="unknown-trial-kind"),
    pytest.param({**experiment(), "spec": {"trialTemplate": {"configMap": {"configMapName": "tpl",
                                                                           "templatePath": "job.yaml"}}}},
                 None, "not in the input", id="configmap-missing"),
    pytest.param({**experiment(), "spec": {"trialTemplate": {}}}, None, "neither a trialSpec", id="no-template"),
    pytest.param(experiment("not an object"), None, "neither a trialSpec", id="trial-not-object"),
])
def test_every_unread_trial_is_reported(obj: dict[str, Any], context: Any, note: str) -> None:
    found = list(operators.templates(obj, context))
    assert len(found) == 1 and found[0].pods == 0 and any(note in n for n in found[0].notes)
    results = judge(obj, S)
    assert any(note in w for r in results for w in r.decision.warnings)


def test_a_configmap_template_in_the_input_is_judged_not_patched() -> None:
    trial = experiment()["spec"]["trialTemplate"]["trialSpec"]
    obj = {**experiment(), "spec": {**experiment()["spec"], "trialTemplate": {
        "trialParameters": experiment()["spec"]["trialTemplate"]["trialParameters"],
        "configMap": {"configMapName": "tpl", "configMapNamespace": "ml", "templatePath": "job.yaml"}}}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tpl", "namespace": "ml"},
          "data": {"job.yaml": yaml.safe_dump(trial)}}
    context = operators.context_of([cm])
    found = list(operators.templates(obj, context))
    assert [(f.path, f.synthesized, f.pods) for f in found] == [(("spec", "trialTemplate", "configMap"), True, 1)]
    results = judge(obj, S, context=context)
    assert results[0].profile.gpus_per_pod == 2 and results[0].patch == ()


def _deep(levels: int) -> Any:
    value: Any = "${trialParameters.learningRate}"
    for _ in range(levels):
        value = {"n": value}
    return value


@pytest.mark.parametrize("hostile", [
    pytest.param({"parallelTrialCount": "lots"}, id="count-text"),
    pytest.param({"parameters": "x", "trialTemplate": {"trialParameters": [1, None, {"name": 3}],
                                                       "trialSpec": {"kind": "Job", "apiVersion": "batch/v1"}}},
                 id="wrong-shapes"),
    pytest.param({"trialTemplate": {"configMap": {"configMapName": "c", "templatePath": "k"}}}, id="configmap-no-ctx"),
    pytest.param({"trialTemplate": {"trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": _deep(5000)}}},
                 id="nested-beyond-recursion"),
])
def test_hostile_shapes_never_raise(hostile: dict[str, Any]) -> None:
    obj = experiment()
    obj["spec"].update(hostile)
    judge(obj, S)
    judge(obj, S, context=operators.context_of([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                                 "data": {"k": "[[[[" * 10_000}}]))


def test_registered_and_sent_to_the_webhook() -> None:
    assert (katib.API_VERSION, "Experiment") in operators.REGISTRY.readers
    assert any(r["apiGroups"] == ["kubeflow.org"] and r["apiVersions"] == ["v1beta1"] and "experiments" in r["resources"]
               for r in operators.REGISTRY.webhook_rules())
