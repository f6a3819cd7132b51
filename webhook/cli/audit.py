"""``gpu-admission audit``: what enforce would deny or warn in a running cluster today, and where the
GPU pods of each workload actually run (issue 29).

I/O lives here, at the edge: listing the workloads, their pods and the nodes through the
``kubernetes`` client in pages (``limit``/``continue``), or reading a saved ``kubectl get ... -o
yaml`` dump (``--from``). The judgement is :mod:`webhook.core.audit` (pure), the same engine and
policy as the webhook and ``check``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from webhook.cli import sources
from webhook.cli.inventory import build as build_inventory
from webhook.core import audit as audit_mod, engine, nodepools
from webhook.core.inventory import node_facts
from webhook.core.nodepools import nodepool_objects
from webhook.core.redaction import redact
from webhook.core.settings import Settings, SettingsError, load as load_settings
from webhook.core.workloads import documents

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PAGE = 500
"""Objects per list call: what ``kubectl`` asks for (its ``--chunk-size`` default)."""
_LISTED_KINDS = audit_mod.listed_kinds()
PROGRESS_EVERY = 2000
"""A progress line on stderr every this many objects read (a large cluster takes a while)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", metavar="FILE", action="append", default=[],
                        help="read a saved dump instead of the cluster: `kubectl get nodes,pods,deployments,"
                             "statefulsets,daemonsets,replicasets,jobs,cronjobs,<operator kinds> -A -o yaml`; "
                             "repeatable")
    parser.add_argument("--kubeconfig", metavar="FILE", default=None,
                        help="kubeconfig of the cluster (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--namespace", "-n", metavar="NS", action="append", default=[],
                        help="only these namespaces (repeatable; default: all)")
    parser.add_argument("--output", choices=("text", "json", "junit"), default="text", help="report format")
    parser.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        settings = load_settings(args.config, read=Path.read_bytes)
    except SettingsError as exc:
        print(f"gpu-admission audit: {exc}", file=err)
        return EXIT_USAGE
    started = time.monotonic()
    try:
        objects = _from_files(args.source) if args.source else _from_cluster(args.kubeconfig, err)
    except (sources.InputError, NeedsExtra) as exc:
        print(f"gpu-admission audit: {exc}", file=err)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - credentials, RBAC, network: one clear line, exit 2
        print(f"gpu-admission audit: cannot read the cluster: {type(exc).__name__}: {str(exc)[:300]}", file=err)
        return EXIT_USAGE
    report = judge_snapshot(objects, settings, namespaces=frozenset(args.namespace))
    render = {"json": render_json, "junit": render_junit, "text": render_text}[args.output]
    out.write(redact(render(report, seconds=time.monotonic() - started)))
    if any(w.result == audit_mod.ERROR for w in report.workloads):
        return EXIT_USAGE  # as check: an internal error on an object is exit 2, whatever else was found
    return EXIT_FAILED if any(w.result == audit_mod.FAIL for w in report.workloads) else EXIT_OK


def _from_files(paths: Sequence[str]) -> list[Any]:
    """The objects of saved dumps (``kind: List`` items flattened)."""
    out: list[Any] = []
    for doc in sources.load(list(paths)):
        out.extend(obj for _pointer, obj in documents(doc.obj))
    if not out:
        raise sources.InputError(f"{', '.join(paths)}: no objects (save a dump with: kubectl get "
                                 "nodes,pods,deployments,statefulsets,jobs -A -o yaml > dump.yaml)")
    return out


def judge_snapshot(objects: Sequence[Any], settings: Settings, *,
                   namespaces: frozenset[str] = frozenset()) -> audit_mod.Report:
    """The audit of a listed or dumped cluster: its nodes and Karpenter NodePools become the
    inventory, the rest is judged (:func:`webhook.core.audit.audit`) with the runtimes among it as
    context. ``audit`` and the reporter both call this."""
    nodes = [o for o in objects if isinstance(o, Mapping) and o.get("kind") == "Node"]
    pools = [p for o in objects for p in nodepool_objects(o)]
    inventory = build_inventory(nodes, settings, nodepools=pools) if nodes else None
    kept = [o for o in objects if isinstance(o, Mapping) and o.get("kind") not in ("Node", "NodePool")]
    return audit_mod.audit(kept, settings, inventory, context=context_of(kept), namespaces=namespaces)


def context_of(objects: Sequence[Any]) -> dict[tuple[str, str, str], Any]:
    """The objects other kinds take their pods from (a TrainJob's runtime, an OME model), keyed as
    ``check`` keys them (:func:`webhook.core.engine.runtime_context`)."""
    return engine.runtime_context(objects)


def _path(api_version: str, resource: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"/apis/{group}/{version}/{resource}" if group else f"/api/{version}/{resource}"


class NeedsExtra(Exception):
    """A live audit without the Kubernetes client installed."""


def _from_cluster(kubeconfig: str | None, err: TextIO) -> list[Any]:
    try:
        import kubernetes  # noqa: F401 - only to say which extra is missing
    except ImportError as exc:
        raise NeedsExtra("a live audit needs the Kubernetes client: pip install 'gpu-admission[inventory]' "
                         "(or audit a saved dump with --from)") from exc
    from webhook.server import load_client

    return list(objects_of(load_client(kubeconfig).api_client, err))


def objects_of(api_client: Any, err: TextIO) -> Iterator[dict[str, Any]]:
    """Every object an audit reads, page by page: the nodes (what the inventory reads of them),
    then each kind of :func:`webhook.core.audit.resources` (a kind the cluster does not serve is
    skipped; one it refuses to list is an error). A progress line goes to ``err`` every
    :data:`PROGRESS_EVERY` objects."""
    seen = 0
    listed = (("v1", "nodes"), (nodepools.API_VERSION, nodepools.PLURAL), *audit_mod.resources())
    for api_version, resource in listed:
        for item in _pages(api_client, _path(api_version, resource)):
            seen += 1
            if seen % PROGRESS_EVERY == 0:
                print(f"gpu-admission audit: {seen} objects read ({resource})", file=err, flush=True)
            yield item


class ApiError(Exception):
    """A request the API server answered with an error (its status and the start of its body)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


def api_request(api_client: Any, method: str, path: str, *, query: Sequence[tuple[str, Any]] = (),
                body: Any = None) -> tuple[int, Any]:
    """One JSON request through the Kubernetes client's generic call (its configuration: server,
    credentials, TLS): (status, decoded body). A 404 is returned (a kind the cluster does not serve);
    any other error status raises :class:`ApiError`. Both shapes of ``ApiClient.call_api`` are
    handled: the client's ``param_serialize`` + ``call_api(method, url, ...)`` of the releases from 33 on,
    and ``call_api(path, method, ...)`` before them (setup.cfg allows both)."""
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if hasattr(api_client, "param_serialize"):
        verb, url, sent_headers, sent_body, post = api_client.param_serialize(
            method=method, resource_path=path, query_params=list(query), header_params=headers, body=body,
            auth_settings=["BearerToken"])
        response = api_client.call_api(verb, url, header_params=sent_headers, body=sent_body, post_params=post,
                                       _request_timeout=30)
        response.read()
        status, data = response.status, response.data
    else:  # pragma: no cover - kubernetes < 33, exercised where that client is installed
        from kubernetes.client.exceptions import ApiException

        try:
            response = api_client.call_api(path, method, query_params=list(query), header_params=headers, body=body,
                                           auth_settings=["BearerToken"], _preload_content=False,
                                           _return_http_data_only=True, _request_timeout=30)
            status, data = 200, response.data
        except ApiException as exc:
            status, data = exc.status or 0, (exc.body or "").encode() if isinstance(exc.body, str) else exc.body or b""
    if status == 404:
        return status, None
    if not 200 <= status < 300:
        raise ApiError(status, data.decode(errors="replace") if isinstance(data, bytes) else str(data))
    return status, json.loads(data) if data else None


def _pages(api_client: Any, path: str) -> Iterator[dict[str, Any]]:
    """The items of ``GET path`` in pages of :data:`PAGE` (``limit``/``continue``, as ``kubectl``
    pages), each slimmed to what the audit reads; nothing when the path is not served (a CRD that
    is not installed: 404)."""
    token: str | None = None
    while True:
        query: list[tuple[str, Any]] = [("limit", PAGE)] + ([("continue", token)] if token else [])
        status, body = api_request(api_client, "GET", path, query=query)
        if status == 404 or not isinstance(body, dict):
            return
        kind = str(body.get("kind", "")).removesuffix("List")
        version = body.get("apiVersion")
        for item in body.get("items") or ():
            if isinstance(item, dict):
                item.setdefault("kind", kind)
                item.setdefault("apiVersion", version)
                yield slim(item)
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the audit keeps of a listed object: a node's name, labels, capacity and allocatable (as
    the webhook's node watch keeps them); an object a listed controller owns, its evidence only
    (:func:`webhook.core.audit.evidence`); a pod without its status but its phase; others without
    status and managedFields."""
    if obj.get("kind") == "Node":
        facts = node_facts(obj)
        return {"apiVersion": "v1", "kind": "Node", **facts} if facts else obj
    obj = dict(audit_mod.evidence(obj, _LISTED_KINDS))
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    if obj.get("kind") == "Pod":
        status = obj.get("status")
        obj["status"] = {"phase": status.get("phase")} if isinstance(status, dict) else {}
    else:
        obj.pop("status", None)
    return obj


# --------------------------------------------------------------------------- reports

def data(report: audit_mod.Report, seconds: float = 0.0) -> dict[str, Any]:
    """The JSON shape of ``audit --output json``."""
    namespaces: dict[str, list[dict[str, Any]]] = {}
    for w in report.workloads:
        namespaces.setdefault(w.namespace, []).append({
            "kind": w.kind, "apiVersion": w.api_version, "name": w.name, "uid": w.uid, "result": w.result,
            "tier": w.tier,
            "findings": [{"rule": f.rule, "result": f.result, "message": f.message, "template": f.template}
                         for f in w.findings],
            "pods": [{"pod": x.pod, "node": x.node, "gpus": x.gpus, "value": x.value, "product": x.product}
                     for x in w.landed],
        })
    counts = {r: sum(1 for w in report.workloads if w.result == r)
              for r in (audit_mod.PASS, audit_mod.WARN, audit_mod.FAIL, audit_mod.SKIP, audit_mod.ERROR)}
    return {
        "summary": {"workloads": len(report.workloads), **counts, "seconds": round(seconds, 2)},
        "namespaces": {ns: rows for ns, rows in sorted(namespaces.items())},
        "idle": [{"value": i.value, "product": i.product, "nodes": i.nodes, "allocatable": i.allocatable,
                  "requested": i.requested, "idle": i.idle} for i in report.idle],
    }


def render_json(report: audit_mod.Report, seconds: float = 0.0) -> str:
    return json.dumps(data(report, seconds), indent=2) + "\n"


_MARK = {audit_mod.PASS: "OK  ", audit_mod.WARN: "WARN", audit_mod.FAIL: "FAIL", audit_mod.SKIP: "SKIP",
         audit_mod.ERROR: "ERR "}


def render_text(report: audit_mod.Report, seconds: float = 0.0) -> str:
    d = data(report, seconds)
    lines: list[str] = []
    for ns, rows in d["namespaces"].items():
        lines.append(f"namespace {ns or '(cluster)'}:")
        for row in rows:
            lines.append(f"  {_MARK[row['result']]}  {row['kind']}/{row['name']}"
                         + (f"  tier {row['tier']}" if row["tier"] else ""))
            for f in row["findings"]:
                if f["result"] != audit_mod.PASS:
                    lines.append(f"        {f['result']}: {f['message']}")
            products = sorted({p["value"] or "?" for p in row["pods"]})
            if products:
                pods = len(row["pods"])
                lines.append(f"        runs on: {', '.join(products)} ({pods} GPU pod{'' if pods == 1 else 's'})")
    if d["idle"]:
        lines.append("GPU capacity by product (allocatable on trusted nodes, requested by running pods):")
        lines.append(f"  {'value':<34} {'nodes':>5} {'GPUs':>6} {'requested':>9} {'idle':>6}")
        for i in d["idle"]:
            lines.append(f"  {i['value']:<34} {i['nodes']:>5} {i['allocatable']:>6} {i['requested']:>9} {i['idle']:>6}")
    s = d["summary"]
    errors = f", {s['error']} not judged by an error" if s["error"] else ""
    lines.append(f"{s['workloads']} GPU workloads: {s['fail']} failing (enforce would deny them, or a group runs "
                 f"on mixed products), {s['warn']} warned, {s['skip']} not judged{errors}, {s['pass']} passed "
                 f"({s['seconds']:.1f} s)")
    return "\n".join(lines) + "\n"


def render_junit(report: audit_mod.Report, seconds: float = 0.0) -> str:
    from xml.sax.saxutils import escape, quoteattr  # only this format needs it (urllib, http: start-up time)

    d = data(report, seconds)
    s = d["summary"]
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="gpu-admission audit" tests="{s["workloads"]}" failures="{s["fail"]}">']
    for ns, rows in d["namespaces"].items():
        fails = sum(1 for r in rows if r["result"] == audit_mod.FAIL)
        skips = sum(1 for r in rows if r["result"] == audit_mod.SKIP)
        out.append(f'  <testsuite name={quoteattr(ns or "(cluster)")} tests="{len(rows)}" failures="{fails}" '
                   f'skipped="{skips}">')
        for row in rows:
            out.append(f'    <testcase classname={quoteattr(ns)} name={quoteattr(row["kind"] + "/" + row["name"])}>')
            failed = [f for f in row["findings"] if f["result"] == audit_mod.FAIL]
            if failed:
                out.append(f'      <failure message={quoteattr("; ".join(f["rule"] for f in failed))}>'
                           f'{escape(chr(10).join(f["message"] for f in failed))}</failure>')
            elif row["result"] == audit_mod.SKIP:
                out.append(f'      <skipped message={quoteattr(row["findings"][0]["message"][:400])}/>')
            warned = [f["message"] for f in row["findings"] if f["result"] == audit_mod.WARN]
            if warned:
                out.append(f"      <system-out>{escape(chr(10).join(warned))}</system-out>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
