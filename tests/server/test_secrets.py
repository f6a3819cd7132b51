"""Secrets never leave the pod spec: planted credentials in env values, secret-named variables,
token-looking args, annotations, node names and GPU quantities never come back in a response
(status message, warnings, audit annotations, HTTP error bodies), in a log line (in process through
the JSON formatter, and on the stderr of a real ``gpu-admission serve`` at debug level), or in the
``check``/``explain`` output.

What counts as a secret: the value of a secret-named env variable (``HF_TOKEN``, ``*_API_KEY``,
``*PASSWORD*``, ... as ``container_env.is_secret_name`` says), any string shaped like a
well-known credential (``webhook.core.redaction.TOKEN_RE``), the userinfo of a URL and a credential
in its query, and a key-shaped string with no known prefix (``gsk_...``, a random 40-character token),
wherever it is written: in a plain env variable (``MODEL_URI``), an argument, a shell script. A model
name taken from a plain variable (``MODEL_ID``) is echoed on purpose: it is the point of the message;
the audit annotations quote it only when it is plain (``redaction.quotable``).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from live import (  # noqa: F401 - helpers; the fixtures are in conftest.py
    StartServer, encode, request_json,
)
from webhook.cli import main as cli
from webhook.core import settings as settings_mod
from webhook.core.redaction import REDACTED, redact
from webhook.server import admission
from webhook.server.app import create_app
from webhook.server.logs import JsonFormatter

KEY = "nvidia.com/gpu.product"
SECRETS = {
    "hf": "hf_PlantedAbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "openai": "sk-proj-PlantedZz9yX8wV7uT6sR5qP4oN3mL2kJ1i",
    "anthropic": "sk-ant-api03-PlantedQwErTyUiOpAsDfGhJkL0987",
    "github": "ghp_Planted1234567890abcdefghijABCDEFGHIJ",
    "github-fine": "github_pat_11PLANTED0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
    "gitlab": "glpat-PlantedXyZ0123456789abcd",
    "ngc": "nvapi-PlantedQWERTYuiop1234567890asdfghjklZX",
    "aws-id": "AKIAPLANTED000EXAMPL",
    "slack": "xoxb-1234567890-PlantedToken",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.PlantedSignature0123456789ab",
    "password": "Pl@nted-Passw0rd!-not-token-shaped",
    "aws-secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTEDKEY",
    # issue 25 point 6: nothing but a shape says these are credentials (none is in a secret-named variable)
    "url-user": "planteduser",
    "url-password": "Url-Passw0rd-Planted-9x",
    "url-user-only": "PlantedCloneUser",
    "query-token": "PlantedQueryValue.not.key.shaped",
    "groq": "gsk_PlantedGroq4mXk9LpR4tYw8ZbC1dFgHjK3sA6eUiOo0qWr5TyX",
    "xai": "xai-Pl4ntedR9tYw8ZbC1dFgHjK3sA6eUiOo0qWr5TyXq7vN2mXk9LpR4tYw8ZbC1dFgHjK3sA6eUiOo0qWr5",
    "random-env": "a8Kd93jfLq02mZx7Vb4NcT1yWp6sRe5uHg0oIiQk",
    "random-args": "7f3c9a1e5b2d8f4a6c0e9b7d3f1a5c8e2b4d6f0a",
}
MODEL_URL = (f"https://{SECRETS['url-user']}:{SECRETS['url-password']}@models.example.com/"
             "meta-llama/Llama-3.1-70B-Instruct")
"""A model URI with a password in it: the model is a catalog one, so only the userinfo is secret."""
PEM = "-----BEGIN PRIVATE KEY-----"


def secret_env() -> list[dict[str, Any]]:
    return [{"name": "HF_TOKEN", "value": SECRETS["hf"]}, {"name": "OPENAI_API_KEY", "value": SECRETS["openai"]},
            {"name": "ANTHROPIC_API_KEY", "value": SECRETS["anthropic"]},
            {"name": "GITHUB_PAT", "value": SECRETS["github"]}, {"name": "GL_TOKEN", "value": SECRETS["gitlab"]},
            {"name": "NGC_API_KEY", "value": SECRETS["ngc"]}, {"name": "AWS_ACCESS_KEY_ID", "value": SECRETS["aws-id"]},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": SECRETS["aws-secret"]},
            {"name": "SLACK_BOT_TOKEN", "value": SECRETS["slack"]}, {"name": "SESSION_JWT", "value": SECRETS["jwt"]},
            {"name": "DB_PASSWORD", "value": SECRETS["password"]},
            {"name": "TLS_PRIVATE_KEY", "value": PEM + "\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"}]


def pod(command: list[Any], *, env: list[dict[str, Any]] | None = None, gpus: Any = 4,
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        image: str = "vllm/vllm-openai:v0.10.1", with_secret_env: bool = True, **spec: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "srv", "image": image, "env": (env or []) + (secret_env() if with_secret_env else []),
                         "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    if command:
        c["command"] = command
    meta: dict[str, Any] = {"name": "p", "namespace": "ai"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [c], **spec}}


S = SECRETS
LLAMA = "meta-llama/Llama-3.1-70B-Instruct"
PODS = {
    "env-only": pod(["vllm", "serve", LLAMA, "-tp", "4"], nodeSelector={KEY: "NVIDIA-L40S"}),
    "api-key-args": pod(["vllm", "serve", LLAMA, "-tp", "4", "--api-key", S["openai"], "--hf-token", S["hf"]],
                        nodeSelector={KEY: "NVIDIA-L40S"}),
    "api-key-equals": pod(["vllm", "serve", LLAMA, "-tp", "4", f"--api-key={S['openai']}", f"--hf-token={S['hf']}"]),
    "token-as-model": pod(["vllm", "serve", S["hf"], "-tp", "4"]),
    "token-as-model-no-env": pod(["vllm", "serve", S["hf"], "-tp", "4"], with_secret_env=False),
    "token-as-model-flag": pod(["vllm", "serve", "--model", S["github"], "-tp", "8"]),
    "tokens-in-value-flags": pod(["vllm", "serve", "m", "-tp", S["jwt"], "--dtype", S["gitlab"],
                                  "--quantization", S["ngc"], "--kv-cache-dtype", S["slack"]]),
    "sh-script": pod(["sh", "-c", f"export HF_TOKEN={S['hf']}; OPENAI_API_KEY={S['openai']} vllm serve {LLAMA} "
                                  f"-tp $TP --api-key {S['openai']} --served-model-name {S['aws-id']}"],
                     env=[{"name": "TP", "value": S["jwt"]}]),
    "secret-value-as-model": pod(["vllm", "serve", "$(MODEL)", "-tp", "4"],
                                 env=[{"name": "MODEL", "value": S["aws-secret"]}]),
    "secret-ref-expanded": pod(["vllm", "serve", "$(HF_TOKEN)", "--tensor-parallel-size", "$(DB_PASSWORD)"]),
    "valuefrom-token-shaped-names": pod(["vllm", "serve", "$(M)", "-tp", "$(TP)"], env=[
        {"name": "M", "valueFrom": {"secretKeyRef": {"name": S["github"].lower(), "key": S["aws-id"]}}},
        {"name": "TP", "valueFrom": {"configMapKeyRef": {"name": "c", "key": S["ngc"]}}}]),
    "tgi-env": pod([], image="ghcr.io/huggingface/text-generation-inference:2.4", env=[
        {"name": "MODEL_ID", "value": S["hf"]}, {"name": "NUM_SHARD", "value": S["openai"]},
        {"name": "HUGGING_FACE_HUB_TOKEN", "value": S["hf"]}]),
    "annotations": pod(["vllm", "serve", "m"], annotations={
        "gpu-admission.io/model": S["github"], "gpu-admission.io/params": S["openai"],
        "gpu-admission.io/tier": S["ngc"], "gpu-admission.io/tensor-parallel": S["jwt"],
        "gpu-admission.io/mode": S["password"], "gpu-admission.io/group-size": S["aws-id"]}),
    "annotation-equals-secret-env": pod(["vllm", "serve", "m", "-tp", "4"], annotations={
        "gpu-admission.io/params": S["password"], "gpu-admission.io/model": S["aws-secret"]}),
    "node-name": pod(["vllm", "serve", LLAMA, "-tp", "4"], nodeName=S["github"].lower()),
    "gpu-quantity": pod(["vllm", "serve", LLAMA], gpus=S["openai"]),
    "group-label": pod(["vllm", "serve", LLAMA, "-tp", "4"], labels={"gpu-admission.io/group": S["slack"]}),
    "pin-value": pod(["vllm", "serve", LLAMA, "-tp", "4"], nodeSelector={KEY: S["hf"]}),
    # issue 25 point 6
    "url-userinfo-env": pod(["vllm", "serve", "$(MODEL_URI)", "-tp", "4"],
                            env=[{"name": "MODEL_URI", "value": MODEL_URL}], with_secret_env=False),
    "url-userinfo-args": pod(["vllm", "serve", "--model", MODEL_URL.replace("Llama-3.1-70B", "Llama-3.1-8B"),
                              "-tp", "2"], gpus=2, with_secret_env=False),
    "url-userinfo-sh": pod(["sh", "-c", f"MODEL={MODEL_URL}; vllm serve $MODEL --tensor-parallel-size 4"],
                           with_secret_env=False),
    "url-user-only": pod(["vllm", "serve", f"git+https://{S['url-user-only']}@github.com/org/model-7b", "-tp", "4"],
                         with_secret_env=False),
    "url-query-token": pod(["vllm", "serve", "$(MODEL_URI)", "-tp", "4"], env=[{"name": "MODEL_URI", "value":
                           f"https://models.example.com/llama-3-8b?revision=main&token={S['query-token']}"}],
                           with_secret_env=False),
    "groq-key-as-model": pod(["vllm", "serve", S["groq"], "-tp", "4"], with_secret_env=False),
    "groq-key-in-plain-env": pod(["vllm", "serve", "$(GROQ)", "-tp", "4"],
                                 env=[{"name": "GROQ", "value": S["groq"]}], with_secret_env=False),
    "xai-key-in-args": pod(["vllm", "serve", LLAMA, "-tp", "4", "--dtype", S["xai"]], with_secret_env=False),
    "random-token-in-env": pod(["vllm", "serve", "$(M)", "-tp", "4"],
                               env=[{"name": "M", "value": S["random-env"]}], with_secret_env=False),
    "random-token-in-tgi-env": pod([], image="ghcr.io/huggingface/text-generation-inference:2.4",
                                   env=[{"name": "MODEL_ID", "value": S["random-env"]}], with_secret_env=False),
    "random-token-in-args": pod(["vllm", "serve", LLAMA, "-tp", "4", "--quantization", S["random-args"]],
                                with_secret_env=False),
    "random-token-in-sh": pod(["sh", "-c", f"vllm serve {LLAMA} -tp 4 --dtype {S['random-env']} "
                                           f"--served-model-name {S['random-args']}"], with_secret_env=False),
}
NEW_SHAPES = [name for name in PODS if name.startswith(("url-", "groq-", "xai-", "random-"))]
"""The pods of issue 25 point 6: every secret in them is found by its shape alone."""
ENDPOINTS = ("/mutate", "/validate", "/validate/audit")


def review(obj: Any, uid: str = "uid-secrets", dry_run: bool = False) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "p", "namespace": "ai",
        "operation": "CREATE", "userInfo": {"username": "alice"}, "object": obj, "dryRun": dry_run}}


def leaks(text: str) -> list[str]:
    """Planted secrets found in ``text`` (also lower-cased, as node and label values are)."""
    low = text.lower()
    found = [name for name, value in SECRETS.items() if value in text or value.lower() in low]
    return found + (["pem"] if PEM in text else [])


def emitted(response: dict[str, Any]) -> str:
    """What a response says to people and logs: everything but the patch (which goes into the pod)."""
    return json.dumps({k: v for k, v in response.items() if k not in ("patch",)})


def env_secret_in_patch(response: dict[str, Any]) -> list[str]:
    """A patch must never copy an env secret anywhere either."""
    if "patch" not in response:
        return []
    text = base64.b64decode(response["patch"]).decode()
    env_values = {k: v for k, v in SECRETS.items()}
    return [k for k, v in env_values.items() if v in text]


@pytest.fixture()
def log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.DEBUG, logger="gpu_admission")
    return []


def formatted(caplog: pytest.LogCaptureFixture) -> str:
    fmt = JsonFormatter()
    return "\n".join(fmt.format(r) for r in caplog.records)


@pytest.mark.parametrize("name", list(PODS))
def test_no_secret_in_any_response_or_log_line(name: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gpu_admission")
    client = create_app(settings_mod.default()).test_client()
    for endpoint in ENDPOINTS:
        for dry_run in (False, True):
            resp = client.post(endpoint, json=review(PODS[name], dry_run=dry_run))
            assert resp.status_code == 200
            r = resp.get_json()["response"]
            assert leaks(emitted(r)) == [], (endpoint, emitted(r)[:1500])
            assert env_secret_in_patch(r) == [] or name in ("group-label", "pin-value"), r
    assert caplog.records, "no decision was logged"
    assert leaks(formatted(caplog)) == []


def test_the_redaction_is_visible_where_a_token_was_quoted() -> None:
    """Not silently dropped: the message still says what is wrong, with the token replaced."""
    client = create_app(settings_mod.default()).test_client()
    r = client.post("/validate", json=review(PODS["token-as-model-no-env"])).get_json()["response"]
    assert REDACTED in r["status"]["message"] and r["auditAnnotations"]["model"] == REDACTED
    r = client.post("/validate", json=review(PODS["annotation-equals-secret-env"])).get_json()["response"]
    assert f"gpu-admission.io/params='{REDACTED}'" in r["status"]["message"]


@pytest.mark.parametrize(("model_id", "shown"), [
    pytest.param(LLAMA, LLAMA, id="hf-id-from-env-is-shown"),
    pytest.param("/models/Llama-3.1-70B-Instruct", "/models/Llama-3.1-70B-Instruct", id="path-is-shown"),
    pytest.param(MODEL_URL, f"https://{REDACTED}@models.example.com/meta-llama/Llama-3.1-70B-Instruct",
                 id="url-is-shown-without-its-userinfo"),
    pytest.param("Planted free text model name", REDACTED, id="free-text-is-withheld"),
    pytest.param("s3://bucket/llama-3-8b?X-Amz-Date=20240101&X-Amz-Signature=f00d", REDACTED,
                 id="url-with-a-query-is-withheld"),
])
def test_audit_annotations_quote_an_env_value_only_when_plain(model_id: str, shown: str) -> None:
    """The audit log keeps annotations at every level, where the pod spec is not: a model read from
    a plain variable is shown when it is a name (``redaction.quotable``), ``[redacted]`` otherwise,
    in the ``model`` annotation and wherever the ``message`` annotation quoted it."""
    obj = pod([], image="ghcr.io/huggingface/text-generation-inference:2.4", with_secret_env=False,
              env=[{"name": "MODEL_ID", "value": model_id}, {"name": "NUM_SHARD", "value": "4"}])
    client = create_app(settings_mod.default()).test_client()
    for endpoint in ("/validate", "/validate/audit"):
        notes = client.post(endpoint, json=review(obj)).get_json()["response"]["auditAnnotations"]
        assert notes["model"] == shown, endpoint
        short = model_id.rsplit("/", 1)[-1]
        if shown == REDACTED:
            assert [k for k, v in notes.items() if model_id in v or short in v] == [], notes
            assert f"{REDACTED} " in notes["message"], notes["message"]  # replaced where quoted, not dropped
        else:
            assert short in notes["message"], notes["message"]


def test_bad_request_errors_do_not_echo_tokens() -> None:
    client = create_app(settings_mod.default()).test_client()
    body = review(PODS["env-only"])
    body["kind"] = S["hf"]
    resp = client.post("/validate", json=body)
    assert resp.status_code == 400 and leaks(resp.get_data(as_text=True)) == [] and REDACTED in resp.get_json()["error"]
    resp = client.post("/validate", data=b"{}", content_type=f"text/{S['openai']}")
    assert resp.status_code == 400 and leaks(resp.get_data(as_text=True)) == []


def test_an_exception_log_line_is_redacted(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A traceback quotes the exception's message, which may quote input: the formatter redacts."""
    def boom(*_a: Any, **_k: Any) -> Any:
        raise KeyError(f"unexpected model {S['hf']} with key {S['openai']}")
    monkeypatch.setattr(admission, "validate", boom)
    caplog.set_level(logging.DEBUG, logger="gpu_admission")
    client = create_app(settings_mod.default()).test_client()
    resp = client.post("/validate", json=review(PODS["env-only"]))
    assert resp.status_code == 500 and leaks(resp.get_data(as_text=True)) == []
    text = formatted(caplog)
    assert "Traceback" in text and "unexpected model" in text and leaks(text) == []


@pytest.mark.parametrize("names", [
    pytest.param(["token-as-model", "annotations", "node-name"], id="prefixed-tokens"),
    pytest.param(NEW_SHAPES, id="userinfo-query-and-key-shapes"),
])
def test_check_and_explain_output_do_not_echo_tokens(tmp_path: Path, names: list[str]) -> None:
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(yaml.safe_dump_all([PODS[name] for name in names]))
    for argv in (["check", str(manifest), "--output", "json"], ["check", str(manifest), "--output", "junit"],
                 ["check", str(manifest)], ["explain", str(manifest)]):
        out, err = io.StringIO(), io.StringIO()
        cli.main(argv, out=out, err=err)
        assert out.getvalue() and leaks(out.getvalue() + err.getvalue()) == [], argv


@pytest.mark.parametrize(("text", "expected"), [
    ("model hf_AbCdEfGhIjKlMnOpQrStUvWxYz at TP4", "model [redacted] at TP4"),
    ("key=sk-proj-AbCdEfGhIjKlMnOpQrStUv.", "key=[redacted]."),
    ("AKIAABCDEFGHIJKLMNOP,", "[redacted],"),
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"),  # real names stay
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
    ("mask-rcnn-abcdefghijklmnopqrstuvwxyz", "mask-rcnn-abcdefghijklmnopqrstuvwxyz"),  # sk- inside a word
    ("HF_TOKEN (model) comes from Secret hf key token", "HF_TOKEN (model) comes from Secret hf key token"),
])
def test_redaction_shapes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redaction_is_linear_on_hostile_text() -> None:
    import time
    hostile = ("hf_" + "a" * 19 + " ") * 20_000 + "sk-" * 50_000 + "eyJ" + "a." * 50_000
    started = time.process_time()
    redact(hostile)
    assert time.process_time() - started < 1.0


# ----------------------------------------------------------------------------- a real server


def test_no_secret_in_a_real_servers_responses_or_stderr(start_server: StartServer) -> None:
    server = start_server("--log-level", "debug")
    conn = server.connection()
    answers: list[str] = []
    try:
        for name, obj in PODS.items():
            for endpoint in ENDPOINTS:
                status, doc, _ = request_json(conn, "POST", endpoint, encode(review(obj, uid=f"uid-{name}")))
                assert status == 200, doc
                answers.append(emitted(doc["response"]))
        bad = review(PODS["env-only"])
        bad["apiVersion"] = S["github"]
        status, doc, _ = request_json(conn, "POST", "/validate", encode(bad))
        assert status == 400
        answers.append(json.dumps(doc))
    finally:
        conn.close()
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=30)
    stderr = server.stderr()
    assert stderr.count('"event":"decision"') >= len(PODS) * 2, stderr[-2000:]
    assert leaks("\n".join(answers)) == []
    assert leaks(stderr) == [], [line for line in stderr.splitlines() if leaks(line)][:5]


# ----------------------------------------------------------------------------- redact's prefilter

from hypothesis import example, given, settings as hsettings, strategies as st  # noqa: E402
from tests.properties import examples

from webhook.core.redaction import scrub  # noqa: E402

_PIECES = [*SECRETS.values(), "HF_", "Sk-", "GHP_", "AKIA", "asia-east1", "xoxb-", "eyJ", "-----begin rsa private key-----",
           "nvapi-", "github_pat_", "glpat-", "AIza", "\u017fk-", "\u212a", " ", "-", "_", "a", "Z", "0", "\u00e9",
           "://", "@", "?", "&", "=", "token=", "/", "+", "a8Kd93jfLq", "snapshots/", "sha256:"]


@pytest.mark.parametrize("text", [
    "plain decision line with no credential",
    "model HF_ABCDEFGHIJKLMNOPQRSTUVWX0123 quoted",  # upper-case prefix: IGNORECASE must still match
    "\u017fk-" + "a" * 30,  # the long s folds to s under IGNORECASE: non-ASCII text skips the prefilter
    "region asia-east1 is not a key",
    *SECRETS.values(),
], ids=lambda t: t[:24])
def test_redact_prefilter_matches_the_full_scan(text: str) -> None:
    assert redact(text) == scrub(text, shortcut=False)


@hsettings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=12), max_size=12).map("".join))
@example(";token=Pl@nted-Passw0rd!-not-token-shaped")  # a ";" parameter the shortcut skipped (CI, 4 Dec)
@example("a;b=1; password=x")
def test_redact_prefilter_never_skips_a_match(text: str) -> None:
    """The substring prefilters are shortcuts only: the result is always the full scan's."""
    assert redact(text) == scrub(text, shortcut=False)


@pytest.mark.parametrize(("text", "expected"), [
    # found by `make fuzz` (seed 1795984650): a mutated model annotation glued text before a token
    ("tier-mismatch: NaNghp_FuzzPlanted0123456789abcdefghijKLMN at TP4", "tier-mismatch: NaN[redacted] at TP4"),
    ("modelsk-proj-FuzzPlanted0123456789abcdefXYZ", "model[redacted]"),
    ("xhf_FuzzPlantedTokenAbCdEfGhIjKlMnOpQr12", "x[redacted]"),
    ("org/nvapi-FuzzPlanted0123456789abcdefghijkl", "org/[redacted]"),
    # word endings that look like a prefix stay words
    ("image flask-app-production-server-v2", "image flask-app-production-server-v2"),
    ("node disk-pressure-node-0123456789abc", "node disk-pressure-node-0123456789abc"),
    ("legacy sk-abcdefghijklmnopqrstuvwxyz012", "legacy [redacted]"),
], ids=["fuzz-found-github", "openai-project", "hf", "ngc", "flask", "disk", "openai-legacy"])
def test_tokens_glued_to_text_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@hsettings(max_examples=examples(400), deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(_PIECES) | st.text(max_size=12), max_size=8).map("".join),
                      max_size=6),
       values=st.lists(st.sampled_from([*SECRETS.values(), "s3cr3t-value", "\u00e9t\u00e9-secret"]), max_size=2))
def test_one_scan_of_a_replys_texts_never_skips_a_redaction(texts: list[str], values: list[str]) -> None:
    """``could_quote`` decides for all the texts of a reply at once: when it says no, ``redact``
    leaves every one of them as it is (so the reply may skip redacting them one by one)."""
    from webhook.core.redaction import could_quote

    if not could_quote(texts, values):
        assert [redact(t, values) for t in texts] == texts


@pytest.mark.parametrize(("texts", "values", "expected"), [
    pytest.param([], (), False, id="nothing"),
    pytest.param(["tier-mismatch: Llama at TP4", "pinned to hbm-nvlink"], (), False, id="plain-texts"),
    pytest.param(["a", "model hf_ABCDEFGHIJKLMNOPQRSTUVWX"], (), True, id="token-in-one-text"),
    pytest.param(["uses s3cr3t-value here"], ("s3cr3t-value",), True, id="secret-value"),
    pytest.param(["caf\u00e9"], (), False, id="non-ascii-plain"),
    pytest.param(["caf\u00e9 \u017fk-" + "a" * 30], (), True, id="non-ascii-folded-prefix"),
    pytest.param(["model https://u:p@host/m"], (), True, id="url-userinfo"),
    pytest.param(["model s3://bucket/m?X-Amz-Signature=abc"], (), True, id="query-secret"),
    pytest.param(["a", "model gsk_Q7vN2mXk9LpR4tYw8ZbC1dFgHjK3sA6eUiOo0qWr5TyX"], (), True, id="key-shape"),
    pytest.param(["pod 3f2504e0-4f89-11d3-9a0c-0305e82c3301 on NVIDIA-H100-80GB-HBM3"], (), False,
                 id="uid-and-product"),
])
def test_could_quote(texts: list[str], values: tuple[str, ...], expected: bool) -> None:
    from webhook.core.redaction import could_quote

    assert could_quote(texts, values) is expected
