"""The ``gpu-admission`` command line: a thin front door over the engine.

Exit codes of ``check`` (an interface CI pipelines rely on):
0 every object would be admitted, 1 at least one would be denied (with ``--strict``: or an object
asks for GPUs where no pod template could be read, or is still a template to render), 2 usage or
input error.
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

templated objects (nvidia.com/gpu: $GPU_PER_NODE, "{{ .Values.gpus }}", empty) are reported
SKIP templated, not denied: render them first (helm template / envsubst / kustomize)

exit codes: 0 all admitted, 1 any denied (or, with --strict, any GPU object not judged or
templated), 2 usage or input error"""


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
                       help="files, directories (recursive *.yaml, *.yml, *.json) or - for stdin")
    check.add_argument("--output", choices=("text", "json", "junit"), default="text",
                       help="report format (default: text)")
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

    serve = sub.add_parser(
        "serve", help="run the admission server (gunicorn, TLS)",
        description="Run the admission webhook: POST /mutate and /validate (AdmissionReview v1), "
                    "GET /healthz, /readyz and /metrics, over TLS 1.2+ with threaded gunicorn workers. "
                    "Certificate and policy files are reloaded when they change, without a restart.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve.add_argument("--config", metavar="FILE", help="policy file (default: the embedded policy); "
                       "reloaded on change, an invalid new version keeps the last good one")
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
    serve.add_argument("--inventory", choices=("auto", "on", "off"), default="auto",
                       help="watch Nodes to offer only GPU products that exist and avoid mixed nodes: auto = "
                            "when in-cluster or kubeconfig credentials load and RBAC allows listing nodes")
    serve.add_argument("--kubeconfig", metavar="FILE", default=None,
                       help="kubeconfig for the node inventory (default: in-cluster, then ~/.kube/config)")

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
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to 3600, got {text!r}")
    return value


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return int(text)


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Validate everything a worker needs before forking, so a bad flag fails here with exit 2."""
    from webhook.server import ServeOptions, keypair, run

    try:
        settings_mod.load(args.config, read=Path.read_bytes)
    except SettingsError as exc:
        print(f"gpu-admission serve: {exc}", file=err)
        return EXIT_USAGE
    problem = keypair.pair_problem(args.cert, args.key)
    if problem:
        print(f"gpu-admission serve: {problem} (create a pair with: gpu-admission certs --service NAME "
              f"--namespace NS --ip 127.0.0.1)", file=err)
        return EXIT_USAGE
    if args.client_ca and not Path(args.client_ca).is_file():
        print(f"gpu-admission serve: --client-ca {args.client_ca}: no such file", file=err)
        return EXIT_USAGE
    host, sep, port = args.bind.rpartition(":")
    if not sep or not port.isdigit() or not host:
        print(f"gpu-admission serve: --bind must be HOST:PORT, got {args.bind!r}", file=err)
        return EXIT_USAGE
    return run(ServeOptions(
        cert=Path(args.cert), key=Path(args.key), bind=args.bind, workers=args.workers, threads=args.threads,
        config=Path(args.config) if args.config else None,
        client_ca=Path(args.client_ca) if args.client_ca else None, log_level=args.log_level,
        inventory=args.inventory, kubeconfig=args.kubeconfig, max_queue_age=args.max_queue_age))


def _rows(docs: Sequence[sources.Document], settings: settings_mod.Settings, *, mode: str | None,
          mutate: bool | None, inventory: Inventory | None = None,
          context: Mapping[tuple[str, str, str], Any] | None = None) -> list[report.Row]:
    """The rows of every object of ``docs``. Offline an object that is still a template (a GPU
    quantity ``$GPU_PER_NODE``, ``"{{ .Values.gpus }}"`` or empty, see :mod:`webhook.core.templating`)
    is one ``templated`` row instead of a judgement: kube-apiserver refuses it before any webhook
    sees it, so it is to be rendered, not denied. The server judges what it is sent and skips nothing."""
    rows: list[report.Row] = []
    for doc in docs:
        for pointer, obj in documents(doc.obj):
            markers = templating.find(obj, settings.gpu_resources, prefix=pointer)
            if markers:
                result = engine.templated(obj, pointer, markers, mode or settings.mode)
                rows.append(report.Row(doc.source, obj, pointer, result))
                continue
            for result in engine.judge_any(obj, settings, mode=mode, mutate=mutate, prefix=pointer,
                                           inventory=inventory, context=context):
                rows.append(report.Row(doc.source, obj, pointer, result))
    return rows


def _context(texts: Sequence[tuple[str, str]]) -> dict[tuple[str, str, str], Any]:
    """The objects other objects of the input take their pods or env from (a TrainJob's runtime, a
    ConfigMap), found in any file of the input. Only a text that names such a kind is parsed here
    (twice, then: the price of reading a Deployment's ConfigMap); the worker processes of ``check``
    inherit the result."""
    objects = []
    for name, text in texts:
        if any(kind in text for kind in engine.CONTEXT_KINDS):
            objects += [obj for doc in sources.parse_stream(text, name) for _, obj in documents(doc.obj)]
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
        texts = sources.read(args.paths)
        fleet = inventory_cli.load_file(args.inventory, settings) if args.inventory else None
        mutate = False if args.no_mutate else None
        context = _context(texts)

        def judge(docs: Sequence[sources.Document]) -> list[report.Row]:
            return _rows(docs, settings, mode=args.mode, mutate=mutate, inventory=fleet, context=context)

        rows = check_pool.judge_texts(texts, judge, jobs=args.jobs or check_pool.default_jobs())
    except (SettingsError, sources.InputError) as exc:
        print(f"gpu-admission: {exc}", file=err)
        return EXIT_USAGE
    render = {"json": report.render_json, "junit": report.render_junit, "text": report.render_text}
    out.write(redact(render[args.output](rows)))  # CI logs are logs: no token a manifest quotes
    if args.output == "json":
        out.write("\n")
    denied = any(not r.result.decision.allowed for r in rows)
    skipped = any(report.is_unjudged(r) or report.is_templated(r) for r in rows)
    return EXIT_DENIED if denied or (args.strict and skipped) else EXIT_OK


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    prepared = _prepare([args.file], args.config, err)
    if prepared is None:
        return EXIT_USAGE
    docs, settings = prepared
    context = engine.runtime_context(obj for doc in docs for _, obj in documents(doc.obj))
    rows = _rows(docs, settings, mode=args.mode, mutate=None, context=context)
    if not rows:
        out.write("no pod templates found (kinds without pods pass through unjudged)\n")
        return EXIT_OK
    out.write(redact(render_explain(rows, settings)))
    return EXIT_DENIED if any(not r.result.decision.allowed for r in rows) else EXIT_OK


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
    commands = {"check": cmd_check, "explain": cmd_explain, "serve": cmd_serve, "certs": _cmd_certs,
                "inventory": inventory_cli.run}
    return commands[args.command](args, out, err)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
