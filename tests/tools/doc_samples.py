"""The docs' sample ``Warning:`` lines, generated from the code (issue 26, point 7).

A fenced block right after a line ``<!-- sample: NAME -->`` in README.md or docs/*.md is what
:data:`SAMPLES` ``[NAME]`` prints: the warnings the server's own admission functions give for the
request the text describes, as kubectl shows them (``Warning: `` and the line, cut where the server
cuts it), then kubectl's own result line. ``tests/test_doc_samples.py`` fails when a block differs;
``make doc-samples`` rewrites them:

    .venv/bin/python tests/tools/doc_samples.py [--check]

The cluster samples use the nodes ``make cluster`` creates (``control_plane.fleet``) as the
inventory, as its server sees them.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from webhook.core import inventory as inventory_mod, settings as settings_mod  # noqa: E402
from webhook.server import admission, review  # noqa: E402

DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- sample: (?P<name>[a-z0-9-]+) -->\n(?P=indent)```[a-z]*\n(?P<body>.*?)"
                    r"^(?P=indent)```\n", re.M | re.S)


def _settings() -> settings_mod.Settings:
    return settings_mod.default()


def _fleet() -> inventory_mod.Inventory:
    from control_plane import fleet  # tests/e2e: the nodes `make cluster` creates
    s = _settings()
    return inventory_mod.from_nodes(fleet(), label_key=s.label_key, scheme=s.label_scheme, catalog=s.catalog,
                                    gpu_resources=s.gpu_resources)


def _load(rel: str, **meta: str) -> dict[str, Any]:
    obj = yaml.safe_load((ROOT / rel).read_text())
    obj["metadata"].update(meta)
    return obj


def _request(obj: dict[str, Any], *, operation: str = "CREATE", old: dict[str, Any] | None = None,
             sub_resource: str | None = None, resource: str = "") -> review.Request:
    group, _, version = obj["apiVersion"].rpartition("/")
    req: dict[str, Any] = {"uid": "sample", "kind": {"group": group, "version": version, "kind": obj["kind"]},
                           "operation": operation, "name": obj["metadata"].get("name"),
                           "namespace": obj["metadata"].get("namespace"), "object": obj,
                           "resource": {"group": group, "version": version, "resource": resource}}
    if old is not None:
        req["oldObject"] = old
    if sub_resource:
        req["subResource"] = sub_resource
    body = {"apiVersion": review.API_VERSION, "kind": review.KIND, "request": req}
    return review.parse(json.dumps(body).encode(), "application/json")


def _warned(outcome: admission.Outcome) -> list[str]:
    return [f"Warning: {w}" for w in outcome.review["response"].get("warnings", [])]


def audit_l40s() -> list[str]:
    """docs/install.md's heredoc pod (and README's) in an audit namespace, server dry run."""
    obj = _load("tests/e2e/demo/llama-70b-on-l40s.yaml", name="llama-70b-l40s", namespace="gpu-check")
    obj["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
    out = admission.validate(_request(obj), _settings(), mode="audit")
    return [*_warned(out), "pod/llama-70b-l40s created (server dry run)"]


def cluster_pinned() -> list[str]:
    obj = _load("tests/e2e/demo/llama-70b.yaml", namespace="demo")
    out = admission.mutate(_request(obj), _settings(), _fleet())
    return ["$ kubectl -n demo apply -f tests/e2e/demo/llama-70b.yaml", *_warned(out),
            f"pod/{obj['metadata']['name']} created"]


def cluster_audit() -> list[str]:
    obj = _load("tests/e2e/demo/llama-70b-on-l40s.yaml", namespace="demo-audit")
    out = admission.validate(_request(obj), _settings(), mode="audit", inventory=_fleet())
    return ["$ kubectl -n demo-audit apply -f tests/e2e/demo/llama-70b-on-l40s.yaml", *_warned(out),
            f"pod/{obj['metadata']['name']} created"]


def _stored_on_l40s() -> dict[str, Any]:
    """examples/vllm-llama-70b-tp4.yaml as created in audit, pinned to L40S by its author."""
    obj = _load("examples/vllm-llama-70b-tp4.yaml")
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    return obj


def annotate_pre_existing() -> list[str]:
    old = _stored_on_l40s()
    new = copy.deepcopy(old)
    new["metadata"].setdefault("annotations", {})["team"] = "inference"
    out = admission.validate(_request(new, operation="UPDATE", old=old), _settings(), mode="enforce",
                             inventory=_fleet())
    return ["$ kubectl -n ai-serving annotate deployment/llama-70b team=inference", *_warned(out),
            "deployment.apps/llama-70b annotated"]


def patch_scale_up() -> list[str]:
    old = _stored_on_l40s()
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = old["spec"]["replicas"] + 1
    out = admission.validate(_request(new, operation="UPDATE", old=old), _settings(), mode="enforce",
                             inventory=_fleet())
    return [f"$ kubectl -n ai-serving patch deployment/llama-70b --type=merge -p "
            f"'{{\"spec\":{{\"replicas\":{new['spec']['replicas']}}}}}'", *_warned(out),
            "deployment.apps/llama-70b patched"]


def kubectl_scale() -> list[str]:
    stored = _stored_on_l40s()
    meta = {"name": "llama-70b", "namespace": "ai-serving"}
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta, "spec": {"replicas": 3}}
    before = {**scale, "spec": {"replicas": stored["spec"]["replicas"]}}
    req = _request(scale, operation="UPDATE", old=before, sub_resource="scale", resource="deployments")
    out = admission.validate(req, _settings(), mode="enforce", inventory=_fleet(), parent=lambda _r: stored)
    return ["$ kubectl -n ai-serving scale deployment/llama-70b --replicas=3", *_warned(out),
            "deployment.apps/llama-70b scaled"]


def audit_report() -> list[str]:
    """`gpu-admission audit` of the snapshot tests/core/test_audit.py describes (a 70B replica on L40S,
    a JobSet split over A100 and H100, a pin enforce would deny, a small model on an A100)."""
    from tests.core import test_audit as snapshot
    from webhook.cli import audit as audit_cli
    from webhook.core import audit

    report = audit.audit(snapshot.SNAPSHOT, _settings(), snapshot.INVENTORY)
    return ["$ gpu-admission audit", *audit_cli.render_text(report).splitlines()]


@dataclass(frozen=True)
class Sample:
    lines: Callable[[], list[str]]


SAMPLES: dict[str, Sample] = {
    "audit-l40s": Sample(audit_l40s),
    "cluster-pinned": Sample(cluster_pinned),
    "cluster-audit": Sample(cluster_audit),
    "annotate-pre-existing": Sample(annotate_pre_existing),
    "patch-scale-up": Sample(patch_scale_up),
    "kubectl-scale": Sample(kubectl_scale),
    "audit-report": Sample(audit_report),
}


def render(text: str) -> tuple[str, list[str]]:
    """``text`` with every marked block regenerated; the names of the blocks that changed."""
    changed: list[str] = []

    def one(m: re.Match[str]) -> str:
        name, indent = m.group("name"), m.group("indent")
        if name not in SAMPLES:
            raise SystemExit(f"unknown sample {name!r}: add it to tests/tools/doc_samples.py SAMPLES")
        body = "".join(f"{indent}{line}\n" for line in SAMPLES[name].lines())
        if body != m.group("body"):
            changed.append(name)
        fence = m.group(0).splitlines()[1]
        return f"{indent}<!-- sample: {name} -->\n{fence}\n{body}{indent}```\n"

    return MARKER.sub(one, text), changed


def marked(text: str) -> list[str]:
    return [m.group("name") for m in MARKER.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report blocks that differ (exit 1)")
    args = parser.parse_args(argv)
    stale = []
    for path in DOCS:
        text = path.read_text()
        new, changed = render(text)
        stale += [f"{path.relative_to(ROOT)}: {name}" for name in changed]
        if changed and not args.check:
            path.write_text(new)
    for line in stale:
        print(("stale " if args.check else "rewrote ") + line)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
