"""A background look at what already runs: which workloads enforce would deny or warn today, and
where their GPU pods actually landed (issue 29).

Why: admission judges an object once, when it is written. A workload admitted before gpu-admission
was installed, or while its namespace was in audit, is never looked at again, and nobody sees the
picture this project exists for: the 70B pods that landed on L40S, the job whose pods straddle A100
and H100, the A100 nodes idle while small models hold them. This module answers from a snapshot of
the cluster (objects, their pods, the nodes), with the same engine and policy the webhook uses.

Each workload is judged once, at its top owner (a Deployment, not its ReplicaSets and pods; a
JobSet, not its Jobs; a PyTorchJob, not its pods): the owner chain is followed through
``metadata.ownerReferences`` (the ``controller`` reference, as the garbage collector does) while the
owner is in the snapshot. Its pods are the evidence of where it runs.

Pure: plain objects in, frozen values out; reading the cluster is the CLI's job
(:mod:`webhook.cli.audit`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.core import engine, operators
from webhook.core.domain import counted
from webhook.core.inventory import Inventory
from webhook.core.redaction import redact
from webhook.core.resources import DONE_PHASES, bound_gpus, used_gpus
from webhook.core.settings import Settings
from webhook.core.workloads import NOT_WORKLOADS

PASS, WARN, FAIL, SKIP, ERROR = "pass", "warn", "fail", "skip", "error"
"""A workload's result, in PolicyReport's words: ``fail`` is what enforce would deny, ``skip`` a GPU
workload that could not be judged (never a pass), ``error`` one whose judgement failed (a bug:
reported, never hidden, and the rest of the cluster is still judged)."""

MIXED = "mixed-products"
"""Rule code: the pods of one multi-pod group run on more than one GPU product."""
WRONG_TIER = "wrong-tier"
"""Rule code: a GPU pod runs on a product outside the tier its workload is judged for."""
UNTRUSTED_NODE = "untrusted-node"
"""Rule code: a multi-GPU pod runs on a node with mixed or mislabeled GPUs."""

BUILT_IN: tuple[tuple[str, str], ...] = (
    ("v1", "pods"), ("apps/v1", "replicasets"), ("apps/v1", "deployments"), ("apps/v1", "statefulsets"),
    ("apps/v1", "daemonsets"), ("batch/v1", "jobs"), ("batch/v1", "cronjobs"),
)
"""(apiVersion, resource) of the built-in workload kinds the webhook sees, and their pods."""
MODELS: tuple[tuple[str, str], ...] = (("ome.io/v1beta1", "basemodels"), ("ome.io/v1beta1", "clusterbasemodels"))
"""The context kinds no operator kind describes: OME's models, which its InferenceService reads
(webhook/core/operators/ome.py). ConfigMaps are not listed: the webhook does not read them either."""


BUILT_IN_KINDS: Mapping[str, str] = {"pods": "Pod", "replicasets": "ReplicaSet", "deployments": "Deployment",
                                     "statefulsets": "StatefulSet", "daemonsets": "DaemonSet", "jobs": "Job",
                                     "cronjobs": "CronJob"}


def listed_kinds() -> frozenset[tuple[str, str]]:
    """(API group, kind) of everything :func:`resources` lists: an object whose controller is one of
    these is judged at that controller, so only its evidence needs keeping (:func:`evidence`)."""
    out = {(v.rpartition("/")[0], BUILT_IN_KINDS[r]) for v, r in BUILT_IN}
    out |= {(k.api_version.rpartition("/")[0], k.kind) for k in operators.REGISTRY.kinds}
    return frozenset(out)


def evidence(obj: Mapping[str, Any], kinds: frozenset[tuple[str, str]]) -> Mapping[str, Any]:
    """What the audit reads of an object a listed controller owns: for a pod, its name, uid, owner,
    node, GPU requests and phase (where it landed, :func:`_landed`); for anything else (a
    ReplicaSet, a Job), its name, uid and owner (the chain to the top owner). ``obj`` as it is when
    its controller is not a listed kind (it is then judged itself). A cluster's pods and
    ReplicaSets are most of what an audit holds: their templates, env and volumes are dropped."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return obj
    owners = meta.get("ownerReferences")
    controller = next((o for o in owners if isinstance(o, Mapping) and o.get("controller") is True),
                      None) if isinstance(owners, list) else None
    if controller is None or (str(controller.get("apiVersion", "")).rpartition("/")[0],
                              controller.get("kind")) not in kinds:
        return obj
    slim_meta = {k: meta[k] for k in ("name", "namespace", "uid", "ownerReferences") if k in meta}
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": slim_meta}
    spec = obj.get("spec")
    if obj.get("kind") == "Pod" and isinstance(spec, Mapping):
        kept: dict[str, Any] = {k: spec[k] for k in ("nodeName",) if k in spec}
        for section in ("containers", "initContainers"):
            items = spec.get(section)
            if isinstance(items, list):
                kept[section] = [{k: c[k] for k in ("name", "resources", "restartPolicy") if k in c}
                                 for c in items if isinstance(c, Mapping)]
        out["spec"] = kept
        status = obj.get("status")
        out["status"] = {"phase": status.get("phase")} if isinstance(status, Mapping) else {}
    return out


def resources() -> tuple[tuple[str, str], ...]:
    """(apiVersion, resource) of everything an audit reads besides the nodes: the built-in workload
    kinds, every operator kind (their runtimes included, which other kinds take their pods from) and
    OME's models (:data:`MODELS`), once each."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for api_version, plural in (*BUILT_IN, *((k.api_version, k.plural) for k in operators.REGISTRY.kinds), *MODELS):
        # one version per resource: the API server serves every version of a resource's objects
        # (KubeRay's v1 and v1alpha1 RayClusters are the same objects), so a second would list them twice
        out.setdefault((api_version.rpartition("/")[0], plural), (api_version, plural))
    return tuple(out.values())


@dataclass(frozen=True)
class Landed:
    """A GPU pod of a workload as it is: the node it is bound to and that node's product."""

    pod: str
    node: str
    gpus: int
    value: str | None
    """The node's product label value; ``None`` when the node is not in the snapshot or has none."""
    product: str | None
    trusted: bool


@dataclass(frozen=True)
class Finding:
    """One result about a workload: a rule code, its result and the message (with the fix)."""

    rule: str
    result: str
    message: str
    template: str = ""


@dataclass(frozen=True)
class WorkloadAudit:
    """A workload judged at its top owner, with where its GPU pods run."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    result: str
    """The worst of its findings: ``fail`` > ``skip`` > ``warn`` > ``pass``."""
    findings: tuple[Finding, ...]
    landed: tuple[Landed, ...] = ()
    tier: str | None = None


@dataclass(frozen=True)
class Idle:
    """GPUs of one product no running pod requests."""

    value: str
    product: str | None
    nodes: int
    allocatable: int
    requested: int

    @property
    def idle(self) -> int:
        return max(self.allocatable - self.requested, 0)


@dataclass(frozen=True)
class Report:
    """The audit of one snapshot: its GPU workloads in the snapshot's order, and the capacity per
    product label value."""

    workloads: tuple[WorkloadAudit, ...]
    idle: tuple[Idle, ...] = ()


_ORDER = {PASS: 0, WARN: 1, SKIP: 2, ERROR: 3, FAIL: 4}


def worst(results: Iterable[str]) -> str:
    return max(results, key=_ORDER.__getitem__, default=PASS)


def _meta(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _controller(obj: Any) -> str | None:
    """The uid of ``obj``'s controller owner (the reference with ``controller: true``)."""
    owners = _meta(obj).get("ownerReferences")
    for ref in owners if isinstance(owners, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True and isinstance(ref.get("uid"), str):
            return ref["uid"]
    return None


def top_owners(objects: Sequence[Any]) -> dict[str, str]:
    """uid -> the uid of its top owner in ``objects`` (itself when its controller is not there).
    A cycle (impossible in a real cluster, possible in a hand-made dump) stops where it closes."""
    by_uid = {str(_meta(o).get("uid")): o for o in objects if isinstance(_meta(o).get("uid"), str)}
    top: dict[str, str] = {}
    for uid in by_uid:
        seen, current = {uid}, uid
        while True:
            parent = _controller(by_uid[current])
            if parent is None or parent not in by_uid or parent in seen:
                break
            seen.add(parent)
            current = parent
        top[uid] = current
    return top


def _phase(pod: Mapping[str, Any]) -> Any:
    status = pod.get("status")
    return status.get("phase") if isinstance(status, Mapping) else None


def _is_pod(obj: Any) -> bool:
    return isinstance(obj, Mapping) and obj.get("kind") == "Pod"


def audit(objects: Sequence[Any], settings: Settings, inventory: Inventory | None = None,
          *, context: Mapping[tuple[str, str, str], Any] | None = None,
          namespaces: Collection[str] = ()) -> Report:
    """The audit of a snapshot: ``objects`` are the workloads, their intermediate owners (ReplicaSets,
    Jobs) and their pods; ``inventory`` the cluster's GPU nodes. Every top owner that holds a pod
    template or is a bare pod is judged in enforce mode (what enforce would do today), as
    ``check`` judges (the mutating webhook's pins included); its GPU pods are checked where they
    run. ``namespaces``: judge only the workloads of these (all when empty); the idle capacity is
    always the whole cluster's."""
    top = top_owners(objects)
    pods_of: dict[str, dict[str, Mapping[str, Any]]] = {}
    for obj in objects:
        uid = _meta(obj).get("uid")
        if _is_pod(obj) and isinstance(uid, str):
            pods_of.setdefault(top.get(uid, uid), {}).setdefault(uid, obj)  # a pod listed twice counts once
    out = []
    seen: set[str] = set()
    for obj in objects:
        meta = _meta(obj)
        uid = meta.get("uid")
        if not isinstance(uid, str) or top.get(uid) != uid or uid in seen:
            continue  # judged at its owner, or already (an object listed twice)
        seen.add(uid)
        if isinstance(obj, Mapping) and obj.get("kind") in operators.REGISTRY.context_only:
            continue  # a runtime or model other kinds take their pods from: judged through them
        if not isinstance(obj, Mapping) or obj.get("kind") in NOT_WORKLOADS:
            continue
        if namespaces and meta.get("namespace") not in namespaces:
            continue
        if _is_pod(obj) and _phase(obj) in DONE_PHASES:
            continue  # a finished pod runs nothing and holds no GPU
        try:
            judged = engine.judge(engine.Request(_as_created(obj), mode="enforce", context=context), settings,
                                  inventory)
        except Exception as exc:  # noqa: BLE001 - a bug on one object: its one error result, the rest judged
            out.append(_failed(obj, exc))
            continue
        if not judged.results:
            continue  # a kind with no pod template and no GPU request: not a workload
        if not any(_gpu_work(r) for r in judged.results):
            continue  # no GPU template: not gpu-admission's business
        out.append(_workload(obj, judged, tuple(pods_of.get(uid, {}).values()), settings, inventory))
    return Report(tuple(out), idle(objects, settings, inventory) if inventory is not None else ())


def _as_created(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object as it was written: a running pod's ``spec.nodeName`` is the scheduler's binding,
    not a choice its author made (judged, it would read as a pin that bypasses the scheduler). Where
    the pod landed is the placement evidence instead (:func:`_landed`). A shallow copy; the snapshot
    is not changed."""
    spec = obj.get("spec")
    if obj.get("kind") != "Pod" or not isinstance(spec, Mapping) or "nodeName" not in spec:
        return obj
    return {**obj, "spec": {k: v for k, v in spec.items() if k != "nodeName"}}


def _failed(obj: Mapping[str, Any], exc: Exception) -> WorkloadAudit:
    meta = _meta(obj)
    message = (f"error: gpu-admission could not judge this {obj.get('kind')}: {type(exc).__name__}: "
               f"{str(exc)[:200]} (a bug: please report it with the object)")
    return WorkloadAudit(kind=str(obj.get("kind")), api_version=str(obj.get("apiVersion", "")),
                         namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                         uid=str(meta.get("uid")), result=ERROR, findings=(Finding("error", ERROR, message),))


def _gpu_work(r: engine.TemplateResult) -> bool:
    """A template gpu-admission has something to say about: it asks for GPUs (in any form it reads:
    whole GPUs, MIG slices, shares, DRA claims said in a note), or it was not judged."""
    return (r.profile.gpus_per_pod > 0 or bool(r.decision.violations) or r.template.found in ("unjudged", "templated")
            or bool(r.template.notes))


def _workload(obj: Mapping[str, Any], judged: engine.Judgement, pods: Sequence[Mapping[str, Any]],
              settings: Settings, inventory: Inventory | None) -> WorkloadAudit:
    meta = _meta(obj)
    findings: list[Finding] = []
    tier = None
    for r in judged.results:
        where = r.template.role or ""
        if r.template.found == "unjudged" or r.template.found == "templated":
            findings.append(Finding(engine.NOT_JUDGED, SKIP, "; ".join(r.decision.warnings), where))
            continue
        if r.profile.gpus_per_pod <= 0 and not r.decision.violations and not r.decision.warnings:
            continue
        tier = tier or r.decision.tier
        for v in r.decision.violations:
            findings.append(Finding(v.code, FAIL, v.whole(), where))
        for v in r.decision.misplaced:
            findings.append(Finding(v.code, WARN, v.whole(), where))
        echoed = {v.short() for v in r.decision.misplaced}
        for w in r.decision.warnings:
            if w not in echoed:
                findings.append(Finding(_code(w), WARN, w, where))
        if not r.decision.violations and not r.decision.misplaced and not r.decision.warnings:
            findings.append(Finding("admitted", PASS, f"{r.decision.tier or 'no tier'}", where))
    landed = _landed(pods, settings, inventory)
    findings.extend(_placement(judged, landed, settings))
    findings = list({(f.rule, f.result, f.message): f for f in findings}.values())  # templates that say the same
    secrets = judged.secrets  # messages may quote a command line: never a secret env value of it
    if secrets:
        findings = [replace(f, message=redact(f.message, secrets)) for f in findings]
    return WorkloadAudit(kind=str(obj.get("kind")), api_version=str(obj.get("apiVersion", "")),
                         namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                         uid=str(meta.get("uid")), result=worst(f.result for f in findings),
                         findings=tuple(findings), landed=landed, tier=tier)


def _code(warning: str) -> str:
    """The rule code a warning starts with (``numa-unaligned: ...``), else ``warning``."""
    head, sep, _ = warning.partition(":")
    return head if sep and head and all(c.isalnum() or c == "-" for c in head) and len(head) <= 48 else "warning"


def _landed(pods: Sequence[Mapping[str, Any]], settings: Settings, inventory: Inventory | None) -> tuple[Landed, ...]:
    out = []
    for pod in pods:
        bound = bound_gpus(pod, settings.gpu_resources)
        if bound is None or bound[1] <= 0:
            continue
        node, gpus = bound
        facts = inventory.nodes.get(node) if inventory is not None else None
        out.append(Landed(str(_meta(pod).get("name") or ""), node, gpus, facts.value if facts else None,
                          facts.product if facts else None, bool(facts and facts.trusted)))
    return tuple(sorted(out, key=lambda x: x.pod))


def _placement(judged: engine.Judgement, landed: Sequence[Landed], settings: Settings) -> list[Finding]:
    """Where the workload's GPU pods run against what it is judged for: one product per multi-pod
    group, the tier's products, trusted nodes for multi-GPU pods."""
    if not landed:
        return []
    out = []
    grouped = any(r.profile.pods > 1 and r.profile.gpus_per_pod > 0 for r in judged.results)
    values = sorted({x.value or "?" for x in landed})
    if grouped and len(values) > 1:
        by = ", ".join(f"{v} ({sum(1 for x in landed if (x.value or '?') == v)} pods)" for v in values)
        out.append(Finding(MIXED, FAIL, f"{MIXED}: the pods of one group run on {len(values)} GPU products: {by}; "
                           f"recreate them after admission pins one product (or pin one yourself)"))
    tiers = {r.decision.tier for r in judged.results if r.decision.tier}
    allowed = {p for t in settings.tiers if t.name in tiers for p in t.products}
    if allowed:
        wrong = [x for x in landed if x.product is not None and x.product not in allowed]
        if wrong:
            names = ", ".join(f"{x.pod} on {x.node} ({x.value})" for x in wrong[:5]) + (" ..." if len(wrong) > 5 else "")
            verb = "runs" if len(wrong) == 1 else "run"
            out.append(Finding(WRONG_TIER, WARN, f"{WRONG_TIER}: {counted(len(wrong), 'GPU pod')} {verb} outside "
                               f"tier {', '.join(sorted(tiers))}: {names}; the webhook pins new pods of it there, "
                               f"these move when they are recreated"))
    untrusted = [x for x in landed if x.gpus > 1 and x.value is not None and not x.trusted]
    if untrusted:
        names = ", ".join(f"{x.pod} on {x.node}" for x in untrusted[:5])
        out.append(Finding(UNTRUSTED_NODE, WARN, f"{UNTRUSTED_NODE}: multi-GPU pods on nodes with mixed or "
                           f"mislabeled GPUs: {names}"))
    return out


def idle(objects: Sequence[Any], settings: Settings, inventory: Inventory) -> tuple[Idle, ...]:
    """Per product label value: trusted nodes, allocatable GPUs and what running pods request."""
    once = {_meta(o).get("uid") or id(o): o for o in objects if _is_pod(o)}  # a pod listed twice holds its GPUs once
    requested = used_gpus(once.values(), settings.gpu_resources)
    out = []
    for value, pool in inventory.pools().items():
        members = [inventory.nodes[n] for n in pool.nodes]
        trusted = [n for n in members if n.trusted]
        out.append(Idle(value, pool.product, len(members), sum(n.allocatable for n in trusted),
                        sum(requested.get(n.name, 0) for n in trusted)))
    return tuple(out)
