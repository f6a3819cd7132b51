"""The procedures the docs print, run exactly as printed against a real kube-apiserver (issue 26).

Each procedure is a fenced ``sh`` block in the docs behind a marker comment
``<!-- procedure: NAME ... -->``; :func:`procedure` takes the block as it is in the file and runs it
with bash (``-euo pipefail``), the control plane's kubeconfig and this suite's kubectl on the PATH.
So the docs cannot drift from what works: change the text and this test runs the new text.

- ``emergency-fail-open`` (docs/install.md, "Failure policy"): with the webhook server down, the
  enforce entries refuse GPU objects (``failed calling webhook``); after the documented step, a GPU
  pod and an operator kind (a PyTorchJob: the ``validate-operators`` entry, the fifth, which the
  earlier four-entry loop missed) are admitted, and every entry reads ``Ignore``.
- ``kustomize-to-helm``, ``helm-enforce``, ``helm-uninstall`` (docs/install.md, "Install with Helm"
  and "Uninstall"), in one life of a release on a control plane of its own: the kustomize audit
  install (``kubectl apply -k manifests/overlays/generated-certs-audit``, as the docs print it) is
  adopted by ``helm install`` (every object now the release's, still audit, the CA bundle kept, the
  Secret left the user's); the upgrade keeps the values and enforces; the uninstall keeps a copy of
  the hand-made TLS Secret and removes the configurations and the namespace. Run with the real
  helm (tests/tools/build-helm.sh), in a directory laid out as the repository is (``charts/``,
  ``manifests/`` with the generated-certs overlay filled in as ``make manifests`` does, ``certs/``).
  No server answers here (no cluster network): what is held is what each step does to the objects.
- ``kustomize-uninstall`` (docs/install.md, "Uninstall"): the cert-manager audit install (cert-manager's
  Issuer and Certificate kinds as stand-in CRDs: cert-manager itself does not run here) is removed
  as printed, webhook configurations first, and nothing of it is left but the deleted namespace.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from pathlib import Path

import yaml

import pytest

from control_plane import ROOT, ControlPlane, Installed, ManifestTree, free_port, register, running_control_plane
from objects import stand_in_crd, vllm_pod
from operators_plane import wait_established
from test_operators_e2e import pytorchjob

pytestmark = pytest.mark.e2e

_MARKER = re.compile(r"<!-- procedure: (?P<name>[\w-]+)[^>]*-->\s*```sh\n(?P<body>.*?)```", re.S)


def procedure(doc: str, name: str) -> str:
    """The ``sh`` block behind ``<!-- procedure: NAME -->`` in ``doc`` (a path under the repository)."""
    found = {m["name"]: m["body"] for m in _MARKER.finditer((ROOT / doc).read_text())}
    assert name in found, f"{doc} has no procedure {name!r} (has {sorted(found)})"
    return found[name]


def run_procedure(cp: ControlPlane, script: str, *, cwd: Path | None = None,
                  tools: tuple[Path, ...] = ()) -> subprocess.CompletedProcess:
    """``script`` with bash, kubectl (and ``tools``' directories) on the PATH; helm gets its own empty
    config, cache and data directories under ``cwd``, never the user's."""
    path = os.pathsep.join([str(Path(cp.kubectl).parent), *(str(tool.parent) for tool in tools),
                            os.environ.get("PATH", "")])
    env = dict(os.environ, KUBECONFIG=str(cp.kubeconfig), PATH=path)
    if cwd is not None:
        env.update({f"HELM_{d}_HOME": str(cwd / ".helm" / d.lower()) for d in ("CONFIG", "CACHE", "DATA")})
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                          timeout=180, cwd=cwd)


def dry_run(cp: ControlPlane, obj: dict) -> subprocess.CompletedProcess:
    return cp.run("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(obj), check=False)


def until(what: str, check, timeout: float = 60) -> None:
    """The apiserver picks changed webhook configurations up asynchronously."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def test_the_emergency_fail_open_admits_every_kind_with_the_server_down(installed: Installed) -> None:
    cp = installed.cp
    namespace = "e2e-emergency"
    cp.namespace(namespace)
    crd = stand_in_crd("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    cp.apply([crd])
    wait_established(cp, (crd["metadata"]["name"],))
    pod = vllm_pod("emergency", namespace)
    job = pytorchjob(None)
    job["metadata"]["namespace"] = namespace
    try:
        register(cp, installed.docs, free_port())  # the shipped entries, pointed where nothing listens
        until("the webhook down refuses a GPU pod",
              lambda: "failed calling webhook" in dry_run(cp, pod).stderr)
        refused = dry_run(cp, job)
        assert refused.returncode != 0 and "failed calling webhook" in refused.stderr, refused.stderr
        assert "validate-operators.gpu-admission.io" in refused.stderr, refused.stderr

        done = run_procedure(cp, procedure("docs/install.md", "emergency-fail-open"))
        assert done.returncode == 0, f"the documented step failed:\n{done.stdout}\n{done.stderr}"
        # the listing: "<entry> <policy>" per entry (after kubectl's "... patched" lines)
        listed = [line.split() for line in done.stdout.splitlines() if line.split()[:1]
                  and line.split()[0].endswith(".gpu-admission.io")]
        names = {d["metadata"]["name"] for d in installed.docs if d.get("kind", "").endswith("WebhookConfiguration")}
        want = sum(len(d["webhooks"]) for d in installed.docs if d.get("kind", "").endswith("WebhookConfiguration"))
        assert names == {"gpu-admission"}, names
        assert len(listed) == want and all(policy == "Ignore" for _, policy in listed), done.stdout

        until("a GPU pod admitted after the emergency step", lambda: dry_run(cp, pod).returncode == 0)
        admitted = dry_run(cp, job)
        assert admitted.returncode == 0, f"the PyTorchJob is still refused:\n{admitted.stderr}"
    finally:
        installed.reinstall()  # the shipped policies again, pointed at the session's webhook


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    """helm from its Go module (tests/tools/build-helm.sh; prepare.sh builds it before pytest)."""
    done = subprocess.run(["bash", str(ROOT / "tests/tools/build-helm.sh")], capture_output=True, text=True,
                          timeout=3600, cwd=ROOT)
    assert done.returncode == 0, f"tests/tools/build-helm.sh failed ({done.returncode}):\n{done.stderr[-2000:]}"
    path = Path(done.stdout.strip().splitlines()[-1])
    return path if path.name == "helm" else path / "helm"


def _ok(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _selector_mode(cp: ControlPlane) -> list[str]:
    """The namespaces label values the first (enforcing) validate entry selects: audit installs
    select only ``enforce``; enforce installs everything but ``audit`` and ``off``."""
    entry = cp.get("validatingwebhookconfiguration", "gpu-admission")["webhooks"][0]
    expr = next(e for e in entry["namespaceSelector"]["matchExpressions"] if e["key"] == "gpu-admission.io/mode")
    return [expr["operator"], *expr.get("values", [])]


def test_kustomize_to_helm_then_enforce_then_uninstall_as_printed(control_plane_bin: Path, manifest_tree: ManifestTree,
                                                                  helm_bin: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"  # laid out as the repository: the procedures use its relative paths
    repo.mkdir()
    (repo / "charts").symlink_to(ROOT / "charts")
    (repo / "manifests").symlink_to(manifest_tree.root)
    (repo / "certs").symlink_to(manifest_tree.certs_dir)
    with running_control_plane(control_plane_bin, tmp_path / "cp") as cp:
        def sh(script: str, what: str) -> subprocess.CompletedProcess:
            return _ok(run_procedure(cp, script, cwd=repo, tools=(helm_bin,)), what)

        sh("kubectl apply -k manifests/overlays/generated-certs-audit", "the kustomize audit install")
        assert _selector_mode(cp)[0] == "In"  # audit: only namespaces labelled enforce are enforced

        # --- kustomize -> Helm: adopted in place
        sh(procedure("docs/install.md", "kustomize-to-helm"), "the documented migration")
        status = json.loads(sh("helm status gpu-admission -n gpu-admission -o json", "helm status").stdout)
        assert (status["version"], status["info"]["status"]) == (1, "deployed")
        chart_objects = yaml.safe_load_all(status.get("manifest", ""))
        rendered = [d for d in chart_objects if d]
        assert rendered, status
        for doc in rendered:  # every object of the release is on the cluster and is the release's
            ns = doc["metadata"].get("namespace")
            live = cp.get(doc["kind"].lower(), doc["metadata"]["name"], ns)
            assert live, (doc["kind"], doc["metadata"]["name"])
            assert live["metadata"].get("annotations", {}).get("meta.helm.sh/release-name") == "gpu-admission"
        secret = cp.get("secret", "gpu-admission-tls", "gpu-admission")
        assert "meta.helm.sh/release-name" not in secret["metadata"].get("annotations", {})  # still the user's
        assert _selector_mode(cp)[0] == "In"
        ca = base64.b64encode((manifest_tree.certs_dir / "ca.crt").read_bytes()).decode()
        webhooks = cp.get("validatingwebhookconfiguration", "gpu-admission")["webhooks"]
        assert all(w["clientConfig"].get("caBundle") == ca for w in webhooks)

        # --- then enforce, keeping the install's values
        upgraded = sh(procedure("docs/install.md", "helm-enforce"), "the documented upgrade")
        values = yaml.safe_load(upgraded.stdout.split("USER-SUPPLIED VALUES:", 1)[-1])
        assert values["mode"] == "enforce" and values["certificates"]["certManager"] is False, upgraded.stdout
        assert _selector_mode(cp)[0] == "NotIn"  # enforce: every namespace but audit and off
        webhooks = cp.get("validatingwebhookconfiguration", "gpu-admission")["webhooks"]
        assert all(w["clientConfig"].get("caBundle") == ca for w in webhooks), "the upgrade dropped the CA bundle"
        manifest = sh("helm get manifest gpu-admission -n gpu-admission", "helm get manifest").stdout
        assert "kind: Certificate" not in manifest and "kind: Issuer" not in manifest  # cert-manager stays off

        # --- uninstall: the hand-made Secret is kept as a file first
        sh(procedure("docs/install.md", "helm-uninstall"), "the documented uninstall")
        kept = yaml.safe_load((repo / "gpu-admission-tls.yaml").read_text())
        assert kept["kind"] == "Secret" and kept["data"]["tls.crt"] == secret["data"]["tls.crt"]
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            assert not cp.get(kind, "gpu-admission"), kind
        namespace = cp.get("namespace", "gpu-admission")
        # no namespace controller runs here to finish the deletion: it is at least under way
        assert not namespace or namespace["metadata"].get("deletionTimestamp"), namespace
        assert run_procedure(cp, "helm status gpu-admission -n gpu-admission", cwd=repo,
                             tools=(helm_bin,)).returncode != 0


def test_the_kustomize_uninstall_as_printed(control_plane_bin: Path, manifest_tree: ManifestTree,
                                            tmp_path: Path) -> None:
    """With kube-controller-manager (its namespace controller finishes the namespace's deletion, for
    which ``kubectl delete`` waits), as in a cluster."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "manifests").symlink_to(manifest_tree.root)
    with running_control_plane(control_plane_bin, tmp_path / "cp", controllers=True) as cp:
        crds = [stand_in_crd("cert-manager.io", "v1", kind, f"{kind.lower()}s") for kind in ("Issuer", "Certificate")]
        cp.apply(crds)
        wait_established(cp, tuple(c["metadata"]["name"] for c in crds))
        _ok(run_procedure(cp, "kubectl apply -k manifests/overlays/cert-manager-audit", cwd=repo), "the install")
        installed_docs = manifest_tree.render("overlays/cert-manager-audit")
        assert cp.get("validatingwebhookconfiguration", "gpu-admission")
        done = _ok(run_procedure(cp, procedure("docs/install.md", "kustomize-uninstall"), cwd=repo),
                   "the documented uninstall")
        first = done.stdout.splitlines()[:2]
        assert all("webhookconfiguration" in line and "deleted" in line for line in first), done.stdout
        for doc in installed_docs:
            group = doc["apiVersion"].rpartition("/")[0]
            resource = doc["kind"].lower() + (f".{group}" if group else "")
            assert not cp.get(resource, doc["metadata"]["name"], doc["metadata"].get("namespace")), \
                (doc["kind"], doc["metadata"]["name"])
