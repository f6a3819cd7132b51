"""An UPDATE is judged against the stored object (``updates: judgeChange``, the default): a table over
(old verdict, new verdict) pairs, then ``judgeObject`` (every UPDATE judged as new) and the edges.

The objects are real Deployments of a vLLM Llama-3.1-70B TP4 server: compliant when its template
has no GPU pin (the mutating webhook pins its pods), ``model-does-not-fit`` when pinned to L4 (33 GiB of weights per GPU on a 24 GB card: cannot work),
``tp-exceeds-gpus`` when TP is 8 on 4 GPUs.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from webhook.core import engine, settings as settings_mod, updates
from webhook.core.workloads import pod_templates
from tests import judging

KEY = "nvidia.com/gpu.product"


def deployment(*, product: str | None = None, tp: int = 4, replicas: int = 2,
               template_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": "vllm/vllm-openai:v0.8.5",
        "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", str(tp)],
        "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    if product:
        spec["nodeSelector"] = {KEY: product}
    meta: dict[str, Any] = {"labels": {"app": "llm"}}
    if template_annotations:
        meta["annotations"] = template_annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ml"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "llm"}},
                     "template": {"metadata": meta, "spec": spec}}}


def annotated(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["annotations"] = {"team": "inference"}
    return out


COMPLIANT = deployment()
PINNED_L4 = deployment(product="NVIDIA-L4")
RESTARTED = deployment(product="NVIDIA-L4",
                       template_annotations={"kubectl.kubernetes.io/restartedAt": "2026-12-02T05:00:00Z"})

Judged = Callable[[dict[str, Any], Any, settings_mod.Settings], engine.Judgement]

CASES = [
    # id, old, new, allowed, codes left, pre-existing codes warned
    pytest.param(COMPLIANT, deployment(replicas=5), True, set(), set(), id="compliant-stays-compliant"),
    pytest.param(COMPLIANT, PINNED_L4, False, {"model-does-not-fit"}, set(), id="update-adds-a-violation"),
    pytest.param(PINNED_L4, deployment(product="NVIDIA-L4", replicas=0), True, set(), {"model-does-not-fit"},
                 id="scale-to-zero-of-a-bad-deployment"),
    pytest.param(PINNED_L4, deployment(product="NVIDIA-L4", replicas=3), True, set(), {"model-does-not-fit"},
                 id="scale-up-of-a-bad-deployment-admitted-with-a-scale-up-warning"),
    pytest.param(PINNED_L4, annotated(PINNED_L4), True, set(), {"model-does-not-fit"}, id="metadata-only-update"),
    pytest.param(PINNED_L4, RESTARTED, True, set(), {"model-does-not-fit"}, id="rollout-restart-template-annotation"),
    pytest.param(PINNED_L4, deployment(product="NVIDIA-GeForce-RTX-4090"), True, set(), {"model-does-not-fit"},
                 id="re-pinned-to-another-wrong-product-same-rule"),
    pytest.param(PINNED_L4, COMPLIANT, True, set(), set(), id="update-fixes-the-template"),
    pytest.param(PINNED_L4, deployment(product="Tesla-T4", tp=8), False, {"tp-exceeds-gpus"}, {"model-does-not-fit"},
                 id="update-adds-a-second-violation"),
    pytest.param(None, PINNED_L4, False, {"model-does-not-fit"}, set(), id="no-old-object-judged-as-new"),
    pytest.param({"kind": "ConfigMap"}, PINNED_L4, False, {"model-does-not-fit"}, set(),
                 id="old-object-without-the-template"),
]


def codes(judged: engine.Judgement) -> set[str]:
    return {v.code for r in judged.results for v in r.decision.violations}


def warned(judged: engine.Judgement) -> set[str]:
    """The codes warned as pre-existing (``pre-existing CODE ...``, or ``scale-up: ... pre-existing CODE``)."""
    return {w.split("pre-existing ", 1)[1].split()[0].rstrip(":") for r in judged.results for w in r.decision.warnings
            if w.startswith(("pre-existing ", "scale-up: "))}


@pytest.mark.parametrize(("old", "new", "allowed", "left", "pre_existing"), CASES)
def test_judge_change(old: Any, new: dict[str, Any], allowed: bool, left: set[str], pre_existing: set[str]) -> None:
    judged = judging.judge_update(new, old, settings_mod.default())
    assert all(r.decision.allowed for r in judged.results) is allowed
    assert codes(judged) == left
    assert warned(judged) == pre_existing


def test_every_new_violation_was_denied_before_for_a_new_object() -> None:
    """What a new object is denied for is unchanged: judge_update with no old object is judge."""
    for obj in (PINNED_L4, deployment(product="NVIDIA-L4", tp=8)):
        new = judging.judge(obj, settings_mod.default())
        assert judging.judge_update(obj, None, settings_mod.default()).results == new


def judge_object_policy() -> settings_mod.Settings:
    return settings_mod.from_mapping({"updates": "judgeObject"}, source="test")


@pytest.mark.parametrize("new", [deployment(product="NVIDIA-L4", replicas=0), annotated(PINNED_L4), RESTARTED],
                         ids=["scale", "annotate", "restart"])
def test_judge_object_judges_every_update_as_new(new: dict[str, Any]) -> None:
    judged = judging.judge_update(new, PINNED_L4, judge_object_policy())
    assert codes(judged) == {"model-does-not-fit"}
    assert not all(r.decision.allowed for r in judged.results)


def test_audit_mode_marks_pre_existing_warnings() -> None:
    judged = judging.judge_update(annotated(PINNED_L4), PINNED_L4, settings_mod.default(), mode="audit")
    (result,) = judged.results
    assert result.decision.allowed and not result.decision.violations
    assert [w for w in result.decision.warnings if "model-does-not-fit" in w][0].startswith("pre-existing model-does-not-fit")


def test_unchanged_templates_are_not_judged_again() -> None:
    calls: list[int] = []

    def judge_old() -> Any:
        calls.append(1)
        return judging.judge(PINNED_L4, settings_mod.default())

    new = judging.judge(annotated(PINNED_L4), settings_mod.default())
    updates.against_old(new, pod_templates(PINNED_L4), judge_old)
    assert calls == []
    changed = judging.judge(deployment(product="NVIDIA-L4", tp=8), settings_mod.default())
    updates.against_old(changed, pod_templates(PINNED_L4), judge_old)
    assert calls == [1]


def test_the_policy_field_is_validated() -> None:
    assert settings_mod.default().updates == "judgeChange"
    with pytest.raises(settings_mod.SettingsError, match="updates"):
        settings_mod.from_mapping({"updates": "judgeSometimes"}, source="policy.yaml")


def test_warning_names_the_code_first_within_kubectls_width() -> None:
    judged = judging.judge_update(annotated(PINNED_L4), PINNED_L4, settings_mod.default())
    warning = next(w for r in judged.results for w in r.decision.warnings if w.startswith("pre-existing"))
    assert warning.startswith("pre-existing model-does-not-fit: ")
    (violation,) = [v for r in judging.judge_review(PINNED_L4, settings_mod.default()).results
                    for v in r.decision.violations]
    assert violation.fix and violation.fix in warning[:119], warning  # the fix shows in kubectl's 120


def test_an_unchanged_operator_job_is_not_judged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's templates carry the group size the engine gives them: the stored templates must be
    read the same way, or every metadata-only update of a PyTorchJob would judge the old job too."""
    import yaml
    from pathlib import Path

    job = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples/kubeflow-pytorchjob-llama-70b.yaml").read_text())
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {KEY: "NVIDIA-L4"}
    calls: list[int] = []
    real = updates.against_old

    def spying(new: Any, old_templates: Any, judge_old: Any, **kw: Any) -> Any:
        return real(new, old_templates, lambda: calls.append(1) or judge_old(), **kw)

    monkeypatch.setattr(updates, "against_old", spying)
    judged = judging.judge_update(annotated(job), job, settings_mod.default())
    assert calls == []
    assert all(r.decision.allowed for r in judged.results) and warned(judged) == {"model-does-not-fit"}


# ----------------------------------------------------------------------------- Kueue admission

def _kueue_job(node_selector: dict[str, str] | None = None, *, queued: bool = True,
               image: str = "vllm/vllm-openai:v0.10.1") -> dict[str, Any]:
    """A JobSet Kueue manages: created suspended, admitted by Kueue writing its flavor's node labels
    into the template (pkg/podset/podset.go) and the podset label (pkg/constants/constants.go)."""
    spec: dict[str, Any] = {"containers": [{
        "name": "vllm", "image": image,
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
        "resources": {"limits": {"nvidia.com/gpu": 4}}}]}
    meta: dict[str, Any] = {}
    if node_selector:
        spec["nodeSelector"] = node_selector
        meta["labels"] = {"kueue.x-k8s.io/podset": "workers"}
    labels = {"kueue.x-k8s.io/queue-name": "gpu-queue"} if queued else {}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ai", "labels": labels},
            "spec": {"suspend": not node_selector, "replicatedJobs": [
                {"name": "workers", "template": {"spec": {"template": {"metadata": meta, "spec": spec}}}}]}}


@pytest.mark.parametrize(("old", "new", "allowed", "warning"), [
    pytest.param(_kueue_job(), _kueue_job({"nvidia.com/gpu.product": "NVIDIA-L4"}), True, "kueue-admission model-does-not-fit",
                 id="kueue-writes-a-flavor-pin"),
    pytest.param(_kueue_job(queued=False), _kueue_job({"nvidia.com/gpu.product": "NVIDIA-L4"}, queued=False), False,
                 None, id="not-queued-denied"),
    pytest.param(_kueue_job(), _kueue_job({"nvidia.com/gpu.product": "NVIDIA-L4"}, image="vllm/vllm-openai:v0.11.0"),
                 False, None, id="queued-but-more-changed"),
])
def test_kueue_admission_is_never_denied(old: dict[str, Any], new: dict[str, Any], allowed: bool,
                                          warning: str | None) -> None:
    (r,) = judging.judge_update(copy.deepcopy(new), old, settings_mod.default()).results
    assert r.decision.allowed is allowed
    if warning:
        assert any(w.startswith(warning) for w in r.decision.warnings)
    else:
        assert [v.code for v in r.decision.violations] == ["model-does-not-fit"]


@pytest.mark.parametrize(("old", "new", "up"), [
    pytest.param({"spec": {"replicas": 2}}, {"spec": {"replicas": 3}}, True, id="replicas-raised"),
    pytest.param({"spec": {"replicas": 3}}, {"spec": {"replicas": 0}}, False, id="scaled-down"),
    pytest.param({"spec": {"replicas": 2}}, {"spec": {"replicas": 2}}, False, id="same"),
    pytest.param({"spec": {}}, {"spec": {"replicas": 2}}, True, id="default-one-to-two"),
    pytest.param({"spec": {"replicas": 0}}, {"spec": {}}, True, id="zero-to-default-one"),
    pytest.param({"spec": {"parallelism": 1}}, {"spec": {"parallelism": 4}}, True, id="job-parallelism"),
    pytest.param({"spec": {"replicas": "2"}}, {"spec": {"replicas": "9"}}, False, id="text-not-compared"),
    pytest.param({"spec": {"replicas": True}}, {"spec": {"replicas": 5}}, False, id="bool-not-a-count"),
    pytest.param(None, {"spec": {"replicas": 5}}, True, id="no-old-object"),
    pytest.param({}, {}, False, id="no-counts"),
])
def test_scaled_up(old: Any, new: Any, up: bool) -> None:
    assert updates.scaled_up(old, new) is up


def test_a_scale_up_of_a_pre_existing_violation_says_its_new_pods_will_be_denied() -> None:
    """The pods a scale-up asks for are new objects, judged on create: the update is admitted (a
    scale-up is never blocked), and the warning says first that they will be denied (issue 26)."""
    judged = judging.judge_update(deployment(product="NVIDIA-L4", replicas=3), PINNED_L4, settings_mod.default())
    assert all(r.decision.allowed for r in judged.results)
    warning, _ = [w for r in judged.results for w in r.decision.warnings if "model-does-not-fit" in w]
    assert warning[:120].startswith("scale-up: the new pods will be denied, pre-existing model-does-not-fit (fix the "
                                    "template to add pods)")
    (violation,) = [v for r in judging.judge_review(PINNED_L4, settings_mod.default()).results
                    for v in r.decision.violations]
    assert violation.short() in [w for r in judged.results for w in r.decision.warnings]  # the fix, whole
    # and a pod of that template is denied on create, which is what the warning promises
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "llm-x", "namespace": "ml"},
           "spec": copy.deepcopy(PINNED_L4["spec"]["template"]["spec"])}
    created = judging.judge_review(pod, settings_mod.default())
    assert not all(r.decision.allowed for r in created.results)
    assert "model-does-not-fit" in {v.code for r in created.results for v in r.decision.violations}


@pytest.mark.parametrize(("n", "noun", "text"), [
    pytest.param(1, "GPU", "1 GPU", id="one"), pytest.param(4, "GPU", "4 GPUs", id="many"),
    pytest.param(0, "pod", "0 pods", id="none"), pytest.param(1, "value", "1 value", id="one-value"),
])
def test_counted_says_one_in_the_singular(n: int, noun: str, text: str) -> None:
    """Messages say "1 GPU x 3 pods", never "1 GPUs" (issue 26)."""
    from webhook.core.domain import counted

    assert counted(n, noun) == text
