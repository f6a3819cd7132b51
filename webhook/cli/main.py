"""The ``gpu-admission`` command line: a thin front door over the engine.

Exit codes of ``check`` (an interface CI pipelines rely on):
0 every object would be admitted, 1 at least one would be denied (with ``--strict``: or an object
asks for GPUs where no pod template could be read, or is still a template to render), 2 usage or
input error, or an internal error on some object (reported as one line naming it; the others are
still judged).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Sequence, TextIO

from webhook import __version__
from webhook.cli import check_pool, inventory as inventory_cli, report, sources
from webhook.cli.explain import render_explain
from webhook.core import engine, settings as settings_mod, templating
from webhook.core.counts import parse_count
from webhook.core.inventory import Inventory
from webhook.core.redaction import redact
from webhook.core.settings import MODES, SettingsError
from webhook.core.workloads import documents
from webhook.server import DEFAULT_MAX_QUEUE_AGE

EXIT_OK, EXIT_DENIED, EXIT_USAGE = 0, 1, 2

EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "serve": ("server", ("flask", "gunicorn", "cryptography", "prometheus_client", "kubernetes")),
    "certs": ("server", ("cryptography",)),
    "inventory": ("inventory", ("kubernetes",)),
    "reporter": ("inventory", ("kubernetes",)),
}
"""The commands that need an optional extra: ``pip install gpu-admission`` installs ``check`` and
``explain`` only (what CI needs); the extra named here brings the libraries a command imports."""

_DESCRIPTION = """\
gpu-admission keeps multi-GPU AI workloads on homogeneous, fitting GPU hardware.
It reads what a pod runs (vLLM, TGI, SGLang, TensorRT-LLM, NIM, torchrun, ...), sizes the model,
and pins it to the right hardware tier with a node affinity, or denies what cannot work."""

_CHECK_EPILOG = """\
examples:
  gpu-admission check examples/
  helm template my-chart | gpu-admission check - --output junit > report.xml
  gpu-admission check deploy.yaml --mode audit --output json
  gpu-admission check . --strict --exclude 'tests/*' --output github

templated objects (nvidia.com/gpu: $GPU_PER_NODE, "{{ .Values.gpus }}", empty) and the files of
a Helm chart's templates/ are reported SKIP, not denied: render them first (helm template /
envsubst / kustomize). A file that cannot be read or parsed is one ERROR line; the rest is judged.

exit codes: 0 all admitted, 1 any denied (or, with --strict, any GPU object not judged or
templated), 2 usage error, a file not read, an internal error, or (with --strict) no manifests"""


_AUDIT_EPILOG = """\
examples:
  gpu-admission audit                                   # the cluster of the current kubeconfig
  gpu-admission audit -n team-a -n team-b --output json
  kubectl get nodes,pods,replicasets,deployments,statefulsets,jobs,cronjobs,jobsets -A -o yaml > dump.yaml
  gpu-admission audit --from dump.yaml --output junit > audit.xml

A live audit needs the [inventory] extra (the Kubernetes client); --from does not.
exit codes: 0 nothing enforce would deny, 1 enforce would deny something (or a group runs on mixed
products), 2 usage error or the cluster could not be read"""


_POLICY_CHECK_DESCRIPTION = """\
Validate a policy file offline, all or nothing, exactly as `gpu-admission serve` loads it
(and as the webhook judges its ConfigMap gpu-admission-policy on apply):
  - a YAML mapping that states apiVersion: gpu-admission.io/v1alpha1 and kind: Policy
    (an empty, comment-only or truncated file is refused, never read as the default);
  - every field passes the schema (unknown fields are refused), every product is in the GPU
    catalog, every rule names a tier.
A valid file prints one line: its generation (the first 12 hex digits of its sha256, as
/readyz and the gpu_admission_policy_info metric show the policy a server serves) and what
it decides."""

_POLICY_CHECK_EPILOG = """\
examples:
  gpu-admission policy check my-overlay/policy.yaml
  kubectl -n gpu-admission get configmap gpu-admission-policy -o jsonpath='{.data.policy\\.yaml}' \\
    | gpu-admission policy check -

exit codes: 0 valid (one summary line on stdout), 1 invalid (the reason, naming the field, on
stderr), 2 usage error or the file cannot be read"""


class _Parser(argparse.ArgumentParser):
    """argparse exits with 2 on usage errors, which is exactly the documented code."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument (to check the metavar), and a formatter
        # without a width imports shutil for the terminal size: ~3 ms of every `check` start, for help
        # text it never prints. The width is found the way shutil finds it, without the import.
        return self.formatter_class(prog=self.prog, width=_columns() - 2)  # type: ignore[call-arg]


def _columns() -> int:
    """The terminal's width: ``$COLUMNS``, else the size of stdout's terminal, else 80 (as
    ``shutil.get_terminal_size``)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def build_parser(*, certs_flags: bool = True) -> argparse.ArgumentParser:
    """The whole command line. ``certs_flags=False`` leaves the flags of ``certs`` out (they need
    webhook.cli.certs, i.e. cryptography, a sixth of the start-up time of ``check``): only for parsing
    a command line whose command is not ``certs``."""
    parser = _Parser(prog="gpu-admission", description=_DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpu-admission {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser(
        "check", help="judge manifests offline, as the cluster's webhook would",
        description="Judge Kubernetes manifests offline with the same engine as the live webhook.",
        epilog=_CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("paths", nargs="*", metavar="PATH",
                       help="files, directories (recursive *.yaml, *.yml, *.json; hidden files and "
                            "directories, node_modules and what git ignores are skipped) or - for stdin")
    check.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                       help="skip the files and directories a glob matches while searching a directory: "
                            "a path relative to it (charts/*, *.json) or a name (vendor); repeatable. "
                            "A file named as PATH is always read")
    check.add_argument("--output", choices=("text", "json", "junit", "github"), default="text",
                       help="report format (default: text); github: workflow commands, an annotation on "
                            "the file and line of each denied, warned, skipped or unread object")
    check.add_argument("--mode", choices=MODES, default=None,
                       help="enforce: violations deny; audit: admit and warn (default: the policy's mode)")
    check.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy)")
    check.add_argument("--no-mutate", action="store_true",
                       help="judge objects as written, not as they are after the mutating webhook")
    check.add_argument("--inventory", metavar="NODES.yaml",
                       help="judge against the real fleet: a saved `kubectl get nodes -o yaml` (offer only "
                            "products that exist, keep multi-GPU pods off mixed nodes)")
    check.add_argument("--strict", action="store_true",
                       help="exit 1 also when an object asks for GPUs (resources, GPU-sharing annotations) but "
                            "no pod template of it could be read, or is still a template ($VAR, {{ ... }} or an "
                            "empty GPU quantity), so it was not judged (reported as SKIP)")
    check.add_argument("--jobs", metavar="N", type=_positive, default=None,
                       help="processes that parse and judge in parallel when there are at least "
                            f"{check_pool.PARALLEL_MIN_DOCS} documents (default: the CPUs available, at most "
                            f"{check_pool.MAX_JOBS}); the report is the same, in the same order")

    inventory = sub.add_parser(
        "inventory", help="show the GPU pools, tiers, free GPUs and anomalies of a live cluster",
        description="List the cluster's GPU nodes by product label: pools, their tier, free GPUs, and the "
                    "mixed or mislabeled nodes gpu-admission keeps multi-GPU pods away from.")
    inventory_cli.add_arguments(inventory)

    from webhook.cli import audit as audit_cli, reporter as reporter_cli

    audit = sub.add_parser(
        "audit", help="what enforce would deny or warn in a running cluster, and where GPU pods landed",
        description="Judge every workload of a live cluster (or a saved dump) with the same engine and policy "
                    "as the webhook, once each at its top owner with its pods as evidence: what enforce "
                    "would deny today (with the fix) and warn; pods of one group on mixed GPU products or "
                    "outside their tier; idle GPUs per product.",
        epilog=_AUDIT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    audit_cli.add_arguments(audit)

    reporter = sub.add_parser(
        "reporter", help="write the audit as PolicyReports, rescanning every --interval",
        description="The background audit: one wgpolicyk8s.io/v1alpha2 PolicyReport (and openreports.io/v1alpha1 "
                    "Report, when served) per namespace with a result per workload and rule, and a cluster "
                    "report of placement (idle GPUs per product, groups on mixed products). Installs no CRD; "
                    "writes nothing but its own reports (label app.kubernetes.io/managed-by=gpu-admission).")
    reporter_cli.add_arguments(reporter)

    serve = sub.add_parser(
        "serve", help="run the admission server (gunicorn, TLS)",
        description="Run the admission webhook: POST /mutate and /validate (AdmissionReview v1) over TLS "
                    "1.2+ with threaded gunicorn workers; GET /healthz, /readyz and /metrics on the plain-HTTP "
                    "probe port (--probe-bind, 8081), answered by a thread of their own; "
                    "with --extender-bind, the kube-scheduler extender on a port of its own, authenticated. "
                    "Certificate and policy files are reloaded when they change, without a restart.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy); "
                       "reloaded on change, a version that does not load keeps the last good one (kept in "
                       "$TMPDIR/gpu-admission for every worker); with none, the server runs unready until "
                       "the file loads")
    serve.add_argument("--cert", metavar="FILE", default="certs/tls.crt", help="serving certificate (PEM)")
    serve.add_argument("--key", metavar="FILE", default="certs/tls.key", help="serving key (PEM)")
    serve.add_argument("--client-ca", metavar="FILE", default=None,
                       help="require client certificates signed by this CA (mutual TLS with kube-apiserver)")
    serve.add_argument("--bind", metavar="HOST:PORT", default="0.0.0.0:8443", help="listen address")
    serve.add_argument("--workers", metavar="N", type=_positive, default=2, help="worker processes")
    serve.add_argument("--threads", metavar="N", type=_positive, default=8,
                       help="threads per worker (each holds keep-alive connections from kube-apiserver)")
    serve.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    serve.add_argument("--max-queue-age", metavar="SECONDS", type=_seconds, default=DEFAULT_MAX_QUEUE_AGE,
                       help="refuse (HTTP 503) a review that waited longer than this for a worker thread, so "
                            "nothing kube-apiserver gave up on is judged; keep it below the webhooks' "
                            "timeoutSeconds (0: never refuse)")
    serve.add_argument("--read-deadline", metavar="SECONDS", type=_deadline, default=5.0,
                       help="a request must arrive whole (TLS handshake, headers and body) within this many "
                            "seconds of its first byte, or its connection is closed; partial requests wait "
                            "in the poller, never in a thread, so slow clients cannot stall the server")
    serve.add_argument("--probe-bind", metavar="HOST:PORT", default=None,
                       help="plain-HTTP port of GET /healthz, /readyz and /metrics, answered by a thread of its "
                            "own in every worker so probes and scrapes answer while admission is saturated "
                            "(default: port 8081 on --bind's host; 'off': none). /metrics is served only here")
    serve.add_argument("--inventory", choices=("auto", "on", "off"), default="auto",
                       help="watch Nodes to offer only GPU products that exist and avoid mixed nodes: auto = "
                            "when in-cluster or kubeconfig credentials load and RBAC allows listing nodes")
    serve.add_argument("--kubeconfig", metavar="FILE", default=None,
                       help="kubeconfig for the node inventory (default: in-cluster, then ~/.kube/config)")
    serve.add_argument("--extender-bind", metavar="HOST:PORT", default=None,
                       help="also serve the kube-scheduler extender (POST /scheduler/filter, /scheduler/prioritize) "
                            "on this address, and only there (default: not served); needs --extender-client-ca "
                            "or --extender-token-file")
    serve.add_argument("--extender-client-ca", metavar="FILE", default=None,
                       help="extender callers may authenticate with a client certificate signed by this CA "
                            "(kube-scheduler: tlsConfig.certFile/keyFile); reloaded on change")
    serve.add_argument("--extender-token-file", metavar="FILE", default=None,
                       help="extender callers may authenticate with 'Authorization: Bearer <token>', the token "
                            "in this file (a mounted Secret; re-read on change); kube-scheduler cannot send one")

    policy = sub.add_parser(
        "policy", help="validate a policy file offline, as the server loads it",
        description="Policy file tools. `policy check FILE` validates a policy file with the parser the\n"
                    "server loads it with (and the webhook judges its own ConfigMap with).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND")
    policy_sub.required = True
    policy_check = policy_sub.add_parser(
        "check", help="validate a policy file: exit 0 valid, 1 invalid, 2 usage",
        description=_POLICY_CHECK_DESCRIPTION,
        epilog=_POLICY_CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    policy_check.add_argument("file", metavar="FILE", help="the policy file, or - for stdin")

    certs = sub.add_parser(
        "certs", help="create a CA and a serving certificate for the webhook",
        description="Create a CA and a serving certificate with the Service DNS names (and IP SANs) "
                    "kube-apiserver verifies; print the base64 caBundle for the webhook configuration.")
    if certs_flags and not _missing("certs"):
        from webhook.cli import certs as certs_mod

        certs_mod.add_arguments(certs)

    explain = sub.add_parser(
        "explain", help="show the analysis of a manifest for people",
        description="Profile, candidate GPUs with memory fit and decode estimate, and the verdict.")
    explain.add_argument("file", metavar="FILE", help="manifest file (or - for stdin)")
    explain.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy)")
    explain.add_argument("--mode", choices=MODES, default=None, help="enforce or audit")
    explain.add_argument("--no-mutate", action="store_true",
                         help="explain the objects as written, not as they are after the mutating webhook "
                              "(as check --no-mutate)")
    explain.add_argument("--inventory", metavar="NODES.yaml",
                         help="explain against the real fleet: a saved `kubectl get nodes -o yaml` (as check "
                              "--inventory)")
    return parser


def _deadline(text: str) -> float:
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to 3600, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = parse_count(text, cap=1_000_000)
    if not value:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Validate everything a worker needs before forking, so a bad flag fails here with exit 2."""
    from webhook.server import ServeOptions, keypair, run

    try:
        settings_mod.load(args.config, read=Path.read_bytes)
    except SettingsError as exc:  # not an exit: in a pod that is a crash loop (live_settings)
        print(f"gpu-admission serve: {exc}: serving the last good copy of the policy if there is one, "
              f"else not ready (/readyz 503) until the file loads", file=err)
    problem = keypair.pair_problem(args.cert, args.key)
    if problem:
        print(f"gpu-admission serve: {problem} (create a pair with: gpu-admission certs --service NAME "
              f"--namespace NS --ip 127.0.0.1)", file=err)
        return EXIT_USAGE
    if args.client_ca and not Path(args.client_ca).is_file():
        print(f"gpu-admission serve: --client-ca {args.client_ca}: no such file", file=err)
        return EXIT_USAGE
    host, sep, port = args.bind.rpartition(":")
    if not sep or parse_count(port, cap=65535) is None or not host:
        print(f"gpu-admission serve: --bind must be HOST:PORT, got {args.bind!r}", file=err)
        return EXIT_USAGE
    problem = _extender_problem(args, port)
    probe_bind, probe_problem = _probe_bind(args, host, port)
    problem = problem or probe_problem
    if problem:
        print(f"gpu-admission serve: {problem}", file=err)
        return EXIT_USAGE
    from webhook.server import ProbeBindError

    options = ServeOptions(
        cert=Path(args.cert), key=Path(args.key), bind=args.bind, workers=args.workers, threads=args.threads,
        config=Path(args.config) if args.config else None,
        client_ca=Path(args.client_ca) if args.client_ca else None, log_level=args.log_level,
        inventory=args.inventory, kubeconfig=args.kubeconfig, max_queue_age=args.max_queue_age,
        read_deadline=args.read_deadline, probe_bind=probe_bind,
        extender_bind=args.extender_bind,
        extender_client_ca=Path(args.extender_client_ca) if args.extender_client_ca else None,
        extender_token_file=Path(args.extender_token_file) if args.extender_token_file else None)
    try:
        return run(options)
    except ProbeBindError as exc:  # in use, or not an address of this host: before any worker started
        print(f"gpu-admission serve: {exc}", file=err)
        return EXIT_USAGE


def _probe_bind(args: argparse.Namespace, admission_host: str, admission_port: str) -> tuple[str | None, str | None]:
    """(the probe port's HOST:PORT or None for 'off', what is wrong with --probe-bind)."""
    from webhook.server import DEFAULT_PROBE_PORT as DEFAULT_PORT

    value = args.probe_bind
    if value is None:
        value = f"{admission_host}:{DEFAULT_PORT}"
    elif value.strip().lower() in ("off", "none", ""):
        return None, None
    host, sep, port = value.rpartition(":")
    number = parse_count(port, cap=65535) if sep else None
    if number is None or not host:
        return None, f"--probe-bind must be HOST:PORT or 'off', got {value!r}"
    taken = {parse_count(admission_port, cap=65535): "--bind"}
    if args.extender_bind:
        taken[parse_count(args.extender_bind.rpartition(":")[2], cap=65535)] = "--extender-bind"
    if number != 0 and number in taken:
        return None, (f"--probe-bind needs a port of its own, not {taken[number]}'s {number}"
                      + ("" if args.probe_bind else f" (the default is {DEFAULT_PORT}: pass --probe-bind)"))
    return value, None


def _extender_problem(args: argparse.Namespace, admission_port: str) -> str | None:
    """What is wrong with serve's extender flags, if anything: the extender is opt-in, on a port of
    its own, and never unauthenticated."""
    ca, token = args.extender_client_ca, args.extender_token_file
    if args.extender_bind is None:
        return ("--extender-client-ca and --extender-token-file only apply with --extender-bind"
                if ca or token else None)
    host, sep, port = args.extender_bind.rpartition(":")
    if not sep or parse_count(port, cap=65535) is None or not host:
        return f"--extender-bind must be HOST:PORT, got {args.extender_bind!r}"
    if parse_count(port, cap=65535) == parse_count(admission_port, cap=65535):
        return f"--extender-bind needs a port of its own, not --bind's {admission_port}"
    if not ca and not token:
        return ("--extender-bind needs --extender-client-ca (mutual TLS, what kube-scheduler can do) or "
                "--extender-token-file: the extender is never served unauthenticated")
    if ca and not Path(ca).is_file():
        return f"--extender-client-ca {ca}: no such file"
    if token:
        from webhook.server import TokenError, read_token

        try:
            read_token(token)
        except TokenError as exc:
            return f"--extender-token-file {exc}"
    return None


def _rows(docs: Sequence[sources.Document], settings: settings_mod.Settings, *, mode: str | None,
          mutate: bool | None, inventory: Inventory | None = None,
          context: Mapping[tuple[str, str, str], Any] | None = None) -> list[report.Row]:
    """The rows of every object of ``docs``. Offline an object that is still a template (a GPU
    quantity ``$GPU_PER_NODE``, ``"{{ .Values.gpus }}"`` or empty, see :mod:`webhook.core.templating`)
    is one ``templated`` row instead of a judgement: kube-apiserver refuses it before any webhook
    sees it, so it is to be rendered, not denied. The server judges what it is sent and skips nothing."""
    rows: list[report.Row] = []
    shown = engine.resolve_mode(settings, mode=mode)  # the mode an unjudged row states
    for doc in docs:
        for pointer, obj in documents(doc.obj):
            try:
                markers = templating.find(obj, settings.gpu_resources, prefix=pointer)
                if markers:
                    results: Sequence[engine.TemplateResult] = (
                        engine.templated(obj, pointer, markers, shown),)
                else:
                    asked = engine.Request(obj, mode=mode, mutate=mutate, prefix=pointer, context=context)
                    results = engine.judge(asked, settings, inventory).results
            except Exception as exc:  # noqa: BLE001 - a bug: this object's one ERROR row, the others judged
                results = (report.failed(obj, pointer, exc, shown),)
            rows.extend(report.Row(doc.source, obj, pointer, result) for result in results)
    return rows


def _context(texts: Sequence[tuple[str, str | sources.Unreadable]]) -> dict[tuple[str, str, str], Any]:
    """The objects other objects of the input take their pods or env from (a TrainJob's runtime, a
    ConfigMap), found in any file of the input. Only a text that names such a kind is parsed here
    (twice, then: the price of reading a Deployment's ConfigMap); the worker processes of ``check``
    inherit the result."""
    objects = []
    for name, text in texts:
        if isinstance(text, str) and any(kind in text for kind in engine.CONTEXT_KINDS):
            try:
                objects += [obj for doc in sources.parse_stream(text, name) for _, obj in documents(doc.obj)]
            except sources.InputError:
                continue  # reported as the file's own row
    return engine.runtime_context(objects)


def _prepare(paths: Sequence[str], config: str | None, err: TextIO) -> tuple[
        list[sources.Document], settings_mod.Settings] | None:
    try:
        settings = settings_mod.load(config, read=Path.read_bytes)
        docs = sources.load(paths)
    except (SettingsError, sources.InputError) as exc:
        print(f"gpu-admission: {exc}", file=err)
        return None
    return docs, settings


def cmd_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.paths:
        print("gpu-admission check: give a file, a directory or - for stdin", file=err)
        return EXIT_USAGE
    try:
        settings = settings_mod.load(args.config, read=Path.read_bytes)
        texts = sources.read(args.paths, exclude=args.exclude)
        fleet = inventory_cli.load_file(args.inventory, settings) if args.inventory else None
        mutate = False if args.no_mutate else None
        context = _context(texts)
        mode = engine.resolve_mode(settings, mode=args.mode)

        def judge(docs: Sequence[sources.Document]) -> list[report.Row]:
            return _rows(docs, settings, mode=args.mode, mutate=mutate, inventory=fleet, context=context)

        def problem(name: str, why: sources.Unreadable) -> list[report.Row]:
            return [report.unreadable(name, why.about(name), templated=why.templated, mode=mode)]

        rows = check_pool.judge_texts(texts, judge, jobs=args.jobs or check_pool.default_jobs(), problem=problem)
    except (SettingsError, sources.InputError) as exc:
        print(f"gpu-admission: {exc}", file=err)
        return EXIT_USAGE
    if args.output == "github":
        from webhook.cli import github  # only this format needs it

        out.write(redact(github.render(rows, {name: text for name, text in texts if isinstance(text, str)})))
    else:
        render = {"json": report.render_json, "junit": report.render_junit, "text": report.render_text}
        out.write(redact(render[args.output](rows)))  # CI logs are logs: no token a manifest quotes
    if args.output == "json":
        out.write("\n")
    if all(isinstance(text, str) and sources.is_blank(text) for _, text in texts):
        # nothing at all was found (a path typo in CI, an empty directory, everything excluded): not
        # "all admitted". Files of objects without pods (ConfigMaps, Services) are a selection.
        where = ", ".join(args.paths)
        print(f"gpu-admission check: {'error' if args.strict else 'warning'}: no manifests found in {where} "
              f"({len(texts)} file(s) read; searched *.yaml, *.yml, *.json, without hidden, ignored and "
              "--exclude'd paths)", file=err)
        return EXIT_USAGE if args.strict else EXIT_OK
    if any(report.is_error(r) for r in rows):
        return EXIT_USAGE
    denied = any(not r.result.decision.allowed for r in rows)
    skipped = any(report.is_unjudged(r) or report.is_templated(r) for r in rows)
    return EXIT_DENIED if denied or (args.strict and skipped) else EXIT_OK


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prepared = _prepare([args.file], args.config, err)
    if prepared is None:
        return EXIT_USAGE
    docs, settings = prepared
    try:
        fleet = inventory_cli.load_file(args.inventory, settings) if args.inventory else None
    except sources.InputError as exc:
        print(f"gpu-admission: {exc}", file=err)
        return EXIT_USAGE
    context = engine.runtime_context(obj for doc in docs for _, obj in documents(doc.obj))
    rows = _rows(docs, settings, mode=args.mode, mutate=False if args.no_mutate else None, inventory=fleet,
                 context=context)
    if not rows:
        out.write("no pod templates found (kinds without pods pass through unjudged)\n")
        return EXIT_OK
    out.write(redact(render_explain(rows, settings)))
    if any(report.is_failed(r) for r in rows):
        return EXIT_USAGE
    return EXIT_DENIED if any(not r.result.decision.allowed for r in rows) else EXIT_OK


def cmd_policy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``policy check FILE``: the policy file validated as the server loads it."""
    name = "(stdin)" if args.file == "-" else args.file
    try:
        if args.file == "-":
            stdin = getattr(sys.stdin, "buffer", None)  # bytes, as a file is read (a test's StringIO has none)
            data = stdin.read() if stdin is not None else sys.stdin.read().encode("utf-8")
        else:
            data = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"gpu-admission policy check: {name}: cannot read: {exc.strerror or exc}", file=err)
        return EXIT_USAGE
    try:
        policy = settings_mod.load(name, read=lambda _path: data)
    except SettingsError as exc:
        print(f"INVALID {redact(str(exc))}", file=err)
        return EXIT_DENIED
    tiers = ", ".join(f"{t.name} ({len(t.products)} products)" for t in policy.tiers)
    print(f"OK {name}: generation {policy.generation}, mode {policy.mode}, mutate {str(policy.mutate).lower()}, "
          f"productLabel {policy.label_key}, tiers {tiers}", file=out)
    return EXIT_OK


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _missing(command: str | None) -> list[str]:
    """The libraries of the command's extra that are not installed (none for check and explain)."""
    _, modules = EXTRAS.get(command or "", ("", ()))
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _extra_message(command: str, missing: Sequence[str]) -> str:
    extra = EXTRAS[command][0]
    return (f"gpu-admission {command}: needs the [{extra}] extra, not installed here (missing: "
            f"{', '.join(missing)}); install it with: pip install 'gpu-admission[{extra}]' "
            f"(from a checkout: pip install '.[{extra}]')")


def _cmd_certs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from webhook.cli import certs as certs_mod

    return certs_mod.run(args, out, err)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    missing = _missing(command)
    if missing:  # a light install (`pip install gpu-admission`): one clear line, exit 2, no traceback
        print(_extra_message(command or "", missing), file=err)
        return EXIT_USAGE
    parser = build_parser(certs_flags=command in (None, "certs"))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or usage error (2)
        return int(exc.code or 0)
    from webhook.cli import audit as audit_cli, reporter as reporter_cli

    commands = {"check": cmd_check, "explain": cmd_explain, "serve": cmd_serve, "certs": _cmd_certs,
                "inventory": inventory_cli.run, "policy": cmd_policy, "audit": audit_cli.run,
                "reporter": reporter_cli.run}
    return commands[args.command](args, out, err)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
