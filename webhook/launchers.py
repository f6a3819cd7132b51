"""Container -> ``LaunchSpec``: which launcher runs, which model, how much parallelism.

``shell`` turns the container into plain argv tuples; this module recognises the launcher in one
of them and reads its flags through one small table per framework (spelling -> field), so adding
a spelling is a one-line change and every spelling is testable from a table. Values are parsed
strictly: a flag whose value is ``$(TP)``, ``${TP}`` or a ``valueFrom`` variable is reported in
``hidden`` by *name and source*, never guessed and never echoed, because pods carry credentials in
their env and reports end up in logs and API warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from webhook.domain import LaunchSpec
from webhook.shell import Invocation, container_env, env_sources, invocations, is_secret_name

__all__ = ["parse_container", "Flag", "canonical_dtype", "canonical_quantization"]

MAX_MODEL_CHARS = 512
MAX_MESSAGES = 32
"""hidden/notes entries kept per spec: enough to explain, bounded for hostile input."""

# --------------------------------------------------------------------------- values

_BAD = object()
"""Converter result: the value is not of the expected form."""
_SKIP = object()
"""Converter result: a valid value that says nothing (``--mixed_precision no``)."""
_ALL_GPUS = object()
"""Converter result: one process per visible GPU (torchrun ``--nproc-per-node gpu``)."""

_INT_RE = re.compile(r"\+?[0-9]{1,6}")
_FLOAT_RE = re.compile(r"[0-9]{0,3}(?:\.[0-9]{1,8})?")
_NNODES_RE = re.compile(r"(\+?[0-9]{1,6})(?::(\+?[0-9]{1,6}))?")
_NEGATIVE_NUMBER_RE = re.compile(r"-[0-9.]{1,32}")
_REF_RE = re.compile(
    r"\$\(([A-Za-z_][A-Za-z0-9_.-]{0,127})\)"  # $(VAR): kubelet syntax left unexpanded
    r"|\$\{([A-Za-z_][A-Za-z0-9_]{0,127})[^}]{0,256}\}"  # ${VAR}, ${VAR:-x}
    r"|\$([A-Za-z_][A-Za-z0-9_]{0,127})"  # $VAR
    r"|\$\{?([0-9@*])"  # $1, ${1}, $@
)

_DTYPES = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "float32": "fp32", "fp32": "fp32", "float": "fp32", "auto": "auto", "fp8": "fp8",
}
_QUANTIZATIONS = {
    "awq": "awq", "awq-marlin": "awq", "gptq": "gptq", "gptq-marlin": "gptq", "marlin": "gptq",
    "fp8": "fp8", "bitsandbytes": "bnb-4bit", "bitsandbytes-nf4": "bnb-4bit",
    "bitsandbytes-fp4": "bnb-4bit", "bnb-4bit": "bnb-4bit", "eetq": "int8",
    "compressed-tensors": "compressed-tensors", "mxfp4": "mxfp4", "gguf": "gguf", "int4": "int4",
    "int8": "int8",
}
_NO_VALUE = frozenset({"none", "null", "no", ""})


def canonical_dtype(raw: str) -> str | None:
    """``bfloat16`` -> ``bf16``, ``half`` -> ``fp16``, ``float`` -> ``fp32``; unknown lower-cased."""
    key = raw.strip().lower()
    if key in _NO_VALUE:
        return None
    return _DTYPES.get(key, key)


def canonical_quantization(raw: str) -> str | None:
    """``awq_marlin`` -> ``awq``, ``bitsandbytes-nf4`` -> ``bnb-4bit``, ``eetq`` -> ``int8``, ...

    Dashes and underscores are interchangeable in the lookup; unknown values come back lower-cased
    as given, ``none`` as ``None``.
    """
    key = raw.strip().lower()
    if key in _NO_VALUE:
        return None
    return _QUANTIZATIONS.get(key.replace("_", "-"), key)


def _to_count(raw: str) -> Any:
    """Strict positive integer: ``4`` yes; ``4.0``, ``1_0``, ``${TP}``, ``0`` no."""
    text = raw.strip()
    if not _INT_RE.fullmatch(text):
        return _BAD
    value = int(text)
    return value if value >= 1 else _BAD


def _to_nnodes(raw: str) -> Any:
    """torchrun ``--nnodes``: ``N`` or ``MIN:MAX`` (elastic; the group may grow to MAX)."""
    m = _NNODES_RE.fullmatch(raw.strip())
    if not m:
        return _BAD
    value = int(m.group(2) or m.group(1))
    return value if value >= 1 else _BAD


def _to_nproc(raw: str) -> Any:
    """torchrun ``--nproc-per-node``: an integer, or ``auto``/``gpu`` (= every visible GPU)."""
    text = raw.strip().lower()
    if text in ("auto", "gpu", "cuda", "-1"):
        return _ALL_GPUS
    if text in ("cpu", "xpu", "npu", "mps"):
        return _SKIP
    return _to_count(text)


def _to_fraction(raw: str) -> Any:
    """A memory fraction in (0, 1]."""
    text = raw.strip()
    if not text or not _FLOAT_RE.fullmatch(text) or text == ".":
        return _BAD
    value = float(text)
    return value if 0 < value <= 1 else _BAD


def _to_model(raw: str) -> Any:
    """A model id or path as given (bounded); empty means not given."""
    text = raw.strip()
    if not text:
        return _SKIP
    return text if len(text) <= MAX_MODEL_CHARS else _BAD


def _to_dtype(raw: str) -> Any:
    value = canonical_dtype(raw)
    return _SKIP if value is None else value


def _to_quantization(raw: str) -> Any:
    value = canonical_quantization(raw)
    return _SKIP if value is None else value


def _to_kv_dtype(raw: str) -> Any:
    """``fp8_e4m3``/``fp8_e5m2`` -> ``fp8``; otherwise as a dtype."""
    text = raw.strip().lower()
    return "fp8" if text.startswith("fp8") else _to_dtype(text)


def _to_precision(raw: str) -> Any:
    """Lightning ``trainer.precision``: ``bf16-mixed`` -> bf16, ``16`` -> fp16, ``32`` -> fp32."""
    text = raw.strip().lower().removesuffix("-mixed").removesuffix("-true")
    return {"16": "fp16", "32": "fp32", "64": "fp64"}.get(text) or _to_dtype(text)


def _to_lmdeploy_format(raw: str) -> Any:
    """LMDeploy ``--model-format``: ``awq``/``gptq``/``fp8`` are quantizations, ``hf`` is not."""
    text = raw.strip().lower()
    return text if text in ("awq", "gptq", "fp8") else _SKIP


def _to_quant_policy(raw: str) -> Any:
    """LMDeploy ``--quant-policy``: 4 and 8 quantize the KV cache to int4/int8, 0 does not."""
    return {"4": "int4", "8": "int8"}.get(raw.strip(), _SKIP)


@dataclass(frozen=True)
class _Field:
    """How one flag value becomes a LaunchSpec field."""

    target: str
    what: str
    expected: str
    convert: Callable[[str], Any]


_FIELDS: dict[str, _Field] = {
    "model": _Field("model", "model", "a model name", _to_model),
    "tensor_parallel": _Field("tensor_parallel", "tensor parallel size", "a positive integer", _to_count),
    "pipeline_parallel": _Field("pipeline_parallel", "pipeline parallel size", "a positive integer", _to_count),
    "data_parallel": _Field("data_parallel", "data parallel size", "a positive integer", _to_count),
    "expert_parallel": _Field("expert_parallel", "expert parallel size", "a positive integer", _to_count),
    "nnodes": _Field("nnodes", "node count", "N or MIN:MAX", _to_nnodes),
    "procs_per_node": _Field("procs_per_node", "processes per node", "a positive integer", _to_count),
    "nproc": _Field("procs_per_node", "processes per node", "an integer, auto or gpu", _to_nproc),
    "total_procs": _Field("total_procs", "total process count", "a positive integer", _to_count),
    "dtype": _Field("dtype", "dtype", "a dtype", _to_dtype),
    "precision": _Field("dtype", "precision", "a precision", _to_precision),
    "mixed_precision": _Field("dtype", "mixed precision", "a precision", _to_dtype),
    "quantization": _Field("quantization", "quantization", "a quantization method", _to_quantization),
    "model_format": _Field("quantization", "model format", "a model format", _to_lmdeploy_format),
    "kv_cache_dtype": _Field("kv_cache_dtype", "KV cache dtype", "a dtype", _to_kv_dtype),
    "quant_policy": _Field("kv_cache_dtype", "KV cache quantization", "0, 4 or 8", _to_quant_policy),
    "gpu_memory_utilization": _Field(
        "gpu_memory_utilization", "GPU memory utilization", "a fraction between 0 and 1", _to_fraction
    ),
}

# --------------------------------------------------------------------------- flag tables


@dataclass(frozen=True)
class Flag:
    """What one flag spelling means: the field it sets and whether it takes a value.

    ``field`` is a key of ``_FIELDS``, a parser-specific name (``config``, ``sharded``,
    ``ep_enabled``...) or ``""`` for flags that only need to be skipped correctly. ``kind`` is
    ``value``, ``bool`` (never takes the next token) or ``optbool`` (takes it only when it is
    ``true``/``false``, like TGI's ``--sharded true`` and HF Trainer's ``--bf16 True``).
    """

    field: str
    kind: str = "value"


def norm_flag(spelling: str) -> str:
    """Lower-case with ``_`` -> ``-`` after the leading dashes: every spelling looks the same."""
    stripped = spelling.lstrip("-")
    return spelling[: len(spelling) - len(stripped)] + stripped.replace("_", "-").lower()


def _table(*rows: tuple[str, str, str]) -> dict[str, Flag]:
    """Rows of (space-separated spellings, field, kind) -> lookup by normalised spelling."""
    out: dict[str, Flag] = {}
    for spellings, fld, kind in rows:
        for spelling in spellings.split():
            out[norm_flag(spelling)] = Flag(fld, kind)
    return out


V, B, OB = "value", "bool", "optbool"

VLLM_FLAGS = _table(
    ("--model", "model", V),
    ("--tensor-parallel-size -tp", "tensor_parallel", V),
    ("--pipeline-parallel-size -pp", "pipeline_parallel", V),
    ("--data-parallel-size -dp", "data_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--enable-expert-parallel -ep", "ep_enabled", B),
    ("--dtype", "dtype", V),
    ("--quantization -q", "quantization", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--gpu-memory-utilization", "gpu_memory_utilization", V),
    ("--config", "config", V),
    ("--served-model-name --tokenizer --data-parallel-size-local -dpl --node-rank -O", "", V),
    (
        "--trust-remote-code --enforce-eager --enable-prefix-caching --no-enable-prefix-caching "
        "--enable-chunked-prefill --no-enable-chunked-prefill --disable-log-requests "
        "--enable-log-requests --disable-log-stats --enable-auto-tool-choice --enable-lora "
        "--disable-custom-all-reduce --enable-reasoning --headless --enable-sleep-mode "
        "--disable-frontend-multiprocessing --async-scheduling --data-parallel-hybrid-lb "
        "--data-parallel-external-lb --enable-eplb --enable-dbo --disable-fastapi-docs "
        "--enable-prompt-tokens-details --enable-server-load-tracking --enable-force-include-usage "
        "--enable-request-id-headers --skip-tokenizer-init --disable-sliding-window "
        "--disable-cascade-attn --enable-prompt-embeds --disable-uvicorn-access-log "
        "--disable-async-output-proc --return-tokens-as-token-ids --fully-sharded-loras "
        "--allow-credentials --enable-log-outputs --use-v2-block-manager",
        "", B,
    ),
)

TGI_FLAGS = _table(
    ("--model-id", "model", V),
    ("--num-shard", "tensor_parallel", V),
    ("--sharded", "sharded", OB),
    ("--quantize", "quantization", V),
    ("--dtype", "dtype", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--cuda-memory-fraction", "gpu_memory_utilization", V),
    (
        "--trust-remote-code --disable-custom-kernels --json-output --disable-grammar-support "
        "--enable-prefill-logprobs --disable-usage-stats",
        "", B,
    ),
)

SGLANG_FLAGS = _table(
    ("--model-path --model", "model", V),
    ("--tensor-parallel-size --tp-size --tp", "tensor_parallel", V),
    ("--pipeline-parallel-size --pp-size --pp", "pipeline_parallel", V),
    ("--data-parallel-size --dp-size --dp", "data_parallel", V),
    ("--expert-parallel-size --ep-size --ep", "expert_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--mem-fraction-static", "gpu_memory_utilization", V),
    ("--quantization", "quantization", V),
    ("--dtype", "dtype", V),
    ("--kv-cache-dtype", "kv_cache_dtype", V),
    ("--config", "config", V),
    ("--enable-ep-moe", "ep_enabled", B),
    ("--served-model-name --tokenizer-path --node-rank --dist-init-addr", "", V),
    (
        "--trust-remote-code --enable-dp-attention --enable-deepep-moe --enable-torch-compile "
        "--disable-radix-cache --enable-metrics --log-requests --disable-cuda-graph "
        "--enable-mixed-chunk --skip-server-warmup --enable-dp-lm-head --disable-overlap-schedule "
        "--enable-cache-report --enable-hierarchical-cache --enable-nan-detection --show-time-cost "
        "--skip-tokenizer-init --enable-p2p-check --disable-custom-all-reduce --enable-memory-saver "
        "--allow-auto-truncate --enable-multimodal",
        "", B,
    ),
)

TRTLLM_FLAGS = _table(
    ("--tp-size", "tensor_parallel", V),
    ("--pp-size", "pipeline_parallel", V),
    ("--ep-size --moe-expert-parallel-size", "expert_parallel", V),
    ("--extra-llm-api-options --config", "config", V),
    ("--backend --tokenizer --gpus-per-node --cluster-size --kv-cache-free-gpu-memory-fraction", "", V),
    ("--trust-remote-code", "", B),
)

TRITON_FLAGS = _table(
    ("--world-size", "procs_per_node", V),
    ("--model-repo --tritonserver --grpc-port --http-port --metrics-port --log-file", "", V),
    ("--multi-model --oversubscribe --disable-spawn-processes --no-mpi --log", "", B),
)

KSERVE_FLAGS = {
    **VLLM_FLAGS,
    **_table(
        ("--model-id", "model", V),
        ("--model-dir", "model_dir", V),
        ("--model", "", V),  # vLLM's own --model is overwritten by the runtime
        ("--model-name --model-revision --tokenizer-revision --backend --task --max-length", "", V),
        (
            "--disable-lower-case --disable-special-tokens --return-token-type-ids "
            "--return-probabilities --enable-docs-url",
            "", B,
        ),
    ),
}

LMDEPLOY_FLAGS = _table(
    ("--tp", "tensor_parallel", V),
    ("--dp", "data_parallel", V),
    ("--ep", "expert_parallel", V),
    ("--nnodes", "nnodes", V),
    ("--dtype", "dtype", V),
    ("--model-format", "model_format", V),
    ("--quant-policy", "quant_policy", V),
    ("--model-name --backend --server-port --server-name --cache-max-entry-count --session-len", "", V),
    ("--enable-prefix-caching --eager-mode", "", B),
)

TORCHRUN_FLAGS = _table(
    ("--nproc-per-node", "nproc", V),
    ("--nnodes", "nnodes", V),
    (
        "--node-rank --rdzv-backend --rdzv-endpoint --rdzv-id --rdzv-conf --master-addr "
        "--master-port --max-restarts --monitor-interval --start-method --role --log-dir -r "
        "--redirects -t --tee --local-addr --logs-specs --local-ranks-filter --numa-binding",
        "", V,
    ),
    ("--standalone --no-python -m --module --run-path --use-env --virtual-local-rank", "", B),
)

ACCELERATE_FLAGS = _table(
    ("--num-processes", "total_procs", V),
    ("--num-machines", "nnodes", V),
    ("--mixed-precision", "mixed_precision", V),
    ("--config-file", "config", V),
    ("--megatron-lm-tp-degree", "tensor_parallel", V),
    ("--megatron-lm-pp-degree", "pipeline_parallel", V),
    (
        "--machine-rank --main-process-ip --main-process-port --gpu-ids --dynamo-backend "
        "--deepspeed-config-file --zero-stage --num-cpu-threads-per-process --rdzv-backend "
        "--deepspeed-multinode-launcher --fsdp-sharding-strategy --fsdp-auto-wrap-policy "
        "--fsdp-transformer-layer-cls-to-wrap --fsdp-state-dict-type --fsdp-backward-prefetch "
        "--fsdp-offload-params --gradient-accumulation-steps --gradient-clipping "
        "--offload-optimizer-device --offload-param-device --max-restarts --monitor-interval",
        "", V,
    ),
    (
        "--multi-gpu --use-deepspeed --use-fsdp --use-megatron-lm --cpu -m --module --no-python "
        "--debug -q --quiet --same-network --enable-cpu-affinity",
        "", B,
    ),
)

DEEPSPEED_FLAGS = _table(
    ("--num-gpus", "procs_per_node", V),
    ("--num-nodes", "nnodes", V),
    ("--hostfile -H --include -i --exclude -e", "hosts", V),
    (
        "--master-port --master-addr --launcher --launcher-args --node-rank --autotuning "
        "--ssh-port --min-elastic-nodes --max-elastic-nodes --venv-script --bind-core-list",
        "", V,
    ),
    (
        "--no-python --module --no-local-rank --force-multi --save-pid --bind-cores-to-rank "
        "--elastic-training --no-ssh --no-ssh-check",
        "", B,
    ),
)

SCRIPT_FLAGS = _table(
    (
        "--model-name-or-path --model --base-model --pretrained-model-name-or-path --factory",
        "model", V,
    ),
    ("--tensor-model-parallel-size", "tensor_parallel", V),
    ("--pipeline-model-parallel-size", "pipeline_parallel", V),
    ("--expert-model-parallel-size", "expert_parallel", V),
    ("--torch-dtype", "dtype", V),
    ("--bf16", "bf16", OB),
    ("--fp16", "fp16", OB),
)

_HYDRA_KEYS: tuple[tuple[str, str], ...] = (
    # (key suffix, field): NeMo / Lightning overrides such as model.tensor_model_parallel_size=4
    ("tensor_model_parallel_size", "tensor_parallel"),
    ("pipeline_model_parallel_size", "pipeline_parallel"),
    ("expert_model_parallel_size", "expert_parallel"),
    ("trainer.num_nodes", "nnodes"),
    ("trainer.devices", "nproc"),
    ("trainer.precision", "precision"),
    ("model.restore_from_path", "model"),
)
_HYDRA_RE = re.compile(r"[+~]{0,2}([A-Za-z_][A-Za-z0-9_.]{0,200})=(.*)", re.S)

# --------------------------------------------------------------------------- argv scanning


@dataclass
class Scan:
    """Flags read from an argv: ``values`` by field (last occurrence wins, as in argparse)."""

    values: dict[str, tuple[str, str]] = field(default_factory=dict)
    """field -> (raw value, flag as spelled)."""
    positionals: list[str] = field(default_factory=list)
    end: int = 0
    """Index of the first positional when scanning stopped there (training launchers)."""


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER_RE.fullmatch(token)


_OVERRIDE_RE = re.compile(r"[+~]{0,2}[A-Za-z_][A-Za-z0-9_]{0,64}\.[A-Za-z0-9_.]{0,200}=")


def _plausible_value(token: str | None) -> bool:
    """Whether an unknown flag probably takes ``token`` as its value.

    Not when it is a flag, a script (``train.py``) or a Hydra override (``trainer.devices=8``),
    which are what follow boolean flags in practice.
    """
    return (
        token is not None
        and not _is_flag(token)
        and not token.endswith((".py", ".sh"))
        and not _OVERRIDE_RE.match(token)
    )


def _bool_literal(token: str) -> bool:
    return token.lower() in ("true", "false", "1", "0", "yes", "no")


def scan(args: Sequence[str], table: Mapping[str, Flag], *, stop_at_positional: bool = False) -> Scan:
    """Read ``--flag value``, ``--flag=value`` and boolean flags from ``args`` using ``table``.

    Unknown flags take the next token as their value unless it looks like a flag or a script
    (``*.py``/``*.sh``), which is right for the value flags launchers are full of. With
    ``stop_at_positional`` scanning ends at the first positional (the training script).
    """
    out = Scan(end=len(args))
    i = 0
    n = len(args)
    while i < n:
        token = args[i]
        if token == "--":
            if stop_at_positional:
                out.end = i + 1
                return out
            out.positionals.extend(args[i + 1 :])
            break
        if not _is_flag(token):
            if stop_at_positional:
                out.end = i
                return out
            out.positionals.append(token)
            i += 1
            continue
        name, eq, inline = token.partition("=")
        flag = table.get(norm_flag(name))
        nxt = args[i + 1] if i + 1 < n else None
        if flag is None:
            i += 2 if not eq and _plausible_value(nxt) else 1
            continue
        if eq:
            value, i = inline, i + 1
        elif flag.kind == B or (flag.kind == OB and (nxt is None or not _bool_literal(nxt))):
            value, i = "true", i + 1
        elif nxt is not None and (flag.kind == OB or not _is_flag(nxt)):
            value, i = nxt, i + 2
        else:
            value, i = "", i + 1
        if flag.field:
            out.values[flag.field] = (value, name)
    return out


def _truthy(raw: str) -> bool:
    return raw.strip().lower() not in ("false", "0", "no", "off")


# --------------------------------------------------------------------------- context and builder


@dataclass(frozen=True)
class _Ctx:
    """What a parser may know about the container besides the argv it reads."""

    env: Mapping[str, str]
    """Literal env usable for values: no secret-named variables, nothing that contains one."""
    unknown: frozenset[str]
    """Names set by ``valueFrom``."""
    sources: Mapping[str, str]
    """``valueFrom`` name -> description of its source (names only)."""
    env_from: tuple[str, ...]
    """``envFrom`` descriptions: any variable may come from them."""
    withheld: frozenset[str]
    """Secret-named variables (and those containing one's value), never read."""
    image: str = ""
    argvs: tuple[tuple[str, ...], ...] = ()
    """Every command line of the container (Ollama pulls its model in a later command)."""
    secret_values: tuple[str, ...] = ()
    """Values of withheld variables: checked once more before a spec leaves this module."""
    env_values: tuple[str, ...] = ()
    """Every literal env value long enough to recognise, longest first, for redaction."""


class _Spec:
    """Collects one LaunchSpec while a parser reads flags and env: fields, hidden values, notes."""

    def __init__(self, ctx: _Ctx, framework: str, role: str) -> None:
        self.ctx = ctx
        self.fields: dict[str, Any] = {"framework": framework, "role": role}
        self.unresolved: set[str] = set()
        self.hidden: list[str] = []
        self.notes: list[str] = []
        self.maybe_env_from: list[str] = []
        """Settings an ``envFrom`` source may set: reported together in one hidden entry."""

    # ---- messages (names and sources only, never values)

    def hide(self, text: str) -> None:
        if text not in self.hidden:
            self.hidden.append(text)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def mentioned(self, key: str) -> bool:
        """Whether the field was given at all, as a value or as something unknowable."""
        target = _FIELDS[key].target if key in _FIELDS else key
        return target in self.fields or target in self.unresolved

    # ---- values

    def set(self, key: str, raw: str, source: str) -> bool:
        """Convert ``raw`` for field ``key`` and store it; explain (without the value) if it can't."""
        spec = _FIELDS[key]
        if self._unresolved(raw, spec, source):
            self.unresolved.add(spec.target)
            return False
        value = spec.convert(raw)
        if value is _BAD:
            self.note(f"{spec.what} from {source} is not {spec.expected}")
            self.unresolved.add(spec.target)
            return False
        if value is _ALL_GPUS:
            self.fields["uses_all_gpus"] = True
            self.fields.pop(spec.target, None)
            return True
        if value is _SKIP:
            return False
        self.fields[spec.target] = value
        self.unresolved.discard(spec.target)
        return True

    def apply(self, found: Scan, *, label: str) -> None:
        """Store every scanned value whose field is a ``_FIELDS`` key; report config files."""
        for key, (raw, spelled) in found.values.items():
            if key in _FIELDS:
                self.set(key, raw, spelled)
        if "config" in found.values:
            spelled = found.values["config"][1]
            self.hide(f"settings in the {label} {spelled} file")

    def env_raw(self, names: Sequence[str], key: str) -> str | None:
        """The first of ``names`` the container sets literally; hidden sources are reported."""
        what = _FIELDS[key].what if key in _FIELDS else key
        for name in names:
            if name in self.ctx.env:
                return self.ctx.env[name]
            if name in self.ctx.unknown or name in self.ctx.withheld:
                self._explain(name, what, style="env")
                self.unresolved.add(_FIELDS[key].target if key in _FIELDS else key)
                return None
        if self.ctx.env_from:
            self.maybe_env_from.append(f"{'/'.join(names)} ({what})")
            self.unresolved.add(_FIELDS[key].target if key in _FIELDS else key)
        return None

    def from_env(self, names: Sequence[str], key: str) -> bool:
        """Set field ``key`` from the first env variable of ``names`` that is set."""
        for name in names:
            if name in self.ctx.env:
                return self.set(key, self.ctx.env[name], name)
        self.env_raw(names, key)
        return False

    def _unresolved(self, raw: str, spec: _Field, source: str) -> bool:
        """Whether ``raw`` still holds a variable or command substitution; if so, explain it."""
        if "$" not in raw and "`" not in raw:
            return False
        refs = [m for m in _REF_RE.finditer(raw[:2048])]
        if not refs:
            if "$(" in raw or "`" in raw:
                self.note(f"{spec.what} from {source} holds a command substitution, not a literal")
                return True
            return False
        for m in refs[:4]:
            if m.group(4):
                self.note(f"{spec.what} from {source} is a positional parameter of the script")
            elif m.group(1):
                self._explain(m.group(1), spec.what, style="kubelet")
            else:
                self._explain(m.group(2) or m.group(3), spec.what, style="shell")
        return True

    def _explain(self, name: str, what: str, *, style: str) -> None:
        """Say where variable ``name`` (feeding ``what``) comes from, or that the pod lacks it."""
        ctx = self.ctx
        written = f"$({name})" if style == "kubelet" else f"${{{name}}}"
        if name in ctx.unknown:
            self.hide(f"{name} ({what}) comes from {ctx.sources.get(name, 'a valueFrom source')}")
        elif is_secret_name(name):
            self.hide(f"{name} ({what}) is a secret-named variable, not read")
        elif name in ctx.withheld:
            self.hide(f"{name} ({what}) holds the value of a secret-named variable, not read")
        elif ctx.env_from:
            self.maybe_env_from.append(f"{name} ({what})")
        elif style == "shell" and name in ctx.env:
            self.note(f"{what} is {written} as literal text: no shell runs to expand it "
                      f"(Kubernetes expands $({name}))")
        elif style == "env":
            self.hide(f"{name} ({what}) is not readable at admission")
        else:
            self.note(f"{what} is {written}, not a literal: {name} is not set in the pod spec")

    def build(self) -> LaunchSpec:
        if self.maybe_env_from:
            items = ", ".join(dict.fromkeys(self.maybe_env_from))
            self.hide(f"{items} may come from {', '.join(self.ctx.env_from)}")
        return LaunchSpec(
            **self.fields,
            hidden=tuple(self.hidden[:MAX_MESSAGES]),
            notes=tuple(self.notes[:MAX_MESSAGES]),
        )


# --------------------------------------------------------------------------- framework parsers


def _leading_positional(args: Sequence[str]) -> tuple[str | None, Sequence[str]]:
    """``MODEL --flags`` -> (MODEL, flags); (None, args) when the first token is a flag."""
    if args and not _is_flag(args[0]):
        return args[0], args[1:]
    return None, args


def _set_positional_model(b: _Spec, model: str | None, source: str) -> None:
    """A positional model overrides ``--model`` (``vllm serve`` copies model_tag over it)."""
    if model is not None:
        b.fields.pop("model", None)
        b.set("model", model, source)


def _expert_parallel_from_flag(b: _Spec, found: Scan, *, factors: Sequence[str]) -> None:
    """``--enable-expert-parallel``: EP size is the product of ``factors`` (vLLM: TP x DP)."""
    if "ep_enabled" not in found.values or not _truthy(found.values["ep_enabled"][0]):
        return
    if b.mentioned("expert_parallel"):
        return
    if any(f in b.unresolved for f in factors):
        b.note("expert parallel is enabled; its size depends on values not visible at admission")
        return
    size = 1
    for f in factors:
        size *= b.fields.get(f) or 1
    b.fields["expert_parallel"] = size


def parse_vllm_serve(args: Sequence[str], b: _Spec) -> None:
    """``vllm serve [MODEL] [flags]`` (and the vllm/vllm-openai image's entrypoint)."""
    model, rest = _leading_positional(args)
    found = scan(rest, VLLM_FLAGS)
    b.apply(found, label="vLLM")
    if model is None and found.positionals:
        model = found.positionals[0]
    _set_positional_model(b, model, "the vllm serve argument")
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel", "data_parallel"))


def parse_vllm_module(args: Sequence[str], b: _Spec) -> None:
    """``python -m vllm.entrypoints.openai.api_server --model X``: no positional model."""
    found = scan(args, VLLM_FLAGS)
    b.apply(found, label="vLLM")
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel", "data_parallel"))


def parse_tgi(args: Sequence[str], b: _Spec) -> None:
    """TGI: flags first, then env (``MODEL_ID``, ``NUM_SHARD``...) as clap does.

    Without ``--num-shard`` TGI shards over every visible GPU unless ``--sharded false``.
    """
    found = scan(args, TGI_FLAGS)
    b.apply(found, label="TGI")
    if not b.mentioned("model"):
        b.from_env(("MODEL_ID", "HF_MODEL_ID"), "model")
    if not b.mentioned("tensor_parallel"):
        b.from_env(("NUM_SHARD", "SM_NUM_GPUS"), "tensor_parallel")
    if not b.mentioned("quantization"):
        b.from_env(("QUANTIZE", "HF_MODEL_QUANTIZE"), "quantization")
    if not b.mentioned("dtype"):
        b.from_env(("DTYPE",), "dtype")
    if not b.mentioned("gpu_memory_utilization"):
        b.from_env(("CUDA_MEMORY_FRACTION",), "gpu_memory_utilization")
    if b.mentioned("tensor_parallel"):
        return
    sharded = found.values["sharded"][0] if "sharded" in found.values else b.env_raw(("SHARDED",), "sharded")
    if sharded is not None and not _truthy(sharded):
        b.fields["tensor_parallel"] = 1
    elif "sharded" not in b.unresolved:
        b.fields["uses_all_gpus"] = True


def parse_sglang(args: Sequence[str], b: _Spec) -> None:
    """SGLang: ``--tp`` counts GPUs across all nodes of the group."""
    found = scan(args, SGLANG_FLAGS)
    b.apply(found, label="SGLang")
    b.fields["tp_is_total"] = True
    _expert_parallel_from_flag(b, found, factors=("tensor_parallel",))


def parse_trtllm(args: Sequence[str], b: _Spec) -> None:
    """``trtllm-serve [serve] MODEL --tp_size N``."""
    if args and args[0] == "serve":
        args = args[1:]
    model, rest = _leading_positional(args)
    found = scan(rest, TRTLLM_FLAGS)
    b.apply(found, label="trtllm-serve")
    _set_positional_model(b, model, "the trtllm-serve argument")


def parse_triton(args: Sequence[str], b: _Spec) -> None:
    """``launch_triton_server.py --world_size=N``: N MPI ranks, one per GPU; model not visible.

    The engine was built for TP x PP = N. N is also reported as ``tensor_parallel`` because the
    weights are split N ways either way, which is what fit and placement need.
    """
    b.apply(scan(args, TRITON_FLAGS), label="Triton")
    if "procs_per_node" in b.fields:
        b.fields["tensor_parallel"] = b.fields["procs_per_node"]
    elif "procs_per_node" in b.unresolved:
        b.unresolved.add("tensor_parallel")


def parse_kserve(args: Sequence[str], b: _Spec) -> None:
    """KServe HF runtime: ``--model_id`` else ``--model_dir``; ``--model_name`` is only an alias."""
    found = scan(args, KSERVE_FLAGS)
    b.apply(found, label="KServe")
    if b.mentioned("model") or "model_dir" not in found.values:
        return
    raw, spelled = found.values["model_dir"]
    if raw.rstrip("/") == "/mnt/models":
        b.note("model is mounted at /mnt/models from the InferenceService storageUri")
    else:
        b.set("model", raw, spelled)


def parse_lmdeploy(args: Sequence[str], b: _Spec) -> None:
    """``lmdeploy serve api_server MODEL --tp N``."""
    model, rest = _leading_positional(args)
    b.apply(scan(rest, LMDEPLOY_FLAGS), label="LMDeploy")
    _set_positional_model(b, model, "the lmdeploy argument")


def parse_ollama(args: Sequence[str], b: _Spec) -> None:
    """Ollama: the model is the first ``ollama run/pull NAME`` anywhere in the container.

    There is no tensor parallelism (layers are spread over GPUs), and ``OLLAMA_NUM_PARALLEL``
    (concurrent requests) and ``num_gpu`` (offloaded layers) are deliberately not read.
    """
    for argv in ((("ollama",) + tuple(args)),) + b.ctx.argvs:
        model = _ollama_model(argv)
        if model:
            b.set("model", model, "ollama run/pull")
            return


def _ollama_model(argv: Sequence[str]) -> str | None:
    """``ollama run NAME`` / ``ollama pull NAME`` -> NAME (first positional after the verb)."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] != "ollama" or argv[1] not in ("run", "pull"):
        return None
    model, _rest = _leading_positional(argv[2:])
    return model


_NIM_IMAGE_RE = re.compile(
    r"(?:^|/)nim/([A-Za-z0-9][A-Za-z0-9._-]{0,127})/([A-Za-z0-9][A-Za-z0-9._-]{0,127})(?=[:@]|$)"
)
"""``.../nim/<org>/<model>`` followed by a tag, a digest or nothing."""
_NIM_GENERIC = ("llm-nim", "nim-llm", "multi-llm")
_PROFILE_TOKENS: dict[str, tuple[str, str]] = {
    "bf16": ("dtype", "bf16"), "fp16": ("dtype", "fp16"), "fp32": ("dtype", "fp32"),
    "fp8": ("quantization", "fp8"), "nvfp4": ("quantization", "nvfp4"),
    "mxfp4": ("quantization", "mxfp4"), "awq": ("quantization", "awq"),
    "int4_awq": ("quantization", "awq"), "gptq": ("quantization", "gptq"),
    "int8_wo": ("quantization", "int8"), "int8": ("quantization", "int8"),
    "int4_wo": ("quantization", "int4"), "int4": ("quantization", "int4"),
}
_OPAQUE_PROFILE_RE = re.compile(r"[0-9a-f]{16,128}")


def nim_image_model(image: str) -> str | None:
    """``nvcr.io/nim/meta/llama-3.1-70b-instruct:1.8.0`` -> ``meta/llama-3.1-70b-instruct``.

    Mirrors keep the ``nim/<org>/<model>`` tail, so any registry prefix is accepted. The generic
    multi-model NIM (``nvidia/llm-nim``) names no model.
    """
    if not isinstance(image, str):
        return None
    m = _NIM_IMAGE_RE.search(image[:512])
    if not m or m.group(2).endswith(_NIM_GENERIC):
        return None
    return f"{m.group(1)}/{m.group(2)}"


def parse_nim(args: Sequence[str], b: _Spec) -> None:
    """NIM: model from the image (``NIM_MODEL_NAME``/``NIM_MODEL_PATH`` override), TP/PP from
    ``NIM_TENSOR_PARALLEL_SIZE``/``NIM_PIPELINE_PARALLEL_SIZE`` or the ``NIM_MODEL_PROFILE`` tag.

    With neither, NIM picks a profile for the GPUs it sees: recorded as ``uses_all_gpus``.
    """
    model = nim_image_model(b.ctx.image)
    if model:
        b.fields["model"] = model
    raw = b.env_raw(("NIM_MODEL_NAME", "NIM_MODEL_PATH"), "model")
    if raw is not None:
        b.set("model", re.sub(r"^hf://", "", raw.strip()), "NIM_MODEL_NAME/NIM_MODEL_PATH")
    b.from_env(("NIM_TENSOR_PARALLEL_SIZE",), "tensor_parallel")
    b.from_env(("NIM_PIPELINE_PARALLEL_SIZE",), "pipeline_parallel")
    profile = b.env_raw(("NIM_MODEL_PROFILE",), "NIM profile")
    if profile is not None:
        _apply_nim_profile(profile, b)
    if not b.mentioned("tensor_parallel") and "NIM profile" not in b.unresolved:
        b.fields["uses_all_gpus"] = True


def _apply_nim_profile(profile: str, b: _Spec) -> None:
    """``vllm-bf16-tp4-pp1`` / ``tensorrt_llm-h100-fp8-tp8-pp1-throughput`` -> tp, pp, precision.

    Explicit env wins over the tag; an opaque profile id says nothing visible.
    """
    text = profile.strip().lower()[:256]
    if _OPAQUE_PROFILE_RE.fullmatch(text):
        b.note("NIM_MODEL_PROFILE is an opaque profile id: its TP and precision are not visible")
        b.unresolved.add("NIM profile")
        return
    for token in text.split("-"):
        m = re.fullmatch(r"(tp|pp)([0-9]{1,3})", token)
        if m:
            key = "tensor_parallel" if m.group(1) == "tp" else "pipeline_parallel"
            if not b.mentioned(key):
                b.set(key, m.group(2), "NIM_MODEL_PROFILE")
        elif token in _PROFILE_TOKENS:
            key, value = _PROFILE_TOKENS[token]
            b.fields.setdefault(key, value)


# ---- training


def parse_torchrun(args: Sequence[str], b: _Spec) -> None:
    """torchrun / ``python -m torch.distributed.run|launch``; env ``PET_*`` as defaults."""
    found = scan(args, TORCHRUN_FLAGS, stop_at_positional=True)
    b.apply(found, label="torchrun")
    if not b.mentioned("procs_per_node") and not b.fields.get("uses_all_gpus"):
        b.from_env(("PET_NPROC_PER_NODE",), "nproc")
    if not b.mentioned("nnodes"):
        b.from_env(("PET_NNODES",), "nnodes")
    _read_training_script(args[found.end :], b)


def parse_accelerate(args: Sequence[str], b: _Spec) -> None:
    """``accelerate launch``: ``--num_processes`` is the TOTAL over ``--num_machines``."""
    found = scan(args, ACCELERATE_FLAGS, stop_at_positional=True)
    b.apply(found, label="accelerate")
    _read_training_script(args[found.end :], b)


def parse_deepspeed(args: Sequence[str], b: _Spec) -> None:
    """``deepspeed --num_gpus 8 --num_nodes 2 train.py``; without them it uses every GPU."""
    found = scan(args, DEEPSPEED_FLAGS, stop_at_positional=True)
    b.apply(found, label="deepspeed")
    if not b.mentioned("procs_per_node") and "hosts" not in found.values:
        b.fields["uses_all_gpus"] = True
    _read_training_script(args[found.end :], b)


def parse_nemo_cli(args: Sequence[str], b: _Spec) -> None:
    """NeMo 2 CLI: ``nemo llm pretrain --factory llama3_8b trainer.devices=8 ...``."""
    _read_script_args(args, b)


def _read_training_script(tokens: Sequence[str], b: _Spec) -> str | None:
    """The script a training launcher runs: model and Megatron/NeMo parallelism from its args."""
    prog = program(tokens)
    if prog is None:
        prog = (tokens[0], tuple(tokens[1:]), tokens[0]) if tokens else None
    if prog is None:
        return None
    _name, rest, path = prog
    return _read_script_args(rest, b, path=path)


def _read_script_args(args: Sequence[str], b: _Spec, *, path: str = "") -> str | None:
    """Read model/TP/PP/dtype flags and Hydra overrides; return ``nemo``/``megatron``/None.

    Values already set by the launcher (procs per node, nodes) are kept: the launcher decides
    how many processes run.
    """
    found = scan(args, SCRIPT_FLAGS)
    for key, (raw, spelled) in found.values.items():
        if key in _FIELDS and not b.mentioned(key):
            b.set(key, raw, spelled)
    for key, dtype in (("bf16", "bf16"), ("fp16", "fp16")):
        if key in found.values and _truthy(found.values[key][0]) and not b.mentioned("dtype"):
            b.fields["dtype"] = dtype
    hydra = _read_hydra(found.positionals, b)
    return _training_kind(args, found, path, hydra=hydra)


_NEMO_SCRIPT_RE = re.compile(r"megatron_[\w-]{1,64}\.py")
"""NeMo 1 example scripts (``.../NeMo/examples/.../megatron_gpt_pretraining.py``)."""
_MEGATRON_SCRIPT_RE = re.compile(r"pretrain_(?:gpt|bert|t5|mamba|llama|vlm|retro|ict)[\w-]{0,32}\.py")


def _training_kind(args: Sequence[str], found: Scan, path: str, *, hydra: bool) -> str | None:
    """``nemo`` (Hydra overrides, NeMo's underscore flags or scripts), ``megatron`` or None."""
    underscore = any(a.startswith("--tensor_model_parallel_size") for a in args[:512])
    nemo_script = "/nemo/" in path[:1024].lower() and _NEMO_SCRIPT_RE.fullmatch(_base(path)[:128])
    if hydra or underscore or nemo_script:
        return "nemo"
    megatron_flags = ("tensor_parallel", "pipeline_parallel", "expert_parallel")
    if any(k in found.values for k in megatron_flags) or _MEGATRON_SCRIPT_RE.fullmatch(_base(path)[:128]):
        return "megatron"
    return None


def _read_hydra(tokens: Sequence[str], b: _Spec) -> bool:
    """``model.tensor_model_parallel_size=4 trainer.num_nodes=2 ...``; True when any matched."""
    matched = False
    for token in tokens[:256]:
        m = _HYDRA_RE.fullmatch(token)
        if not m:
            continue
        key, raw = m.group(1), m.group(2)
        for suffix, fld in _HYDRA_KEYS:
            if key == suffix or key.endswith("." + suffix):
                matched = True
                if not b.mentioned(fld):
                    b.set(fld, raw, key)
                break
    return matched


# --------------------------------------------------------------------------- detection

_PYTHON_RE = re.compile(r"(?:python|pypy)(?:[0-9]{1,2}(?:\.[0-9]{1,3})?)?")
_PY_VALUE_OPTS = frozenset({"-W", "-X", "--check-hash-based-pycs"})
_PY_CLUSTER_M_RE = re.compile(r"-[uBOsSEIqbdv]{1,4}m")
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "conda", "mamba", "micromamba", "pixi"})
_RUNNER_VALUE_OPTS = frozenset(
    {"--with", "-w", "--python", "-p", "--project", "--directory", "--extra", "--group",
     "--env-file", "-n", "--name", "--prefix", "--with-requirements", "--index", "--index-url",
     "--extra-index-url", "--package", "--from", "-e", "--environment"}
)
_ENTRYPOINT_RE = re.compile(r"[\w.-]{0,64}entrypoint[\w.-]{0,64}")

Parser = Callable[[Sequence[str], _Spec], None]


@dataclass(frozen=True)
class Launcher:
    """A known program: the subcommand words it needs, then how its flags are read."""

    framework: str
    role: str
    parse: Parser
    subcommand: tuple[str, ...] = ()


_VLLM_SERVE = Launcher("vllm", "inference", parse_vllm_serve, ("serve",))
_VLLM_MODULE = Launcher("vllm", "inference", parse_vllm_module)
_TORCHRUN = Launcher("torchrun", "training", parse_torchrun)
_ACCELERATE = Launcher("accelerate", "training", parse_accelerate)
_DEEPSPEED = Launcher("deepspeed", "training", parse_deepspeed)

LAUNCHERS: dict[str, Launcher] = {
    # program basename or python module -> launcher
    "vllm": _VLLM_SERVE,
    "vllm.entrypoints.cli.main": _VLLM_SERVE,
    "vllm.entrypoints.openai.api_server": _VLLM_MODULE,
    "vllm.entrypoints.api_server": _VLLM_MODULE,
    "text-generation-launcher": Launcher("tgi", "inference", parse_tgi),
    "sglang.launch_server": Launcher("sglang", "inference", parse_sglang),
    "sglang_router.launch_server": Launcher("sglang", "inference", parse_sglang),
    "sglang": Launcher("sglang", "inference", parse_sglang, ("serve",)),
    "trtllm-serve": Launcher("tensorrt-llm", "inference", parse_trtllm),
    "launch_triton_server.py": Launcher("triton-trtllm", "inference", parse_triton),
    "huggingfaceserver": Launcher("kserve-hf", "inference", parse_kserve),
    "lmdeploy": Launcher("lmdeploy", "inference", parse_lmdeploy, ("serve", "api_server")),
    "ollama": Launcher("ollama", "inference", parse_ollama),
    "torchrun": _TORCHRUN,
    "torch.distributed.run": _TORCHRUN,
    "torch.distributed.launch": _TORCHRUN,
    "accelerate": Launcher("accelerate", "training", parse_accelerate, ("launch",)),
    "accelerate-launch": _ACCELERATE,
    "accelerate.commands.launch": _ACCELERATE,
    "deepspeed": _DEEPSPEED,
    "deepspeed.launcher.runner": _DEEPSPEED,
    "nemo": Launcher("nemo", "training", parse_nemo_cli),
}

IMAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    # image -> program its entrypoint runs, used when the container sets no command
    (re.compile(r"(?:^|/)(?:text-generation-inference|huggingface-pytorch-tgi-inference)(?:[:@]|$)"),
     "text-generation-launcher"),
    (re.compile(r"(?:^|/)vllm-openai(?:[:@]|$)"), "vllm serve"),
    (re.compile(r"(?:^|/)huggingfaceserver(?:[:@]|$)"), "huggingfaceserver"),
    (re.compile(r"(?:^|/)ollama/ollama(?:[:@]|$)"), "ollama"),
)


def _base(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def program(argv: Sequence[str]) -> tuple[str, tuple[str, ...], str] | None:
    """Reduce an argv to (program, its args, as written): ``python3 -u -m X a`` -> (X, (a,), X).

    Skips ``python``/``python3.11`` and their options, ``uv run``/``conda run -n env``, and
    ``*entrypoint*.sh`` wrappers; a path becomes its basename. ``None`` for ``python -c`` or
    nothing to run.
    """
    i = 0
    n = len(argv)
    for _ in range(8):
        if i >= n:
            return None
        head = _base(argv[i])
        if head in _RUNNERS and i + 1 < n and argv[i + 1] == "run":
            i = _skip_opts(argv, i + 2, _RUNNER_VALUE_OPTS)
        elif _PYTHON_RE.fullmatch(head):
            return _python_program(argv, i + 1)
        elif _ENTRYPOINT_RE.fullmatch(head):
            i = _skip_opts(argv, i + 1, frozenset())
        else:
            return head, tuple(argv[i + 1 :]), argv[i]
    return None


def _skip_opts(argv: Sequence[str], i: int, value_opts: frozenset[str]) -> int:
    """Index of the first non-option at or after ``i`` (one ``--`` is consumed)."""
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--":
            return i + 1
        i += 2 if argv[i] in value_opts else 1
    return i


def _python_program(argv: Sequence[str], i: int) -> tuple[str, tuple[str, ...], str] | None:
    """After ``python``: ``-m MODULE args`` or ``script.py args``; ``-c``/``-`` -> None."""
    n = len(argv)
    while i < n and argv[i].startswith("-"):
        opt = argv[i]
        if opt == "-m" or _PY_CLUSTER_M_RE.fullmatch(opt):
            return (argv[i + 1], tuple(argv[i + 2 :]), argv[i + 1]) if i + 1 < n else None
        if opt.startswith("-m") and len(opt) > 2:
            return opt[2:], tuple(argv[i + 1 :]), opt[2:]
        if opt in ("-c", "-") or opt.startswith("-c"):
            return None
        i += 2 if opt in _PY_VALUE_OPTS else 1
    if i >= n:
        return None
    return _base(argv[i]), tuple(argv[i + 1 :]), argv[i]


def detect(argv: Sequence[str]) -> tuple[Launcher, tuple[str, ...]] | None:
    """The known launcher an argv runs and the args its parser reads, or None."""
    prog = program(argv)
    if prog is None:
        return None
    name, rest, path = prog
    launcher = LAUNCHERS.get(name)
    if launcher is not None:
        k = len(launcher.subcommand)
        if tuple(rest[:k]) == launcher.subcommand:
            return launcher, tuple(rest[k:])
        return None
    if name.endswith(".py"):
        probe = _Spec(_EMPTY_CTX, "", "")
        kind = _read_script_args(rest, probe, path=path)
        if kind:
            return Launcher(kind, "training", _script_parser(path)), rest
    return None


def _script_parser(path: str) -> Parser:
    """A parser for ``python pretrain_gpt.py ...`` run without a launcher (Megatron/NeMo)."""

    def parse(args: Sequence[str], b: _Spec) -> None:
        _read_script_args(args, b, path=path)

    return parse


_EMPTY_CTX = _Ctx(env={}, unknown=frozenset(), sources={}, env_from=(), withheld=frozenset())

# --------------------------------------------------------------------------- entry point


def parse_container(container: Mapping[str, Any]) -> LaunchSpec | None:
    """Find the first command line in the container that runs a known launcher and read model,
    parallelism and precision from its flags and env.

    Falls back to the image (NIM by name; TGI, vLLM, KServe, Ollama images whose entrypoint is
    the launcher when the container sets no command). ``None`` when nothing known runs (a plain
    CPU app). Never raises on JSON input and never puts an env value into ``hidden``/``notes``.
    """
    if not isinstance(container, Mapping):
        return None
    ctx = _context(container)
    runs, notes = invocations(container, ctx.env)
    ctx = _with_argvs(ctx, runs, container)
    for run in runs:
        hit = detect(run.argv)
        if hit is not None:
            spec = _run_parser(hit[0], hit[1], ctx, run)
            return _finish(spec, notes, ctx)
    spec = _parse_by_image(container, ctx)
    return _finish(spec, notes, ctx) if spec is not None else None


def _context(container: Mapping[str, Any]) -> _Ctx:
    """Literal env minus secrets, valueFrom names and sources, envFrom descriptions, image."""
    literal, hidden = container_env(container)
    resolved = _gpu_resource_env(container)
    literal.update(resolved)
    withheld = {name for name in literal if is_secret_name(name)}
    secrets = tuple(literal[name] for name in withheld if len(literal[name]) >= 4)
    withheld |= {name for name, value in literal.items() if any(s in value for s in secrets)}
    image = container.get("image")
    return _Ctx(
        env={k: v for k, v in literal.items() if k not in withheld},
        unknown=frozenset(h for h in hidden if not h.startswith("envFrom ") and h not in resolved),
        sources=env_sources(container),
        env_from=tuple(h for h in hidden if h.startswith("envFrom ")),
        withheld=frozenset(withheld),
        image=image[:512] if isinstance(image, str) else "",
        secret_values=tuple(literal[name] for name in withheld if len(literal[name]) >= 4),
        env_values=tuple(sorted({v for v in literal.values() if len(v) >= 8}, key=len, reverse=True)),
    )


_GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu"})


def _gpu_resource_env(container: Mapping[str, Any]) -> dict[str, str]:
    """``valueFrom.resourceFieldRef: limits.nvidia.com/gpu`` is knowable: the container's own count.

    Only whole-GPU resources of this container with the default divisor are resolved.
    """
    out: dict[str, str] = {}
    env = container.get("env")
    resources = container.get("resources")
    if not isinstance(env, list) or not isinstance(resources, Mapping):
        return out
    for item in env[:1024]:
        ref = _resource_field_ref(item)
        if ref is None or ref.get("divisor") not in (None, "1", 1):
            continue
        if ref.get("containerName") not in (None, "", container.get("name")):
            continue
        section, _, resource = str(ref.get("resource", ""))[:256].partition(".")
        bucket = resources.get(section) if section in ("limits", "requests") else None
        value = bucket.get(resource) if isinstance(bucket, Mapping) and resource in _GPU_RESOURCES else None
        if isinstance(value, (int, str)) and not isinstance(value, bool) and _INT_RE.fullmatch(str(value)):
            out[item["name"]] = str(int(str(value)))
    return out


def _resource_field_ref(item: Any) -> Mapping[str, Any] | None:
    """The ``resourceFieldRef`` of a named env entry, or None."""
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        return None
    value_from = item.get("valueFrom")
    ref = value_from.get("resourceFieldRef") if isinstance(value_from, Mapping) else None
    return ref if isinstance(ref, Mapping) else None


def _with_argvs(ctx: _Ctx, runs: Sequence[Invocation], container: Mapping[str, Any]) -> _Ctx:
    """Add every command line (including a postStart exec hook) for parsers that look across them."""
    argvs = [run.argv for run in runs]
    hook = _post_start_command(container)
    if hook is not None:
        extra, _ = invocations({"command": hook, "env": container.get("env")}, ctx.env)
        argvs.extend(run.argv for run in extra)
    return replace(ctx, argvs=tuple(argvs))


def _post_start_command(container: Mapping[str, Any]) -> Any:
    lifecycle = container.get("lifecycle")
    post = lifecycle.get("postStart") if isinstance(lifecycle, Mapping) else None
    exec_ = post.get("exec") if isinstance(post, Mapping) else None
    return exec_.get("command") if isinstance(exec_, Mapping) else None


def _run_parser(launcher: Launcher, args: Sequence[str], ctx: _Ctx, run: Invocation | None) -> LaunchSpec:
    """Run one launcher's parser with the env the command line sees (script exports included)."""
    if run is not None and run.env:
        extra = {k: v for k, v in run.env if k not in ctx.withheld and not is_secret_name(k)}
        ctx = replace(ctx, env={**ctx.env, **extra})
    b = _Spec(ctx, launcher.framework, launcher.role)
    launcher.parse(args, b)
    return b.build()


def _parse_by_image(container: Mapping[str, Any], ctx: _Ctx) -> LaunchSpec | None:
    """NIM by image name; launcher images only when ``command`` is absent (the entrypoint runs)."""
    if _NIM_IMAGE_RE.search(ctx.image):
        return _run_parser(Launcher("nim", "inference", parse_nim), (), ctx, None)
    if container.get("command") not in (None, []):
        return None
    for pattern, entry in IMAGES:
        if pattern.search(ctx.image):
            args = _entrypoint_args(container, ctx)
            hit = detect(tuple(entry.split()) + args)
            if hit is not None:
                return _run_parser(hit[0], hit[1], ctx, None)
    return None


def _entrypoint_args(container: Mapping[str, Any], ctx: _Ctx) -> tuple[str, ...]:
    """``args`` as the image entrypoint receives them ($(VAR)-expanded, capped)."""
    probe = {"command": ["entrypoint"], "args": container.get("args"),
             "env": container.get("env"), "envFrom": container.get("envFrom")}
    runs, _ = invocations(probe, ctx.env)
    return runs[0].argv[1:] if runs else ()


def _finish(spec: LaunchSpec, notes: Sequence[str], ctx: _Ctx) -> LaunchSpec:
    """Attach the shell's notes and make sure no env value (secrets above all) left the pod."""
    all_notes = list(dict.fromkeys([*spec.notes, *notes]))[:MAX_MESSAGES]
    changes: dict[str, Any] = {}
    for name in ("model", "dtype", "quantization", "kv_cache_dtype"):
        value = getattr(spec, name)
        if isinstance(value, str) and any(s in value for s in ctx.secret_values):
            changes[name] = None
            all_notes.append(f"{name} withheld: it contains the value of a secret-named variable")
    changes["hidden"] = tuple(_redact(h, ctx.env_values) for h in spec.hidden)
    changes["notes"] = tuple(_redact(n, ctx.env_values) for n in all_notes)
    return replace(spec, **changes)


def _redact(text: str, values: Sequence[str]) -> str:
    """Belt and braces: messages are built from names only, but never let a value through."""
    for value in values[:256]:
        if value in text:
            text = text.replace(value, "<value>")
    return text
