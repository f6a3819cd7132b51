"""The verdict memo's finished replies, through the server's admission functions (moved from tests/core:
core tests import no server)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from tests.properties import examples

from webhook.core import verdicts
from webhook.core.settings import default as default_settings
from webhook.server import admission, review
from webhook.server.verdict_cache import VerdictCache
from tests.core.test_verdicts import SETTINGS, TEMPLATES, _pod, _with, stamped  # the core tests' builders


def _request(pod: dict[str, Any], uid: str = "u-1") -> review.Request:
    body = json.dumps({"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "namespace": pod["metadata"]["namespace"], "name": pod["metadata"].get("name"), "object": pod}}).encode()
    return review.parse(body, "application/json")


def _replies(pod: dict[str, Any], cache: VerdictCache | None, uid: str = "u-1") -> tuple[Any, Any]:
    """(/mutate reply, /validate reply) for ``pod``, with ``cache`` as the server's memo (None: fresh),
    each as the server sends it: a reply kept for an earlier copy comes encoded (``Outcome.wire``),
    and those bytes must be what encoding the reply gives."""
    memo = cache if cache is not None else VerdictCache(max_entries=0)  # one memo for both entries, as an app owns one
    req = _request(pod, uid)
    outcomes = (admission.mutate(req, SETTINGS, memo=memo), admission.validate(req, SETTINGS, mode="enforce", memo=memo))
    for outcome in outcomes:
        assert outcome.wire is None or outcome.wire == review.encode(outcome.review)
        if cache is None:
            assert outcome.wire is None  # nothing kept, nothing reused
    REUSED.extend(outcome for outcome in outcomes if outcome.wire is not None)
    return outcomes[0].review, outcomes[1].review


REUSED: list[admission.Outcome] = []


@hsettings(max_examples=examples(150), deadline=None)
@given(which=st.integers(min_value=0, max_value=len(TEMPLATES) - 1), seed=st.integers(min_value=0, max_value=2**32),
       copies=st.integers(min_value=2, max_value=5))
def test_a_cached_verdict_equals_a_fresh_one(which: int, seed: int, copies: int) -> None:
    """The property: warm the memo with one copy, then every other copy's cached reply is the reply
    a fresh judgement gives it."""
    _, owner, template = TEMPLATES[which]
    rng = random.Random(seed)
    pods = [stamped(owner, template, rng) for _ in range(copies)]
    cache = VerdictCache()
    REUSED.clear()
    first = _replies(pods[0], cache, uid="uid-0")
    for n, pod in enumerate(pods[1:], start=1):
        # a new request uid each time, as kube-apiserver sends: a kept reply must echo this one
        assert _replies(pod, cache, uid=f"uid-{n}") == _replies(pod, None, uid=f"uid-{n}")
    if verdicts.controller_made(pods[0]):
        assert cache.hits >= 2 * (copies - 1)  # the copies were answered from the memo
        # from the third copy on, every allowing reply is the one built for the second, kept encoded
        # (a denial names the pod; a verdict is not given a reply to keep until it is asked for again)
        allowing = sum(reply["response"]["allowed"] is True for reply in first)
        assert len(REUSED) == allowing * (copies - 2)
    else:  # a pod written by hand is never kept
        assert cache.hits == 0 and len(cache) == 0 and not REUSED


def test_cache_answers_only_for_the_same_settings_and_inventory() -> None:
    cache = VerdictCache()
    calls: list[int] = []
    pod = _pod()
    pod["metadata"]["generateName"] = "a-"

    def compute() -> int:
        calls.append(1)
        return len(calls)

    s1, s2 = default_settings(), object()
    assert cache.lookup(pod, s1, None, ("enforce", True), compute).value == 1
    assert cache.lookup(copy.deepcopy(pod), s1, None, ("enforce", True), compute).value == 1
    assert cache.lookup(pod, s2, None, ("enforce", True), compute).value == 2  # a reloaded policy
    assert cache.lookup(pod, s1, object(), ("enforce", True), compute).value == 3  # a new inventory
    assert cache.lookup(pod, s1, None, ("audit", True), compute).value == 4  # another mode
    assert cache.lookup(_with(pod, "metadata/labels/app", "y"), s1, None, ("enforce", True), compute).value == 5


def test_cache_is_bounded() -> None:
    cache = VerdictCache(max_entries=3)
    for i in range(10):
        cache.lookup(_with(_with(_pod(), "metadata/generateName", "a-"), "metadata/labels/app", str(i)),
                     None, None, (), lambda: i)
    assert len(cache) == 3


def test_reply_table_is_offered_on_hits_only_and_bounded() -> None:
    from webhook.server.verdict_cache import MAX_REPLIES

    cache = VerdictCache()
    pod = _with(_pod(), "metadata/generateName", "a-")
    assert cache.lookup(pod, None, None, (), lambda: "v") == ("v", None, "miss")  # judged now: nothing to keep into
    value, replies, result = cache.lookup(copy.deepcopy(pod), None, None, (), lambda: "other")
    assert value == "v" and replies is not None and result == "hit"
    for n in range(MAX_REPLIES + 3):
        replies[("variant", n)] = n
    assert len(replies) == MAX_REPLIES and cache.lookup(pod, None, None, (), lambda: "x").replies is replies
    assert cache.lookup(_with(_pod(), "metadata/name", "by-hand"), None, None, (), lambda: "h") == ("h", None, "unkept")


@pytest.mark.parametrize(("uid", "warnings"), [
    ("u-1", ["a warning"]),
    ('u-"2\\', []),  # a uid JSON must escape is echoed as encoding it would
    ("u-3", ["\x00uid\x00"]),  # NULs in a text are JSON like any other character
    ("u-4", ['"uid":"first"']),  # the uid member's bytes inside a text are escaped: no second match
], ids=["plain", "escaped-uid", "nul-in-text", "uid-member-in-text"])
def test_a_kept_reply_answers_byte_for_byte(uid: str, warnings: list[str]) -> None:
    reusable = review.Reusable.of(review.respond(None, allowed=True, uid="first", warnings=warnings))
    assert reusable is not None
    reply, wire = reusable.answer(uid)
    assert reply["response"]["uid"] == uid and wire == review.encode(reply)
    assert reply == review.respond(None, allowed=True, uid=uid, warnings=warnings)
    assert wire == review.encode(review.respond(None, allowed=True, uid=uid, warnings=warnings))


def test_a_reply_whose_uid_cannot_be_cut_out_is_encoded_afresh() -> None:
    reply = review.respond(None, allowed=True, uid="first", warnings=["w"])
    reply = {**reply, "extra": {"uid": "first"}}  # the uid member twice (no reply of ours has this)
    reusable = review.Reusable.of(reply)
    assert reusable is not None and reusable.head is None
    answered, wire = reusable.answer("second")
    assert answered["response"]["uid"] == "second" and wire == review.encode(answered)


def test_a_reply_without_a_response_is_not_kept() -> None:
    assert review.Reusable.of({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}) is None


def test_the_memo_metric_counts_hits_misses_and_unkept() -> None:
    """``gpu_admission_verdict_memo_total{result}``: the first copy of a controller's pod is a miss,
    the next a hit; a pod written by hand is unkept (its next copy would not look the same)."""
    from webhook.server.app import create_app

    app = create_app(SETTINGS)  # its own memo
    client = app.test_client()
    made = _pod()
    made["metadata"] = {"generateName": "m-", "namespace": "ns", "labels": {"app": "x", "pod-template-hash": "abc"},
                        "ownerReferences": [{"controller": True, "kind": "ReplicaSet", "name": "m", "uid": "r"}]}
    by_hand = _pod()
    for obj in (made, made, by_hand):
        body = json.dumps({"apiVersion": review.API_VERSION, "kind": review.KIND, "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
            "namespace": "ns", "object": obj}})
        assert client.post("/validate", data=body, content_type="application/json").status_code == 200
    text = app.extensions["gpu_admission"].metrics.exposition()[0].decode()
    found = {line.split("{")[1].split("}")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("gpu_admission_verdict_memo_total{")}
    assert found == {'result="miss"': 1.0, 'result="hit"': 1.0, 'result="unkept"': 1.0}
