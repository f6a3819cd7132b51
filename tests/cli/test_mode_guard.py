"""Who may opt a namespace out (issue 25, point 7): the ValidatingAdmissionPolicy and its binding,
as manifests/base/mode-guard.yaml ships them and as the chart renders them (modeGuard).

- Default values render the very objects `kubectl kustomize manifests/base` renders, with the same
  groups (system:masters, gpu-admission:mode-admins), on by default in every install.
- Other groups: `--set modeGuard.groups=...` renders what the kustomize patch that docs/install.md
  shows renders; modeGuard.enabled=false what its delete patches leave: no policy, no binding.
- The values schema refuses a group the CEL string literal could not hold, and an empty list.

tests/e2e/test_mode_guard_e2e.py runs the policy in a real kube-apiserver.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from test_chart import CHART, RELEASE, differences, helm, normalized, run_helm, template  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "manifests" / "base" / "mode-guard.yaml"
NAME = "gpu-admission-mode-guard"
KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
DEFAULT_GROUPS = ["system:masters", "gpu-admission:mode-admins"]
GROUPS_PATCH = """  - target: {{kind: ValidatingAdmissionPolicy, name: gpu-admission-mode-guard}}
    patch: |-
      - op: replace
        path: /spec/variables/0/expression
        value: "{expression}"
"""
"""The kustomize patch docs/install.md shows for other groups (kept in step by a test below)."""
DELETE_PATCHES = """  - patch: |-
      $patch: delete
      apiVersion: admissionregistration.k8s.io/v1
      kind: ValidatingAdmissionPolicyBinding
      metadata:
        name: gpu-admission-mode-guard
  - patch: |-
      $patch: delete
      apiVersion: admissionregistration.k8s.io/v1
      kind: ValidatingAdmissionPolicy
      metadata:
        name: gpu-admission-mode-guard
"""


def guard(docs: list[dict]) -> dict[str, dict]:
    found = {d["kind"]: normalized(d) for d in docs if d["kind"] in KINDS}
    assert all(d["metadata"]["name"] == NAME for d in found.values())
    return found


def groups_of(policy: dict) -> list[str]:
    """spec.variables allowedGroups, a CEL list of string literals, read back as a list."""
    (variable,) = [v for v in policy["spec"]["variables"] if v["name"] == "allowedGroups"]
    assert policy["spec"]["variables"][0] is variable  # the path the kustomize patch replaces
    value = ast.literal_eval(variable["expression"])
    assert isinstance(value, list) and all(isinstance(g, str) for g in value), variable
    return value


def overlay(manifest_tree, name: str, patches: str) -> str:
    path = manifest_tree.root / "overlays" / f"_test-{name}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                             "resources:\n  - ../../base\npatches:\n" + patches)
    return f"overlays/_test-{name}"


def test_the_shipped_file_guards_the_label_with_the_default_groups() -> None:
    policy, binding = yaml.safe_load_all(MANIFEST.read_text())
    assert (policy["kind"], binding["kind"]) == KINDS
    assert groups_of(policy) == DEFAULT_GROUPS
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["namespaces", "namespaces/status", "namespaces/finalize"]}]
    (validation,) = policy["spec"]["validations"]
    # an unchanged label is admitted before anything else is looked at
    assert validation["expression"] == "variables.newMode == variables.oldMode || variables.member"
    assert validation["reason"] == "Forbidden" and "\n" not in validation["message"]
    assert binding["spec"] == {"policyName": NAME, "validationActions": ["Deny"]}
    assert "mode-guard.yaml" in yaml.safe_load((ROOT / "manifests/base/kustomization.yaml").read_text())["resources"]


def test_every_install_ships_it(manifest_tree) -> None:
    for rel in (".", "overlays/cert-manager-audit", "overlays/generated-certs", "overlays/generated-certs-audit"):
        found = guard(manifest_tree.render(rel))
        assert sorted(found) == list(KINDS), rel
        assert groups_of(found["ValidatingAdmissionPolicy"]) == DEFAULT_GROUPS, rel


def test_the_chart_renders_the_same_policy_and_binding_with_the_same_groups(helm: Path, manifest_tree) -> None:
    chart, kustomize = guard(template(helm)), guard(manifest_tree.render("base"))
    assert sorted(chart) == sorted(kustomize) == list(KINDS)
    assert groups_of(chart["ValidatingAdmissionPolicy"]) == groups_of(kustomize["ValidatingAdmissionPolicy"]) \
        == DEFAULT_GROUPS
    for kind in KINDS:
        assert not differences(chart[kind], kustomize[kind]), (kind, differences(chart[kind], kustomize[kind]))


def test_other_groups_render_what_the_documented_kustomize_patch_renders(helm: Path, manifest_tree) -> None:
    groups = ["system:masters", "platform-admins", "system:serviceaccounts:argocd"]
    expression = "[" + ", ".join(f"'{g}'" for g in groups) + "]"
    chart = guard(template(helm, "--set", "modeGuard.groups={" + ",".join(groups) + "}"))
    kustomize = guard(manifest_tree.render(overlay(manifest_tree, "mode-guard-groups",
                                                   GROUPS_PATCH.format(expression=expression))))
    assert groups_of(chart["ValidatingAdmissionPolicy"]) == groups_of(kustomize["ValidatingAdmissionPolicy"]) == groups
    for kind in KINDS:
        assert not differences(chart[kind], kustomize[kind]), (kind, differences(chart[kind], kustomize[kind]))
    # and the patch is the one the install page shows
    install = (ROOT / "docs" / "install.md").read_text()
    assert GROUPS_PATCH.format(expression="['system:masters', 'platform-admins']") in install


def test_disabled_renders_what_the_documented_delete_patches_leave(helm: Path, manifest_tree) -> None:
    assert guard(template(helm, "--set", "modeGuard.enabled=false")) == {}
    assert guard(manifest_tree.render(overlay(manifest_tree, "mode-guard-off", DELETE_PATCHES))) == {}
    assert DELETE_PATCHES in (ROOT / "docs" / "install.md").read_text()


@pytest.mark.parametrize("values, message", [
    (["--set", "modeGuard.groups[0]=it's"], "modeGuard/groups/0"),
    (["--set-json", "modeGuard.groups=[]"], "modeGuard/groups"),
    (["--set-json", 'modeGuard.groups=["a\\\\b"]'], "modeGuard/groups/0"),
    (["--set", "modeGuard.enabled=yes"], "modeGuard/enabled"),
])
def test_the_values_schema_refuses_groups_cel_cannot_hold(helm: Path, values: list[str], message: str) -> None:
    done = run_helm(helm, "template", RELEASE, str(CHART), *values, check=False)
    assert done.returncode != 0, done.stdout[:500]
    assert message in done.stderr, done.stderr
