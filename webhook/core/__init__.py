"""The pure core: object -> pod templates -> profile -> decision -> patches, and the data behind it.

Owns: ``engine`` (the one pipeline both doors call), ``workloads`` (where pod templates live in each
kind), ``inference`` and ``launchers`` (what a container runs: framework, model, parallelism),
``models``, ``hardware`` and ``sizing`` (parameters, GPU products, memory fit), ``rules`` (each
rule: a case in, findings out) and ``policy`` (the table that composes them), ``patches`` (RFC 6902 ops), ``groups``, ``selection`` and ``resources`` (labels, node
selection terms, GPU quantities), ``dra`` (ResourceClaims), ``inventory`` (the cluster's GPU pools
as an index), ``scheduling`` (the extender's filter and scores), ``settings`` (the policy schema,
its embedded default and validation), ``redaction`` (no secret leaves in a message), ``templating``
(an object still to be rendered, which ``check`` reports instead of judging), and the
bundled ``data/`` (GPU catalog, model catalog, default policy).

Never: Flask, gunicorn, the Kubernetes client, Prometheus, sockets, threads, the clock, or file
I/O other than reading the bundled data; nothing from :mod:`webhook.server` or :mod:`webhook.cli`.
The doors read files, watch the cluster and keep time, and hand plain data in.
tests/test_architecture.py holds every one of these rules.
"""

from __future__ import annotations

PUBLIC: tuple[str, ...] = (
    "engine",      # Request -> judge -> Judgement (the one entry), resolve_mode, TemplateResult, tier_fits, describe
    "settings",    # Settings, SettingsError, MODES, parse_text, default: the policy both doors load
    "domain",      # the frozen value types results are made of (JSON, WorkloadProfile, Decision, ...)
    "workloads",   # documents (List expansion for check), WORKLOAD_KINDS (what the server judges)
    "inventory",   # Inventory, from_nodes, node_objects: the doors build it from Nodes they read
    "nodepools",   # nodepool_objects, the CRD coordinates: the doors read NodePools as they read Nodes
    "redaction",   # redact: the last filter on every text a door emits
    "resources",   # pod_gpus, used_gpus: GPUs counted as Kubernetes counts them (inventory report, audit)
    "dra",         # judge_claim, KINDS: ResourceClaims, the server's second admission kind
    "scheduling",  # filter / prioritize: the extender's rules behind the server's routes
    "verdicts",    # key: a pod's content without its per-copy fields (the server's verdict memo)
    "templating",  # find: an object that is still a template (check reports it instead of judging it)
    "counts",      # parse_count: the one reading of a count written as text (the doors' own flags too)
    "audit",       # audit: a snapshot of what runs, judged at each top owner, with where its pods landed
    "policy_reports",  # the audit as wgpolicyk8s.io / openreports.io reports (the reporter writes them)
)
"""The core modules the front doors may import (``webhook.core.<name>``); everything else in the
core is internal, free to change shape without touching a door."""

__all__ = ["PUBLIC"]
