"""Data and expert parallelism of vLLM and SGLang launches: ranks, where they run, split experts.

Why a module of its own: the two servers place data-parallel (DP) ranks differently, and the GPU
count and the memory split follow from that, not from the flags one by one:

- vLLM: every DP rank is its own engine of TP x PP GPUs, so a launch uses DP x TP x PP GPUs;
  ``--data-parallel-size-local L`` runs L of those ranks in this pod (the rest in other pods of the
  group) and ``--data-parallel-rank R`` (external load balancing) runs exactly one. With
  ``--enable-expert-parallel`` the MoE experts are split over an EP group of DP x TP ranks instead
  of being tensor-sliced (vllm docs/serving/data_parallel_deployment.md: "By default, expert layers
  form a tensor parallel group of size DP x TP"; "--data-parallel-size=4 --tensor-parallel-size=2
  ... would require 8 GPUs"; vllm/engine/arg_utils.py for the ``-dp``/``-dpl``/``-dpn`` spellings).
- SGLang: ``--tp`` counts every GPU of the launch. ``--dp-size N`` alone starts N replicas of that
  (``--dp 2 --tp 2`` "uses 4 GPUs in total", docs/advanced_features/server_arguments.md), but with
  ``--enable-dp-attention`` the N attention ranks live inside the TP group (``tp_size % dp_size ==
  0``, docs/advanced_features/dp_dpa_smg_guide.md), so no extra GPUs. Experts are split over
  ``--ep-size`` ranks of that group (``ep_size <= tp_size``, docs/advanced_features/
  expert_parallelism.md); the all-to-all MoE backends (``--moe-a2a-backend deepep``/``mooncake``/
  ``flashinfer``, the older ``--enable-deepep-moe``) force ``ep_size = tp_size`` (server_args.py).

Everything here only records what the flags say (``data_parallel``, ``data_parallel_local``,
``dp_attention``, ``expert_parallel``); ``inference`` turns it into GPUs and pods, ``sizing`` into
memory per GPU.
"""

from __future__ import annotations

from webhook.core.launchers.scan import Scan, truthy
from webhook.core.launchers.spec import Spec

_A2A_BACKENDS = frozenset({"deepep", "mooncake", "flashinfer", "ascend_fuseep", "ascend-fuseep"})
"""SGLang ``--moe-a2a-backend`` values that force EP = TP (``none`` keeps TP-sliced experts)."""
_POOLING_TASKS = frozenset({"embed", "embedding", "score", "classify", "reward", "pooling"})
"""vLLM ``--task``/``--runner``/``--convert`` values that serve an encoder, not a generator."""


def _flag(found: Scan, key: str) -> bool:
    return key in found.values and truthy(found.values[key][0])


def read_vllm_parallel(found: Scan, b: Spec) -> None:
    """DP placement and expert parallelism of one ``vllm serve`` (or OpenAI server module) launch."""
    if "task" in found.values and found.values["task"][0].strip().lower() in _POOLING_TASKS:
        b.fields["kind"] = "embedding"
    if "dp_rank" in found.values and not b.mentioned("data_parallel_local"):
        b.fields["data_parallel_local"] = 1  # external load balancing: one rank per launch
    _pods_from_local_ranks(b)
    if _flag(found, "ep_enabled"):
        _expert_parallel_over(b, ("tensor_parallel", "data_parallel"))


def read_sglang_parallel(found: Scan, b: Spec) -> None:
    """DP attention, embedding mode and expert parallelism of one SGLang launch."""
    b.fields["tp_is_total"] = True
    if _flag(found, "embedding"):
        b.fields["kind"] = "embedding"
    if _flag(found, "dp_attention"):
        b.fields["dp_attention"] = True
    size = b.fields.get("expert_parallel")
    if isinstance(size, int) and size > 1:
        b.fields["expert_parallel_enabled"] = True
        return
    if b.mentioned("expert_parallel"):
        return  # an explicit --ep-size 1, or one that is not visible: nothing to add
    backend = found.values["a2a_backend"][0].strip().lower() if "a2a_backend" in found.values else ""
    if backend in _A2A_BACKENDS or _flag(found, "ep_all_to_all") or _flag(found, "ep_enabled"):
        _expert_parallel_over(b, ("tensor_parallel",))


def _expert_parallel_over(b: Spec, factors: tuple[str, ...]) -> None:
    """Experts split over the product of ``factors`` (missing ones count 1, as their defaults do)."""
    b.fields["expert_parallel_enabled"] = True
    if b.mentioned("expert_parallel"):
        return
    if any(f in b.unresolved for f in factors):
        if not (factors == ("tensor_parallel", "data_parallel") and "tensor_parallel" not in b.unresolved
                and b.fields.get("data_parallel_local")):
            # (with local ranks known, inference derives DP, and so EP, from the pods of the group)
            b.note("expert parallel is enabled; its size depends on values not visible at admission")
        return
    size = 1
    for f in factors:
        size *= b.fields.get(f) or 1
    b.fields["expert_parallel"] = size


def _pods_from_local_ranks(b: Spec) -> None:
    """``--data-parallel-size 16 --data-parallel-size-local 8``: the launch spans 2 pods.

    Recorded as ``nnodes`` (pods of the group) unless the launch states it; an LWS or a declared
    group size still wins in ``inference``. ``--data-parallel-size-local 0`` is an API-server-only
    pod: its engines, and its GPUs, are elsewhere.
    """
    local = b.fields.get("data_parallel_local")
    total = b.fields.get("data_parallel")
    if local == 0:
        b.note("--data-parallel-size-local 0: this pod runs only the API server; its engines run in other pods")
        return
    if not isinstance(local, int) or not isinstance(total, int) or local >= total or b.mentioned("nnodes"):
        return
    b.fields["nnodes"] = -(-total // local)
