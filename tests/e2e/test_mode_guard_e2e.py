"""Who may opt a namespace out (issue 25, point 7): the ValidatingAdmissionPolicy of
manifests/base/mode-guard.yaml, as `kubectl kustomize` renders it, evaluated by the real
kube-apiserver.

Users are impersonated by the admin (``kubectl --as --as-group``), so the groups are exactly the ones
the test names, as an authenticator would report them. Both users get RBAC to create, patch and
update namespaces (and namespaces/status) first: the policy, not RBAC, is what refuses.

- alice (group ``devs``, not allowed) may not set, change or remove ``gpu-admission.io/mode``, nor
  create a namespace with it, nor change it through the status subresource; the denial says who may
  and which group to be added to. Every other change of hers to a labelled namespace is admitted.
- bob (group ``gpu-admission:mode-admins``) and the admin (``system:masters``) may.

The apiserver's policy informer picks a new policy and binding up a moment after they are created:
the module waits (server-side dry runs, deadline) until alice's probe is denied by the policy.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Iterator

import pytest

from control_plane import ControlPlane, ManifestTree

pytestmark = pytest.mark.e2e

POLICY = "gpu-admission-mode-guard"
KEY = "gpu-admission.io/mode"
ALICE = ("--as=alice", "--as-group=devs")
BOB = ("--as=bob", "--as-group=gpu-admission:mode-admins")
DENIED = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request"
RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "e2e-namespace-editor"},
     "rules": [{"apiGroups": [""], "resources": ["namespaces", "namespaces/status"],
                "verbs": ["get", "list", "create", "patch", "update"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "e2e-namespace-editor"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-namespace-editor"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
                  {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "gpu-admission:mode-admins"}]},
]
NAMESPACES = ("mg-probe", "mg-plain", "mg-labelled", "mg-status", "mg-created-bob", "mg-created-alice",
              "mg-created-plain")


def label(cp: ControlPlane, who: tuple[str, ...], namespace: str, *labels: str,
          extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return cp.run(*who, "label", "namespace", namespace, *labels, "--overwrite", *extra, check=False)


def mode(cp: ControlPlane, namespace: str) -> str | None:
    return cp.get("namespace", namespace)["metadata"].get("labels", {}).get(KEY)


def wait_until(what: str, probe, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        done = probe()
        if done is True:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:.0f} s: {done}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def guarded(control_plane: ControlPlane, manifest_tree: ManifestTree) -> Iterator[ControlPlane]:
    cp = control_plane
    docs = [d for d in manifest_tree.render("base") if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert sorted(d["kind"] for d in docs) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    cp.apply(RBAC)
    for name in NAMESPACES[:4]:
        cp.namespace(name)
    cp.run("label", "namespace", "mg-labelled", f"{KEY}=audit")
    cp.apply(docs)
    try:
        # the apiserver type-checks the expressions against Namespace and reports it in the status
        def type_checked():
            status = (cp.get("validatingadmissionpolicy", POLICY) or {}).get("status", {})
            if "typeChecking" not in status:
                return f"no status.typeChecking yet: {status}"
            return status["typeChecking"].get("expressionWarnings") or True
        wait_until("the policy's type checking", type_checked)

        # in effect once alice's probe is denied by the policy (RBAC, also eventual, lets her try)
        def in_effect():
            done = label(cp, ALICE, "mg-probe", f"{KEY}=off", extra=("--dry-run=server",))
            return True if done.returncode != 0 and DENIED in done.stderr else (done.returncode, done.stderr)
        wait_until("the policy taking effect", in_effect)
        wait_until("bob's RBAC", lambda: label(cp, BOB, "mg-probe", f"{KEY}=off",
                                               extra=("--dry-run=server",)).returncode == 0)
        yield cp
    finally:
        cp.run("delete", "--ignore-not-found", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in docs + RBAC))
        cp.run("delete", "namespace", "--ignore-not-found", "--wait=false", *NAMESPACES)


def test_a_non_member_may_not_set_the_label_and_is_told_what_to_do(guarded: ControlPlane) -> None:
    cp = guarded
    done = label(cp, ALICE, "mg-plain", f"{KEY}=off")
    assert done.returncode != 0
    assert "is forbidden" in done.stderr, done.stderr  # reason Forbidden: HTTP 403
    assert (f"{DENIED}: namespace mg-plain: alice may not set the label gpu-admission.io/mode=off (it turns "
            "gpu-admission off, to audit or to enforce in a namespace). Only members of the groups system:masters, "
            "gpu-admission:mode-admins may set, change or remove it: ask a cluster administrator to add you to "
            "the group gpu-admission:mode-admins in your authenticator") in done.stderr, done.stderr
    assert mode(cp, "mg-plain") is None
    # nor create a namespace that carries it; without it, she may
    created = cp.run(*ALICE, "create", "-f", "-", check=False, stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mg-created-alice", "labels": {KEY: "audit"}}}))
    assert created.returncode != 0 and "alice may not set the label gpu-admission.io/mode=audit" in created.stderr, \
        created.stderr
    assert cp.run(*ALICE, "create", "namespace", "mg-created-plain", check=False).returncode == 0


def test_a_member_and_the_admin_may_set_change_and_remove_it(guarded: ControlPlane) -> None:
    cp = guarded
    done = label(cp, BOB, "mg-plain", f"{KEY}=off")
    assert done.returncode == 0, done.stderr
    assert mode(cp, "mg-plain") == "off"
    assert label(cp, BOB, "mg-plain", f"{KEY}=enforce").returncode == 0
    assert mode(cp, "mg-plain") == "enforce"
    assert label(cp, (), "mg-plain", f"{KEY}=audit").returncode == 0  # the admin: system:masters
    assert mode(cp, "mg-plain") == "audit"
    assert label(cp, BOB, "mg-plain", f"{KEY}-").returncode == 0
    assert mode(cp, "mg-plain") is None
    created = cp.run(*BOB, "create", "-f", "-", check=False, stdin=json.dumps(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mg-created-bob", "labels": {KEY: "off"}}}))
    assert created.returncode == 0, created.stderr


def test_unrelated_changes_by_a_non_member_are_admitted(guarded: ControlPlane) -> None:
    cp = guarded
    assert mode(cp, "mg-labelled") == "audit"
    done = label(cp, ALICE, "mg-labelled", "team=ml")
    assert done.returncode == 0, done.stderr
    done = cp.run(*ALICE, "annotate", "namespace", "mg-labelled", "owner=alice", check=False)
    assert done.returncode == 0, done.stderr
    # re-stating the same value changes nothing: admitted too
    done = label(cp, ALICE, "mg-labelled", f"{KEY}=audit", "team=ml2")
    assert done.returncode == 0, done.stderr
    labels = cp.get("namespace", "mg-labelled")["metadata"]["labels"]
    assert (labels[KEY], labels["team"]) == ("audit", "ml2")


def test_a_non_member_may_not_change_or_remove_it(guarded: ControlPlane) -> None:
    cp = guarded
    changed = label(cp, ALICE, "mg-labelled", f"{KEY}=off")
    assert changed.returncode != 0
    assert "alice may not change the label gpu-admission.io/mode from audit to off" in changed.stderr, changed.stderr
    removed = label(cp, ALICE, "mg-labelled", f"{KEY}-")
    assert removed.returncode != 0
    assert f"{DENIED}: namespace mg-labelled: alice may not remove the label gpu-admission.io/mode=audit " \
        in removed.stderr, removed.stderr
    assert mode(cp, "mg-labelled") == "audit"


def test_the_status_subresource_is_no_way_around(guarded: ControlPlane) -> None:
    """A namespace's status update keeps its spec, not its metadata: labels change through it too."""
    cp = guarded
    patch = json.dumps({"metadata": {"labels": {KEY: "off"}}})
    done = cp.run(*ALICE, "patch", "namespace", "mg-status", "--subresource=status", "--type=merge", "-p", patch,
                  check=False)
    assert done.returncode != 0 and DENIED in done.stderr, done.stderr
    assert mode(cp, "mg-status") is None
    done = cp.run(*BOB, "patch", "namespace", "mg-status", "--subresource=status", "--type=merge", "-p", patch,
                  check=False)
    assert done.returncode == 0, done.stderr
    assert mode(cp, "mg-status") == "off"
