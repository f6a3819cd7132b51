"""Training launch -> its memory strategy: what the flags and configs say about how weights,
gradients and optimizer state are laid over the GPUs (sized by :mod:`webhook.core.training_memory`).

Read from these sources (each as its project documents it); the script's own flags come first
when both it and the launcher decide, then the launcher's, then the first reason a source gives for
not deciding:

* accelerate ``launch`` (``commands/launch.py``): ``--use_deepspeed`` (with ``--zero_stage``,
  ``--deepspeed_config_file``, ``--offload_optimizer_device``, ``--offload_param_device``),
  ``--use_fsdp`` (``--fsdp_sharding_strategy``, FULL_SHARD by default; FSDP2
  ``--fsdp_reshard_after_forward``; ``--fsdp_offload_params``), ``--use_megatron_lm``
  (``--megatron_lm_use_distributed_optimizer``), ``--multi_gpu`` (DDP), in accelerate's order
  (DeepSpeed, FSDP, Megatron-LM, multi-GPU); without one of them the ``--config_file`` YAML (or a
  default config the script writes, ``files.ACCELERATE_DEFAULT``) decides: ``distributed_type``
  ``DEEPSPEED`` (``deepspeed_config.zero_stage``, default 2, or its ``deepspeed_config_file``),
  ``FSDP`` (``fsdp_config.fsdp_reshard_after_forward`` / ``fsdp_sharding_strategy``), ``MULTI_GPU``,
  ``MEGATRON_LM`` (``megatron_lm_config``).
* TRL's CLI (``trl sft ...``) runs ``accelerate launch`` with the arguments its script does not take
  (``trl/cli/commands/training.py``), so the same flags, plus ``--accelerate_config NAME`` for the
  configs TRL ships (``trl/accelerate_configs/*.yaml``).
* The script's own flags: Hugging Face Trainer/TRL ``--deepspeed`` (a path or inline JSON;
  DeepSpeed's ``add_config_arguments`` spells it ``--deepspeed --deepspeed_config PATH``) and
  ``--fsdp "full_shard auto_wrap"`` (``FSDPOption``: ``full_shard``, ``shard_grad_op``,
  ``hybrid_shard``, ``hybrid_shard_zero2``, ``no_shard``, ``offload``) with ``--fsdp_config``;
  ``--zero_stage`` (DeepSpeed-Chat; Megatron-DeepSpeed ``--zero-stage``).
* A DeepSpeed JSON: ``zero_optimization.stage`` (0 when absent: DeepSpeed's default),
  ``offload_optimizer.device`` / ``offload_param.device`` ``cpu``/``nvme``.
* Megatron-LM scripts: TP/PP (defaults 1) and ``--use-distributed-optimizer`` (off by default);
  NeMo: TP/PP overrides (its recipe decides them otherwise: not read), ``model.optim.name=
  distributed_fused_adam`` or ``use_distributed_optimizer=`` overrides (not visible: ``None``).
* PEFT (TRL ``ModelConfig``): ``--use_peft``, ``--lora_r`` (also ``--use_peft_lora``, ``--use_lora``,
  ``--lora_rank``, LLaMA-Factory ``--finetuning_type lora``), ``--load_in_4bit`` /
  ``--use_4bit_quantization`` / ``--quantization_bit 4`` (QLoRA), ``--load_in_8bit`` (8-bit base);
  NeMo ``peft.peft_scheme=lora``. Reading LoRA only ever lowers the figure, so a weak sign is enough.

A config is read only from where the pod shows it (``launchers.files``: written by the script or
mounted from a ConfigMap of the input); a named file that is not there leaves the strategy unknown
with the reason (``--deepspeed /cfg/ds.json is not in the input``). torchrun with none of these is
unknown: the script may do anything. Unknown never becomes a guess here: sizing takes the
optimistic bound and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.core import training_memory as tm
from webhook.core.counts import parse_count
from webhook.core.launchers import files
from webhook.core.launchers.scan import Scan, truthy
from webhook.core.launchers.spec import Spec

MAX_CONFIG_CHARS = 64 * 1024
"""A config longer than this is not parsed (DeepSpeed and accelerate configs are under 4 KiB)."""

_STAGES = {0: tm.DDP, 1: tm.ZERO1, 2: tm.ZERO2, 3: tm.ZERO3}
_FSDP = {
    # accelerate FSDP_SHARDING_STRATEGY names and torch ShardingStrategy values (1-5); FSDP2's
    # fsdp_reshard_after_forward true/false (FULL_SHARD / SHARD_GRAD_OP)
    "FULL_SHARD": tm.FSDP, "1": tm.FSDP, "TRUE": tm.FSDP,
    "SHARD_GRAD_OP": tm.FSDP_GRAD_OP, "2": tm.FSDP_GRAD_OP, "FALSE": tm.FSDP_GRAD_OP,
    "NO_SHARD": tm.DDP, "3": tm.DDP,
    "HYBRID_SHARD": tm.FSDP_HYBRID, "4": tm.FSDP_HYBRID,
    "HYBRID_SHARD_ZERO2": tm.FSDP_HYBRID_GRAD_OP, "_HYBRID_SHARD_ZERO2": tm.FSDP_HYBRID_GRAD_OP,
    "5": tm.FSDP_HYBRID_GRAD_OP,
}
_HF_FSDP = {"full_shard": tm.FSDP, "shard_grad_op": tm.FSDP_GRAD_OP, "hybrid_shard": tm.FSDP_HYBRID,
            "hybrid_shard_zero2": tm.FSDP_HYBRID_GRAD_OP, "no_shard": tm.DDP}
"""transformers ``FSDPOption`` sharding values (``offload`` and ``auto_wrap`` are modifiers)."""
TRL_CONFIGS: Mapping[str, str] = {
    "zero1": tm.ZERO1, "zero3": tm.ZERO3, "fsdp1": tm.FSDP, "fsdp2": tm.FSDP, "multi_gpu": tm.DDP,
}
"""``trl ... --accelerate_config NAME``: the accelerate configs TRL ships (``trl/accelerate_configs``:
zero1 and zero3 set ``zero_stage``, fsdp1 ``fsdp_reshard_after_forward: FULL_SHARD``, fsdp2
``true`` with ``fsdp_version: 2``, multi_gpu ``distributed_type: MULTI_GPU``)."""
_OFFLOAD_DEVICES = frozenset({"cpu", "nvme"})
_HYDRA_RE = re.compile(r"[+~]{0,2}([A-Za-z_][A-Za-z0-9_.]{0,200})=(.{0,256})", re.S)


@dataclass(frozen=True)
class Reading:
    """What one source says: a strategy (``None``: it leaves it unknown, ``source`` says why)."""

    strategy: str | None
    source: str
    offload: str | None = None
    distributed_optimizer: bool | None = None


def settle(b: Spec, *, launcher: str, launch: Scan | None, script: Scan | None, kind: str | None) -> None:
    """Decide the strategy of a training launch and store it on ``b`` (``training_strategy``,
    ``strategy_source``, ``training_offload``, ``distributed_optimizer``, ``peft``).

    ``launch``: the launcher's own flags (accelerate, TRL); ``script``: the training script's;
    ``kind``: ``megatron``/``nemo`` when the script is one (their parallelism decides)."""
    script = script or Scan()
    hydra = _hydra(script)
    reading: Reading | None = None
    if kind in ("megatron", "nemo"):
        reading = _megatron(b, script, kind, hydra)
    else:
        # the script's own --deepspeed/--fsdp first: the HF Trainer builds accelerate's DeepSpeed or FSDP
        # plugin from them whatever the launcher was told
        said = [r for r in (_script(b, script), _launcher(b, launcher, launch)) if r is not None]
        decided = [r for r in said if r.strategy is not None]
        reading = decided[0] if decided else (said[0] if said else None)
        if reading is None and launcher == "deepspeed":
            reading = Reading(None, "the deepspeed launcher runs it, and no DeepSpeed config is visible")
    if reading is not None:
        b.fields["training_strategy"] = reading.strategy
        b.fields["strategy_source"] = reading.source[:160]
        if reading.offload:
            b.fields["training_offload"] = reading.offload
        if reading.distributed_optimizer is not None:
            b.fields["distributed_optimizer"] = reading.distributed_optimizer
    peft = _peft(script, hydra)
    if peft:
        b.fields["peft"] = peft


# --------------------------------------------------------------------------- launchers


def _launcher(b: Spec, launcher: str, found: Scan | None) -> Reading | None:
    if found is None or launcher not in ("accelerate", "trl"):
        return None
    v = found.values
    if _on(v, "use_deepspeed"):
        return _accelerate_deepspeed(b, v)
    if _on(v, "use_fsdp"):
        return _accelerate_fsdp(b, v)
    if _on(v, "use_megatron_lm"):
        config = _accelerate_config(b, v)
        flag = v.get("megatron_distributed_optimizer")
        distributed = truthy(flag[0]) if flag else (None if config is not None and config.strategy is None
                                                    else bool(config and config.distributed_optimizer))
        return Reading(tm.MEGATRON, "accelerate --use_megatron_lm", distributed_optimizer=distributed)
    if _on(v, "multi_gpu"):
        return Reading(tm.DDP, "accelerate --multi_gpu")
    preset = v.get("accelerate_config")
    if launcher == "trl" and preset and preset[0] in TRL_CONFIGS and files.find(b.ctx.files, preset[0],
                                                                                 b.ctx.workdir) is None:
        return Reading(TRL_CONFIGS[preset[0]], f"trl {preset[1]} {preset[0]} (trl/accelerate_configs/{preset[0]}.yaml)")
    return _accelerate_config(b, v)


def _on(values: Mapping[str, tuple[str, str]], key: str) -> bool:
    return key in values and truthy(values[key][0])


def _accelerate_deepspeed(b: Spec, v: Mapping[str, tuple[str, str]]) -> Reading:
    offload = _offload(v.get("offload_optimizer_device", ("",))[0], v.get("offload_param_device", ("",))[0])
    if "deepspeed_config_file" in v:
        raw, spelled = v["deepspeed_config_file"]
        return _deepspeed_file(b, raw, f"accelerate {spelled}")
    if "zero_stage" in v:
        raw, spelled = v["zero_stage"]
        return _with_offload(_stage(raw, f"accelerate --use_deepspeed {spelled} {raw[:8]}"), offload)
    config = _accelerate_config(b, v)
    if config is not None and config.strategy in _STAGES.values():
        return config
    return Reading(None, "accelerate --use_deepspeed without --zero_stage (2 unless a config file sets it)")


def _accelerate_fsdp(b: Spec, v: Mapping[str, tuple[str, str]]) -> Reading:
    offload = "all" if _on(v, "fsdp_offload_params") else None
    for key in ("fsdp_reshard_after_forward", "fsdp_sharding_strategy"):
        if key in v:
            raw, spelled = v[key]
            name = _FSDP.get(raw.strip().upper())
            source = f"accelerate --use_fsdp {spelled} {raw[:24]}"
            return Reading(name, source if name else f"{source} is not a sharding strategy", offload)
    config = _accelerate_config(b, v)
    if config is not None and config.strategy is not None and config.strategy.startswith("fsdp"):
        return config
    # FULL_SHARD is both accelerate's default and the smallest figure: whatever a hidden config says
    return Reading(tm.FSDP, "accelerate --use_fsdp (FULL_SHARD by default)", offload)


def _accelerate_config(b: Spec, v: Mapping[str, tuple[str, str]]) -> Reading | None:
    """The accelerate YAML the launch reads: ``--config_file`` (TRL: ``--accelerate_config`` path), or
    a default config the script writes; None when neither is named or written."""
    named = v.get("config") or v.get("accelerate_config")
    if named:
        raw, spelled = named
        where = f"accelerate {spelled} {_short(raw)}"
        text = files.find(b.ctx.files, raw, b.ctx.workdir)
        if text is None:
            return Reading(None, f"{where} is not in the input")
    else:
        hit = files.accelerate_default(b.ctx.files)
        if hit is None:
            return None
        where, text = f"accelerate default config {_short(hit[0])}", hit[1]
    data = _load(text)
    if not isinstance(data, Mapping):
        return Reading(None, f"{where} is not a YAML mapping")
    return _accelerate_yaml(b, data, where)


def _accelerate_yaml(b: Spec, data: Mapping[Any, Any], where: str) -> Reading:
    kind = str(data.get("distributed_type") or "").strip().upper()
    if kind == "DEEPSPEED":
        ds = _mapping(data.get("deepspeed_config"))
        path = ds.get("deepspeed_config_file")
        if isinstance(path, str) and path.strip() and path.strip().lower() != "none":
            return _deepspeed_file(b, path, f"{where} deepspeed_config_file")
        offload = _offload(str(ds.get("offload_optimizer_device") or ""), str(ds.get("offload_param_device") or ""))
        if ds.get("zero_stage") is None:
            return Reading(tm.ZERO2, f"{where} distributed_type: DEEPSPEED (zero_stage defaults to 2)", offload)
        return _with_offload(_stage(ds["zero_stage"], f"{where} deepspeed_config.zero_stage={ds['zero_stage']}"),
                             offload)
    if kind == "FSDP":
        fsdp = _mapping(data.get("fsdp_config"))
        offload = "all" if str(fsdp.get("fsdp_offload_params")).lower() == "true" else None
        for key in ("fsdp_reshard_after_forward", "fsdp_sharding_strategy"):
            if fsdp.get(key) is not None:
                value = str(fsdp[key]).strip().upper()
                name = _FSDP.get(value)
                source = f"{where} fsdp_config.{key}: {value[:24]}"
                return Reading(name, source if name else f"{source} is not a sharding strategy", offload)
        return Reading(tm.FSDP, f"{where} distributed_type: FSDP (FULL_SHARD by default)", offload)
    if kind.startswith("MULTI_"):
        return Reading(tm.DDP, f"{where} distributed_type: {kind[:16]}")
    if kind == "MEGATRON_LM":
        mega = _mapping(data.get("megatron_lm_config"))
        for key, fld in (("megatron_lm_tp_degree", "tensor_parallel"), ("megatron_lm_pp_degree", "pipeline_parallel")):
            if mega.get(key) is not None and not b.mentioned(fld):
                b.set(fld, str(mega[key]), f"{where} {key}")
        distributed = str(mega.get("megatron_lm_use_distributed_optimizer")).lower() == "true"
        return Reading(tm.MEGATRON, f"{where} distributed_type: MEGATRON_LM", distributed_optimizer=distributed)
    if kind == "NO":
        return Reading(None, f"{where} distributed_type: NO (one process)")
    return Reading(None, f"{where} sets no distributed_type accelerate shards by")


# --------------------------------------------------------------------------- the script's flags


def _script(b: Spec, found: Scan) -> Reading | None:
    v = found.values
    if "deepspeed" in v and v["deepspeed"][0].strip() and not _is_bool(v["deepspeed"][0]):
        raw, spelled = v["deepspeed"]
        return _deepspeed_file(b, raw, spelled)
    if "deepspeed_config" in v:
        raw, spelled = v["deepspeed_config"]
        reading = _deepspeed_file(b, raw, spelled)
        if reading.strategy is None and "zero_stage" in v:
            return _stage(v["zero_stage"][0], f"script flag {v['zero_stage'][1]} {v['zero_stage'][0][:8]}")
        return reading
    if "zero_stage" in v:
        raw, spelled = v["zero_stage"]
        return _stage(raw, f"script flag {spelled} {raw[:8]}")
    if "fsdp" in v:
        return _hf_fsdp(b, v)
    return None


def _hf_fsdp(b: Spec, v: Mapping[str, tuple[str, str]]) -> Reading | None:
    """transformers ``--fsdp "full_shard auto_wrap offload"`` (with ``--fsdp_config``)."""
    raw, spelled = v["fsdp"]
    options = raw.lower().replace(",", " ").split()
    if not options or options[0] in ("false", "0", "no", "none"):
        return None
    name = next((_HF_FSDP[o] for o in options if o in _HF_FSDP), tm.FSDP)  # no sharding option: FULL_SHARD
    offload = "all" if "offload" in options else None
    source = f"{spelled} {' '.join(options)[:48]}"
    config = _fsdp_config(b, v.get("fsdp_config"))
    if config is not None:
        if config.get("version") in (2, "2") and config.get("reshard_after_forward") is not None:
            name = _FSDP.get(str(config["reshard_after_forward"]).upper(), name)
            source += f", fsdp_config reshard_after_forward: {config['reshard_after_forward']}"
        if str(config.get("offload_params")).lower() == "true":
            offload = "all"
    return Reading(name, source, offload)


def _fsdp_config(b: Spec, named: tuple[str, str] | None) -> Mapping[str, Any] | None:
    """transformers ``--fsdp_config`` (a path or inline JSON) with its ``fsdp_`` prefixes dropped, as
    ``TrainingArguments`` drops them; None when it is not visible."""
    if named is None:
        return None
    raw = named[0].strip()
    text = raw if raw.startswith("{") else files.find(b.ctx.files, raw, b.ctx.workdir)
    data = _load(text) if text is not None else None
    if not isinstance(data, Mapping):
        return None
    return {(k[5:] if isinstance(k, str) and k.startswith("fsdp_") else k): val for k, val in data.items()}


# --------------------------------------------------------------------------- DeepSpeed


def _deepspeed_file(b: Spec, raw: str, spelled: str) -> Reading:
    """A DeepSpeed config named by ``spelled`` (a path, or inline JSON as transformers accepts)."""
    text = raw.strip()
    if text.startswith("{"):
        where = f"deepspeed config (inline JSON, {spelled})"
    else:
        where = f"deepspeed config {_short(text)}"
        found = files.find(b.ctx.files, text, b.ctx.workdir)
        if found is None:
            return Reading(None, f"{spelled} {_short(text)} is not in the input")
        text = found
    data = _load(text)
    if not isinstance(data, Mapping):
        return Reading(None, f"{where} is not a JSON object")
    return deepspeed_config(data, where)


def deepspeed_config(data: Mapping[Any, Any], where: str = "deepspeed config") -> Reading:
    """A DeepSpeed config's ZeRO stage and offload (``zero_optimization``; stage 0 when absent)."""
    zero = data.get("zero_optimization")
    if zero is None:
        return Reading(tm.DDP, f"{where} has no zero_optimization (ZeRO stage 0)")
    if not isinstance(zero, Mapping):
        return Reading(None, f"{where} zero_optimization is not an object")
    stage = zero.get("stage", 0)
    reading = _stage(stage, f"{where} zero_optimization.stage={str(stage)[:8]}")
    optimizer = _mapping(zero.get("offload_optimizer")).get("device")
    param = _mapping(zero.get("offload_param")).get("device")
    offload = _offload(str(optimizer or ("cpu" if zero.get("cpu_offload") is True else "")),
                       str(param or "") if reading.strategy == tm.ZERO3 else "")
    return _with_offload(reading, offload)


def _stage(value: Any, source: str) -> Reading:
    stage = parse_count(value, cap=9, padded=True) if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        stage = value
    if stage not in _STAGES:
        return Reading(None, f"{source} is not a ZeRO stage (0-3)")
    return Reading(_STAGES[stage], source)


def _offload(optimizer: str, param: str) -> str | None:
    if param.strip().lower() in _OFFLOAD_DEVICES:
        return "all"
    if optimizer.strip().lower() in _OFFLOAD_DEVICES:
        return "optimizer"
    return None


def _with_offload(reading: Reading, offload: str | None) -> Reading:
    if reading.strategy is None or offload is None or reading.strategy == tm.DDP:
        return reading
    return Reading(reading.strategy, reading.source, offload, reading.distributed_optimizer)


# --------------------------------------------------------------------------- Megatron, NeMo


def _megatron(b: Spec, found: Scan, kind: str, hydra: Mapping[str, str]) -> Reading:
    """Megatron-LM or NeMo: weights over TP x PP, DP over the rest; the distributed optimizer."""
    label = "NeMo" if kind == "nemo" else "Megatron-LM"
    if {"tensor_parallel", "pipeline_parallel"} & b.unresolved:
        return Reading(None, f"{label}: its TP or PP is not visible")
    if kind == "nemo" and not (b.mentioned("tensor_parallel") or b.mentioned("pipeline_parallel")):
        return Reading(None, "NeMo: its recipe sets TP and PP, and no override does")
    v = found.values
    distributed: bool | None = None
    if "distributed_optimizer" in v:
        distributed = truthy(v["distributed_optimizer"][0])
    for key, value in hydra.items():
        if key.endswith("use_distributed_optimizer"):
            distributed = truthy(value)
        elif key == "optim.name" or key.endswith(".optim.name"):
            distributed = value.strip().strip("'\"").lower() == "distributed_fused_adam"
    if distributed is None and ("zero_stage" in v or "deepspeed_config" in v):
        stage = _stage(v["zero_stage"][0], "") if "zero_stage" in v else _deepspeed_file(b, *v["deepspeed_config"])
        if stage.strategy is not None:
            distributed = stage.strategy != tm.DDP  # Megatron-DeepSpeed: ZeRO shards the optimizer over DP
    if distributed is None and kind == "megatron":
        distributed = False  # --use-distributed-optimizer is off unless given
    return Reading(tm.MEGATRON, f"{label} TP x PP", distributed_optimizer=distributed)


def _hydra(found: Scan) -> dict[str, str]:
    """Hydra overrides among the script's positionals (``model.optim.name=distributed_fused_adam``)."""
    out: dict[str, str] = {}
    for token in found.positionals[:256]:
        m = _HYDRA_RE.fullmatch(token)
        if m:
            out[m.group(1)] = m.group(2)
    return out


# --------------------------------------------------------------------------- PEFT


def _peft(found: Scan, hydra: Mapping[str, str]) -> str | None:
    v = found.values
    bits = v.get("quantization_bit", ("",))[0].strip()
    four = _on(v, "load_in_4bit") or bits == "4"
    eight = _on(v, "load_in_8bit") or bits == "8"
    scheme = next((value.strip().lower() for key, value in hydra.items() if key.endswith("peft_scheme")), "")
    lora = (_on(v, "use_peft") or "lora_r" in v or v.get("finetuning_type", ("",))[0].strip().lower() in
            ("lora", "qlora") or scheme in ("lora", "qlora"))
    if four:
        return "qlora"  # 4-bit weights are frozen: only adapters train
    if eight:
        return "lora-8bit"
    return "lora" if lora else None


# --------------------------------------------------------------------------- helpers


def _load(text: str | None) -> Any:
    """A JSON or YAML document, or None (too long, malformed, or not one document)."""
    if text is None or len(text) > MAX_CONFIG_CHARS:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_bool(text: str) -> bool:
    return text.strip().lower() in ("true", "false", "1", "0", "yes", "no")


def _short(text: str) -> str:
    """A path for a message: at most 64 characters, its end kept (the file name says the most)."""
    text = text.strip()
    return text if len(text) <= 64 else "..." + text[-61:]
