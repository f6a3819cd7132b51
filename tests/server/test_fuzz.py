"""Bad input at the HTTP front door: mutation fuzzing (``tests/fuzzing.py``) and hypothesis over
``app.test_client()``, plus the limits that keep a hostile review cheap.

CI runs at least 20,000 generated reviews (``FUZZ_REVIEWS``, default 20,000 over two policies) and
prints the counts; ``make fuzz`` runs the same with ``FUZZ_REVIEWS=300000``, a fresh ``FUZZ_SEED``
and ``FUZZ_EXAMPLES=3000`` hypothesis examples, and writes the figures to ``FUZZ_REPORT``.
A failure names the seed and prints the request that broke the contract.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
import zlib
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fuzzing
from webhook.core import settings as settings_mod
from webhook.core.inference import MAX_CONTAINERS
from webhook.server.app import create_app

REVIEWS = int(os.environ.get("FUZZ_REVIEWS", "20000"))
SEED = int(os.environ.get("FUZZ_SEED", "20260601"))
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))

POLICIES = {
    "default": ({}, 0.8),
    # audit everywhere, the pod annotation honoured, no mutation, GKE label scheme: other code paths
    "variant": ({"mode": "audit", "allowAuditAnnotation": True, "mutate": False}, 0.1),
    "gke": ({"labelScheme": "gke"}, 0.1),
}


class Totals:
    def __init__(self) -> None:
        self.stats = fuzzing.Stats()
        self.hypothesis_stats = fuzzing.Stats()
        self.lines: list[str] = []
        self.hypothesis = 0


@pytest.fixture(scope="module")
def totals(request: pytest.FixtureRequest) -> Iterator[Totals]:
    """Counts over the whole module, printed at its end (and written to ``FUZZ_REPORT`` if set)."""
    t = Totals()
    yield t
    total = t.stats.reviews + t.hypothesis
    summary = (f"fuzz total: {total} generated reviews ({t.stats.reviews} mutation-fuzzed, {t.hypothesis} "
               f"hypothesis), seed {SEED}")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        print("\n" + "\n".join(t.lines + [summary]), flush=True)
    report = os.environ.get("FUZZ_REPORT")
    if report:
        with open(report, "w") as fh:
            json.dump({"seed": SEED, "total": total, "hypothesis_examples": t.hypothesis,
                       "mutation": t.stats.as_dict(), "lines": t.lines}, fh, indent=2)


@pytest.fixture(scope="module")
def seeds() -> list[fuzzing.Seed]:
    return fuzzing.corpus()


def _app(overrides: dict[str, Any]) -> Any:
    policy = settings_mod.from_mapping(overrides) if overrides else settings_mod.default()
    return create_app(policy).test_client()


@pytest.fixture(autouse=True)
def quiet_logs(caplog: pytest.LogCaptureFixture) -> None:
    # a decision log line per review would make the fuzz run mostly about logging
    caplog.set_level("ERROR", logger="gpu_admission")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_mutation_fuzzing_keeps_the_contract(policy: str, seeds: list[fuzzing.Seed], totals: Totals,
                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    overrides, share = POLICIES[policy]
    n = max(len(seeds), int(REVIEWS * share))
    seed = SEED + zlib.crc32(policy.encode()) % 1000
    try:
        stats = fuzzing.run(_app(overrides), reviews=n, seed=seed, seeds=seeds)
    except fuzzing.ContractError as exc:
        repro = tmp_path_factory.mktemp("fuzz") / "failing-review.json"
        repro.write_bytes(exc.body)
        raise AssertionError(f"seed {seed}, policy {policy}: {exc}\nwhole request: {repro} (curl --data-binary "
                             f"@{repro} ... {exc.endpoint})") from None
    totals.stats.merge(stats)
    totals.lines.append(stats.line(policy))
    assert stats.reviews >= n
    if n >= 1000:  # the run exercised what it should (not just the seeds)
        assert stats.statuses.get(200, 0) > n // 2 and stats.statuses.get(400, 0) > n // 50
        if policy != "variant":  # mutate: false patches nothing
            assert stats.patches_applied > n // 50 and stats.schema_checked > 0 and stats.idempotence_checked > 0


# ----------------------------------------------------------------------------- hypothesis

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40) | st.sampled_from(fuzzing.STRINGS[:60]),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(
        st.sampled_from(fuzzing.FIELD_NAMES) | st.text(max_size=8), children, max_size=6),
    max_leaves=40,
)

ENVELOPE_SLOTS = ["apiVersion", "kind", "request", "request.uid", "request.kind", "request.operation",
                  "request.object", "request.dryRun", "request.subResource", "request.name", "request.namespace",
                  "request.object.spec", "request.object.metadata", "request.object.kind"]
POD_SLOTS = ["containers", "containers.0", "containers.0.resources", "containers.0.resources.limits",
             "containers.0.resources.limits.nvidia.com/gpu", "containers.0.command", "containers.0.args",
             "containers.0.env", "containers.0.env.0", "containers.0.envFrom", "containers.0.image",
             "initContainers", "nodeSelector", "nodeName", "affinity", "affinity.nodeAffinity",
             "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
             "affinity.podAffinity", "tolerations"]


def _put(doc: Any, dotted: str, value: Any) -> None:
    """Set ``value`` at a dotted path (list indexes as numbers; ``nvidia.com/gpu`` kept whole)."""
    parts = dotted.replace("nvidia.com/gpu", "\0").split(".")
    parts = [p.replace("\0", "nvidia.com/gpu") for p in parts]
    cur = doc
    for part in parts[:-1]:
        key: Any = int(part) if part.isdigit() and isinstance(cur, list) else part
        if isinstance(cur, dict):
            if not isinstance(cur.get(key), (dict, list)):
                cur[key] = {}
            cur = cur[key]
        elif isinstance(cur, list) and isinstance(key, int) and key < len(cur):
            cur = cur[key]
        else:
            return
    last = parts[-1]
    if isinstance(cur, dict):
        cur[last] = value
    elif isinstance(cur, list) and last.isdigit() and int(last) < len(cur):
        cur[int(last)] = value


def _gpu_pod_review() -> dict[str, Any]:
    return fuzzing.envelope(fuzzing.hand_pod("vllm-70b-tp4"))


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(slot=st.sampled_from(ENVELOPE_SLOTS), value=json_values,
       endpoint=st.sampled_from(["/mutate", "/validate", "/validate/audit"]))
def test_any_json_in_the_envelope(slot: str, value: Any, endpoint: str, totals: Totals) -> None:
    doc = _gpu_pod_review()
    _put(doc, slot, value)
    checker = fuzzing.Checker(_client())
    checker.check(endpoint, fuzzing.encode(doc), "application/json", totals.hypothesis_stats, f"{slot}={value!r:.80}")
    totals.hypothesis += 1


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(slot=st.sampled_from(POD_SLOTS), value=json_values, endpoint=st.sampled_from(["/mutate", "/validate"]))
def test_any_json_where_the_engine_reads(slot: str, value: Any, endpoint: str, totals: Totals) -> None:
    doc = _gpu_pod_review()
    _put(doc["request"]["object"]["spec"], slot, value)
    checker = fuzzing.Checker(_client())
    checker.check(endpoint, fuzzing.encode(doc), "application/json", totals.hypothesis_stats, f"{slot}={value!r:.80}")
    totals.hypothesis += 1


_CLIENT: list[Any] = []


def _client() -> Any:
    """One app for all hypothesis examples (building one per example would dominate the run)."""
    if not _CLIENT:
        _CLIENT.append(_app({}))
    return _CLIENT[0]


# ----------------------------------------------------------------------------- decided behaviours

def _post(client: Any, path: str, body: bytes) -> tuple[int, Any]:
    resp = client.post(path, data=body, content_type="application/json")
    return resp.status_code, resp.get_json()


def test_duplicate_keys_the_last_one_wins_as_in_go() -> None:
    """kube-apiserver never sends duplicate keys (it encodes the object itself); should a client do,
    the last value wins, as in Go's encoding/json, and the request is judged, not refused or crashed."""
    client = _app({})
    body = fuzzing.encode(_gpu_pod_review())
    dup_uid = body.replace(b'"request":{"uid":"seed"', b'"request":{"uid":"first","uid":"second"', 1)
    status, doc = _post(client, "/validate", dup_uid)
    assert status == 200 and doc["response"]["uid"] == "second"
    pinned = fuzzing.envelope(fuzzing.hand_pod("vllm-70b-a100"))  # pinned to A100: allowed
    raw = fuzzing.encode(pinned)
    # a first spec that pins to L40S, then the real (A100) one: judged on the A100 one
    l40s = json.dumps(fuzzing.hand_pod("vllm-70b-l40s")["spec"], separators=(",", ":")).encode()
    dup_spec = raw.replace(b'"spec":{"containers"', b'"spec":' + l40s + b',"spec":{"containers"', 1)
    assert dup_spec != raw
    status, doc = _post(client, "/validate", dup_spec)
    assert status == 200 and doc["response"]["allowed"] is True


@pytest.mark.parametrize(("literal", "status"), [
    (b"NaN", 200), (b"Infinity", 200), (b"-Infinity", 200), (b"1e999", 200), (b"1e308", 200),
    (b"1" + b"0" * 400, 200),  # a 400-digit GPU count: judged (invalid-gpu-request), not an overflow
    (b"9" * 5000, 400),  # past Python's 4,300-digit int limit: regression, was a 500
])
def test_odd_numbers_never_crash(literal: bytes, status: int) -> None:
    """Python's parser takes NaN/Infinity (Go's does not, and the apiserver never sends them): a GPU
    count of NaN or 1e308 is a denial, never a 500."""
    client = _app({})
    body = fuzzing.encode(_gpu_pod_review()).replace(b'"nvidia.com/gpu":4', b'"nvidia.com/gpu":' + literal, 1)
    for path in ("/validate", "/mutate"):
        got, doc = _post(client, path, body)
        assert got == status, doc
        if status == 200:
            assert doc["response"]["uid"] == "seed"
            if path == "/validate":
                assert doc["response"]["allowed"] is False and "invalid-gpu-request" in doc["response"]["status"]["message"]
        else:
            assert "digits" in doc["error"]


@pytest.mark.parametrize("depth", [100, 500, 900])
def test_deeply_nested_object_is_judged_not_crashed(depth: int) -> None:
    """Regression: a group member with a deeply nested spec hit the recursion limit in the patch
    builder (a deep copy of the whole spec) and got a 500 from /mutate."""
    review = fuzzing.envelope(fuzzing.hand_pod("group-member"))  # group-member: node + pod affinity patch
    deep: Any = "x"
    for _ in range(depth):
        deep = [deep]
    review["request"]["object"]["spec"]["x-unknown"] = deep
    client = _app({})
    for path in ("/mutate", "/validate"):
        status, doc = _post(client, path, fuzzing.encode(review))
        assert status in (200, 400) and (status == 200 or "nested" in doc["error"]), (path, status, doc)
        if path == "/mutate" and status == 200:
            assert "patch" in doc["response"]


# ----------------------------------------------------------------------------- limits


def _cpu(fn: Any) -> float:
    """CPU seconds of ``fn()``, its own: the objects earlier tests left in this long pytest process
    are frozen out of the garbage collector's walks while it runs (a server worker's heap holds none
    of them). Without this, a full-suite run once measured 1.64 s for a request that takes 0.65 s
    alone: the collections its 4 MiB body triggers walked the whole suite's heap."""
    gc.collect()
    gc.freeze()
    try:
        started = time.process_time()
        fn()
        return time.process_time() - started
    finally:
        gc.unfreeze()


def test_many_containers_are_cut_with_a_warning_and_stay_fast() -> None:
    """The API server sets no limit on containers per pod: a 4 MiB pod of tiny containers took 5 s
    (over the 3 s webhook timeout). Only MAX_CONTAINERS are read for a launcher, GPU containers
    first, with a warning; every container's GPUs still count."""
    tiny = [{"name": f"c{i}", "image": "x", "command": ["sleep", "1"]} for i in range(60_000)]
    gpu = {"name": "vllm", "image": "vllm/vllm-openai", "resources": {"limits": {"nvidia.com/gpu": 4}},
           "command": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "-tp", "4"]}
    obj = fuzzing.pod(*tiny, gpu)  # the GPU container hides at the very end
    body = fuzzing.encode(fuzzing.envelope(obj))
    assert 3 * 1024 * 1024 < len(body) < 4 * 1024 * 1024
    client = _app({})
    result: dict[str, Any] = {}
    took = _cpu(lambda: result.update(_post(client, "/validate/audit", body)[1]))
    r = result["response"]
    assert any(f"only {MAX_CONTAINERS}" in w for w in r["warnings"]), r["warnings"]
    assert r["auditAnnotations"]["model"] == "meta-llama/Llama-3.1-70B-Instruct"  # found behind 60,000 others
    assert r["auditAnnotations"]["gpus-per-pod"] == "4"
    assert took < 1.5, f"{took:.2f} s CPU"


def test_a_list_object_is_not_expanded() -> None:
    """Regression: a review whose object was a v1 List of 16,000 pods judged every one (10 s, a 9 MB
    answer). kube-apiserver never sends a List: it is judged as the one object it is."""
    items = [fuzzing.hand_pod("vllm-70b-l40s") for _ in range(2_000)]
    review = fuzzing.envelope({"apiVersion": "v1", "kind": "List", "metadata": {"name": "x"}, "items": items},
                              kind="Pod")
    client = _app({})
    result: dict[str, Any] = {}
    took = _cpu(lambda: result.update(_post(client, "/validate", fuzzing.encode(review))[1]))
    assert result["response"] == {"uid": "seed", "allowed": True} and took < 1.0


HOSTILE_ARGS = [
    ("brace-bomb", ["sh", "-c", "${" * 200_000]),
    ("paren-bomb", ["sh", "-c", "$(" * 200_000]),
    ("kubelet-paren-bomb", ["vllm", "serve", "$(" * 200_000]),
    ("nested-defaults", ["sh", "-c", "${A:-${B:-${C:-${D:-x}}}} " * 20_000]),
    ("quote-soup", ["sh", "-c", "'\"`\\" * 100_000]),
    ("operator-soup", ["sh", "-c", "&&;|>" * 100_000]),
    ("flag-soup", ["vllm", "serve", "m"] + ["--tensor-parallel-size=", "-tp", "--"] * 50_000),
    ("model-regex-bait", ["vllm", "serve", "7b-" * 100_000 + "x"]),
    ("size-regex-bait", ["vllm", "serve", "1." * 150_000 + "1b"]),
]


@pytest.mark.parametrize("command", [h[1] for h in HOSTILE_ARGS], ids=[h[0] for h in HOSTILE_ARGS])
def test_pathological_args_finish_fast_over_http(command: list[str]) -> None:
    """No pattern can backtrack without bound: every regex is anchored or bounded and every input
    is capped (512 items, 65,536 characters per item, 512 script words, 512 characters of a model
    name), so a review of megabytes of hostile args is judged in well under the 3 s timeout."""
    obj = fuzzing.pod(fuzzing.container(command, 4))
    body = fuzzing.encode(fuzzing.envelope(obj))
    client = _app({})
    for path in ("/validate", "/mutate"):
        result: dict[str, Any] = {}
        took = _cpu(lambda: result.update({"r": _post(client, path, body)}))
        status, doc = result["r"]
        assert status in (200, 413), doc
        assert took < 1.0, f"{path}: {took:.2f} s CPU for {len(body)} bytes"


@pytest.mark.parametrize("env", [
    pytest.param([{"name": "V", "value": "$(V)$(V)"}] * 64, id="self-doubling"),
    pytest.param([{"name": "V0", "value": "x" * 64}] + [{"name": f"V{i + 1}", "value": f"$(V{i})$(V{i})"}
                                                       for i in range(64)], id="chain-doubling"),
    pytest.param([{"name": "BIG", "value": "y" * 100_000}, {"name": "M", "value": "$(BIG)" * 5_000}], id="wide"),
])
def test_env_expansion_is_no_billion_laughs_bomb(env: list[dict[str, Any]]) -> None:
    """Regression (found by the fuzzer): env values that reference the previous ones doubled at each
    entry, so 2 KiB of env asked for terabytes (MemoryError). Expansion is capped per value and per
    container; the review is judged in milliseconds and the capped variables count as unknown."""
    obj = fuzzing.pod(fuzzing.container(["vllm", "serve", "$(V)", "--tensor-parallel-size", "4"], 4, env=env))
    body = fuzzing.encode(fuzzing.envelope(obj))
    client = _app({})
    for path in ("/validate/audit", "/mutate"):
        result: dict[str, Any] = {}
        took = _cpu(lambda: result.update({"r": _post(client, path, body)}))
        status, doc = result["r"]
        assert status == 200 and doc["response"]["uid"] == "seed", doc
        assert took < 1.0, f"{path}: {took:.2f} s CPU"
