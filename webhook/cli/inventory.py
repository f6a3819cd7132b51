"""``gpu-admission inventory``: the GPU pools, tiers, free GPUs and anomalies of a live cluster,
and the loader behind ``check --inventory NODES.yaml`` (a saved ``kubectl get nodes -o yaml``).

I/O lives here, at the edge: listing Nodes and Pods through the ``kubernetes`` client. The index
itself is :mod:`webhook.core.inventory` (pure).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Mapping, TextIO

from webhook.cli import sources
from webhook.core.inventory import Inventory, from_nodes, node_objects
from webhook.core.nodepools import nodepool_objects
from webhook.core.resources import used_gpus
from webhook.core.settings import Settings, SettingsError, load as load_settings

EXIT_OK, EXIT_USAGE = 0, 2


def load_file(path: str, settings: Settings) -> Inventory:
    """An inventory from a ``kubectl get nodes -o yaml|json`` file, with the Karpenter NodePools of
    the same file if any (``kubectl get nodes,nodepools -o yaml``); raises ``sources.InputError``."""
    docs = sources.load([path])
    nodes = [n for doc in docs for n in node_objects(doc.obj)]
    if not nodes:
        raise sources.InputError(f"{path}: no Node objects (save one with: kubectl get nodes -o yaml > {path})")
    return build(nodes, settings, nodepools=[p for doc in docs for p in nodepool_objects(doc.obj)])


def build(nodes: list[Any], settings: Settings, resource_version: str | None = None,
          nodepools: list[Any] | None = None) -> Inventory:
    return from_nodes(nodes, label_key=settings.label_key, scheme=settings.label_scheme, catalog=settings.catalog,
                      gpu_resources=settings.gpu_resources, resource_version=resource_version,
                      nodepools=nodepools or ())


def summary(inventory: Inventory, settings: Settings, used: Mapping[str, int]) -> dict[str, Any]:
    """The JSON shape of ``inventory --output json``."""
    tier_of = {p: t.name for t in settings.tiers for p in t.products}
    pools = []
    for pool in inventory.pools().values():
        members = [inventory.nodes[n] for n in pool.nodes]
        trusted = [n for n in members if n.trusted]
        pools.append({
            "value": pool.value,
            "product": pool.product,
            "tier": tier_of.get(pool.product or "", None),
            "nodes": list(pool.nodes),
            "gpus": sum(n.capacity for n in members),
            "allocatable": pool.allocatable,
            "free": sum(max(n.allocatable - used.get(n.name, 0), 0) for n in trusted),
            "max_per_node": pool.max_allocatable,
        })
    anomalies = [{"node": n.name, "value": n.value, "anomalies": list(n.anomalies)} for n in inventory.untrusted()]
    scalable = [{"value": v, "source": s} for v, s in sorted(inventory.scalable.items())]
    return {"label_key": inventory.label_key, "pools": pools, "anomalies": anomalies, "scalable": scalable}


def render_text(data: Mapping[str, Any]) -> str:
    lines = [f"GPU pools by {data['label_key']}:"]
    lines.append(f"  {'value':<34} {'tier':<11} {'nodes':>5} {'GPUs':>5} {'free':>5} {'max/node':>8}")
    for p in data["pools"]:
        lines.append(f"  {p['value']:<34} {p['tier'] or '-':<11} {len(p['nodes']):>5} {p['gpus']:>5} "
                     f"{p['free']:>5} {p['max_per_node']:>8}")
    if not data["pools"]:
        lines.append("  (no GPU nodes)")
    if data.get("scalable"):
        lines.append("Can scale up (no node yet counts as present):")
        for s in data["scalable"]:
            lines.append(f"  {s['value']}: {s['source']}")
    if data["anomalies"]:
        lines.append("Untrusted nodes (kept away from multi-GPU pods):")
        for a in data["anomalies"]:
            lines.append(f"  {a['node']}: {'; '.join(a['anomalies'])}")
    return "\n".join(lines) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", default=None,
                        help="kubeconfig of the cluster (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--output", choices=("text", "json"), default="text", help="report format")
    parser.add_argument("--config", metavar="FILE", help="policy file (label key, tiers; default: embedded)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        settings = load_settings(args.config, read=Path.read_bytes)
    except SettingsError as exc:
        print(f"gpu-admission inventory: {exc}", file=err)
        return EXIT_USAGE
    try:
        from kubernetes.client import ApiClient

        from webhook.server import list_nodes, load_client

        api = load_client(args.kubeconfig)
        nodes, rv = list_nodes(api)
        serialise = ApiClient().sanitize_for_serialization
        pods = [serialise(p) for p in api.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded").items]
    except Exception as exc:  # noqa: BLE001 - credentials, RBAC, network: one clear line, exit 2
        print(f"gpu-admission inventory: cannot read the cluster: {type(exc).__name__}: {str(exc)[:300]}", file=err)
        return EXIT_USAGE
    inventory = build(nodes, settings, rv)
    data = summary(inventory, settings, used_gpus(pods, settings.gpu_resources))
    out.write(json.dumps(data, indent=2) + "\n" if args.output == "json" else render_text(data))
    return EXIT_OK
