"""charts/gpu-admission: the Helm chart renders the same objects as the kustomize install.

helm is built from its Go module by tests/tools/build-helm.sh (cached like the control plane); if it
cannot be built here every test skips with the script's own error. `helm template` with each set of
values is compared field by field with `kubectl kustomize` of the matching kustomization (rendered by
the kubectl the control-plane build makes, the `manifest_tree` fixture of conftest.py):

    default values                        manifests/ (= overlays/cert-manager)
    mode=audit                            overlays/cert-manager-audit
    failOpen=true                         base + components/cert-manager + components/fail-open
    dra.enabled=true                      base + components/cert-manager + components/dra
    extender.enabled=true                 base + components/cert-manager + components/extender
    reporter.enabled=true                 base + components/cert-manager + components/reporter
    certificates.certManager=false        overlays/generated-certs, less its Secret (a Helm user
      + caBundle=<the overlay's CA>       provides the Secret; the chart takes its name)

Same kinds, names, namespaces, and every field (spec, webhooks, rules, data, annotations, labels)
equal, except the labels in IGNORED_LABELS: Helm's own (helm.sh/chart) and
app.kubernetes.io/managed-by, which says "kustomize" in one and "Helm" in the other. Every object
the chart renders, with each set of values, passes kubernetes-validate strict (the cert-manager
kinds aside: their schema is not Kubernetes').

The knobs with no kustomize counterpart (tolerations, nodeSelector, affinity, imagePullSecrets,
extraArgs, timeoutSeconds) are table-driven: each reaches its field and changes nothing else against
the render without it; the PodDisruptionBudget is rendered only with more than one replica.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from webhook.core.settings import embedded_policy_text

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gpu-admission"
BUILD_HELM = ROOT / "tests" / "tools" / "build-helm.sh"
NAMESPACE = "gpu-admission"
RELEASE = "gpu-admission"
IGNORED_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")
"""Labels each tool sets for itself: the only differences the comparison allows."""
CRD_GROUPS = ("cert-manager.io/",)
BUILD_TIMEOUT = 1800
"""Seconds: building helm from source on a 2-core machine with an empty Go cache."""


@pytest.fixture(scope="session")
def helm() -> Path:
    try:
        done = subprocess.run(["bash", str(BUILD_HELM)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.skip(f"tests/tools/build-helm.sh did not finish within {BUILD_TIMEOUT} s")
    if done.returncode != 0:
        pytest.skip(f"helm cannot be built here: tests/tools/build-helm.sh exited {done.returncode}: "
                    f"{done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def run_helm(helm: Path, *args: str, check: bool = True, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
    """helm with its own (empty) config, cache and data directories, never the user's."""
    home = Path("/tmp/gpu-admission-helm")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data"),
           "KUBECONFIG": str(kubeconfig) if kubeconfig else str(home / "no-cluster")}
    done = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=180, env=env)
    if check and done.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr}")
    return done


def template(helm: Path, *args: str, namespace: str = NAMESPACE) -> list[dict]:
    done = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", namespace, *args)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def key(doc: dict) -> tuple[str, str, str, str]:
    meta = doc["metadata"]
    return doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"]


def normalized(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    labels = doc["metadata"].get("labels", {})
    for label in IGNORED_LABELS:
        labels.pop(label, None)
    if not labels:
        doc["metadata"].pop("labels", None)
    return doc


def differences(a, b, path: str = "") -> list[str]:
    """Every path where a (helm) and b (kustomize) differ, field by field."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}.{k}: only in kustomize")
            elif k not in b:
                out.append(f"{path}.{k}: only in helm")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items in helm, {len(b)} in kustomize"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{path}: helm {a!r} != kustomize {b!r}"]


def object_differences(chart: list[dict], kustomize: list[dict]) -> list[str]:
    helm_objects = {key(d): normalized(d) for d in chart}
    kustomize_objects = {key(d): normalized(d) for d in kustomize}
    assert len(helm_objects) == len(chart) and len(kustomize_objects) == len(kustomize), "duplicate objects"
    assert sorted(helm_objects) == sorted(kustomize_objects)
    return [f"{k[1]} {k[3]}{d}" for k in sorted(helm_objects)
            for d in differences(helm_objects[k], kustomize_objects[k])]


def assert_same_objects(chart: list[dict], kustomize: list[dict]) -> None:
    found = object_differences(chart, kustomize)
    assert not found, "\n".join(found)


def webhook_entries(docs: list[dict]) -> list[dict]:
    return [w for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]]


# --- the chart itself ----------------------------------------------------------------------------

def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"], chart["version"], chart["appVersion"]) == \
        ("v2", "gpu-admission", "0.1.0", "0.1.0")


def test_the_chart_policy_is_the_embedded_default_byte_for_byte() -> None:
    assert (CHART / "files/policy.yaml").read_text() == embedded_policy_text()


def test_helm_lint(helm: Path) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout
    for values in (["--set", "mode=audit"], ["--set", "failOpen=true", "--set", "dra.enabled=true"],
                   ["--set", "certificates.certManager=false", "--set", "certificates.caBundle=Q0E="],
                   ["--set", "extender.enabled=true", "--set", "extender.tokenSecret=gpu-admission-extender-token"]):
        run_helm(helm, "lint", "--strict", str(CHART), *values)


@pytest.mark.parametrize("values, message", [
    (["--set", "mode=enforcing"], "mode"),
    (["--set", "replicas=0"], "replicas"),
    (["--set", "failOpen=yes"], "failOpen"),
    (["--set", "unknownValue=1"], "unknownValue"),
    (["--set", "certificates.certManager=false"], "caBundle"),
    (["--set", "extender.enabled=true", "--set", "extender.clientCAConfigMap="], "never served unauthenticated"),
    (["--set", "extender.enabled=yes"], "enabled"),
    (["--set", "timeoutSeconds=31"], "timeoutSeconds"),  # Kubernetes' own limit
    (["--set", "timeoutSeconds=0"], "timeoutSeconds"),
    (["--set", "extraArgs=--log-level"], "extraArgs"),  # a list, not one string
    (["--set", "imagePullSecrets[0].secret=my-registry"], "imagePullSecrets"),
    (["--set", "nodeSelector=gpu"], "nodeSelector"),
])
def test_the_values_schema_refuses_mistakes(helm: Path, values: list[str], message: str) -> None:
    done = run_helm(helm, "template", RELEASE, str(CHART), *values, check=False)
    assert done.returncode != 0, done.stdout[:500]
    assert message in done.stderr, done.stderr


# --- the same objects as kustomize ----------------------------------------------------------------

def test_default_values_render_what_kustomize_renders(helm: Path, manifest_tree) -> None:
    assert_same_objects(template(helm), manifest_tree.render("."))


def test_the_comparison_sees_every_changed_field(helm: Path, manifest_tree) -> None:
    """The comparison is not vacuous: each changed value shows up, at its path, and nothing else."""
    found = object_differences(template(helm, "--set", "replicas=3", "--set", "resources.limits.memory=1Gi",
                                        "--set", "policy=mode: audit"), manifest_tree.render("."))
    assert sorted(found) == ["ConfigMap gpu-admission-policy.data.policy.yaml: helm 'mode: audit' != kustomize "
                     + repr(embedded_policy_text()),
                     "Deployment gpu-admission.spec.replicas: helm 3 != kustomize 2",
                     "Deployment gpu-admission.spec.template.spec.containers[0].resources.limits.memory: "
                     "helm '1Gi' != kustomize '384Mi'"]
    found = object_differences(template(helm, "--set", "mode=audit"), manifest_tree.render("."))
    assert len(found) == 24 and all("namespaceSelector.matchExpressions[1]" in f for f in found), found


def test_audit_mode_renders_the_cert_manager_audit_overlay(helm: Path, manifest_tree) -> None:
    assert_same_objects(template(helm, "--set", "mode=audit"), manifest_tree.render("overlays/cert-manager-audit"))


def test_fail_open_renders_the_fail_open_component(helm: Path, manifest_tree) -> None:
    rel = manifest_tree.with_components("components/cert-manager", "components/fail-open")
    assert_same_objects(template(helm, "--set", "failOpen=true"), manifest_tree.render(rel))


def test_dra_renders_the_dra_component(helm: Path, manifest_tree) -> None:
    rel = manifest_tree.with_components("components/cert-manager", "components/dra")
    assert_same_objects(template(helm, "--set", "dra.enabled=true"), manifest_tree.render(rel))


def test_the_extender_renders_the_extender_component(helm: Path, manifest_tree) -> None:
    rel = manifest_tree.with_components("components/cert-manager", "components/extender")
    assert_same_objects(template(helm, "--set", "extender.enabled=true"), manifest_tree.render(rel))


def test_the_reporter_renders_the_reporter_component(helm: Path, manifest_tree) -> None:
    rel = manifest_tree.with_components("components/cert-manager", "components/reporter")
    assert_same_objects(template(helm, "--set", "reporter.enabled=true"), manifest_tree.render(rel))


def test_provided_certificates_render_the_generated_certs_overlay(helm: Path, manifest_tree) -> None:
    kustomize = manifest_tree.render("overlays/generated-certs")
    secret = [d for d in kustomize if d["kind"] == "Secret"]
    assert len(secret) == 1 and secret[0]["metadata"]["name"] == "gpu-admission-tls"
    # kustomize wraps the base64 at 76 columns (newlines inside the value); a user passes
    # `base64 -w0 ca.crt`. Both are compared decoded: the same CA bytes.
    ca = base64.b64decode(secret[0]["data"]["ca.crt"])
    assert ca == (manifest_tree.certs_dir / "ca.crt").read_bytes()
    chart = template(helm, "--set", "certificates.certManager=false",
                     "--set", f"certificates.caBundle={base64.b64encode(ca).decode()}")
    assert not [d for d in chart if d["kind"] == "Secret" or d["apiVersion"].startswith(CRD_GROUPS)]
    kustomize = [d for d in kustomize if d["kind"] != "Secret"]
    for w in webhook_entries(chart) + webhook_entries(kustomize):
        w["clientConfig"]["caBundle"] = base64.b64decode(w["clientConfig"]["caBundle"])
    assert {w["clientConfig"]["caBundle"] for w in webhook_entries(chart)} == {ca}
    assert_same_objects(chart, kustomize)


# --- values beyond the kustomize variants ---------------------------------------------------------

VARIANTS = {
    "defaults": [],
    "audit": ["--set", "mode=audit"],
    "fail-open+dra": ["--set", "failOpen=true", "--set", "dra.enabled=true"],
    "audit+dra": ["--set", "mode=audit", "--set", "dra.enabled=true"],
    "provided-certs": ["--set", "certificates.certManager=false", "--set", "certificates.caBundle=Q0E="],
    "extender+token": ["--set", "extender.enabled=true", "--set", "extender.tokenSecret=gpu-admission-extender-token"],
    "extender-token-only": ["--set", "extender.enabled=true", "--set", "extender.clientCAConfigMap=",
                            "--set", "extender.tokenSecret=gpu-admission-extender-token"],
    "tuned": ["--set", "replicas=3", "--set", "image.repository=registry.example/gpu-admission",
              "--set", "image.tag=0.1.1", "--set", "resources.limits.memory=512Mi",
              "--set", "namespaceSelector.excludedNamespaces={kube-system,monitoring}",
              "--set", "namespaceSelector.matchExpressions[0].key=team",
              "--set", "namespaceSelector.matchExpressions[0].operator=Exists",
              "--set", "dra.enabled=true", "--set", "dra.deviceClassName=gpu.example.com"],
    "single-replica": ["--set", "replicas=1"],
    "scheduling-and-args": [
        "--set-json", 'tolerations=[{"key": "node-role.example.com/system", "operator": "Exists", "effect": "NoSchedule"}]',
        "--set-json", 'nodeSelector={"node-role.example.com/system": "true"}',
        "--set-json", 'affinity.nodeAffinity={"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": '
                      '[{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}',
        "--set", "imagePullSecrets[0].name=my-registry",
        "--set", "extraArgs={--log-level,debug,--max-queue-age,0.5}",
        "--set", "timeoutSeconds=10", "--set", "dra.enabled=true"],
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_validates_strictly(helm: Path, variant: str) -> None:
    version = kubernetes_validate.latest_version()
    docs = template(helm, *VARIANTS[variant])
    assert docs
    for doc in docs:
        if not doc["apiVersion"].startswith(CRD_GROUPS):
            kubernetes_validate.validate(doc, version, strict=True)


def test_values_reach_the_objects(helm: Path) -> None:
    docs = template(helm, *VARIANTS["tuned"])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/gpu-admission:0.1.1"
    assert container["resources"]["limits"] == {"cpu": "2", "memory": "512Mi"}
    entries = webhook_entries(docs)
    assert len(entries) == 11 + 1 + 1 + 2  # the 11, the scale entry, the mutating one, DRA
    # the policy ConfigMap's entry selects the release namespace only, whatever the selector values say
    (policy,) = [w for w in entries if w["name"] == "validate-policy.gpu-admission.io"]
    assert policy["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}]}
    assert policy["failurePolicy"] == "Ignore"
    for w in entries:
        if w is policy:
            continue
        expressions = w["namespaceSelector"]["matchExpressions"]
        assert expressions[0] == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": ["kube-system", "monitoring", NAMESPACE]}
        assert expressions[-1] == {"key": "team", "operator": "Exists"}
    dra = [w for w in entries if "resourceclaims" in w["name"]]
    assert all("'gpu.example.com'" in w["matchConditions"][0]["expression"] for w in dra)
    assert not any("'gpu.nvidia.com'" in w["matchConditions"][0]["expression"] for w in dra)


@pytest.mark.parametrize("variant, args, sources", [
    pytest.param("defaults", [], [], id="off-by-default"),
    pytest.param("extender+token", ["--extender-bind", "0.0.0.0:8444",
                                    "--extender-client-ca", "/etc/gpu-admission/extender/client-ca.crt",
                                    "--extender-token-file", "/etc/gpu-admission/extender/token"],
                 [{"configMap": {"name": "gpu-admission-extender-client-ca",
                                 "items": [{"key": "ca.crt", "path": "extender/client-ca.crt"}]}},
                  {"secret": {"name": "gpu-admission-extender-token",
                              "items": [{"key": "token", "path": "extender/token"}]}}], id="client-ca-and-token"),
    pytest.param("extender-token-only", ["--extender-bind", "0.0.0.0:8444",
                                         "--extender-token-file", "/etc/gpu-admission/extender/token"],
                 [{"secret": {"name": "gpu-admission-extender-token",
                              "items": [{"key": "token", "path": "extender/token"}]}}], id="token-only"),
])
def test_the_extender_values_reach_the_deployment(helm: Path, variant: str, args: list[str],
                                                  sources: list[dict]) -> None:
    """Off unless enabled (no flag, port or mount); enabled, each way to authenticate is mounted from
    its ConfigMap or Secret and named in the flags, and port 8444 opens in the Service and the
    NetworkPolicy."""
    from webhook.cli.main import build_parser

    docs = template(helm, *VARIANTS[variant])
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][container["args"].index("8") + 1:] == args
    build_parser().parse_args(container["args"])  # flags serve knows
    assert pod["volumes"][0]["projected"]["sources"][2:] == sources
    service = next(d for d in docs if d["kind"] == "Service")["spec"]["ports"]
    ingress = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]["ingress"][0]["ports"]
    enabled = bool(args)
    assert [p["containerPort"] for p in container["ports"]] == [8443, 8081] + [8444] * enabled
    assert [p["port"] for p in service] == [443, 8081] + [8444] * enabled
    assert [p["port"] for p in ingress] == [8443] + [8444] * enabled


def pod_of(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]


SPREAD = yaml.safe_load((CHART / "values.yaml").read_text())["affinity"]
"""The default affinity: the replicas spread over nodes (manifests/base/deployment.yaml's)."""
POD = r"Deployment gpu-admission\.spec\.template\.spec"
ARCH = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}
SERVE_FLAGS = 15
"""The chart's own `gpu-admission serve` arguments (serve, then --config ... --threads 8: seven flags and values)."""


@pytest.mark.parametrize("base, args, where, rendered, expected", [
    pytest.param([], ["--set-json", 'tolerations=[{"key": "node-role.example.com/system", "operator": "Exists", '
                                    '"effect": "NoSchedule"}]'],
                 [rf"{POD}\.tolerations: only in helm"], lambda docs: pod_of(docs)["tolerations"],
                 [{"key": "node-role.example.com/system", "operator": "Exists", "effect": "NoSchedule"}],
                 id="tolerations"),
    pytest.param([], ["--set-json", 'nodeSelector={"node-role.example.com/system": "true"}'],
                 [rf"{POD}\.nodeSelector: only in helm"], lambda docs: pod_of(docs)["nodeSelector"],
                 {"node-role.example.com/system": "true"}, id="nodeSelector"),
    pytest.param([], ["--set-json", f"affinity.nodeAffinity={json.dumps(ARCH)}"],
                 [rf"{POD}\.affinity\.nodeAffinity: only in helm"], lambda docs: pod_of(docs)["affinity"],
                 {**SPREAD, "nodeAffinity": ARCH}, id="affinity-merges-into-the-spread"),
    pytest.param([], ["--set", "affinity.podAntiAffinity=null"], [rf"{POD}\.affinity: only in kustomize"],
                 lambda docs: "affinity" in pod_of(docs), False, id="affinity-spread-removed"),
    pytest.param([], ["--set", "imagePullSecrets[0].name=my-registry"],
                 [rf"{POD}\.imagePullSecrets: only in helm"], lambda docs: pod_of(docs)["imagePullSecrets"],
                 [{"name": "my-registry"}], id="imagePullSecrets"),
    pytest.param([], ["--set", "extraArgs={--log-level,debug,--max-queue-age,0.5}"],
                 [rf"{POD}\.containers\[0\]\.args: {SERVE_FLAGS + 4} items in helm, {SERVE_FLAGS} in kustomize"],
                 lambda docs: pod_of(docs)["containers"][0]["args"][SERVE_FLAGS:],
                 ["--log-level", "debug", "--max-queue-age", "0.5"], id="extraArgs"),
    pytest.param(["--set", "extender.enabled=true"], ["--set", "extraArgs={--log-level,debug}"],
                 [rf"{POD}\.containers\[0\]\.args: {SERVE_FLAGS + 6} items in helm, {SERVE_FLAGS + 4} in kustomize"],
                 lambda docs: pod_of(docs)["containers"][0]["args"][SERVE_FLAGS:],
                 ["--extender-bind", "0.0.0.0:8444", "--extender-client-ca", "/etc/gpu-admission/extender/client-ca.crt",
                  "--log-level", "debug"], id="extraArgs-after-the-extender-flags"),
    pytest.param(["--set", "dra.enabled=true"], ["--set", "timeoutSeconds=10"],
                 [r"(Mutating|Validating)WebhookConfiguration gpu-admission\.webhooks\[\d+\]\.timeoutSeconds: "
                  r"helm 10 != kustomize 3"],
                 lambda docs: [w["timeoutSeconds"] for w in webhook_entries(docs)], [10] * (11 + 1 + 1 + 2),
                 id="timeoutSeconds-every-entry-dra-too"),
])
def test_each_knob_renders_where_expected(helm: Path, base: list[str], args: list[str], where: list[str],
                                          rendered, expected) -> None:
    """Each knob reaches its field, and changes nothing else: compared with the render without it (the
    defaults, or the base values named), every difference is at the knob's own path."""
    docs = template(helm, *base, *args)
    assert rendered(docs) == expected
    found = object_differences(docs, template(helm, *base))
    assert found and all(any(re.fullmatch(w, f) for w in where) for f in found), found


def test_the_defaults_of_the_knobs_render_nothing_new(helm: Path) -> None:
    """Empty tolerations, nodeSelector, imagePullSecrets and extraArgs add no field; timeoutSeconds is
    3 as manifests/ has it (test_default_values_render_what_kustomize_renders compares the rest)."""
    docs = template(helm)
    pod = pod_of(docs)
    assert not {"tolerations", "nodeSelector", "imagePullSecrets"} & set(pod)
    assert len(pod["containers"][0]["args"]) == SERVE_FLAGS and pod["affinity"] == SPREAD
    assert {w["timeoutSeconds"] for w in webhook_entries(docs)} == {3}


def test_the_service_monitor_is_the_monitoring_components(helm: Path) -> None:
    """metrics.serviceMonitor.enabled renders manifests/components/monitoring's ServiceMonitor (with
    Helm's labels and any extra ones, e.g. kube-prometheus-stack's release label); off by default."""
    assert not [d for d in template(helm) if d["kind"] == "ServiceMonitor"]
    (chart,) = [d for d in template(helm, "--set", "metrics.serviceMonitor.enabled=true",
                                    "--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack")
                if d["kind"] == "ServiceMonitor"]
    component = yaml.safe_load((ROOT / "manifests/components/monitoring/servicemonitor.yaml").read_text())
    assert chart["spec"] == component["spec"]
    assert component["metadata"]["labels"].items() <= chart["metadata"]["labels"].items()
    assert chart["metadata"]["labels"]["release"] == "kube-prometheus-stack"


@pytest.mark.parametrize("namespaces, rule", [
    pytest.param([], None, id="none-only-the-kubelet"),
    pytest.param(["--set", "metrics.monitoringNamespaces={observability,prometheus}"],
                 [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}},
                  {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prometheus"}}}], id="two"),
])
def test_the_monitoring_namespaces_reach_the_probe_port(helm: Path, namespaces: list[str], rule: Any) -> None:
    args = namespaces or ["--set-json", "metrics.monitoringNamespaces=[]"]
    ingress = next(d for d in template(helm, *args) if d["kind"] == "NetworkPolicy")["spec"]["ingress"]
    probe_rules = [r for r in ingress if {"protocol": "TCP", "port": 8081} in r["ports"]]
    assert probe_rules == ([] if rule is None else [{"from": rule, "ports": [{"protocol": "TCP", "port": 8081}]}])


@pytest.mark.parametrize("replicas, pdb", [(1, False), (2, True), (3, True)])
def test_the_pdb_is_rendered_only_with_more_than_one_replica(helm: Path, manifest_tree, replicas: int,
                                                             pdb: bool) -> None:
    """With one replica, minAvailable 1 would block every node drain: no PodDisruptionBudget then;
    otherwise the one of manifests/, and nothing else changes but the replica count."""
    docs = template(helm, "--set", f"replicas={replicas}")
    budgets = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert len(budgets) == pdb
    kustomize = manifest_tree.render(".")
    if not pdb:
        kustomize = [d for d in kustomize if d["kind"] != "PodDisruptionBudget"]
    found = object_differences(docs, kustomize)
    assert found == ([] if replicas == 2 else [f"Deployment gpu-admission.spec.replicas: helm {replicas} != kustomize 2"])


def test_audit_mode_also_audits_dra_claims(helm: Path) -> None:
    """components/dra + components/audit leave the DRA entries enforcing unlabelled namespaces (the
    audit component patches the entries by name and does not know them); the chart's audit mode
    audits them like every other enforcing entry: only mode=enforce namespaces are sent."""
    for w in webhook_entries(template(helm, *VARIANTS["audit+dra"])):
        if w["name"].startswith(("validate-", "mutate-")) and w["name"] != "validate-policy.gpu-admission.io":
            assert w["namespaceSelector"]["matchExpressions"][1] == \
                {"key": "gpu-admission.io/mode", "operator": "In", "values": ["enforce"]}, w["name"]


def test_fail_open_also_covers_dra_claims(helm: Path) -> None:
    assert {w["failurePolicy"] for w in webhook_entries(template(helm, *VARIANTS["fail-open+dra"]))} == {"Ignore"}


def test_a_policy_file_replaces_the_default(helm: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\nmode: audit\n# a comment\n")
    docs = template(helm, "--set-file", f"policy={policy}")
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    assert configmap["data"] == {"policy.yaml": policy.read_text()}


def test_another_release_namespace_is_used_everywhere(helm: Path) -> None:
    docs = template(helm, namespace="gpu-admission-system")
    for doc in docs:
        assert doc["metadata"].get("namespace", "gpu-admission-system") == "gpu-admission-system", key(doc)
    assert next(d for d in docs if d["kind"] == "Namespace")["metadata"]["name"] == "gpu-admission-system"
    for w in webhook_entries(docs):
        assert w["clientConfig"]["service"]["namespace"] == "gpu-admission-system"
        own = w["name"] == "validate-policy.gpu-admission.io"  # the release namespace's policy ConfigMap only
        assert w["namespaceSelector"]["matchExpressions"][0]["values"] == (
            ["gpu-admission-system"] if own else ["kube-system", "gpu-admission-system"])
    serving = next(d for d in docs if d["kind"] == "Certificate" and d["metadata"]["name"] == "gpu-admission-serving")
    assert serving["spec"]["dnsNames"] == ["gpu-admission.gpu-admission-system.svc",
                                           "gpu-admission.gpu-admission-system.svc.cluster.local"]
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == "gpu-admission-system"
    assert not [d for d in template(helm, "--set", "namespace.create=false") if d["kind"] == "Namespace"]


def test_the_ca_bundle_is_the_provided_one(helm: Path) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    docs = template(helm, "--set", "certificates.certManager=false", "--set", f"certificates.caBundle={ca}",
                    "--set", "certificates.secretName=my-tls")
    assert {w["clientConfig"]["caBundle"] for w in webhook_entries(docs)} == {ca}
    assert not any("annotations" in d["metadata"] for d in docs if d["kind"].endswith("WebhookConfiguration"))
    volume = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["volumes"][0]
    assert volume["projected"]["sources"][1]["secret"]["name"] == "my-tls"


# --- helm install and upgrade into a real kube-apiserver ------------------------------------------

POST_RENDERER = """#!{python}
# helm --post-renderer: the webhook configurations call the server on loopback (no cluster network
# here), as tests/e2e/control_plane.py local_client_config does for the kustomize install.
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for doc in docs:
    if doc["kind"].endswith("WebhookConfiguration"):
        for w in doc["webhooks"]:
            service = w["clientConfig"].pop("service")
            assert service["port"] == 443, service
            w["clientConfig"]["url"] = "https://127.0.0.1:{port}" + service["path"]
yaml.safe_dump_all(docs, sys.stdout)
"""


@pytest.mark.e2e
def test_helm_install_then_upgrade_with_the_webhook_answering(helm: Path, control_plane_bin: Path, manifest_tree,
                                                              tmp_path: Path) -> None:
    """`helm install` then `helm upgrade` (to mode=audit) into a real kube-apiserver, with provided
    certificates; the server runs the chart's Deployment command and policy on loopback (kwok has no
    container runtime), and the only change helm's output gets is the webhooks' URL (a post-renderer).
    After each, a GPU pod's server-side dry run is answered by the server itself; `helm uninstall`
    leaves no webhook configuration behind."""
    from control_plane import running_control_plane, running_webhook, wait_until_served

    ca = base64.b64encode((manifest_tree.certs_dir / "ca.crt").read_bytes()).decode()
    values = ["--set", "certificates.certManager=false", "--set", f"certificates.caBundle={ca}"]
    docs = template(helm, *values)
    with running_webhook(docs, manifest_tree.certs_dir, tmp_path / "webhook") as hook, \
            running_control_plane(control_plane_bin, tmp_path / "cp") as cp:
        post = tmp_path / "loopback-post-renderer"
        post.write_text(POST_RENDERER.format(python=sys.executable, port=hook.port))
        post.chmod(0o755)
        common = [RELEASE, str(CHART), "--namespace", NAMESPACE, "--post-renderer", str(post), *values]

        # the chart renders the release namespace itself (namespace.create, as manifests/ does), and
        # helm stores the release in it before creating anything: created first, marked as the
        # release's so helm adopts it (and sets its labels), as docs/install.md's Helm section says
        done = run_helm(helm, "install", *common, kubeconfig=cp.kubeconfig, check=False)
        assert done.returncode != 0 and f'namespaces "{NAMESPACE}" not found' in done.stderr, done.stderr
        cp.apply([{"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": NAMESPACE, "labels": {"app.kubernetes.io/managed-by": "Helm"},
                                "annotations": {"meta.helm.sh/release-name": RELEASE,
                                                "meta.helm.sh/release-namespace": NAMESPACE}}}])
        run_helm(helm, "install", *common, kubeconfig=cp.kubeconfig)
        wait_until_served(cp, hook)
        namespace = cp.get("namespace", NAMESPACE)
        assert namespace["metadata"]["labels"]["gpu-admission.io/mode"] == "off"
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        stored = cp.get("validatingwebhookconfiguration", "gpu-admission")
        assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert stored["webhooks"][0]["namespaceSelector"]["matchExpressions"][1]["operator"] == "NotIn"
        for kind, name in (("deployment", "gpu-admission"), ("configmap", "gpu-admission-policy"),
                           ("resourcequota", "gpu-admission-critical-pods"), ("networkpolicy", "gpu-admission")):
            assert cp.get(kind, name, NAMESPACE), (kind, name)

        run_helm(helm, "upgrade", *common, "--set", "mode=audit", "--set", "replicas=3", kubeconfig=cp.kubeconfig)
        stored = cp.get("validatingwebhookconfiguration", "gpu-admission")
        assert stored["webhooks"][0]["namespaceSelector"]["matchExpressions"][1] == \
            {"key": "gpu-admission.io/mode", "operator": "In", "values": ["enforce"]}
        assert cp.get("deployment", "gpu-admission", NAMESPACE)["spec"]["replicas"] == 3
        cp.namespace("chart-enforce", {"gpu-admission.io/mode": "enforce"})
        wait_until_served(cp, hook, "chart-enforce")
        status = json.loads(run_helm(helm, "status", RELEASE, "--namespace", NAMESPACE, "-o", "json",
                                     kubeconfig=cp.kubeconfig).stdout)
        assert (status["version"], status["info"]["status"]) == (2, "deployed")

        run_helm(helm, "uninstall", RELEASE, "--namespace", NAMESPACE,
                 kubeconfig=cp.kubeconfig)
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration", "clusterrole"):
            assert not cp.get(kind, "gpu-admission" if kind != "clusterrole" else "gpu-admission-node-reader"), kind
