"""Issue 25, point 4, at the HTTP door: a count written with a digit of another script is judged, not
a crash. ``"²"`` passed ``str.isdigit()`` and then made ``int()`` raise, so each review below was
answered HTTP 500 (an apiserver with ``failurePolicy: Fail`` refuses the object with no reason a user
can act on). Now every reader takes ASCII digits only (``webhook.core.counts``): each review gets
HTTP 200 and a judgement, on both endpoints."""

from __future__ import annotations

from typing import Any

import pytest

import fuzzing
from webhook.core import settings as settings_mod
from webhook.server.app import create_app

LLAMA_70B = "meta-llama/Llama-3.1-70B-Instruct"
TP4 = ["vllm", "serve", LLAMA_70B, "-tp", "4"]
TRITON = "nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3"


def _deployment(replicas: Any) -> dict[str, Any]:
    spec = fuzzing.pod(fuzzing.container(TP4, 4))["spec"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ai"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}}}


def _pod(command: list[str], gpus: Any = 4, **meta_or_spec: Any) -> dict[str, Any]:
    image = TRITON if command[0] == "mpirun" else "vllm/vllm-openai:v0.10.1"
    return fuzzing.pod(fuzzing.container(command, gpus, image=image), **meta_or_spec)


# (object, API group, what /validate's message says: the count was read as no count)
CASES = [
    pytest.param(_pod(["vllm", "serve", LLAMA_70B], annotations={"gpu-admission.io/tensor-parallel": "\u00b2"}), "",
                 "invalid-annotation: annotation gpu-admission.io/tensor-parallel=", id="annotation-tensor-parallel"),
    pytest.param(_pod(TP4, labels={"gpu-admission.io/group": "g"}, annotations={"gpu-admission.io/group-size": "\u00b2"}),
                 "", "at TP4 uses 4 GPUs per pod", id="annotation-group-size"),
    pytest.param(_pod(TP4, labels={"leaderworkerset.sigs.k8s.io/group-key": "k"},
                      annotations={"leaderworkerset.sigs.k8s.io/size": "\u00b2"}),
                 "", "at TP4 uses 4 GPUs per pod", id="label-lws-size"),
    pytest.param(_pod(["sh", "-c", f"exec vllm serve {LLAMA_70B} -tp $\u00b2"]),
                 "", "at TP1 uses 4 GPUs per pod", id="sh-c-positional"),
    pytest.param(_pod(["mpirun", "-n", "\u00b2", "tritonserver", "--model-repository=/models"]),
                 "", "uses 4 GPUs per pod", id="mpirun-n"),
    pytest.param(_deployment("\u00b2"), "apps", None, id="replicas-string"),
    pytest.param(_pod(TP4, "\uff14"), "", "invalid-gpu-request: nvidia.com/gpu limits '\uff14' is not a quantity",
                 id="quantity-fullwidth"),
    pytest.param(_pod(TP4, "\u00b2"), "", "invalid-gpu-request", id="quantity-superscript"),
    pytest.param(_pod(TP4, affinity=fuzzing.required([fuzzing.expr("example.com/memory-gib", "Gt", "9" * 5000)])),
                 "", "at TP4 uses 4 GPUs per pod", id="node-affinity-gt-huge"),
]


@pytest.fixture(scope="module")
def client() -> Any:
    return create_app(settings_mod.default()).test_client()


@pytest.mark.parametrize(("obj", "group", "says"), CASES)
def test_a_non_ascii_count_is_judged_not_a_500(client: Any, obj: dict[str, Any], group: str,
                                               says: str | None) -> None:
    body = fuzzing.encode(fuzzing.envelope(obj, group=group))
    for path in ("/validate", "/mutate"):
        resp = client.post(path, data=body, content_type="application/json")
        assert resp.status_code == 200, (path, resp.get_data()[:300])
        response = resp.get_json()["response"]
        assert response["uid"] == "seed" and isinstance(response["allowed"], bool)
        if path == "/mutate":
            assert response["allowed"] is True
            continue
        assert response["auditAnnotations"]["decision"] in ("allowed", "denied")  # judged, not skipped
        if says is not None:
            assert says in response["status"]["message"], response
        else:
            assert response["allowed"] is True


def test_the_fuzzer_writes_these_spellings_where_counts_are_read() -> None:
    """The alphabet that would have found issue 25: non-ASCII digits, other Unicode, NUL."""
    assert {"\u00b2", "\u0663", "\uff11\uff12"} <= set(fuzzing.NOT_ASCII_DIGITS)
    assert any("\u0301" in s for s in fuzzing.OTHER_UNICODE) and any("\u202e" in s for s in fuzzing.OTHER_UNICODE)
    assert "\x00" in fuzzing.NUL
    assert set(fuzzing.NOT_ASCII_DIGITS + fuzzing.NUL) <= set(fuzzing.COUNT_TEXTS) & set(fuzzing.STRINGS)
    mutator = fuzzing.Mutator(25)
    review = fuzzing.envelope(_deployment(2), group="apps")
    applied = [a for _ in range(400) for a in mutator.mutate(review)[1]]
    assert {"count:0", "count:1", "count:2", "count:3", "count:replicas", "count:affinity"} <= set(applied)
