"""GPU requests that no GPU count reads: MIG slices and scheduler-shared GPUs, judged as far as they go.

Why: :func:`webhook.core.resources.pod_gpus` counts whole devices of the policy's ``gpuResources``.
Two common ways to ask for a GPU leave that count at 0, and a pod counted at 0 GPUs is a CPU pod to
every rule: it would pass in silence, looking exactly like one that was judged.

- **MIG slices** (NVIDIA device plugin / GPU Operator, ``mixed`` MIG strategy): a container asks for
  ``nvidia.com/mig-<slice_count>g.<memory_size>gb`` (NVIDIA/k8s-device-plugin ``README.md``, option
  ``MIG_STRATEGY``, @ cb6e45ec357705e6458f753eb04a4bde31ec18cf). The name states the slice's memory,
  which is what sizing may use; the compute slices and memory together imply the GPU family
  (:data:`MIG_PROFILES`). MIG has no GPU-to-GPU peer-to-peer, so tensor parallelism over several
  slices runs without NVLink (NVIDIA MIG User Guide, "Deployment Considerations"; RAPIDS deployment
  docs, "Multi-Instance GPU": no CUDA IPC, so NVLink and NVSwitch are unavailable). Under the
  ``single`` strategy a slice is an ``nvidia.com/gpu`` and its node's product label carries
  ``-MIG-<profile>``: :meth:`webhook.core.hardware.Catalog.parse_label` reads that back as the base
  product, and :mod:`webhook.core.pinned` keeps such a pin, unsized, rather than judge a whole GPU.
- **KAI Scheduler GPU sharing** (the same annotations Run:ai reads): the pod carries the annotation
  ``gpu-fraction`` (share of one GPU's memory, e.g. ``"0.5"``) or ``gpu-memory`` (MiB, e.g.
  ``"2000"``), optionally ``gpu-fraction-num-devices``, and requests no ``nvidia.com/gpu``
  (NVIDIA/KAI-Scheduler ``docs/gpu-sharing/README.md`` @ 82d69adbd1a21afc3a4b0004cdb10555153ae4d9,
  ``docs/gpu-sharing/gpu-sharing.yaml`` and ``gpu-memory.yaml`` @ d6c52d12b1e1f29247e59e7eab4f473b804f72eb,
  annotation keys in ``pkg/common/constants/constants.go`` @ dafd3d81d1d2d6cafcb115496ab49e1017bb3032).
  KAI enforces no memory limit: the processes must stay within what they asked for.

What is judged: the model's memory against a slice's (or a ``gpu-memory``) size with the policy's
sizing, and the parallelism the launch states against the devices the pod gets. What is not: the
product (the slice's resource name or the sharing scheduler chooses the nodes, so no product pin is
added) and, for ``gpu-fraction``, the memory (it depends on the GPU the pod lands on). Every finding
is a warning: the pod is admitted, and never in silence.

- **DRA claims on the pod** (``spec.resourceClaims``, each a ``resourceClaimName`` or a
  ``resourceClaimTemplateName``; containers name them in ``resources.claims``: ``k8s.io/api/core/v1``
  ``PodResourceClaim``, ``ResourceRequirements.Claims``). A pod whose GPUs come from a claim counts 0
  ``nvidia.com/gpu``; the claim itself is judged where it is written (:mod:`webhook.core.dra`: one
  product across its GPUs), the pod's model is not sized against devices it cannot see. A claim
  *beside* counted GPUs (an IMEX channel of a ComputeDomain on GB200 NVL72 systems, a NIC) is not
  judged either; both are said. A claim alone on a pod with no sign of GPU work (no launcher, no
  model) is said nothing about: most DRA devices are not GPUs.

Also here, for ``check``: what a launcher states about GPUs (``torchrun --nproc-per-node 8``) when
the object's GPU quantity is still a template (:func:`launcher_statements`).

Pure: a profile, a template and the settings in, sentences out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.core import dra, inference, sizing
from webhook.core.domain import GpuProduct, LabelOption, WorkloadProfile
from webhook.core.placing import describe
from webhook.core.counts import ASCII_SPACE, parse_count
from webhook.core.resources import pod_gpus, requested_names
from webhook.core.settings import Settings
from webhook.core.workloads import PodTemplate, pod_templates

MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-([0-9]{1,2})g\.([0-9]{1,4})gb")
"""``nvidia.com/mig-3g.40gb``: compute slices, then memory in GB. A suffix (``+me``, a
media-extension profile) is tolerated: the memory is still the name's. The GB are read as 10^9
bytes, a little below what the device reports (the same node labels give ``3g.40gb`` 40320 MiB,
``1g.10gb`` 9984 MiB), so a fit is never promised on memory the slice lacks."""

MIG_PROFILES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"), ("A100-SXM4-40GB", "A100-PCIE-40GB")),
    (("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
     ("A100-SXM4-80GB", "A100-PCIE-80GB", "H100-SXM5-80GB", "H100-PCIE-80GB")),
)
"""MIG profiles -> the catalog products that offer them. A100 40 GB and 80 GB: NVIDIA MIG User
Guide, "Supported MIG Profiles" (the A100-SXM4-40GB table, and the 80 GB names "1g.10gb, 1g.20gb,
2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"); H100 80 GB shares the 80 GB names (an H100 node's mixed-strategy
labels ``nvidia.com/mig-1g.10gb.product: NVIDIA-H100-80GB-HBM3-MIG-1g.10gb``, ``-2g.20gb``, ``-3g.40gb``:
NVIDIA/cloud-native-docs ``gpu-operator/manifests/output/mig-mixed-node-labels.json`` @
1c9e5bc1849401d5089b5ec14993fc83b560387b).
A profile of another GPU (A30, H100 94 GB, H200, B200) is still sized by its name's memory; the
warning then names no product."""

FRACTION = "gpu-fraction"
MEMORY = "gpu-memory"
DEVICES = "gpu-fraction-num-devices"
SHARING = (FRACTION, MEMORY)
"""The annotations that make a pod a KAI Scheduler (Run:ai) shared-GPU pod."""

_DECIMAL = re.compile(r"[0-9]{1,6}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}")
"""A fraction as written (``0.5``, ``.25``, ``1``): ASCII digits only, as Go's ParseFloat reads KAI's."""
MAX_MEMORY_MIB = 1 << 24
"""16 TiB in MiB: more than any GPU; a larger ``gpu-memory`` is no request (said as such)."""
MAX_DEVICES = 64
MIB = 2 ** 20
_HOST_ALLREDUCE_US = 400.0
"""All-reduce latency of a slice (no NVLink, no peer-to-peer): the catalog's plain-PCIe figure."""


@dataclass(frozen=True)
class MigSlice:
    """One MIG resource a pod requests: ``count`` slices of ``profile`` (``3g.40gb``)."""

    resource: str
    profile: str
    compute: int
    memory_gb: int
    count: int

    @property
    def products(self) -> tuple[str, ...]:
        """Catalog products that offer this profile (``()`` when :data:`MIG_PROFILES` has none)."""
        return tuple(p for names, products in MIG_PROFILES if self.profile in names for p in products)


@dataclass(frozen=True)
class SharedGpu:
    """A KAI Scheduler GPU-sharing request read from a pod's annotations."""

    fraction: float | None
    memory_mib: int | None
    devices: int
    problems: tuple[str, ...] = ()


def mig_slices(spec: Mapping[str, Any], spec_pointer: str, gpu_resources: tuple[str, ...]) -> tuple[MigSlice, ...]:
    """The MIG resources of a pod spec that the policy does not count as GPUs already, each with the
    pod's effective count of it (:func:`pod_gpus`: init containers and sidecars as Kubernetes has them)."""
    names: dict[str, re.Match[str]] = {}
    for name in requested_names(spec):
        match = MIG_RESOURCE.match(name)
        if match and name not in gpu_resources:
            names.setdefault(name, match)
    out = []
    for name, match in names.items():
        count = pod_gpus(spec, spec_pointer, (name,)).gpus
        if count > 0:
            compute, memory = int(match.group(1)), int(match.group(2))
            out.append(MigSlice(name, f"{compute}g.{memory}gb", compute, memory, count))
    return tuple(out)


def shared_gpu(annotations: Mapping[str, str]) -> SharedGpu | None:
    """The KAI sharing request of a pod's annotations, ``None`` when it carries neither
    ``gpu-fraction`` nor ``gpu-memory``. Values that are not what KAI reads are problems, said."""
    if not any(key in annotations for key in SHARING):
        return None
    problems: list[str] = []
    fraction = memory = None
    if FRACTION in annotations:
        text = annotations[FRACTION]
        fraction = float(text) if isinstance(text, str) and _DECIMAL.fullmatch(text.strip(ASCII_SPACE)) else None
        if fraction is None or not 0 < fraction <= 1:
            problems.append(f"{FRACTION}={str(text)[:20]!r} is not a fraction of a GPU (0 < f <= 1)")
            fraction = None
    if MEMORY in annotations:
        memory = parse_count(annotations[MEMORY], cap=MAX_MEMORY_MIB, padded=True) or None
        if memory is None:
            problems.append(f"{MEMORY}={str(annotations[MEMORY])[:20]!r} is not a whole number of MiB")
    devices = 1
    if DEVICES in annotations:
        count = parse_count(annotations[DEVICES], cap=MAX_DEVICES, padded=True)
        if count:
            devices = count
        else:
            problems.append(f"{DEVICES}={str(annotations[DEVICES])[:20]!r} is not a number of devices")
    return SharedGpu(fraction, memory, devices, tuple(problems))


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``: its name and where its devices come from."""

    name: str
    source: str
    """``template <name>`` (a ResourceClaimTemplate, one claim per pod) or ``claim <name>``."""


def pod_claims(spec: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """The DRA claims of a pod spec, in order; entries that are not mappings with a name are skipped
    (the apiserver refuses them)."""
    out = []
    claims = spec.get("resourceClaims")
    for entry in claims if isinstance(claims, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        template, claim = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
        source = (f"template {str(template)[:63]}" if isinstance(template, str)
                  else f"claim {str(claim)[:63]}" if isinstance(claim, str) else "no source")
        out.append(PodClaim(entry["name"][:63], source))
    return tuple(out)


def _judge_claims(profile: WorkloadProfile, claims: tuple[PodClaim, ...]) -> list[str]:
    named = ", ".join(f"{c.name} ({c.source})" for c in claims[:4]) + (" ..." if len(claims) > 4 else "")
    if profile.gpus_per_pod > 0:
        return [f"DRA: besides {profile.gpus_per_pod} GPU(s) the pod claims devices through ResourceClaims "
                f"[{named}]: not judged here (an IMEX channel or another DRA device is placed by its driver)"]
    if not (profile.framework or profile.model or stated_devices(profile)):
        return []
    work = describe(profile) if profile.model else (profile.framework or "GPU work")
    return [f"DRA: {work} with no nvidia.com/gpu: its devices come from ResourceClaims [{named}], which no GPU "
            f"count reads; the claim's product constraint is judged on the ResourceClaim(Template) itself "
            f"({dra.MISSING_CONSTRAINT}); the model's fit and the pod's tier are not judged, no pin added"]


def stated_devices(profile: WorkloadProfile) -> int | None:
    """GPUs per pod that the launch states (TP x PP declared to a server, processes per pod for
    training), ``None`` when it states nothing (a server's default TP of 1 is no statement)."""
    if profile.role == "training" and profile.gpus_used:
        return max(1, profile.gpus_used // max(profile.pods, 1))
    if profile.tensor_parallel and profile.tp_declared:
        return profile.tensor_parallel * (profile.pipeline_parallel or 1)
    return None


def judge(profile: WorkloadProfile, template: PodTemplate, settings: Settings) -> tuple[str, ...]:
    """Warnings for a pod that asks for MIG slices or a shared GPU and for no whole GPU
    (``profile.gpus_per_pod == 0``), or for GPUs through DRA claims (with or without whole GPUs);
    ``()`` for any other pod."""
    claims = pod_claims(template.spec) if "resourceClaims" in template.spec else ()
    if profile.gpus_per_pod > 0:
        return tuple(_judge_claims(profile, claims)) if claims else ()
    out: list[str] = _judge_claims(profile, claims) if claims else []
    for piece in mig_slices(template.spec, template.spec_pointer, settings.gpu_resources):
        out.extend(_judge_mig(profile, piece, settings))
    shared = shared_gpu(template.annotations)
    if shared is not None:
        out.extend(_judge_shared(profile, shared, settings))
    return tuple(out)


def _judge_mig(profile: WorkloadProfile, piece: MigSlice, settings: Settings) -> list[str]:
    products = piece.products
    of = f"a slice of {' or '.join(products)}" if products else "a MIG slice of a GPU the catalog has no profile for"
    head = (f"MIG: {piece.count} x {piece.resource} ({of}, {piece.memory_gb} GB each): sized on the slice's "
            f"memory; no product pin added, the resource chooses the nodes")
    base = settings.catalog.product(products[0]) if products and products[0] in settings.catalog.products else None
    out = [head + _fit_said(profile, piece.count, piece.memory_gb * 10**9 / sizing.GIB, base, settings,
                            f"{piece.profile} slice", "use a larger slice or whole GPUs")]
    stated = stated_devices(profile)
    if stated is not None and stated > piece.count:
        out.append(f"MIG: the launch states {stated} GPUs per pod but the pod gets {piece.count} "
                   f"{piece.profile} slice(s): cannot work as written; request {stated} slices or whole GPUs")
    elif stated is not None and stated > 1:
        out.append(f"MIG: {stated}-way parallelism over {piece.profile} slices has no NVLink or GPU peer-to-peer "
                   f"(MIG offers none): every all-reduce crosses host memory; one slice that holds the model, "
                   f"or whole GPUs (nvidia.com/gpu), is faster")
    return out


def _judge_shared(profile: WorkloadProfile, shared: SharedGpu, settings: Settings) -> list[str]:
    if shared.memory_mib is not None:
        what = f"{MEMORY}={shared.memory_mib} MiB"
    elif shared.fraction is not None:
        what = f"{FRACTION}={shared.fraction:g} of a GPU"
    else:
        what = "a shared GPU"
    devices = f" on each of {shared.devices} devices" if shared.devices > 1 else ""
    judged = "per shared device" if shared.devices > 1 else "as single-GPU work on a shared device"
    head = (f"GPU sharing (KAI Scheduler annotations): {what}{devices}, no nvidia.com/gpu requested: judged "
            f"{judged}; no product pin added")
    if shared.memory_mib is not None:
        head += _fit_said(profile, shared.devices, shared.memory_mib * MIB / sizing.GIB, None, settings,
                          f"{shared.memory_mib} MiB share", f"ask for more {MEMORY} or a whole GPU")
    else:
        head += "; its memory depends on the GPU it lands on: fit not judged"
    out = [head, *(f"GPU sharing: {p}" for p in shared.problems)]
    stated = stated_devices(profile)
    if stated is not None and stated > shared.devices:
        out.append(f"GPU sharing: the launch states {stated} GPUs per pod but the pod gets a share of "
                   f"{shared.devices} device(s): cannot work as written; request nvidia.com/gpu: {stated}")
    elif shared.devices > 1:
        out.append(f"GPU sharing: shares of {shared.devices} devices: multi-GPU placement (NVLink, one product) "
                   f"is not judged for shared GPUs")
    return out


def _fit_said(profile: WorkloadProfile, devices: int, memory_gib: float, base: GpuProduct | None,
              settings: Settings, name: str, advice: str) -> str:
    """``; Qwen2.5-7B-Instruct (7.6B, bf16) needs 18.2 GiB per device, 33.5 usable on the 3g.40gb
    slice: fits`` (or why not), by the policy's own sizing (:func:`sizing.fit`) on a spec of the
    slice: ``base``'s with the slice's memory and no GPU links, else an Ampere card (MIG's oldest)."""
    if profile.params_b is None:
        return "; model size unknown: fit not judged"
    spec = replace(base, memory_gib=memory_gib, interconnect="pcie") if base is not None else GpuProduct(
        id=name, memory_gib=memory_gib, bandwidth_gbs=1000.0, interconnect="pcie", interconnect_gbs=0.0,
        compute_capability="8.0", family="ampere", memory_type="HBM")
    option = LabelOption(value=name, spec=spec, products=())
    sized = replace(profile, gpus_per_pod=devices)
    fit = sizing.fit(sized, option, overhead_gib=settings.overhead_gib, kv_reserve_gib=settings.kv_reserve_gib,
                     utilization=settings.memory_utilization, allreduce_us=_HOST_ALLREDUCE_US,
                     kv_fraction=settings.kv_fraction)
    need = f"{fit.need_gib:.1f} GiB" if fit.need_gib is not None else "an unknown amount"
    if fit.fits:
        verdict = "fits"
    elif fit.need_gib is not None and fit.need_gib <= fit.usable_gib:  # memory holds, the precision does not
        verdict = f"precision not run there ({fit.precision}{f', as on {base.id}' if base is not None else ''})"
    else:
        verdict = f"does not fit: {advice}"
    return f"; {describe(profile)} needs {need} per device, {fit.usable_gib:.1f} usable on the {name}: {verdict}"


def launcher_statements(obj: Any, prefix: str = "") -> tuple[str, ...]:
    """What the launchers of ``obj``'s templates state about GPUs per pod (``torchrun
    --nproc-per-node 8``): said beside a templated GPU quantity, so the report keeps what the object
    does say about its GPUs while it cannot be judged."""
    out: list[str] = []
    for template in pod_templates(obj, prefix):
        prof = inference.profile(template, gpu_resources=()).profile
        stated = stated_devices(prof) if prof.framework else None
        if stated is not None:
            out.append(f"{prof.framework} in {prof.container or 'its container'} at {template.spec_pointer or '/'} "
                       f"states {stated} GPU(s) per pod")
    return tuple(dict.fromkeys(out))
