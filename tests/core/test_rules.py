"""The policy's rules one by one, and the table that composes them (webhook.core.rules, webhook.core.policy).

Each rule is called on its own with a :class:`Case` built here: what it returns is its findings and
warnings, and what it chooses for the rows after it, never a write into shared state. The table
test adds a made-up rule as one row and sees its finding in the decision."""

from __future__ import annotations

import dataclasses
import json

import pytest

from webhook.core import policy, rules
from webhook.core.domain import Violation, WorkloadProfile
from webhook.core.inventory import from_nodes
from webhook.core.placing import Finding
from webhook.core.rules import Case, Outcome
from webhook.core.settings import default
from webhook.core.workloads import PodTemplate

SETTINGS = default()
A100 = "NVIDIA-A100-SXM4-80GB"
L40S = "NVIDIA-L40S"


def _template(*, gpus: int = 4, node_name: str | None = None, annotations: dict[str, str] | None = None,
              selector: dict[str, str] | None = None) -> PodTemplate:
    spec: dict = {"containers": [{"name": "server", "image": "vllm/vllm-openai:v0.9.0",
                                  "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    return PodTemplate("", {"name": "p", "annotations": annotations or {}}, spec,
                       annotations=annotations or {})


def _profile(**fields: object) -> WorkloadProfile:
    base = {"framework": "vllm", "model": "meta-llama/Llama-3.1-70B-Instruct", "params_b": 70.6, "dtype": "bf16",
            "bytes_per_param": 2.0, "tensor_parallel": 4, "tp_declared": True, "gpus_per_pod": 4, "gpus_used": 4,
            "role": "serving", "kind": "llm", "container": "server"}
    base.update(fields)
    return WorkloadProfile(**base)  # type: ignore[arg-type]


def _case(profile: WorkloadProfile | None = None, template: PodTemplate | None = None, **decided: object) -> Case:
    case = Case(profile or _profile(), template or _template(), SETTINGS, None, None, mode="enforce",
                key=SETTINGS.label_key)
    return case._replace(**decided) if decided else case


def _codes(outcome: Outcome) -> list[str]:
    return [f.violation.code for f in outcome.findings]


def _tiered(case: Case) -> Case:
    """The case as the rows before ``placement`` leave it."""
    return case._replace(**rules.tier(case).decided)


@pytest.mark.parametrize(("rule", "case", "codes", "warned"), [
    pytest.param(rules.node_name, _case(template=_template(node_name="gpu-7")), ["missing-homogeneous-selector"], "",
                 id="node-name-multi-gpu"),
    pytest.param(rules.node_name, _case(_profile(gpus_per_pod=1, tensor_parallel=1, gpus_used=1, params_b=8.0),
                                        _template(gpus=1, node_name="gpu-7")), [], "", id="node-name-one-gpu-trusted"),
    pytest.param(rules.parallelism, _case(_profile(tensor_parallel=8, gpus_used=8)), ["tp-exceeds-gpus"], "",
                 id="parallelism-over"),
    pytest.param(rules.parallelism, _case(_profile(tensor_parallel=2, gpus_used=2)), [],
                 "4 GPUs requested but vllm uses TP2 x PP1 = 2", id="parallelism-under"),
    pytest.param(rules.parallelism, _case(), [], "", id="parallelism-exact"),
    pytest.param(rules.mode, _case(template=_template(annotations={"gpu-admission.io/mode": "strict"})), [],
                 "ignored: use \"audit\"", id="mode-unknown-annotation"),
    pytest.param(rules.notes, _case(_profile(params_b=None, model=None)), [], "cannot tell the model size",
                 id="notes-unknown-size"),
    pytest.param(rules.placement, _tiered(_case()), ["missing-homogeneous-selector"], "", id="placement-unpinned"),
    pytest.param(rules.placement, _tiered(_case(template=_template(selector={"nvidia.com/gpu.product": A100}))), [],
                 "", id="placement-pinned-fitting"),
    pytest.param(rules.placement, _tiered(_case(_profile(params_b=405.0, model="meta-llama/Llama-3.1-405B"))),
                 ["model-does-not-fit"], "", id="placement-too-big"),
])
def test_each_rule_returns_its_findings(rule, case: Case, codes: list[str], warned: str) -> None:
    outcome = rule(case)
    assert _codes(outcome) == codes
    if warned:
        assert any(warned in w for w in outcome.warnings), outcome.warnings
    else:
        assert not [w for w in outcome.warnings if "numa" in w or "requested" in w]


def test_a_rule_changes_nothing_it_is_given() -> None:
    """Rules are functions: the same case twice gives the same outcome, and the case is unchanged."""
    case = _tiered(_case(template=_template(node_name="gpu-7")))
    before = (json.dumps(case.template.spec, sort_keys=True), dataclasses.astuple(case.profile), case.choice)
    for row in policy.RULES:
        if row.when is None or row.when(case):
            assert row.check(case) == row.check(case), row.name
    assert (json.dumps(case.template.spec, sort_keys=True), dataclasses.astuple(case.profile), case.choice) == before


def test_placement_decides_where_and_that_the_patch_is_needed() -> None:
    decided = rules.placement(_tiered(_case())).decided
    assert decided["placement"] is not None and A100 in decided["placement"].values
    assert L40S not in decided["placement"].values
    assert decided["patch_needed"] is True and decided["key"] == SETTINGS.label_key


def _node(name: str, *, count: int) -> dict:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.count": str(count)}},
            "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}


@pytest.mark.parametrize(("mixed_nodes", "excluded", "warned"), [
    pytest.param("deny", ("mixed-1",), "kept off untrusted GPU nodes", id="kept-off"),
    pytest.param("warn", None, "may land on untrusted GPU nodes", id="only-warned"),
])
def test_untrusted_nodes_decide_the_exclusion(mixed_nodes: str, excluded: tuple[str, ...] | None,
                                              warned: str) -> None:
    """A node whose count label says fewer GPUs than it has is mixed or mislabeled: the rule
    decides the placement without it (or only warns), and leaves a trusted node alone."""
    settings = dataclasses.replace(SETTINGS, mixed_nodes=mixed_nodes)
    inventory = from_nodes([_node("good-1", count=8), _node("mixed-1", count=4)], label_key=settings.label_key,
                           scheme=settings.label_scheme, catalog=settings.catalog,
                           gpu_resources=settings.gpu_resources)
    case = _tiered(_case()._replace(settings=settings, inventory=inventory))
    case = case._replace(**rules.placement(case).decided)
    outcome = rules.untrusted_nodes(case)
    assert any(warned in w and "mixed-1" in w for w in outcome.warnings), outcome.warnings
    if excluded is None:
        assert outcome.decided == {}
    else:
        assert outcome.decided["placement"].exclude_nodes == excluded
        assert outcome.decided["placement"].values == case.placement.values


def test_every_row_decides_only_fields_of_a_case() -> None:
    fields = set(Case._fields)
    names = [row.name for row in policy.RULES]
    assert len(names) == len(set(names)), names
    for row in policy.RULES:
        assert row.decides <= fields, (row.name, row.decides - fields)


def test_a_rule_that_decides_what_its_row_does_not_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def sneaky(case: Case) -> Outcome:
        return Outcome(decided={"mode": "audit"})

    monkeypatch.setattr(policy, "RULES", (*policy.RULES, policy.Rule("sneaky", sneaky)))
    with pytest.raises(AssertionError, match="sneaky"):
        policy.decide(_profile(), _template(), SETTINGS, mode="enforce", mutate=True)


def test_adding_a_rule_is_one_function_and_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up rule (no model over 60B on a pod named ``p``) as one row: its finding denies, in
    row order after the others, and its warning is among the decision's."""
    def made_up(case: Case) -> Outcome:
        if (case.profile.params_b or 0) <= 60:
            return rules.NOTHING
        return Outcome(findings=(Finding(Violation("made-up-rule", "too big for this test", "/spec")),),
                       warnings=("made-up warning",))

    clean = policy.decide(_profile(), _template(selector={"nvidia.com/gpu.product": A100}), SETTINGS,
                          mode="enforce", mutate=True)
    assert clean.allowed, clean.violations
    monkeypatch.setattr(policy, "RULES", (*policy.RULES, policy.Rule("made-up", made_up, policy._gpu_pod)))
    judged = policy.decide(_profile(), _template(selector={"nvidia.com/gpu.product": A100}), SETTINGS,
                           mode="enforce", mutate=True)
    assert not judged.allowed
    assert [v.code for v in judged.violations] == ["made-up-rule"]
    assert "made-up warning" in judged.warnings
    small = policy.decide(_profile(params_b=8.0, model="meta-llama/Llama-3.1-8B"), _template(), SETTINGS,
                          mode="enforce", mutate=True)
    assert "made-up-rule" not in [v.code for v in small.violations]


def test_findings_come_in_row_order() -> None:
    """A pod breaking two rules gets both violations, in the table's order (node-name before parallelism)."""
    judged = policy.decide(_profile(tensor_parallel=8, gpus_used=8),
                           _template(node_name="gpu-7", selector={"nvidia.com/gpu.product": A100}),
                           SETTINGS, mode="enforce", mutate=True)
    codes = [v.code for v in judged.violations]
    order = [row.name for row in policy.RULES]
    assert codes == ["missing-homogeneous-selector", "tp-exceeds-gpus"]
    assert order.index("node-name") < order.index("parallelism")
