"""One place per operator kind: the descriptor table (webhook.core.operators.REGISTRY) is what the
engine reads and what the shipped webhook rules are generated from (tests/tools/webhook_rules.py).

The made-up kind below is added as one descriptor and judged from one example object: its reader,
its group label, its per-copy label and its leader role all take effect without touching any other
module, and the generated rules no longer match the shipped files until they are refreshed."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.judging import judge
from tests.tools import webhook_rules
from webhook.core import operators, verdicts
from webhook.core.groups import GPU_GROUP, membership
from webhook.core.operators import Found, OperatorKind, PodGroup
from webhook.core.settings import default

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = default()
A100 = "NVIDIA-A100-SXM4-80GB"


def _read_trainjob(obj: Mapping[str, Any], _kind: str, _context: operators.Context) -> Iterator[Found]:
    """The made-up kind keeps a coordinator and its workers at ``spec.coordinator`` / ``spec.workers``."""
    spec = operators.mapping(obj.get("spec"))
    for role in ("coordinator", "workers"):
        part = operators.mapping(spec.get(role))
        if "template" in part:
            yield Found(("spec", role, "template"), part["template"], role, operators.count(part.get("replicas")))


MADE_UP = OperatorKind(
    "example.gpu-admission.io/v1", "DemoTrainJob", "demotrainjobs", _read_trainjob,
    group=PodGroup("example.gpu-admission.io/job", "Demo job", "demo"),
    per_copy_labels=frozenset({"example.gpu-admission.io/rank"}),
    leaders=frozenset({"coordinator"}),
    source="made up for this test")


def _pod(args: list[str], gpus: int, command: str = "torchrun") -> dict[str, Any]:
    return {"metadata": {"labels": {"example.gpu-admission.io/job": "demo"}},
            "spec": {"containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                                     "command": [command], "args": args,
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


EXAMPLE = {
    "apiVersion": "example.gpu-admission.io/v1", "kind": "DemoTrainJob", "metadata": {"name": "demo"},
    "spec": {
        "coordinator": {"replicas": 1, "template": _pod(
            ["--nnodes=4", "--nproc-per-node=8", "train.py", "--model_name_or_path", "meta-llama/Llama-3.1-70B"], 8)},
        # the workers run an ssh daemon the coordinator's launcher drives (MPI style): no launch of their own
        "workers": {"replicas": 3, "template": _pod(["-De"], 8, command="/usr/sbin/sshd")},
    },
}


@pytest.fixture
def with_made_up_kind(monkeypatch: pytest.MonkeyPatch) -> operators.Registry:
    registry = operators.REGISTRY.with_kinds(MADE_UP)
    monkeypatch.setattr(operators, "REGISTRY", registry)
    return registry


def test_the_shipped_rules_are_the_generated_ones() -> None:
    """Fails until `make webhook-rules` has written what the descriptor table says."""
    assert webhook_rules.stale(operators.REGISTRY) == []


def test_an_unknown_kind_is_read_by_shape_only_without_its_descriptor() -> None:
    (coordinator, workers) = judge(EXAMPLE, SETTINGS)
    assert {coordinator.template.found, workers.template.found} == {"generic"}


def test_a_made_up_kind_is_one_descriptor(with_made_up_kind: operators.Registry) -> None:
    (coordinator, workers) = judge(EXAMPLE, SETTINGS)
    # read by its reader: its roles, a job of 4 GPU pods
    assert (coordinator.template.role, workers.template.role) == ("coordinator", "workers")
    assert {coordinator.template.found, workers.template.found} == {"kind"}
    assert coordinator.profile.pods == workers.profile.pods == 4
    # the workers inherit the coordinator's model (its leader role) and are sized with it
    assert workers.profile.model == coordinator.profile.model == "meta-llama/Llama-3.1-70B"
    assert workers.decision.tier == coordinator.decision.tier is not None
    # its pods are one group by its label, and the patch keeps the group on one product
    member = membership(_pod([], 8)["metadata"]["labels"], {})
    assert member is not None and (member.source, member.identity) == ("Demo job", "demo/demo")
    assert workers.decision.group is not None and workers.decision.group.label_key == GPU_GROUP
    assert any(op["path"].endswith("/podAffinity") or "podAffinity" in str(op["value"]) for op in workers.patch)


def test_its_per_copy_label_leaves_the_verdict_key(with_made_up_kind: operators.Registry) -> None:
    pods = []
    for rank in ("0", "1"):
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(_pod(["train.py"], 8))}
        pod["metadata"]["labels"]["example.gpu-admission.io/rank"] = rank
        pods.append(pod)
    assert verdicts.key(pods[0]) == verdicts.key(pods[1])


def test_without_its_descriptor_the_per_copy_label_is_content() -> None:
    pods = []
    for rank in ("0", "1"):
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(_pod(["train.py"], 8))}
        pod["metadata"]["labels"]["example.gpu-admission.io/rank"] = rank
        pods.append(pod)
    assert verdicts.key(pods[0]) != verdicts.key(pods[1])


def test_the_shipped_rules_are_stale_until_refreshed(with_made_up_kind: operators.Registry, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert webhook_rules.stale(with_made_up_kind) == list(webhook_rules.FILES)
    # refreshed (on copies): the kind is in both entries of both files, and the table is current again
    copies = []
    for path in webhook_rules.FILES:
        target = tmp_path / path.name.replace(".yaml", f"-{path.parent.name}.yaml")
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
        copies.append(target)
    monkeypatch.setattr(webhook_rules, "FILES", tuple(copies))
    assert webhook_rules.main([]) == 0
    for target in copies:
        text = target.read_text(encoding="utf-8")
        assert text.count('- apiGroups: ["example.gpu-admission.io"]') == 2
        assert text.count("resources: [demotrainjobs]") == 2
    assert webhook_rules.stale(with_made_up_kind) == []


def test_the_check_flag_fails_on_a_stale_file(tmp_path: Path) -> None:
    """The script run as `make webhook-rules` would: --check is 0 on the shipped files."""
    done = subprocess.run([sys.executable, str(ROOT / "tests/tools/webhook_rules.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_layout_it_cannot_find_is_an_error_not_a_silent_pass() -> None:
    with pytest.raises(webhook_rules.Stale, match="validate-operators"):
        webhook_rules.render("webhooks:\n  - name: validate-pods.gpu-admission.io\n", operators.REGISTRY)


def test_every_descriptor_is_complete() -> None:
    """Each kind names its plural as a CRD does (lowercase), its source, and one entry."""
    for k in operators.REGISTRY.kinds:
        assert k.plural == k.plural.lower() and k.plural.endswith("s"), k
        assert k.source, k.kind
        assert "/" in k.api_version, k
    assert operators.REGISTRY.own_entry == {"LeaderWorkerSet"}
    assert operators.REGISTRY.context_only == {"TrainingRuntime", "ClusterTrainingRuntime", "ServingRuntime",
                                               "ClusterServingRuntime"}


def test_a_kind_described_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="DemoTrainJob"):
        operators.REGISTRY.with_kinds(MADE_UP, MADE_UP)
