"""Transformer architecture -> parameter count, for launches that give sizes instead of a model id.

Megatron-LM, NeMo and BioNeMo training often build the network from flags (``--num-layers 32
--hidden-size 4096 ...``) or Hydra overrides (``model.num_layers=32``) and name no model the
catalog could look up. The weights are then counted from the shapes, per layer:

- attention: query and output projections ``h x (heads x head_dim)`` each, key and value
  ``h x (groups x head_dim)`` each; ``head_dim`` is ``--kv-channels``, else ``h / heads``; without
  grouped-query attention ``groups = heads`` (4 h^2 for the classic model);
- MLP: ``2 x h x ffn``, ``3 x h x ffn`` when gated (SwiGLU: ``linear_fc1`` is twice as wide);
- MoE layers: ``experts x`` the expert MLP (``--moe-ffn-hidden-size``, else ``ffn``) plus the router
  ``h x experts`` and a shared expert when one is given; a token runs ``top-k`` experts;
- embeddings ``vocab x h``, twice when the output layer is untied.

Biases and norms (a few ``h`` per layer, under 0.01 % of a 7B model) are left out. The check: Llama-2-7B
(32 layers, h 4096, 32 heads, ffn 11008, SwiGLU, vocab 32000, untied) gives 6.738B, the 6.74B its
model card states. Defaults are Megatron's own (NVIDIA/Megatron-LM megatron/training/arguments.py at
000c4ac24f61159c138b0975def722c65245983c, ``validate_args`` and ``_add_moe_args``): ``ffn`` is
``4h``, or ``int(4h x 2/3 / 64) x 64`` with SwiGLU; ``--moe-router-topk`` is 2; ``--moe-layer-freq``
1 (every layer MoE).
"""

from __future__ import annotations

from dataclasses import dataclass

VOCAB_ASSUMED = 128_256
"""Embeddings size when no vocabulary size is visible (Megatron takes it from the tokenizer file):
Llama 3's tokenizer, among the largest of the common ones, so the estimate errs on the large side."""
MEGATRON_TOPK = 2
"""Megatron-LM ``--moe-router-topk`` default (megatron/training/arguments.py ``_add_moe_args``)."""
MAX_COUNT = 10**7
"""Any shape above this is a typo or hostile input, not a network: no estimate."""


@dataclass(frozen=True)
class Architecture:
    """The sizes a launch states; ``None`` where it states nothing (the defaults above apply)."""

    layers: int
    hidden: int
    heads: int | None = None
    query_groups: int | None = None
    """Key/value head groups of grouped-query attention; ``None`` is multi-head attention."""
    kv_channels: int | None = None
    ffn: int | None = None
    gated: bool = False
    """SwiGLU (or another gated linear unit): three MLP matrices instead of two."""
    vocab: int | None = None
    untied: bool = False
    experts: int | None = None
    moe_ffn: int | None = None
    top_k: int | None = None
    moe_every: int = 1
    """One MoE layer every N layers (Megatron ``--moe-layer-freq N``); 1: every layer."""
    shared_expert_ffn: int | None = None


@dataclass(frozen=True)
class Estimate:
    params_b: float
    active_params_b: float | None
    """Parameters a token runs through (MoE: top-k experts), ``None`` for a dense model."""
    assumed: tuple[str, ...] = ()
    """What the estimate had to assume (vocabulary size, attention heads), for the note."""


def default_ffn(hidden: int, gated: bool) -> int:
    """Megatron's ``--ffn-hidden-size`` when none is given (``validate_args``)."""
    return int((4 * hidden * 2 / 3) / 64) * 64 if gated else 4 * hidden


def estimate(arch: Architecture) -> Estimate | None:
    """Total (and, for MoE, active) parameters in billions; ``None`` for sizes that are no network."""
    sizes = (arch.layers, arch.hidden, arch.heads, arch.query_groups, arch.kv_channels, arch.ffn,
             arch.vocab, arch.experts, arch.moe_ffn, arch.top_k, arch.shared_expert_ffn)
    if arch.layers < 1 or arch.hidden < 1 or any(s is not None and not 0 < s <= MAX_COUNT for s in sizes):
        return None
    h = arch.hidden
    assumed: list[str] = []
    attention = _attention(arch, assumed)
    ffn = arch.ffn or default_ffn(h, arch.gated)
    width = 3 if arch.gated else 2
    dense_mlp = width * h * ffn
    vocab = arch.vocab
    if vocab is None:
        vocab = VOCAB_ASSUMED
        assumed.append(f"a {VOCAB_ASSUMED:,}-token vocabulary (its size is not visible)")
    embeddings = vocab * h * (2 if arch.untied else 1)
    if not arch.experts or arch.experts < 2:
        return Estimate(_b(arch.layers * (attention + dense_mlp) + embeddings), None, tuple(assumed))
    moe_layers = -(-arch.layers // max(arch.moe_every, 1))  # layers 0, N, 2N...: ceil(L / N)
    dense_layers = arch.layers - moe_layers
    expert = width * h * (arch.moe_ffn or ffn)
    shared = width * h * arch.shared_expert_ffn if arch.shared_expert_ffn else 0
    router = h * arch.experts
    top_k = min(arch.top_k or MEGATRON_TOPK, arch.experts)
    common = arch.layers * attention + dense_layers * dense_mlp + moe_layers * (router + shared) + embeddings
    total = common + moe_layers * arch.experts * expert
    active = common + moe_layers * top_k * expert
    return Estimate(_b(total), _b(active), tuple(assumed))


def _attention(arch: Architecture, assumed: list[str]) -> int:
    """Q, K, V and output projections of one layer."""
    h = arch.hidden
    if arch.heads is None:
        if arch.query_groups is not None or arch.kv_channels is not None:
            assumed.append("multi-head attention of width h (the head count is not visible)")
        return 4 * h * h
    head_dim = arch.kv_channels or max(h // arch.heads, 1)
    groups = min(arch.query_groups or arch.heads, arch.heads)
    return 2 * h * arch.heads * head_dim + 2 * h * groups * head_dim


def _b(count: int) -> float:
    return count / 1e9


def describe(arch: Architecture) -> str:
    """The shapes in one line for a note: ``32 layers, hidden 4096, 32 heads (8 groups), ffn 11008 SwiGLU...``."""
    parts = [f"{arch.layers} layers", f"hidden {arch.hidden}"]
    if arch.heads is not None:
        parts.append(f"{arch.heads} heads" + (f" ({arch.query_groups} KV groups)" if arch.query_groups else ""))
    ffn = f"ffn {arch.ffn}" if arch.ffn else "ffn default"
    parts.append(ffn + (" gated" if arch.gated else ""))
    if arch.vocab is not None:
        parts.append(f"vocab {arch.vocab}" + (" untied" if arch.untied else ""))
    if arch.experts:
        parts.append(f"{arch.experts} experts top-{arch.top_k or MEGATRON_TOPK}")
    return ", ".join(parts)
