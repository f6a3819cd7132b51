"""Ray's LLM libraries as a KubeRay object states them: the model, tensor and pipeline parallelism and
GPU type of Ray Serve LLM (``ray.serve.llm``) and Ray Data LLM (``ray.data.llm``) deployments.

The pod templates of a RayService or RayJob run ``ray start``; what runs on the GPU workers is named
elsewhere: in the RayService's ``serveConfigV2`` (a YAML string), in Serve config or ``LLMConfig``
YAML files and Python scripts mounted from ConfigMaps of the input, and in the RayJob's
``entrypoint``. This module reads those texts into :class:`LLMFacts`; :mod:`.ray` decides which files
the cluster can see and puts the facts on its worker groups as ``gpu-admission.io/*`` hints.

Upstream facts (ray-project/ray):

- python/ray/llm/_internal/serve/configs/server_models.py@01b6cd7f: ``LLMConfig`` has
  ``model_loading_config`` (``ModelLoadingConfig``: ``model_id``, and ``model_source``, "when omitted,
  defaults to the model_id as a HuggingFace model ID"), ``engine_kwargs``, ``accelerator_type``
  (validated against the names of ``ray.util.accelerators``, ``"A10"`` read as ``"A10G"``) and
  ``deployment_config`` (``autoscaling_config`` among its fields). ``LLMConfig.parse_from``: an
  ``llm_configs`` entry that is a string is the path of a YAML file, or of a folder whose
  ``.yml``/``.yaml``/``.json`` files are each an LLMConfig, when that path exists; else the string is
  parsed as YAML itself.
- python/ray/llm/_internal/serve/deployments/llm/vllm/vllm_models.py@017a84f4: the engine uses
  ``engine_kwargs.tensor_parallel_size`` x ``pipeline_parallel_size`` GPUs (each defaults to 1), one
  placement bundle ``{"GPU": 1, "accelerator_type:<type>": 0.001}`` per GPU, placed ``STRICT_PACK``
  (one Ray node, i.e. one worker pod) unless pipeline parallelism is over 1 (then ``PACK``).
- python/ray/llm/_internal/batch/processor/vllm_engine_proc.py@03c1c901 and base.py@00501e2b:
  ``vLLMEngineProcessorConfig(model_source=..., engine_kwargs=..., accelerator_type=...)`` (the
  engine stage runs ``model_source`` with ``engine_kwargs``), given to ``build_llm_processor``.
- python/ray/util/accelerators/accelerators.py@00501e2b: the accelerator type names (``"A100"``,
  ``"H100"``, ``"L4"``, ``"A10G"``, ``"A100-80G"``, ...).

A script is read, never run: :mod:`ast` parses it and only literal keyword arguments count (and
module-level names bound to literals); a model given by a variable the script computes is reported
as not readable. Bounded: texts over :data:`MAX_TEXT` characters and nodes past :data:`MAX_NODES`
are not read; YAML is loaded with the safe loader.
"""

from __future__ import annotations

import ast
import itertools
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.core.counts import parse_count

MAX_TEXT = 256 * 1024
"""Longest serveConfigV2, YAML file or script read (characters)."""
MAX_NODES = 200_000
"""Syntax-tree nodes of one script visited."""
MAX_CONFIGS = 64
"""Applications, llm_configs and calls read per text."""
MAX_DEPTH = 12
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_UNKNOWN: Any = object()
_CONFIG_EXTENSIONS = (".yml", ".yaml", ".json")

SERVE_CONFIG = "LLMConfig"
DATA_CONFIG = "vLLMEngineProcessorConfig"
_MAPPING_CALLS = frozenset({"dict", "ModelLoadingConfig"})
_ALIASED = frozenset({SERVE_CONFIG, DATA_CONFIG})
"""Config classes also read under the name ``from ... import X as Y`` gives them (anywhere in the
script: an alias is a name only that class can have been given)."""


@dataclass(frozen=True)
class LLMFacts:
    """What one Ray LLM deployment states."""

    model: str | None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    accelerator: str | None = None
    source: str = ""
    """Where it was read (``spec.serveConfigV2``, a file path), for messages."""
    unreadable: str | None = None
    """Why the model could not be read (a value the script computes), else ``None``."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= 512 else None


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= 4096 else None
    n = parse_count(value, cap=4096, padded=True) if isinstance(value, str) else None
    return n if n else None


def accelerator_name(value: Any) -> str | None:
    """The accelerator type as Ray Serve LLM validates it (``"A10"`` becomes ``"A10G"``)."""
    name = _text(value)
    if name is None:
        return None
    return "A10G" if name == "A10" else name[:64]


def from_llm_config(config: Mapping[str, Any], source: str) -> LLMFacts:
    """One Ray Serve ``LLMConfig`` (as a mapping: YAML, or a Python literal)."""
    loading = config.get("model_loading_config")
    loading = loading if isinstance(loading, Mapping) else {}
    engine = config.get("engine_kwargs")
    engine = engine if isinstance(engine, Mapping) else {}
    source_value, id_value = loading.get("model_source"), loading.get("model_id")
    # a cloud mirror (a mapping) loads weights from a bucket: model_id is then the only name given
    model = _text(source_value) or (None if source_value is _UNKNOWN else _text(id_value))
    unreadable = None
    if model is None and _UNKNOWN in (source_value, id_value, config.get("model_loading_config")):
        unreadable = "its model_loading_config is not a literal"
    return LLMFacts(model, _positive(engine.get("tensor_parallel_size")),
                    _positive(engine.get("pipeline_parallel_size")),
                    accelerator_name(config.get("accelerator_type")), source, unreadable)


def from_processor_config(config: Mapping[str, Any], source: str) -> LLMFacts:
    """One Ray Data ``vLLMEngineProcessorConfig`` (its keyword arguments)."""
    engine = config.get("engine_kwargs")
    engine = engine if isinstance(engine, Mapping) else {}
    model = _text(config.get("model_source"))
    unreadable = "its model_source is not a literal" if model is None and "model_source" in config else None
    return LLMFacts(model, _positive(engine.get("tensor_parallel_size")),
                    _positive(engine.get("pipeline_parallel_size")),
                    accelerator_name(config.get("accelerator_type")), source, unreadable)


def load_yaml(text: Any, where: str) -> tuple[Any, str | None]:
    """``text`` parsed (safe loader), or ``(None, note)`` when it is not readable YAML."""
    if not isinstance(text, str):
        return None, f"{where} is not a string: its model is not read"
    if len(text) > MAX_TEXT or len(text.encode("utf-8", "replace")) > MAX_TEXT:
        return None, f"{where} is over {MAX_TEXT // 1024} KiB: its model is not read"
    try:
        return yaml.load(text, Loader=_LOADER), None  # noqa: S506 (a safe loader)
    except Exception as exc:  # noqa: BLE001 (YAMLError, RecursionError on deep nesting, ...: all mean "unreadable")
        return None, f"{where} does not parse as YAML ({type(exc).__name__}): its model is not read"


def serve_applications(doc: Any, source: str, files: Mapping[str, str],
                       workdir: str = "") -> tuple[list[LLMFacts], list[str]]:
    """The deployments a Serve config (``serveConfigV2``, a ``serve run`` YAML) states: each
    application's ``args.llm_configs`` (mappings, file or folder paths the cluster's files show, YAML
    text) and a custom app's ``runtime_env.env_vars`` (KubeRay's vLLM sample: ``MODEL_ID``,
    ``TENSOR_PARALLELISM``, ``PIPELINE_PARALLELISM``; ray-project/kuberay ray-operator/config/samples/
    vllm/ray-service.vllm.yaml@09a89552)."""
    apps = doc.get("applications") if isinstance(doc, Mapping) else None
    found: list[LLMFacts] = []
    notes: list[str] = []
    for app in apps[:MAX_CONFIGS] if isinstance(apps, list) else ():
        if not isinstance(app, Mapping):
            continue
        args = app.get("args")
        configs = args.get("llm_configs") if isinstance(args, Mapping) else None
        for config in configs[:MAX_CONFIGS] if isinstance(configs, list) else ():
            if isinstance(config, Mapping):
                found.append(from_llm_config(config, source))
            elif isinstance(config, str):
                more, why = _config_string(config, source, files, workdir)
                found += more
                notes += why
        runtime_env = app.get("runtime_env")
        env = runtime_env.get("env_vars") if isinstance(runtime_env, Mapping) else None
        if isinstance(env, Mapping) and _text(env.get("MODEL_ID")):
            found.append(LLMFacts(env["MODEL_ID"], _positive(env.get("TENSOR_PARALLELISM")),
                                  _positive(env.get("PIPELINE_PARALLELISM")), None, source))
    return found, notes


def _config_string(text: str, source: str, files: Mapping[str, str],
                   workdir: str) -> tuple[list[LLMFacts], list[str]]:
    """An ``llm_configs`` string: a file or folder the cluster's files show, else YAML text."""
    shown = files_at(files, text, workdir)
    if shown:
        found: list[LLMFacts] = []
        notes: list[str] = []
        for path, body in shown[:MAX_CONFIGS]:
            doc, note = load_yaml(body, path)
            if note:
                notes.append(note)
            elif isinstance(doc, Mapping):
                found.append(from_llm_config(doc, path))
        return found, notes
    doc, _ = load_yaml(text, source)
    if isinstance(doc, Mapping):
        return [from_llm_config(doc, source)], []
    return [], [f"{source} names the LLMConfig file {text[:96]!r}, which no ConfigMap of the input mounts in "
                "the cluster: its model is not read"]


def files_at(files: Mapping[str, str], path: str, workdir: str) -> list[tuple[str, str]]:
    """The file at ``path``, or the config files under it when it is a folder (as
    ``LLMConfig.parse_from`` walks it), from the files the cluster shows."""
    wanted = _normal(path, workdir)
    if not wanted:
        return []
    exact = [(name, text) for name, text in files.items() if _normal(name, workdir) == wanted]
    if exact:
        return exact[:1]
    prefix = wanted.rstrip("/") + "/"
    return sorted((name, text) for name, text in files.items()
                  if _normal(name, workdir).startswith(prefix) and name.endswith(_CONFIG_EXTENSIONS))


def _normal(path: str, workdir: str) -> str:
    text = path.strip()
    if not text:
        return ""
    if not text.startswith("/") and workdir.startswith("/"):
        text = posixpath.join(workdir, text)
    return posixpath.normpath(text)


# ---------------------------------------------------------------- Python scripts


def python_facts(source_text: str, path: str) -> tuple[list[LLMFacts], list[str]]:
    """The Ray LLM deployments a Python script states: ``LLMConfig(...)`` and
    ``vLLMEngineProcessorConfig(...)`` calls (by name or attribute), and dict literals shaped as an
    LLMConfig (``{"model_loading_config": ...}``, as given to ``build_openai_app``)."""
    if not isinstance(source_text, str) or len(source_text) > MAX_TEXT:
        return [], [f"{path} is over {MAX_TEXT // 1024} KiB: its model is not read"]
    try:
        tree = ast.parse(source_text, filename=path[:256])
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return [], [f"{path} does not parse as Python ({type(exc).__name__}): its model is not read"]
    consts = _constants(tree)
    nodes = list(itertools.islice(ast.walk(tree), MAX_NODES))
    aliases = {a.asname: a.name for node in nodes if isinstance(node, ast.ImportFrom)
               for a in node.names[:64] if a.asname and a.name in _ALIASED}
    found: list[LLMFacts] = []
    for node in nodes:
        if len(found) >= MAX_CONFIGS:
            break
        if isinstance(node, ast.Call):
            name = _callee(node)
            name = aliases.get(name, name) if name else name
            if name == SERVE_CONFIG:
                found.append(from_llm_config(_keywords(node, consts), path))
            elif name == DATA_CONFIG:
                found.append(from_processor_config(_keywords(node, consts), path))
        elif isinstance(node, ast.Dict) and _has_key(node, "model_loading_config"):
            value = _value(node, consts, 0)
            if isinstance(value, Mapping):
                found.append(from_llm_config(value, path))
    return found, []


def _constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` bindings (a name bound twice is not a constant)."""
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for stmt in tree.body[:4096]:
        target, value = None, None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target.id, stmt.value
        if target is None:
            continue
        if target in seen:
            out[target] = _UNKNOWN
            continue
        seen.add(target)
        out[target] = _value(value, out, 0)
    return out


def _callee(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _has_key(node: ast.Dict, key: str) -> bool:
    return any(isinstance(k, ast.Constant) and k.value == key for k in node.keys[:MAX_CONFIGS])


def _keywords(node: ast.Call, consts: Mapping[str, Any]) -> dict[str, Any]:
    """A call's keyword arguments as values (``_UNKNOWN`` where not a literal)."""
    return {kw.arg: _value(kw.value, consts, 1) for kw in node.keywords[:256] if kw.arg}


def _value(node: Any, consts: Mapping[str, Any], depth: int) -> Any:
    """The literal value of ``node`` (``dict(...)`` and ``ModelLoadingConfig(...)`` calls read as
    mappings of their keywords; names bound to literals at module level resolved), else ``_UNKNOWN``."""
    if depth > MAX_DEPTH:
        return _UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (str, int, float, bool)) or node.value is None else _UNKNOWN
    if isinstance(node, ast.Name):
        return consts.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys[:256], node.values[:256]):
            k = _value(key, consts, depth + 1) if key is not None else _UNKNOWN
            if isinstance(k, str):
                out[k] = _value(item, consts, depth + 1)
        return out
    if isinstance(node, ast.Call) and _callee(node) in _MAPPING_CALLS:
        return {kw.arg: _value(kw.value, consts, depth + 1) for kw in node.keywords[:256] if kw.arg}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, consts, depth + 1) for item in node.elts[:256]]
    return _UNKNOWN


# ---------------------------------------------------------------- command lines


def entrypoint_files(argvs: Sequence[Sequence[str]]) -> Iterator[tuple[str, str]]:
    """(kind, path or code) of what command lines run that may state a Ray LLM deployment:
    ``("python", script)``, ``("code", text)`` for ``python -c``, ``("serve", config.yaml)`` for
    ``serve run|deploy``."""
    for argv in argvs[:64]:
        if not argv:
            continue
        head = argv[0].rsplit("/", 1)[-1]
        if head.startswith("python"):
            found = _python_target(argv[1:])
            if found is not None:
                yield found
        elif head == "serve" and len(argv) > 2 and argv[1] in ("run", "deploy"):
            for token in argv[2:32]:
                if token.endswith((".yaml", ".yml")) and not token.startswith("-"):
                    yield "serve", token
                    break


def _python_target(args: Sequence[str]) -> tuple[str, str] | None:
    """The script (or ``-c`` code) a ``python`` command line runs; ``None`` for ``-m`` and the REPL."""
    i = 0
    while i < len(args) and i < 32:
        token = args[i]
        if token == "-c":
            return ("code", args[i + 1]) if i + 1 < len(args) else None
        if token == "-m" or token.startswith("-m"):
            return None
        if token in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if token.startswith("-"):
            i += 1
            continue
        return ("python", token) if token.endswith(".py") else None
    return None


# ---------------------------------------------------------------- summary


def summary(found: Sequence[LLMFacts], where: str) -> tuple[str | None, int | None, int | None,
                                                             tuple[str, ...], tuple[str, ...]]:
    """(model, TP, PP, accelerator types, notes) of the deployments ``found`` in ``where``: a model
    only when exactly one is named (no worker group can be told which of several it runs), TP and
    PP only when all deployments that state them agree."""
    notes: list[str] = []
    models = sorted({f.model for f in found if f.model})
    for f in found:
        if f.model is None and f.unreadable:
            notes.append(f"{f.source[:96]} configures a Ray LLM deployment, but {f.unreadable}: its model is "
                         "not read; annotate the GPU worker group with gpu-admission.io/model")
    if len(models) > 1:
        notes.append(f"{where} serves {len(models)} models ({', '.join(m[:64] for m in models[:4])}): which "
                     "worker group runs which is not known; annotate the groups with gpu-admission.io/model")
        return None, None, None, (), tuple(dict.fromkeys(notes))
    tps = {f.tensor_parallel for f in found if f.tensor_parallel}
    pps = {f.pipeline_parallel for f in found if f.pipeline_parallel}
    accelerators = tuple(sorted({f.accelerator for f in found if f.accelerator}))
    return (models[0] if models else None, tps.pop() if len(tps) == 1 else None,
            pps.pop() if len(pps) == 1 else None, accelerators, tuple(dict.fromkeys(notes)))


def accelerator_note(where: str, names: Sequence[str]) -> str | None:
    """What a stated ``accelerator_type`` means for the worker pods: Ray places the model's GPU
    bundles only on Ray nodes of that type, which Kubernetes knows nothing of; the pods' own
    selection (or the webhook's pin) must land them on it. Not turned into a product pin: the
    pods' spec is the object's own and is patched as written, and Ray's names (``A100`` covers
    every A100) are coarser than the catalog's products."""
    if not names:
        return None
    shown = ", ".join(n for n in names[:4])
    return (f"{where} asks Ray for accelerator_type {shown}: Ray places the model only on Ray nodes of that "
            f"GPU type; make the GPU worker group's node selection land on {shown} nodes")
