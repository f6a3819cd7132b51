"""Architecture flags -> ``Architecture``: the network's shape when a launch names no model.

Megatron-LM scripts (``--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --swiglu ...``,
spellings in ``flags.SCRIPT_FLAGS``) and NeMo Hydra overrides (``model.num_layers=32``, keys in
``flags.ARCH_HYDRA_KEYS``) build the network from its sizes; :mod:`webhook.core.architecture`
counts its weights. Read only when both the layer count and the hidden size are visible as
literals: a shape half seen, or taken from a variable, is reported and not guessed.

Megatron semantics kept: ``--num-query-groups`` counts only with ``--group-query-attention`` (its
default is 1, and without the switch attention is multi-head); ``--padded-vocab-size`` is the
embedding's real size and wins over ``--vocab-size``. NeMo's ``num_query_groups: null`` is
multi-head attention, an ``activation`` with ``glu`` in it (``fast-swiglu``, ``geglu``, ``reglu``) is
gated, ``share_embeddings_and_output_weights: false`` unties the output layer.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.core.architecture import Architecture
from webhook.core.launchers.scan import truthy
from webhook.core.launchers.spec import Spec
from webhook.core.launchers.values import flag_count

PREFIX = "arch."
_COUNTS = ("layers", "hidden", "heads", "query_groups", "kv_channels", "ffn", "vocab", "padded_vocab",
           "experts", "moe_ffn", "top_k", "shared_expert_ffn")
_NULL = frozenset({"null", "none", "~", ""})


def read_architecture(values: Mapping[str, tuple[str, str]], b: Spec) -> None:
    """Set ``b.fields["architecture"]`` from ``arch.*`` values (raw, as spelled); explain when not.

    ``values`` holds both a scan's ``arch.*`` fields and Hydra overrides (spelled ``model.x``).
    """
    raw = {k[len(PREFIX):]: v for k, v in values.items() if k.startswith(PREFIX)}
    if not raw:
        return
    hidden_source = [spelled for text, spelled in raw.values() if "$" in text or "`" in text]
    if hidden_source:
        b.note(f"architecture flag {hidden_source[0][:64]} is not a literal: the model size is not "
               f"estimated from the architecture flags")
        return
    counts: dict[str, int | None] = {}
    for key in _COUNTS:
        if key not in raw or raw[key][0].strip().lower() in _NULL:
            counts[key] = None
            continue
        value = flag_count(raw[key][0])
        if value is None or value < 1:
            b.note(f"architecture flag {raw[key][1][:64]} is not a positive integer: the model size is "
                   f"not estimated from the architecture flags")
            return
        counts[key] = value
    layers, hidden = counts["layers"], counts["hidden"]
    if layers is None or hidden is None:
        missing = [n for n, v in (("the layer count", layers), ("the hidden size", hidden)) if v is None]
        verb = "are" if len(missing) > 1 else "is"
        b.note(f"architecture flags are given but {' and '.join(missing)} {verb} not: the model size is not "
               f"estimated from them")
        return
    b.fields["architecture"] = Architecture(
        layers=layers,
        hidden=hidden,
        heads=counts["heads"],
        query_groups=_query_groups(raw, counts["query_groups"]),
        kv_channels=counts["kv_channels"],
        ffn=counts["ffn"],
        gated=_gated(raw),
        vocab=counts["padded_vocab"] or counts["vocab"],
        untied=_untied(raw),
        experts=counts["experts"],
        moe_ffn=counts["moe_ffn"],
        top_k=counts["top_k"],
        moe_every=_moe_every(raw, b),
        shared_expert_ffn=counts["shared_expert_ffn"],
    )
    if "mla" in raw and truthy(raw["mla"][0]):
        b.note("--multi-latent-attention: attention is sized as multi-head attention (an over-estimate)")


def _query_groups(raw: Mapping[str, tuple[str, str]], groups: int | None) -> int | None:
    """Megatron reads ``--num-query-groups`` only with ``--group-query-attention``; NeMo's key alone."""
    if groups is None or "query_groups" not in raw:
        return None
    spelled = raw["query_groups"][1]
    if spelled.startswith("-") and not ("gqa" in raw and truthy(raw["gqa"][0])):
        return None
    return groups


def _gated(raw: Mapping[str, tuple[str, str]]) -> bool:
    if "gated" in raw and truthy(raw["gated"][0]):
        return True
    return "activation" in raw and "glu" in raw["activation"][0].lower()


def _untied(raw: Mapping[str, tuple[str, str]]) -> bool:
    if "untied" in raw and truthy(raw["untied"][0]):
        return True
    return "shared_embeddings" in raw and not truthy(raw["shared_embeddings"][0])


def _moe_every(raw: Mapping[str, tuple[str, str]], b: Spec) -> int:
    """``--moe-layer-freq N``; a list pattern (``([0]*3+[1]*1)*8``) is not evaluated: every layer
    is then sized as MoE, which over-counts, and a note says so."""
    if "moe_every" not in raw:
        return 1
    value = flag_count(raw["moe_every"][0])
    if value is not None and value >= 1:
        return value
    b.note("--moe-layer-freq is a layer pattern: every layer is sized as an MoE layer (an over-estimate)")
    return 1
