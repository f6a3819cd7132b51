"""Turn a public manifest into a fixture of this project's own: the facts the engine reads, nothing else.

The tests hold the engine to manifests other projects publish. What the tests need from such a
manifest are facts (which image, which command and flags, which env, how many GPUs, which node
selection, how many replicas), not the file. This tool keeps exactly those and writes them in this
project's form, with a header naming the source the fixture describes (repository, path, commit)
as a reference:

1. objects that hold no pod spec and no fact the engine reads (a Service, a PVC, RBAC, monitoring
   objects) are dropped, and so are the fields no rule reads (probes, ports, security contexts,
   pull policies and secrets, service accounts, DNS and termination settings, status);
2. then every remaining object, field and list item is removed in turn, parents first, and the
   removal is kept when the engine's judgement of every object (each template's role, counts,
   labels and annotations, profile, decision, patch, and the secrets found) is the same with and
   without it, under the default policy with and without mutation and in audit, until nothing more
   can go. A runtime is also judged through probes that use it as its users do (a TrainJob, an
   InferenceService), and the objects of the other files named that refer to one of these by name
   are judged too. What is left is what the judgement rests on, plus each object's kind and name.

A field a test reads for itself, though no judgement rests on it, is kept by a header line
``# keeps: Kind:dotted.path (why)`` (the whole subtree; list items by number). Comments,
formatting and the upstream licence headers are not carried; multi-line strings (scripts) are
written as literal blocks.

    python tests/tools/fixture_facts.py FILE...            # rewrite in place
    python tests/tools/fixture_facts.py --check FILE...    # exit 1 when a file is not in this form

A fixture already in this form is left as it is (the tool is idempotent).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from webhook.core import engine, templating  # noqa: E402  (after the path: run as a script)
from webhook.core.settings import Settings, default, from_mapping  # noqa: E402
from webhook.core.workloads import documents  # noqa: E402

HEADER = "# describes:"
WRITTEN = ("# a gpu-admission test fixture: the facts the engine reads from that manifest (images, commands,\n"
           "# flags, env, GPU requests, node selection, counts), written in this project's form\n")

DROPPED_KINDS = frozenset({
    "Service", "Ingress", "PersistentVolumeClaim", "PersistentVolume", "Secret", "ServiceAccount", "Role",
    "RoleBinding", "ClusterRole", "ClusterRoleBinding", "HorizontalPodAutoscaler", "PodDisruptionBudget",
    "ServiceMonitor", "PodMonitor", "Namespace", "Gateway", "HTTPRoute", "NetworkPolicy", "StorageClass",
    "InferencePool", "InferenceModel", "Route",
})
"""Objects around a workload that hold no pod spec and no fact the engine reads (by kind, in the core
and networking groups: see :func:`dropped`)."""
WORKLOADS_OF_A_DROPPED_NAME = frozenset({("serving.knative.dev", "Service")})
"""(group, kind) of workloads that share a name with a dropped kind: a Knative Service holds a pod
template (its Route does not, and is dropped like any other)."""


def dropped(doc: Any) -> bool:
    """Whether ``doc`` is an object around a workload (:data:`DROPPED_KINDS`), not a workload whose
    kind has the same name (:data:`WORKLOADS_OF_A_DROPPED_NAME`)."""
    if not isinstance(doc, dict) or doc.get("kind") not in DROPPED_KINDS:
        return False
    version = doc.get("apiVersion")
    group = version.rpartition("/")[0] if isinstance(version, str) else ""
    return (group, doc["kind"]) not in WORKLOADS_OF_A_DROPPED_NAME
CONTAINER_NOISE = frozenset({
    "livenessProbe", "readinessProbe", "startupProbe", "ports", "securityContext", "imagePullPolicy",
    "lifecycle", "terminationMessagePath", "terminationMessagePolicy", "stdin", "stdinOnce", "tty",
})
POD_NOISE = frozenset({
    "imagePullSecrets", "serviceAccountName", "serviceAccount", "automountServiceAccountToken",
    "securityContext", "dnsPolicy", "dnsConfig", "terminationGracePeriodSeconds", "enableServiceLinks",
})
METADATA_NOISE = frozenset({"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields",
                            "selfLink"})
_SOURCE = re.compile(r"^#\s*source:\s*(?P<repo>[^/\s]+/[^/\s]+)/(?P<path>\S.*?)@(?P<commit>[0-9a-f]{7,40})\s*$")
"""``# source: owner/repo/path@commit``; the path may hold spaces (``docs/My Samples/pod.yaml``)."""
_NOTE = re.compile(r"^#\s*(?:note|about):\s*(?P<text>.+)$")


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    if "\n" in text:
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", text)


_Dumper.add_representer(str, _str)


def _is_container(node: dict[str, Any]) -> bool:
    return isinstance(node.get("name"), str) and isinstance(node.get("image"), str)


def prune(node: Any) -> Any:
    """``node`` without the fields no rule reads (a copy)."""
    if isinstance(node, list):
        return [prune(item) for item in node]
    if not isinstance(node, dict):
        return node
    drop: frozenset[str] = frozenset()
    if _is_container(node):
        drop = CONTAINER_NOISE
    elif isinstance(node.get("containers"), list):
        drop = POD_NOISE
    out = {}
    for key, value in node.items():
        if key in drop:
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in METADATA_NOISE}
        out[key] = prune(value)
    return out


PROTECTED = frozenset({("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace")})
"""Paths (from an object's root) never removed: what names the object."""


def _policies() -> tuple[tuple[Settings, bool, str | None], ...]:
    audit = from_mapping({"mode": "audit"})
    return ((default(), True, None), (default(), False, None), (audit, True, "audit"))


def _project(result: engine.TemplateResult) -> tuple[object, ...]:
    t = result.template
    return (t.pointer, t.role, t.kind, t.found, t.group_size, t.replicas, t.notes, t.spec_at, t.patchable, t.gang,
            tuple(sorted(t.labels.items())), tuple(sorted(t.annotations.items())), result.profile,
            result.decision, result.patch, result.claim)


def verdicts(objects: Sequence[Any], context_objects: Sequence[Any]) -> list[tuple[object, ...]]:
    """What the engine says of each object (one entry per object), as the tests can see it."""
    context = engine.runtime_context([o for obj in context_objects for _, o in documents(obj)])
    out: list[tuple[object, ...]] = []
    for obj in objects:
        said: list[object] = []
        for settings, mutate, mode in _policies():
            for pointer, o in documents(obj):
                markers = templating.find(o, settings.gpu_resources, prefix=pointer)
                if markers:
                    said.append(("templated", markers))
                    continue
                judged = engine.judge(engine.Request(o, mode=mode, mutate=mutate, prefix=pointer, context=context),
                                      settings)
                said.append((tuple(_project(r) for r in judged.results), tuple(sorted(judged.secrets))))
        out.append(tuple(said))
    return out


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every removable place under ``node``, parents before children, list items last to first (so
    removing one does not move the ones still to try)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i in reversed(range(len(node))):
            out.append((*prefix, i))
            out.extend(_paths(node[i], (*prefix, i)))
    return out


def _without(node: Any, path: tuple[Any, ...]) -> Any:
    """A copy of ``node`` without what is at ``path`` (shared where untouched)."""
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        if not rest:
            return {k: v for k, v in node.items() if k != head}
        return {k: (_without(v, rest) if k == head else v) for k, v in node.items()}
    if not rest:
        return node[:head] + node[head + 1:]
    return node[:head] + [_without(node[head], rest)] + node[head + 1:]


def _exists(node: Any, path: tuple[Any, ...]) -> bool:
    for step in path:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return False
    return True


def _keep_path(text: str) -> tuple[str, tuple[Any, ...]]:
    """``kind:a.b.0.c`` -> (kind, path); list indices as numbers."""
    kind, _, dotted = text.partition(":")
    return kind, tuple(int(p) if p.isdigit() else p for p in dotted.split("."))


def _protected(kind: str, path: tuple[Any, ...], keeps: Sequence[tuple[str, tuple[Any, ...]]]) -> bool:
    if path in PROTECTED:
        return True
    for keep_kind, keep in keeps:
        if keep_kind == kind and (keep[:len(path)] == path or path[:len(keep)] == keep):
            return True
    return False


def _probes(objects: Sequence[Any]) -> list[Any]:
    """Objects that refer to the runtimes among ``objects`` the way their users do, so what a
    runtime gives a TrainJob or an InferenceService is held by the judgement too (a runtime judged
    alone shows only part of it)."""
    out: list[Any] = []
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, dict) else None
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        if kind in ("ClusterTrainingRuntime", "TrainingRuntime") and isinstance(name, str):
            for trainer in (None, {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}):
                job: dict[str, Any] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                       "metadata": {"name": f"probe-{name}"},
                                       "spec": {"runtimeRef": {"name": name, "kind": kind}}}
                if trainer:
                    job["spec"]["trainer"] = trainer
                out.append(job)
        if kind in ("ClusterServingRuntime", "ServingRuntime") and isinstance(name, str):
            formats = (obj.get("spec") or {}).get("supportedModelFormats") or [{}]
            fmt = formats[0].get("name", "huggingface") if isinstance(formats[0], dict) else "huggingface"
            out.append({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                        "metadata": {"name": f"probe-{name}"},
                        "spec": {"predictor": {"model": {"modelFormat": {"name": fmt}, "runtime": name,
                                                         "storageUri": "hf://meta-llama/Llama-3.1-8B-Instruct",
                                                         "resources": {"limits": {"nvidia.com/gpu": 1}}}}}})
    return out


def minimize(objects: list[Any], others: Sequence[Any] = (),
             keeps: Sequence[tuple[str, tuple[Any, ...]]] = ()) -> list[Any]:
    """``objects`` with every object and field the engine's judgement does not rest on removed (see
    above); ``others``: the objects of the other files, whose judgement must not change either when
    these give them context; ``keeps``: (kind, path) a test reads for itself, kept whole."""
    # the other files' objects that may take context from these: those that name one of them
    names = {str((o.get("metadata") or {}).get("name")) for o in objects
             if isinstance(o, dict) and o.get("kind") in engine.CONTEXT_KINDS}
    watched = [o for o in others if names and any(name in json.dumps(o) for name in names)]
    watched += _probes(objects)

    def judged(candidate: list[Any]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        everything = [*candidate, *others]
        return verdicts(candidate, everything), verdicts(watched, everything)

    own, theirs = judged(objects)
    current, kept_own = list(objects), list(own)
    for index in reversed(range(len(current))):  # whole objects first: one the judgement does not rest on
        silent = all(isinstance(v, tuple) and v[0] == () and v[1] == () for v in kept_own[index]) and not any(
            kind == current[index].get("kind") for kind, _ in keeps)
        candidate = current[:index] + current[index + 1:]
        if silent and candidate and judged(candidate) == (kept_own[:index] + kept_own[index + 1:], theirs):
            current, kept_own = candidate, kept_own[:index] + kept_own[index + 1:]
    removed = True
    while removed:  # until nothing more can go: a removal can make another one possible
        removed = False
        for index in range(len(current)):
            for path in _paths(current[index]):
                kind = str(current[index].get("kind"))
                if _protected(kind, path, keeps) or not _exists(current[index], path):
                    continue
                candidate = list(current)
                candidate[index] = _without(current[index], path)
                if judged(candidate) == (kept_own, theirs):
                    current, removed = candidate, True
    return current


_KEEP = re.compile(r"^# keeps: (?P<path>\S+) (?P<why>\(.+\))$")


def keeps_of(text: str) -> list[str]:
    """The ``# keeps: Kind:dotted.path (why)`` lines of a fixture's header."""
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# keeps:"):
            found = _KEEP.match(line)
            if not found:
                raise ValueError(f"a keeps line is '# keeps: Kind:dotted.path (why)': {line!r}")
            out.append(line)
    return out


def header(text: str) -> tuple[str, str, str, str | None]:
    """(repository, path, commit, what it is) from a fixture's first comment lines, either form."""
    repo = path = commit = ""
    note: str | None = None
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        found = _SOURCE.match(line)
        if found:
            repo, path, commit = found["repo"], found["path"], found["commit"]
        described = re.match(r"^# describes: (\S+) (\S.*?) @ ([0-9a-f]{7,40})$", line)
        if described:
            repo, path, commit = described.groups()
        noted = _NOTE.match(line)
        if noted:
            note = noted["text"].strip()
    if not repo:
        raise ValueError("no '# source: owner/repo/path@commit' or '# describes:' line in the header")
    return repo, path, commit, note


def render(text: str, others: Sequence[Any] = ()) -> str:
    """The fixture form of a manifest (its header names its source); ``others``: the objects of the
    other files read with it (the context they may take from this one)."""
    repo, path, commit, note = header(text)
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    kept = [prune({k: v for k, v in d.items() if k != "status"}) for d in docs
            if not dropped(d)]
    keep_lines = keeps_of(text)
    keeps = [_keep_path(_KEEP.match(line)["path"]) for line in keep_lines]  # type: ignore[index]
    kept = minimize(kept, others, keeps)
    if not kept:
        raise ValueError("nothing left: no workload or context object in the file")
    head = (f"{HEADER} {repo} {path} @ {commit}\n" + WRITTEN + (f"# about: {note}\n" if note else "")
            + "".join(line + "\n" for line in keep_lines))
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True) for d in kept)
    return head + body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a file is not in this form")
    args = parser.parse_args(argv)
    stale = 0
    texts = {path: path.read_text(encoding="utf-8") for path in args.files}
    objects = {path: [d for d in yaml.safe_load_all(text) if isinstance(d, dict)] for path, text in texts.items()}
    for path in args.files:
        text = texts[path]
        others = [o for other, objs in objects.items() if other != path for o in objs]
        wanted = render(text, others)
        if wanted == text:
            continue
        stale += 1
        if args.check:
            print(f"{path}: not in the fixture form (python tests/tools/fixture_facts.py {path})", file=sys.stderr)
        else:
            path.write_text(wanted, encoding="utf-8")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
