"""The background audit against a real cluster (issue 29): kube-apiserver, kube-scheduler,
kube-controller-manager, kwok, the JobSet controller built from its module, the webhook installed
from the manifests, and the report CRDs as their projects publish them (Kyverno's
``wgpolicyk8s.io`` PolicyReport CRDs and openreports/reports-api's ``openreports.io`` ones, taken
from their Go modules; not copied here).

- A JobSet whose pods were placed before the webhook was installed (its configurations removed for
  the while, then installed again): its two replicated Jobs pinned to A100 and to H100, so the
  group's pods straddle the two products.
- A Deployment created while its namespace is in audit: a 70B model at TP4 pinned to L40S, admitted
  with warnings, its pod running on the L40S node.
- `gpu-admission audit` (live, pages of 500, with the reporter's own credentials) reports both as
  failing; `gpu-admission reporter` (run here with the component's ServiceAccount, ClusterRoles and
  bindings, as rendered) writes them into each namespace's PolicyReport and Report, and the
  placement into the ClusterPolicyReport; patching the Deployment to a fitting pin clears its failure
  within a few scans; deleting it removes it from the report.
- The reporter's ServiceAccount can write reports and nothing else (`kubectl auth can-i`, answered by
  the apiserver's RBAC authorizer).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from control_plane import ROOT, ControlPlane, Installed, create_nodes, free_port, gpu_node
from operators_plane import running_operators, token_kubeconfig, wait_established

pytestmark = pytest.mark.e2e

A100, H100, L40S = "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L40S"
TAINT = {"key": "gpu-admission.io/e2e-fleet", "value": "audit", "effect": "NoSchedule"}
LEGACY, AUDITED = "audit-e2e-legacy", "audit-e2e-audited"
SA = "gpu-admission-reporter"
KEEP_RUNNING = {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}
REPORT_CRDS = (
    # (module, version, folder of CRD files, CRD names)
    ("github.com/kyverno/kyverno", "v1.19.1", "config/crds/policyreport",
     ("policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io")),
    ("github.com/openreports/reports-api", "v0.2.1", "config/crd",
     ("reports.openreports.io", "clusterreports.openreports.io")),
)
VLLM = "vllm/vllm-openai:v0.10.1"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90.0, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {str(last)[:500]})")


def module_dir(module: str, version: str) -> Path:
    """The module's files in the Go module cache (downloaded through the module proxy once)."""
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(json.loads(done.stdout)["Dir"])


def tolerating(spec: dict) -> dict:
    return dict(spec, tolerations=[dict(TAINT, operator="Equal")], terminationGracePeriodSeconds=0)


def vllm_spec(pin: str) -> dict:
    resources = {"cpu": "8", "memory": "64Gi"}
    return tolerating({"nodeSelector": {"nvidia.com/gpu.product": pin}, "containers": [{
        "name": "vllm", "image": VLLM,
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
        "resources": {"requests": resources, "limits": {"nvidia.com/gpu": "4", **resources}}}]})


def jobset() -> dict:
    resources = {"cpu": "16", "memory": "128Gi"}

    def job(name: str, product: str) -> dict:
        spec = tolerating({"restartPolicy": "Never", "nodeSelector": {"nvidia.com/gpu.product": product},
                           "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                           "command": ["torchrun", "--nproc-per-node", "8", "--nnodes", "4",
                                                       "train.py", "--model_name_or_path",
                                                       "meta-llama/Llama-3.1-70B", "--fsdp", "full_shard"],
                                           "resources": {"requests": resources,
                                                         "limits": {"nvidia.com/gpu": "8", **resources}}}]})
        return {"name": name, "replicas": 1, "template": {"spec": {
            "parallelism": 2, "completions": 2, "backoffLimit": 0,
            "template": {"metadata": {"annotations": KEEP_RUNNING}, "spec": spec}}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "pretrain", "namespace": LEGACY},
            "spec": {"replicatedJobs": [job("a100", A100), job("h100", H100)]}}


def deployment(pin: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llama-70b", "namespace": AUDITED},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llama-70b"}},
                     "strategy": {"type": "Recreate"},
                     "template": {"metadata": {"labels": {"app": "llama-70b"}}, "spec": vllm_spec(pin)}}}


def bound_pods(cp: ControlPlane, namespace: str) -> list[dict]:
    pods = json.loads(cp.run("-n", namespace, "get", "pods", "-o", "json").stdout)["items"]
    return [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


# --- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reporter_kubeconfig(installed: Installed, manifest_tree, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The component's ServiceAccount, ClusterRoles and bindings, as rendered, and a kubeconfig with
    that ServiceAccount's token."""
    cp = installed.cp
    docs = manifest_tree.render(manifest_tree.with_components("components/reporter", base="overlays/generated-certs"))
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
            and "reporter" in d["metadata"]["name"]]
    assert {d["kind"] for d in rbac} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    cp.apply(rbac)
    return token_kubeconfig(cp, SA, "gpu-admission", tmp_path_factory.mktemp("reporter") / "kubeconfig")


@pytest.fixture(scope="module")
def report_crds(installed: Installed) -> None:
    cp = installed.cp
    for module, version, folder, names in REPORT_CRDS:
        files = sorted((module_dir(module, version) / folder).glob("*.yaml"))
        assert files, f"{module}@{version} has no CRDs under {folder}"
        for f in files:
            cp.run("apply", "--server-side", "-f", str(f))
        wait_established(cp, names)


@pytest.fixture(scope="module")
def cluster(installed: Installed, control_plane_bin: Path, report_crds: None,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The fleet (tainted for this module's pods), the two namespaces, the JobSet controller, and the
    two workloads, running."""
    cp = installed.cp
    nodes = [gpu_node(f"audit-{kind}-{i}", product, taints=[TAINT])
             for kind, product, count in (("a100", A100, 3), ("h100", H100, 2), ("l40s", L40S, 1)) for i in range(count)]
    create_nodes(cp, nodes)
    cp.namespace(LEGACY)  # no mode label: the webhook enforces it once it is installed
    cp.namespace(AUDITED, {"gpu-admission.io/mode": "audit"})
    with running_operators(cp, control_plane_bin, tmp_path_factory.mktemp("audit-operators"), names=("jobset",)):
        # the JobSet runs before the webhook is installed: its configurations are removed, the JobSet
        # controller and the Job controller make its pods, kube-scheduler binds them where their pins
        # say, and the webhook is installed again (the session's other modules need it)
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            cp.run("delete", kind, "gpu-admission")
        try:
            cp.apply([jobset()])
            wait_for("the JobSet's 4 pods bound", lambda: len(bound_pods(cp, LEGACY)) >= 4, 120)
        finally:
            installed.reinstall()
        created = cp.run("create", "-f", "-", stdin=json.dumps(deployment(L40S)), check=False)
        assert created.returncode == 0, created.stderr
        assert "Warning:" in created.stderr  # audit namespace: admitted with the webhook's warnings
        wait_for("the Deployment's pod bound", lambda: len(bound_pods(cp, AUDITED)) >= 1, 120)
        yield cp
    cp.run("delete", "namespace", LEGACY, AUDITED, "--wait=false", check=False)
    cp.run("delete", "nodes", *(n["metadata"]["name"] for n in nodes), "--wait=false", check=False)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


# --- the tests ------------------------------------------------------------------------------------

def test_the_reporters_account_writes_reports_and_nothing_else(installed: Installed, reporter_kubeconfig: Path,
                                                                report_crds: None) -> None:
    cp = installed.cp
    who = f"system:serviceaccount:gpu-admission:{SA}"
    allowed = [("create", "policyreports.wgpolicyk8s.io", "-n", "default"),
               ("delete", "clusterpolicyreports.wgpolicyk8s.io"), ("update", "reports.openreports.io", "-n", "x"),
               ("list", "pods", "-A"), ("list", "deployments.apps", "-A"), ("list", "nodes")]
    refused = [("create", "deployments", "-n", "default"), ("patch", "pods", "-n", "default"),
               ("delete", "nodes"), ("get", "secrets", "-n", "gpu-admission"), ("create", "configmaps", "-n", "x"),
               ("update", "validatingwebhookconfigurations"), ("create", "pods/exec", "-n", "x"),
               ("watch", "pods", "-A"), ("create", "clusterroles")]
    for verb, resource, *where in allowed + refused:
        done = cp.run("auth", "can-i", verb, resource, *where, "--as", who, check=False)
        expected = "yes" if (verb, resource, *where) in allowed else "no"
        assert done.stdout.strip() == expected, (verb, resource, done.stdout, done.stderr)


def test_audit_reports_the_audited_deployment_and_the_split_jobset(cluster: ControlPlane,
                                                                  reporter_kubeconfig: Path) -> None:
    done = run_cli("audit", "--kubeconfig", str(reporter_kubeconfig), "-n", LEGACY, "-n", AUDITED,
                   "--output", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    data = json.loads(done.stdout)
    (pretrain,) = data["namespaces"][LEGACY]
    assert pretrain["kind"] == "JobSet" and pretrain["result"] == "fail"
    assert "mixed-products" in {f["rule"] for f in pretrain["findings"]}
    assert {p["value"] for p in pretrain["pods"]} == {A100, H100} and len(pretrain["pods"]) == 4
    (llama,) = data["namespaces"][AUDITED]
    assert llama["kind"] == "Deployment" and llama["result"] == "fail"
    failed = [f for f in llama["findings"] if f["result"] == "fail"]
    assert failed and all("pin nvidia.com/gpu.product" in f["message"] for f in failed)
    assert [p["value"] for p in llama["pods"]] == [L40S]
    text = run_cli("audit", "--kubeconfig", str(reporter_kubeconfig), "-n", LEGACY, "-n", AUDITED)
    assert "FAIL  JobSet/pretrain" in text.stdout and "FAIL  Deployment/llama-70b" in text.stdout


def report(cp: ControlPlane, kind: str, namespace: str | None) -> dict | None:
    where = ("-n", namespace) if namespace else ()
    done = cp.run("get", kind, "gpu-admission", *where, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def results_for(obj: dict | None, name: str) -> list[dict]:
    return [r for r in (obj or {}).get("results", []) if any(x["name"] == name for x in r.get("resources", []))]


@pytest.fixture(scope="module")
def reporter(cluster: ControlPlane, reporter_kubeconfig: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    port = free_port()
    log = tmp_path_factory.mktemp("reporter-log") / "reporter.log"
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "reporter", "--kubeconfig", str(reporter_kubeconfig),
                             "--interval", "5", "--metrics-bind", f"127.0.0.1:{port}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        yield port, log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert proc.returncode in (0, -15, 1) or "Traceback" not in log.read_text(), log.read_text()[-3000:]


def test_the_reports_follow_the_cluster(cluster: ControlPlane, reporter: tuple[int, Path]) -> None:
    cp = cluster
    port, log = reporter

    def failing(kind: str, namespace: str, name: str, rule: str | None = None) -> bool:
        rows = results_for(report(cp, kind, namespace), name)
        return any(r["result"] == "fail" and (rule is None or r["rule"] == rule) for r in rows)

    for kind in ("policyreports.wgpolicyk8s.io", "reports.openreports.io"):
        wait_for(f"{kind} of {LEGACY}: the JobSet split over products",
                 lambda: failing(kind, LEGACY, "pretrain", "mixed-products"), 60)
        wait_for(f"{kind} of {AUDITED}: the Deployment's pin", lambda: failing(kind, AUDITED, "llama-70b"), 60)
    polr = report(cp, "policyreports.wgpolicyk8s.io", AUDITED)
    assert polr is not None and polr["summary"]["fail"] >= 1
    assert polr["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-admission"
    (row,) = [r for r in polr["results"] if r["result"] == "fail"][:1]
    assert row["source"] == "gpu-admission" and row["resources"][0]["kind"] == "Deployment"
    cluster_report = report(cp, "clusterpolicyreports.wgpolicyk8s.io", None)
    assert cluster_report is not None
    idle = {r["properties"]["value"] for r in cluster_report["results"] if r["rule"] == "idle-capacity"}
    assert {A100, H100, L40S} <= idle
    assert any(r["rule"] == "mixed-products" and r["resources"][0]["name"] == "pretrain"
               for r in cluster_report["results"])

    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert f'gpu_admission_report_results{{workload_namespace="{LEGACY}",rule="mixed-products",result="fail"}} 1' in metrics
    assert "gpu_admission_report_last_scan_timestamp_seconds" in metrics

    # a fitting pin clears the failure within a few scans (the new pod lands on an A100)
    cp.run("-n", AUDITED, "patch", "deployment", "llama-70b", "--type", "json", "-p",
           json.dumps([{"op": "replace", "path": "/spec/template/spec/nodeSelector/nvidia.com~1gpu.product",
                        "value": A100}]))
    def on_a100() -> bool:
        pods = bound_pods(cp, AUDITED)
        return bool(pods) and all(p["spec"]["nodeName"].startswith("audit-a100") for p in pods)

    wait_for("the Deployment's pod on an A100", on_a100, 90)
    wait_for("the Deployment's failure cleared",
             lambda: results_for(report(cp, "policyreports.wgpolicyk8s.io", AUDITED), "llama-70b")
             and not failing("policyreports.wgpolicyk8s.io", AUDITED, "llama-70b"), 60)

    # deleting it removes it: the namespace has no GPU workload left, so its report goes
    cp.run("-n", AUDITED, "delete", "deployment", "llama-70b", "--wait=false")
    wait_for("the Deployment gone from the reports",
             lambda: not results_for(report(cp, "policyreports.wgpolicyk8s.io", AUDITED), "llama-70b")
             and not results_for(report(cp, "reports.openreports.io", AUDITED), "llama-70b"), 60)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
