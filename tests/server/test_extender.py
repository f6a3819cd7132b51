"""The kube-scheduler extender's app, through ``test_client()``: the wire shapes of
k8s.io/kube-scheduler/extender/v1 (Go field names, capitalised), the filter and score rules,
malformed arguments, authentication, the body limit, and the shipped KubeSchedulerConfiguration
snippet. (The app on its own port of a real server: test_extender_live.py.)"""

from __future__ import annotations

import functools
import io
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from webhook.core import scheduling, settings as settings_mod
from webhook.server import extender, tokens
from webhook.server.app import DEFAULT_MAX_BODY, create_app
from webhook.server.gunicorn.listeners import CLIENT_CERTIFICATE
from tests import judging

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "manifests/scheduler/kube-scheduler-config.yaml"
A100, L40S, H100 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L40S", "NVIDIA-H100-80GB-HBM3"


def node(name: str, product: str | None, gpus: int, *, count_label: int | None = None,
         allocatable: int | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if product is not None:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus if count_label is None else count_label)
    alloc = gpus if allocatable is None else allocatable
    return {"metadata": {"name": name, "labels": labels},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": str(gpus)},
                       "allocatable": {"cpu": "64", "nvidia.com/gpu": str(alloc)}}}


MIXED = node("mixed", A100, 8, count_label=4)  # GFD's flipping labels: 4 of one model, 8 GPUs
UNLABELLED = node("bare", None, 8)
A100_1 = node("a100-1", A100, 8)
A100_2 = node("a100-2", "A100-SXM4-80GB", 8)  # legacy spelling, same product and pool
L40S_1 = node("l40s-1", L40S, 4)
NODES = [MIXED, UNLABELLED, A100_1, A100_2, L40S_1]


def pod(gpus: int, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        init_gpus: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x",
                                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if init_gpus:
        spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": init_gpus}}}]
    meta: dict[str, Any] = {"name": "p", "namespace": "ai", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def args(p: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Pod": p, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


TOKEN = "s3cret-token-of-the-test"


def extender_client(tmp_path: Path, s: settings_mod.Settings | None = None, **kwargs: Any) -> FlaskClient:
    """The extender's app with a token file; the client sends that token on every request."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")  # a Secret made with `echo` ends in a newline
    app = extender.create_app(s or settings_mod.default(), token_file=token, **kwargs)
    test_client = app.test_client()
    test_client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {TOKEN}"
    return test_client


@pytest.fixture()
def client(tmp_path: Path) -> FlaskClient:
    return extender_client(tmp_path)


def filter_(client: FlaskClient, body: Any) -> dict[str, Any]:
    resp = client.post("/scheduler/filter", json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return resp.get_json()


def scores(client: FlaskClient, body: Any) -> dict[str, int]:
    resp = client.post("/scheduler/prioritize", json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    out = resp.get_json()
    assert isinstance(out, list) and all(set(h) == {"Host", "Score"} for h in out)
    return {h["Host"]: h["Score"] for h in out}


def kept(result: dict[str, Any]) -> list[str]:
    return [n["metadata"]["name"] for n in result["Nodes"]["items"]]


# ----------------------------------------------------------------------------- filter


def test_filter_drops_mixed_and_unlabelled_nodes_for_a_4_gpu_pod(client: FlaskClient) -> None:
    result = filter_(client, args(pod(4), NODES))
    assert set(result) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert kept(result) == ["a100-1", "a100-2", "l40s-1"]
    assert result["NodeNames"] is None and result["Error"] == "" and result["FailedNodes"] == {}
    failed = result["FailedAndUnresolvableNodes"]
    assert set(failed) == {"mixed", "bare"}
    assert "nvidia.com/gpu.count=4" in failed["mixed"] and "8 GPUs" in failed["mixed"]
    assert "no nvidia.com/gpu.product label" in failed["bare"]
    # kept nodes are echoed exactly as received (the scheduler uses them as the node objects)
    assert result["Nodes"]["items"][0] == A100_1


def test_filter_keeps_every_node_for_a_1_gpu_pod(client: FlaskClient) -> None:
    result = filter_(client, args(pod(1), NODES))
    assert kept(result) == [n["metadata"]["name"] for n in NODES]
    assert result["FailedAndUnresolvableNodes"] == {}


@pytest.mark.parametrize("p,dropped", [
    (pod(1, labels={"gpu-admission.io/group": "llama"}), True),  # a group member, even with one GPU
    (pod(1, labels={"leaderworkerset.sigs.k8s.io/group-key": "abc"}), True),
    (pod(1, init_gpus=2), True),  # an init container's GPUs count, as Kubernetes counts them
    (pod(2), True),
    (pod(0), False),
])
def test_filter_who_is_strict(client: FlaskClient, p: dict[str, Any], dropped: bool) -> None:
    result = filter_(client, args(p, [MIXED, A100_1]))
    assert ("mixed" in result["FailedAndUnresolvableNodes"]) is dropped
    assert "a100-1" in kept(result)


@pytest.mark.parametrize("n,trusted", [
    (node("shared", "NVIDIA-A100-SXM4-80GB-SHARED", 8), False),  # time-sliced replicas
    (node("no-count", A100, 8, count_label=None), True),
    (node("more-count", A100, 4, count_label=8), True),
])
def test_filter_node_readings(client: FlaskClient, n: dict[str, Any], trusted: bool) -> None:
    if n["metadata"]["name"] == "no-count":
        del n["metadata"]["labels"]["nvidia.com/gpu.count"]
    assert (kept(filter_(client, args(pod(4), [n]))) == [n["metadata"]["name"]]) is trusted


def test_filter_empty_node_list(client: FlaskClient) -> None:
    assert filter_(client, {"Pod": pod(4), "Nodes": {"items": None}})["Nodes"] == {"items": []}


# ----------------------------------------------------------------------------- prioritize


def test_prioritize_single_gpu_is_neutral(client: FlaskClient) -> None:
    assert scores(client, args(pod(1), NODES)) == {n["metadata"]["name"]: scheduling.NEUTRAL for n in NODES}


def test_prioritize_multi_gpu(client: FlaskClient) -> None:
    got = scores(client, args(pod(4), NODES))
    assert got["mixed"] == 0 and got["bare"] == 0
    # the A100 pool (16 GPUs, both spellings) is the largest with room: 10; L40S (4 GPUs) has room too
    assert got["a100-1"] == got["a100-2"] == 10
    assert got["l40s-1"] == 7 + round(3 * 4 / 16) == 8
    assert all(6 <= got[n] <= 10 for n in ("a100-1", "a100-2", "l40s-1"))


def test_prioritize_group_prefers_the_pool_that_holds_the_group(client: FlaskClient) -> None:
    member = pod(4, labels={"gpu-admission.io/group": "llama"}, annotations={"gpu-admission.io/group-size": "3"})
    h100 = node("h100-1", H100, 4)
    got = scores(client, args(member, [A100_1, A100_2, L40S_1, h100, MIXED]))
    # 3 pods x 4 GPUs = 12: only the A100 pool (16) holds the whole group
    assert got == {"a100-1": 10, "a100-2": 10, "l40s-1": scheduling.SHORT_POOL,
                   "h100-1": scheduling.SHORT_POOL, "mixed": 0}


def test_prioritize_order_and_range(client: FlaskClient) -> None:
    resp = client.post("/scheduler/prioritize", json=args(pod(8), NODES))
    hosts = resp.get_json()
    assert [h["Host"] for h in hosts] == [n["metadata"]["name"] for n in NODES]
    assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= 10 for h in hosts)


def test_heterogeneous_risk_mirrors_the_seed() -> None:
    assert scheduling.heterogeneous_risk(["A100"] * 4) == 100
    assert scheduling.heterogeneous_risk(["A100", "A100", "L40S", "L40S"]) == 0
    assert scheduling.heterogeneous_risk([]) == 100


def test_policy_label_key_is_used(tmp_path: Path) -> None:
    s = settings_mod.from_mapping({"productLabel": "cloud.google.com/gke-accelerator"})
    app = extender_client(tmp_path, s)
    gke = {"metadata": {"name": "g", "labels": {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}},
           "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}}
    assert kept(filter_(app, args(pod(4), [gke, A100_1]))) == ["g"]  # A100_1 has no GKE label


# ----------------------------------------------------------------------------- malformed


@pytest.mark.parametrize("path", ["/scheduler/filter", "/scheduler/prioritize"])
@pytest.mark.parametrize("body,needle", [
    (b"", "not JSON"),
    (b"{not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"Nodes": {"items": []}}', "Pod"),
    (b'{"Pod": "x", "Nodes": {"items": []}}', "Pod"),
    (b'{"Pod": {}}', "Nodes"),
    (b'{"Pod": {}, "NodeNames": ["a"]}', "nodeCacheCapable: false"),
    (b'{"Pod": {}, "Nodes": []}', "items"),
    (b'{"Pod": {}, "Nodes": {"items": {}}}', "items"),
    (b'{"Pod": {}, "Nodes": {"items": [1]}}', "items[0]"),
    (b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}', "metadata.name"),
    (b"[" * 100000, "not JSON"),
])
def test_malformed_args_are_400(client: FlaskClient, path: str, body: bytes, needle: str) -> None:
    resp = client.post(path, data=body, content_type="application/json")
    assert resp.status_code == 400
    assert needle in resp.get_json()["error"]


@pytest.mark.parametrize("p", [{}, {"spec": None}, {"spec": {"containers": "x"}}, {"metadata": [], "spec": {}},
                               {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "lots"}}}]}}])
def test_odd_pods_never_500(client: FlaskClient, p: dict[str, Any]) -> None:
    weird = {"metadata": {"name": "w", "labels": "x"}, "status": {"capacity": []}}
    for path in ("/scheduler/filter", "/scheduler/prioritize"):
        assert client.post(path, json=args(p, [A100_1, weird])).status_code == 200


@functools.lru_cache(maxsize=None)
def padded_args(size: int) -> bytes:
    """ExtenderArgs of exactly ``size`` bytes: a 4-GPU pod and full-looking A100 nodes (~13 KB each,
    annotations as padding), the rest of the size in one annotation of the pod."""
    import json

    def encoded(doc: dict[str, Any]) -> bytes:
        return json.dumps(doc, separators=(",", ":")).encode()

    padding = {"x-padding/" + str(i): "v" * 50 for i in range(200)}
    doc = args(pod(4, annotations={"pad": ""}), [])
    items = doc["Nodes"]["items"]
    length = len(encoded(doc))
    while length < size - 20_000:  # counted as it grows: encoding the whole list each time is quadratic
        n = node(f"n{len(items)}", A100, 8)
        n["metadata"]["annotations"] = padding
        length += len(encoded(n)) + (1 if items else 0)
        items.append(n)
    doc["Pod"]["metadata"]["annotations"]["pad"] = "x" * (size - len(encoded(doc)))
    body = encoded(doc)
    assert len(body) == size, (len(body), size)
    return body


@pytest.mark.parametrize("size, status", [
    pytest.param(DEFAULT_MAX_BODY - 1, 200, id="under-the-limit"),
    pytest.param(DEFAULT_MAX_BODY, 200, id="at-the-limit"),  # inclusive, as /validate's
    pytest.param(DEFAULT_MAX_BODY + 1, 413, id="one-byte-over"),
    pytest.param(3 * DEFAULT_MAX_BODY, 413, id="three-times"),
])
@pytest.mark.parametrize("path", ["/scheduler/filter", "/scheduler/prioritize"])
def test_the_body_limit_is_the_admission_routes(client: FlaskClient, path: str, size: int, status: int) -> None:
    """The same limit as /validate (4 MiB), for a Content-Length and for a chunked body alike."""
    body = padded_args(size)
    for framing in ("content-length", "chunked"):
        if framing == "chunked":
            # what gunicorn hands the app for a chunked body: no CONTENT_LENGTH, the stream ends itself
            resp = client.post(path, input_stream=io.BytesIO(body), content_type="application/json",
                               headers={"Transfer-Encoding": "chunked"},
                               environ_overrides={"wsgi.input_terminated": True})
        else:
            resp = client.post(path, data=body, content_type="application/json")
        assert resp.status_code == status, (framing, resp.get_data(as_text=True)[:200])
        if status == 413:
            assert resp.get_json() == {"error": f"body larger than {DEFAULT_MAX_BODY} bytes"}
        elif path.endswith("filter"):
            assert len(resp.get_json()["Nodes"]["items"]) > 250  # a few hundred full nodes fit


def test_get_is_not_allowed(client: FlaskClient) -> None:
    assert client.get("/scheduler/filter").status_code == 405


# ----------------------------------------------------------------------------- authentication


def call(app_client: FlaskClient, path: str = "/scheduler/filter", **kw: Any) -> tuple[int, Any]:
    resp = app_client.post(path, json=args(pod(4), [A100_1]), **kw)
    return resp.status_code, resp.get_json()


@pytest.mark.parametrize("authorization, certificate, client_ca, status", [
    pytest.param(f"Bearer {TOKEN}", False, False, 200, id="token"),
    pytest.param(f"bearer   {TOKEN}  ", False, False, 200, id="token-scheme-any-case"),
    pytest.param(None, False, False, 401, id="nothing"),
    pytest.param("Bearer", False, False, 401, id="empty-token"),
    pytest.param(f"Bearer {TOKEN}x", False, False, 401, id="token-with-more"),
    pytest.param(f"Bearer {TOKEN[:-1]}", False, False, 401, id="token-prefix"),
    pytest.param(f"Basic {TOKEN}", False, False, 401, id="other-scheme"),
    pytest.param(TOKEN, False, False, 401, id="no-scheme"),
    pytest.param("Bearer t\u00f6ken", False, False, 401, id="not-ascii"),
    pytest.param(None, True, True, 200, id="verified-certificate"),
    pytest.param(f"Bearer {TOKEN}", False, True, 200, id="token-beside-a-client-ca"),
    pytest.param(None, False, True, 401, id="no-certificate-no-token"),
    # a certificate counts only where a client CA verifies it: the stamp alone does not
    pytest.param(None, True, False, 401, id="certificate-without-client-ca"),
])
def test_authentication(tmp_path: Path, authorization: str | None, certificate: bool, client_ca: bool,
                        status: int) -> None:
    app_client = extender_client(tmp_path, client_ca=client_ca)
    del app_client.environ_base["HTTP_AUTHORIZATION"]
    headers = {"Authorization": authorization} if authorization is not None else {}
    got, doc = call(app_client, headers=headers, environ_base={CLIENT_CERTIFICATE: certificate})
    assert got == status, doc
    if status == 401:
        assert "unauthenticated" in doc["error"] and TOKEN not in doc["error"]


@pytest.mark.parametrize("path, method", [
    ("/scheduler/filter", "POST"), ("/scheduler/prioritize", "POST"), ("/scheduler/filter", "GET"),
    ("/readyz", "GET"), ("/metrics", "GET"), ("/validate", "POST"), ("/nothing", "GET"),
])
def test_every_path_needs_authentication_before_anything(tmp_path: Path, path: str, method: str) -> None:
    """401 before routing (no probing for what exists), and before the body is read: a 64 MiB
    Content-Length from an unauthenticated caller is answered 401, not 413."""
    app_client = extender_client(tmp_path)
    del app_client.environ_base["HTTP_AUTHORIZATION"]
    resp = app_client.open(path, method=method, data=b"{}", content_type="application/json",
                           headers={"Content-Length": str(64 * 1024 * 1024)})
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer ")


@pytest.mark.parametrize("path, status", [
    ("/readyz", 404), ("/healthz", 404), ("/metrics", 404), ("/validate", 404), ("/mutate", 404),
    ("/scheduler/filter", 200),
])
def test_the_extender_app_serves_only_the_extender(client: FlaskClient, path: str, status: int) -> None:
    resp = client.post(path, json=args(pod(1), [A100_1]))
    assert resp.status_code == status
    if status == 404:
        assert "error" in resp.get_json()


@pytest.mark.parametrize("path", ["/scheduler/filter", "/scheduler/prioritize"])
def test_the_admission_app_does_not_serve_the_extender(path: str) -> None:
    resp = create_app(settings_mod.default()).test_client().post(path, json=args(pod(4), [A100_1]))
    assert resp.status_code == 404


def test_an_extender_without_authentication_is_refused() -> None:
    with pytest.raises(ValueError, match="client CA or a token file"):
        extender.create_app(settings_mod.default())


def test_the_token_file_is_reloaded_and_a_broken_one_keeps_the_last(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    app_client = extender.create_app(settings_mod.default(), token_file=token, reload_interval=0).test_client()

    def status(value: str) -> int:
        return call(app_client, headers={"Authorization": f"Bearer {value}"})[0]

    assert (status("first"), status("second")) == (200, 401)
    token.write_text("second")  # rotated (a Secret update)
    assert (status("first"), status("second")) == (401, 200)
    for broken in ("", "  \n"):  # half-written or emptied: the last good token stays
        token.write_text(broken)
        assert (status("second"), status("")) == (200, 401)
    token.unlink()
    assert status("second") == 200


@pytest.mark.parametrize("content, problem", [
    pytest.param(None, "cannot read", id="missing"),
    pytest.param("", "is empty", id="empty"),
    pytest.param(" \n\t\n", "is empty", id="whitespace"),
])
def test_an_unusable_token_file_is_refused_at_start(tmp_path: Path, content: str | None, problem: str) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    with pytest.raises(tokens.TokenError, match=problem):
        extender.create_app(settings_mod.default(), token_file=token)


# ----------------------------------------------------------------------------- shipped configuration


def test_scheduler_config_snippet() -> None:
    doc = yaml.safe_load(CONFIG.read_text())
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    (ext,) = doc["extenders"]
    # the extender's own port (components/extender), never the admission port's 443
    assert ext["urlPrefix"] == "https://gpu-admission.gpu-admission.svc:8444/scheduler"
    assert (ext["filterVerb"], ext["prioritizeVerb"]) == ("filter", "prioritize")
    assert ext["weight"] == 5 and ext["enableHTTPS"] is True
    assert ext["nodeCacheCapable"] is False and ext["ignorable"] is True
    # every GPU resource the default policy counts
    assert ext["managedResources"] == [{"name": r, "ignoredByScheduler": False}
                                       for r in settings_mod.default().gpu_resources]
    assert set(ext["tlsConfig"]) & {"caData", "caFile"} and "insecure" not in ext["tlsConfig"]
    # mutual TLS: kube-scheduler's extender configuration has no field for a bearer token
    assert set(ext["tlsConfig"]) >= {"certFile", "keyFile"}
    assert not {"bindVerb", "preemptVerb"} & set(ext)
    # configures the scheduler, not the cluster: never part of a kustomization
    assert not (CONFIG.parent / "kustomization.yaml").exists()
    assert (CONFIG.parent / "README.md").exists()
    for kustomization in (ROOT / "manifests").rglob("kustomization.yaml"):
        doc = yaml.safe_load(kustomization.read_text())
        referenced = [*doc.get("resources", []), *doc.get("components", []),
                      *(f for g in doc.get("configMapGenerator", []) for f in g.get("files", []))]
        assert not [r for r in referenced if "scheduler" in r], kustomization


def test_scheduler_config_url_matches_the_routes(client: FlaskClient) -> None:
    ext = yaml.safe_load(CONFIG.read_text())["extenders"][0]
    prefix = urllib.parse.urlsplit(ext["urlPrefix"]).path
    for verb in (ext["filterVerb"], ext["prioritizeVerb"]):
        assert client.post(f"{prefix}/{verb}", json=args(pod(1), [A100_1])).status_code == 200


def test_prioritize_a_controller_pod_as_the_mutating_webhook_left_it(client: FlaskClient) -> None:
    """A Kubeflow worker pod after /mutate: the webhook's gpu-group label and group-size annotation
    are what the extender reads, so the first member of a 3 x 4-GPU job goes to the pool that holds
    the whole job (issue 14: prefer a product with room for the group)."""
    from webhook.core import engine
    import jsonpatch

    raw = pod(4, labels={"training.kubeflow.org/job-name": "llama", "training.kubeflow.org/replica-type": "worker"})
    raw.update(apiVersion="v1", kind="Pod")
    raw["spec"]["containers"][0]["command"] = ["torchrun", "--nnodes=3", "--nproc-per-node=4", "train.py",
                                               "--model_name_or_path=meta-llama/Llama-3.1-8B"]
    (result,) = judging.judge(raw, settings_mod.default())
    member = jsonpatch.apply_patch(raw, list(result.patch))
    assert member["metadata"]["annotations"]["gpu-admission.io/group-size"] == "3"
    got = scores(client, args(member, [A100_1, A100_2, L40S_1, node("h100-1", H100, 4), MIXED]))
    assert got == {"a100-1": 10, "a100-2": 10, "l40s-1": scheduling.SHORT_POOL,
                   "h100-1": scheduling.SHORT_POOL, "mixed": 0}


def test_serve_checks_the_token_file_without_importing_prometheus() -> None:
    """prometheus_client reads PROMETHEUS_MULTIPROC_DIR when it is imported, and `serve` sets it only
    after checking its flags: had the check imported it, no worker would write its metrics files."""
    import subprocess
    import sys

    code = ("import sys, webhook.server as s; s.read_token, s.TokenError; "
            "sys.exit(1 if 'prometheus_client' in sys.modules or 'flask' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0


def test_no_policy_loaded_is_a_503_not_a_500(tmp_path: Path) -> None:
    """A worker that started with a broken policy file and no last good copy has no policy: the
    extender answers 503 (kube-scheduler's ignorable extender then schedules without it)."""
    from webhook.server.live_settings import LiveSettings
    broken = tmp_path / "policy.yaml"
    broken.write_text("mode: [\n")
    client = extender_client(tmp_path, LiveSettings(broken))  # type: ignore[arg-type]
    resp = client.post("/scheduler/filter", json=args(pod(4), [A100_1]))
    assert resp.status_code == 503 and "no policy loaded" in resp.get_json()["error"]
