"""The rules: profile + pod template + settings -> Decision.

Every outcome is either a ``Violation(code, message, path)`` or a warning string; messages say what
to change, with numbers. Codes are stable (scripts and dashboards match on them):

- ``missing-homogeneous-selector``: multi-GPU pod whose node selection does not pin the GPU product
  to its tier (fixable: the mutating patch pins it);
- ``tier-mismatch``: the pod pins products outside its tier (never silently overridden);
- ``tp-exceeds-gpus``: the declared parallelism needs more GPUs than the pod (group) requests;
- ``model-does-not-fit``: no product of the tier holds the model at that parallelism;
- ``tier-not-in-cluster``: the GPU inventory shows no node that offers the tier's fitting products
  with enough GPUs per node (only when an inventory is known);
- ``invalid-gpu-request`` / ``invalid-annotation``: malformed input, reported where it is.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.core import numa, pinned, pins, schemes, tiering
from webhook.core.fixes import FIX_BUDGET, fix_line
from webhook.core.domain import MISPLACED, Decision, Fit, GroupAffinity, Placement, Violation, WorkloadProfile, counted
from webhook.core.groups import GPU_GROUP, Membership, declared_size, group_label, group_value, membership
from webhook.core.inference import MODE, PREFIX, TIER
from webhook.core.inventory import Inventory
from webhook.core.patches import has_group_term
from webhook.core.placing import (
    Finding as _Finding,
    TierChoice as _TierChoice,
    describe as _describe,
    evaluate as _evaluate,
    does_not_fit as _does_not_fit,
    unavailable as _unavailable,
    shown_list as _shown_list,
    shown as _shown,
    DOES_NOT_FIT, GROUP_DOES_NOT_FIT, INVALID_ANNOTATION, MISSING_SELECTOR, NOT_IN_CLUSTER, NUMA_UNALIGNED, TIER_MISMATCH,
    TP_EXCEEDS,
    holds_on,
    tight_warning,
)
from webhook.core.resources import pod_gpus
from webhook.core.selection import excludes_everywhere, pinned_values
from webhook.core.settings import MODES, Settings, Tier
from webhook.core.tiering import is_multi
from webhook.core.workloads import PodTemplate, join


def _absent_tier_warns(choice: _TierChoice, profile: WorkloadProfile, settings: Settings,
                       inventory: Inventory | None, warnings: list[str]) -> _TierChoice:
    """``inventory.absentTier: warn``: a tier that would hold the model but that nothing in the
    cluster offers (no node, no NodePool, no scalable product) is placed as if no inventory were
    known, with a warning: the Pending pod is what makes an autoscaler add the node, and a denial
    would block that scale-up."""
    if (settings.absent_tier != "warn" or inventory is None or choice.tier is None or choice.present is None
            or choice.usable() or not any(f.fits for f in choice.fits)):
        return choice
    wanted = [f.value for f in choice.fits if f.fits]
    warnings.append(f"{NOT_IN_CLUSTER} (admitted, inventory.absentTier: warn): no node of the cluster offers "
                    f"[{_shown(choice, wanted)}] (tier {choice.tier.name}) with {counted(profile.gpus_per_pod, 'GPU')} "
                    f"yet; the pod stays Pending until one joins. The cluster has: {inventory.describe()}")
    return replace(choice, present=None)


def tier_fits(profile: WorkloadProfile, tier: Tier, settings: Settings) -> tuple[Fit, ...]:
    """Fit of ``profile`` on every label option of ``tier`` (for explain and what-if tooling)."""
    return _evaluate(tier, profile, settings).fits


def _choose_tier(profile: WorkloadProfile, template: PodTemplate, settings: Settings,
                 findings: list[_Finding], inventory: Inventory | None) -> _TierChoice:
    multi = is_multi(profile)
    if profile.tier_override is not None:
        tier = settings.tier(profile.tier_override)
        if tier is None:
            names = ", ".join(t.name for t in settings.tiers)
            findings.append(_Finding(Violation(
                INVALID_ANNOTATION,
                f"annotation {TIER}={profile.tier_override[:40]!r} names no tier: use one of {names}",
                join(template.pointer, "metadata", "annotations", TIER),
                fix=f"set annotation {TIER} to one of {names}"[:FIX_BUDGET - len(INVALID_ANNOTATION) - 2])))
        elif multi and not tier.multi_gpu:
            target, _ = tiering.multi_gpu_tier(profile, settings)
            findings.append(_Finding(Violation(
                TIER_MISMATCH,
                f"{_describe(profile)} uses {counted(profile.gpus_per_pod, 'GPU')} x {counted(profile.pods, 'pod')}, but tier "
                f"{tier.name} is for single-GPU work (multiGpu: false): remove annotation {TIER} or set it to "
                f"{target}",
                join(template.pointer, "metadata", "annotations", TIER),
                fix=f"remove annotation {TIER} or set it to {target}", kind=MISPLACED)))
            return _TierChoice(None)
        else:
            chosen = _evaluate(tier, profile, settings, inventory)
            trap = pinned.tier_annotation_trap(profile, settings, chosen, annotation=TIER, inventory=inventory,
                                               path=join(template.pointer, "metadata", "annotations", TIER))
            if trap is not None:
                findings.append(_Finding(trap))
            return chosen
    if multi:
        name, _ = tiering.multi_gpu_tier(profile, settings)
    elif profile.params_b is not None:
        name = settings.large_model_tier if profile.params_b > settings.large_model_params_b else settings.small_model_tier
    elif profile.kind in ("embedding", "diffusion"):
        # a one-GPU embedding or image server whose checkpoint is not readable (TEI, ComfyUI): these
        # are models of a few billion parameters at most, the small-model tier's work
        name = settings.small_model_tier
    else:
        return _TierChoice(None)  # a single-GPU pod whose model is unknown is not constrained
    tier = settings.tier(name)
    assert tier is not None  # settings validation guarantees rule tiers exist
    choice = _evaluate(tier, profile, settings, inventory)
    if (name == settings.small_model_tier and settings.escalate and name != settings.large_model_tier
            and not choice.usable()):
        bigger = settings.tier(settings.large_model_tier)
        assert bigger is not None
        escalated = _evaluate(bigger, profile, settings, inventory)
        if escalated.usable():
            return _TierChoice(escalated.tier, escalated.options, escalated.fits, escalated_from=name,
                               present=escalated.present)
    return choice


def _placement(profile: WorkloadProfile, template: PodTemplate, settings: Settings, choice: _TierChoice,
               findings: list[_Finding], warnings: list[str],
               inventory: Inventory | None) -> tuple[tuple[str, ...] | None, bool, str]:
    """Label values the pod may land on, whether the pod must be patched to get there, and the
    node label key they are values of (the policy's, or the scheme the user pinned in)."""
    assert choice.tier is not None
    spec_path = template.spec_pointer
    pin = _pin_of(template, settings, inventory, warnings)
    if pin is False:
        return None, False, settings.label_key
    if isinstance(pin, pinned.Pin):
        judged = pinned.judge(profile, template, settings, choice, pin, findings=findings, warnings=warnings,
                              inventory=inventory)
        return judged.values, judged.narrow, pin.key
    fitting = choice.usable()
    if not fitting:
        held = [h for h in holds_on(profile, choice.options, settings)
                if h.fits and (choice.present is None or h.value in choice.present)]
        if held:  # the weights fit, the policy's margins do not: pin it there, and say so
            warnings.append(tight_warning(profile, max(held, key=lambda h: h.usable_gib)))
            fitting = [h.value for h in held]
        else:
            violation = (_unavailable(profile, choice, spec_path, inventory)
                         or _does_not_fit(profile, choice, settings, spec_path))
            if violation.code == DOES_NOT_FIT and pinned.assumed_training(profile):
                warnings.append(pinned.assumed_warning(profile, violation))
                return None, False, settings.label_key
            findings.append(_Finding(violation))
            return None, False, settings.label_key
    if is_multi(profile):
        findings.append(_Finding(Violation(
            MISSING_SELECTOR,
            f"{_describe(profile)} uses {counted(profile.gpus_per_pod, 'GPU')} per pod"
            + (f" x {profile.pods} pods" if profile.pods > 1 else "")
            + f" but does not pin {settings.label_key}: add a required nodeAffinity "
            f"{settings.label_key} In [{_shown(choice, fitting)}] (tier {choice.tier.name})",
            spec_path, fix=fix_line(MISSING_SELECTOR, f"add required nodeAffinity {settings.label_key} In ",
                                    _shown_list(choice, fitting))), fixable=True))
    return tuple(fitting), True, settings.label_key


def _pin_of(template: PodTemplate, settings: Settings, inventory: Inventory | None,
            warnings: list[str]) -> pinned.Pin | None | bool:
    """The product pin the spec writes (:func:`webhook.core.pins.read_pin`) as :mod:`webhook.core.pinned`
    judges it: in the policy's label, another scheme the catalog knows, or the products of the nodes
    its own selection lands on (with an inventory). ``None``: no pin. ``False``: a pin that cannot
    be read (an unknown instance type, a custom node-group label without an inventory): warned, and
    nothing is added beside it (the pod has chosen its nodes)."""
    catalog = settings.catalog
    read = pins.read_pin(template.spec, catalog=catalog, label_key=settings.label_key, scheme=settings.label_scheme,
                         inventory=inventory)
    if read.kind == pins.POLICY:
        return pinned.Pin(settings.label_key, settings.label_scheme,
                          {v: catalog.named_products(v, settings.label_scheme) for v in read.values},
                          read.via_node_selector, policy_scheme=True)
    if read.kind == pins.FOREIGN and read.foreign is not None:
        return pinned.Pin(read.foreign.key, read.foreign.scheme, schemes.products_of(read.foreign, catalog),
                          read.foreign.via_node_selector, policy_scheme=False)
    if read.kind == pins.RESOLVED:
        # the nodes its selection admits carry the policy's label: judged as a pin of those values
        return pinned.Pin(settings.label_key, settings.label_scheme,
                          {v: catalog.named_products(v, settings.label_scheme) for v in read.values},
                          read.via_node_selector, policy_scheme=True)
    if read.kind == pins.UNREADABLE:
        mentioned = {settings.label_key, *catalog.schemes.values()} & {read.key, *read.selecting}
        if any(pinned_values(template.spec, key).values is None for key in mentioned):
            # a product label in some term, another term open beside it (ORed terms, an empty term, a
            # node by name): the pin has holes, and the mutating patch closes them in every term
            return None
        warnings.append(pins.warning(read))
        return False
    return None


def _node_name(profile: WorkloadProfile, template: PodTemplate, findings: list[_Finding]) -> None:
    """A multi-GPU pod with ``spec.nodeName`` skips the scheduler: its node, and so its GPU product,
    was chosen by hand and cannot be checked at admission. Deny it rather than trust it."""
    node = template.spec.get("nodeName")
    if not is_multi(profile) or not isinstance(node, str) or not node:
        return
    findings.append(_Finding(Violation(
        MISSING_SELECTOR,
        f"{_describe(profile)} sets spec.nodeName={node[:63]!r}, which bypasses the scheduler and the GPU "
        f"product pin: remove nodeName and let the scheduler place the pod on its tier",
        join(template.spec_pointer, "nodeName"), fix="remove spec.nodeName; the scheduler places the pod on its tier")))


def _container_path(template: PodTemplate, container: str | None) -> str:
    containers = template.spec.get("containers")
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        if isinstance(c, Mapping) and c.get("name") == container:
            return join(template.spec_pointer, "containers", i)
    return join(template.spec_pointer, "containers")


def _parallelism(profile: WorkloadProfile, template: PodTemplate, settings: Settings, member: Membership | None,
                 findings: list[_Finding], warnings: list[str]) -> None:
    if profile.gpus_used is None or profile.gpus_per_pod <= 0:
        return
    available = profile.gpus_per_pod * profile.pods
    resource = settings.gpu_resources[0]
    layout = _layout(profile)
    pods = f" x {profile.pods} pods" if profile.pods > 1 else ""
    group = group_label(template.labels)
    over = profile.gpus_used > available
    size_unknown = over and (profile.pods == 1 and template.group_size == 1
                             and (bool(group or member) or template.found == "generic")
                             and declared_size(template.labels, template.annotations) is None)
    if size_unknown:
        # the group size cannot be read (a group label, or a kind read by shape): the launch may span
        # pods this object makes, so it is not judged as one pod
        name = (f"group {group[1]}" if group else f"{member.source} {member.name}" if member
                else f"this {template.kind}")
        warnings.append(f"{layout} = {profile.gpus_used} GPUs, more than the pod's {profile.gpus_per_pod}: spans pods? "
                        f"The pod count of {name} cannot be read: set annotation gpu-admission.io/group-size "
                        f"so the total can be checked")
        return
    if over:
        per_pod = -(-profile.gpus_used // profile.pods)
        per_process = _per_pod_processes(profile)
        if per_process is not None:
            message = (f"{profile.framework or 'the launcher'} starts {per_process} processes per pod x {profile.pods} "
                       f"pods = {profile.gpus_used} GPUs, but each pod requests {profile.gpus_per_pod} {resource}: "
                       f"set the processes per node (torchrun --nproc-per-node, nprocPerNode) to "
                       f"{profile.gpus_per_pod} or request {per_process} GPUs per pod")
            fix = f"set processes per node to {profile.gpus_per_pod}, or request {per_process} {resource} per pod"
        else:
            message = (f"{profile.framework or 'the launcher'} runs {layout} = {profile.gpus_used} GPUs but the pod "
                       f"requests {profile.gpus_per_pod} {resource}{pods}: request {per_pod} GPUs per pod or lower "
                       f"the parallelism to fit {available}")
            fix = f"request {per_pod} {resource} per pod, or lower {layout} to {available} GPUs"
        findings.append(_Finding(Violation(TP_EXCEEDS, message, _container_path(template, profile.container),
                                           fix=fix)))
    elif profile.gpus_used < available:
        warnings.append(
            f"{profile.gpus_per_pod * profile.pods} GPUs requested but {profile.framework or 'the launcher'} "
            f"uses {layout} = {profile.gpus_used}: set the parallelism to {available} or request fewer GPUs")


def _per_pod_processes(profile: WorkloadProfile) -> int | None:
    """Processes each pod of a training group starts, when the GPUs it uses are whole processes per
    pod (data parallelism, no tensor split): the number a PyTorchJob's ``nprocPerNode`` sets."""
    if profile.role != "training" or (profile.tensor_parallel or 1) > 1 or (profile.pipeline_parallel or 1) > 1:
        return None
    if profile.pods <= 1 or profile.gpus_used is None or profile.gpus_used % profile.pods:
        return None
    return profile.gpus_used // profile.pods


def _layout(profile: WorkloadProfile) -> str:
    if profile.tensor_parallel is None:
        return f"{profile.gpus_used} processes"
    text = f"TP{profile.tensor_parallel} x PP{profile.pipeline_parallel or 1}"
    if profile.data_parallel and profile.data_parallel > 1 and profile.gpus_used != (
            profile.tensor_parallel * (profile.pipeline_parallel or 1)):
        text += f" x DP{profile.data_parallel}"
    return text


def _info_warnings(profile: WorkloadProfile, choice: _TierChoice, warnings: list[str]) -> None:
    if is_multi(profile) and profile.params_b is None and not any(PREFIX in n for n in profile.notes):
        # (inference's own note, when it has one, already says why and how to declare the model)
        warnings.append(
            "cannot tell the model size of this multi-GPU pod, so its memory fit is unchecked: "
            "set annotation gpu-admission.io/model or gpu-admission.io/params")
    for hidden in profile.hidden:
        warnings.append(f"{hidden}: unknown at admission time; set the gpu-admission.io/ annotations "
                        f"to state it")
    warnings.extend(profile.notes)
    if choice.escalated_from and choice.tier is not None:
        warnings.append(f"{_describe(profile)} fits no GPU of tier {choice.escalated_from}; "
                        f"placed on tier {choice.tier.name}")


def effective_mode(requested: str, template: PodTemplate, settings: Settings, warnings: list[str]) -> str:
    """The request's mode, softened to audit by the pod annotation only where settings allow it."""
    wanted = template.annotations.get(MODE)
    if wanted is None or wanted == requested:
        return requested
    if wanted == "audit" and requested == "enforce":
        if settings.allow_audit_annotation:
            return "audit"
        warnings.append(f"annotation {MODE}=audit ignored: the policy does not allow pods to soften "
                        f"enforcement (allowAuditAnnotation: false)")
    elif wanted not in MODES:
        warnings.append(f"annotation {MODE}={wanted[:20]!r} ignored: use \"audit\"")
    return requested


def decide(profile: WorkloadProfile, template: PodTemplate, settings: Settings, *, mode: str,
           mutate: bool, problems: Sequence[Violation] = (), inventory: Inventory | None = None) -> Decision:
    """Judge one pod template. ``mutate``: judge it as it will be after the mutating patch;
    ``inventory``: the cluster's GPU nodes, when known (offer only what exists, avoid mixed nodes).

    Audit mutates nothing, whichever way it is reached (the policy's ``mode: audit``, an audit
    namespace's entries, the pod's audit annotation, ``check --mode audit``): audit is the mode that
    changes nothing and only says what enforcement would do, so it is also the kill switch that undoes
    pinning. The template is therefore judged as it is written, and what the patch would have fixed
    is a warning."""
    warnings: list[str] = []
    findings = [_Finding(p) for p in problems]
    mode = effective_mode(mode, template, settings, warnings)
    mutate = mutate and mode != "audit"
    if profile.gpus_per_pod <= 0:
        return _finish(mode, None, None, False, findings, warnings, (), mutate, misplaced=settings.misplaced)
    choice = _absent_tier_warns(_choose_tier(profile, template, settings, findings, inventory), profile, settings,
                                inventory, warnings)
    values: tuple[str, ...] | None = None
    patch_needed = False
    key = settings.label_key
    vendor = _other_vendor(template.spec, settings) if choice.tier is not None else None
    if vendor is not None:
        # the tier's products are pinned by a label this vendor's nodes do not carry: a pin would make
        # the pod unschedulable, so it is counted (parallelism is checked) but not placed
        warnings.append(f"{vendor} GPUs are counted but not placed: the policy pins {settings.label_key}, which "
                        f"{vendor} nodes do not carry; to judge them, use a policy with productLabel "
                        f"{settings.catalog.schemes.get('amd', 'amd.com/gpu.product-name')} and {vendor} products "
                        f"in its tiers")
        choice = _TierChoice(None)
    if choice.tier is not None:
        values, patch_needed, key = _placement(profile, template, settings, choice, findings, warnings, inventory)
        _node_name(profile, template, findings)
    member = membership(template.labels, template.annotations)
    _parallelism(profile, template, settings, member, findings, warnings)
    if choice.tier is not None and choice.tier.multi_gpu and _has_gpu_links(choice.tier, settings, profile):
        _numa(profile, template, settings, findings, warnings)
    _info_warnings(profile, choice, warnings)
    placement = _placement_of(profile, settings, key, values, choice) if values else None
    if placement is not None and inventory is not None and is_multi(profile) and key == settings.label_key:
        placement, excluded_now = _avoid_untrusted(placement, template, settings, inventory, warnings)
        patch_needed = patch_needed or excluded_now
    group = _group_affinity(profile, template, settings, member, placement, findings)
    if placement is not None and inventory is not None and profile.pods > 1 and key == settings.label_key:
        _group_fit(profile, template, settings, placement, inventory, findings, warnings)
    return _finish(mode, choice.tier.name if choice.tier else None, placement, patch_needed, findings,
                   warnings, choice.fits, mutate and settings.mutate, group, misplaced=settings.misplaced)


_VENDOR_RESOURCES: Mapping[str, tuple[str, str]] = {"amd.com/": ("AMD", "amd")}
"""GPU resource prefix -> (vendor, catalog label scheme of that vendor's nodes)."""


def _other_vendor(spec: Mapping[str, Any], settings: Settings) -> str | None:
    """The vendor of the pod's GPUs when all of them are counted by a resource of another vendor than
    the policy's label scheme labels (``amd.com/gpu`` under the GFD scheme), else ``None``. Counted
    by :func:`webhook.core.resources.pod_gpus`, as every GPU of the pod is."""
    for prefix, (vendor, scheme) in _VENDOR_RESOURCES.items():
        if settings.label_scheme == scheme:
            continue
        others = tuple(r for r in settings.gpu_resources if not r.startswith(prefix))
        if len(others) < len(settings.gpu_resources) and pod_gpus(spec, "", others).gpus == 0:
            return vendor
    return None


def _placement_of(profile: WorkloadProfile, settings: Settings, key: str, values: tuple[str, ...],
                  choice: _TierChoice) -> Placement:
    """The placement with its reason and the products' short names (one per product)."""
    scheme = next((name for name, k in settings.catalog.schemes.items() if k == key), settings.label_scheme)
    products = tuple(dict.fromkeys(p for v in values for p in settings.catalog.named_products(v, scheme)))
    pods = f" x {profile.pods} pods" if profile.pods > 1 else ""
    tier = choice.tier.name if choice.tier else "none"
    reason = f"tier {tier}: {_describe(profile)}, {counted(profile.gpus_per_pod, 'GPU')} per pod{pods}"
    return Placement(key, values, reason=reason, products=products)


def _has_gpu_links(tier: Tier, settings: Settings, profile: WorkloadProfile) -> bool:
    """Does the tier give this pod GPUs joined by NVLink (or Infinity Fabric)? The single-NUMA binding
    is the NVLink tier's promise; a 7B model at TP2 on two PCIe cards is not held to it."""
    return tiering.has_gpu_links(tier.products, settings.catalog, profile.gpus_per_pod)


SOCKET_GPUS = 4
"""GPUs under one CPU socket of an 8-GPU HGX/DGX board (``nvidia-smi topo -m`` on a DGX H100: GPUs
0-3 on NUMA node 0, 4-7 on node 1; AMD hosts in NPS4 split them finer). A pod of more GPUs spans
both sockets whatever its QoS: the kubelet cannot put it on one NUMA node (Topology Manager
``single-numa-node`` refuses it), and binding each process to its GPU's node is the launcher's job
(``torchrun --numa-binding``)."""


def numa_pays(profile: WorkloadProfile) -> bool:
    """Whether the kubelet's single-NUMA alignment pays for this pod: training, or a group of several
    pods, of at most :data:`SOCKET_GPUS` GPUs per pod (more cannot sit on one NUMA node).

    The host is on these workloads' data path at every step. Training processes feed each GPU host
    batches every step (PyTorch's ``torchrun --numa-binding`` docs: "typically 1-10% overall", NVIDIA's
    ``gpu_affinity``: it "usually improves and stabilizes" multi-GPU training). A group's inter-node
    collectives go through the host's PCIe and NIC and NCCL's CPU proxy threads, which run where their
    CPUs are. A single serving pod on NVLink is not held to it: its weights are copied once, its
    tensor-parallel traffic stays GPU to GPU, and the engines that care set their own affinity
    (TensorRT-LLM's ``TLLM_NUMA_AWARE_WORKER_AFFINITY``). Warning every such pod is what made
    ``numa-unaligned`` most of the warnings on ordinary manifests."""
    return (profile.role == "training" or profile.pods > 1) and profile.gpus_per_pod <= SOCKET_GPUS


def _numa(profile: WorkloadProfile, template: PodTemplate, settings: Settings, findings: list[_Finding],
          warnings: list[str]) -> None:
    """The design's single-NUMA binding: a multi-GPU pod on the NVLink tier, of a workload where it
    pays (:func:`numa_pays`), that the kubelet cannot give CPUs on its GPUs' NUMA node
    (:mod:`webhook.core.numa`); policy ``numa`` says warn, deny or off."""
    if settings.numa == "off" or not numa_pays(profile):
        return
    text = numa.numa_warning(template.spec, profile.gpus_per_pod, settings.gpu_resources)
    if text is None:
        return
    if settings.numa == "deny":
        findings.append(_Finding(Violation(NUMA_UNALIGNED, text, template.spec_pointer,
                                           fix="set cpu and memory limits = requests in every container, whole CPUs")))
    else:
        warnings.append(f"{NUMA_UNALIGNED}: {text}")


def _avoid_untrusted(placement: Placement, template: PodTemplate, settings: Settings, inventory: Inventory,
                     warnings: list[str]) -> tuple[Placement, bool]:
    """Mixed or mislabeled nodes carrying one of the placement's values: report them and, unless the
    policy says only to warn, keep the pod off them by hostname. Returns the placement and whether
    the pod still needs that exclusion patched in."""
    bad = inventory.untrusted(placement.values)
    if not bad:
        return placement, False
    names = tuple(n.name for n in bad)
    reasons = "; ".join(f"{n.name}: {n.anomalies[0]}" for n in bad[:3])
    if settings.mixed_nodes == "warn":
        warnings.append(f"multi-GPU pod may land on untrusted GPU nodes ({reasons})")
        return placement, False
    warnings.append(f"kept off untrusted GPU nodes ({reasons})")
    placement = replace(placement, exclude_nodes=names)
    return placement, not excludes_everywhere(template.spec, frozenset(names))


def _group_affinity(profile: WorkloadProfile, template: PodTemplate, settings: Settings, member: Membership | None,
                    placement: Placement | None, findings: list[_Finding]) -> GroupAffinity | None:
    """The label and pod affinity a GPU member of a multi-pod group still needs (a fixable finding).

    Members are found by their controller's labels (:func:`webhook.core.groups.membership`); only
    GPU pods get here (``decide`` returns before for a pod without GPUs), so the group label and the
    affinity that selects it are on GPU members only. A controller whose pods are one group only
    when the launch spans pods (KServe replicas, an Indexed Job) is grouped only then. The value
    hashes the controller's group identity with the user's own product pin, so members pinned to
    different products are never forced together."""
    spans_pods = profile.pods > 1 or (profile.gpus_used or 0) > profile.gpus_per_pod
    if member is None or placement is None or (not member.always and not spans_pods):
        return None
    # a value already there is kept: ours from an earlier invocation (the pin our own patch added
    # must not change it) or one the user chose
    value = template.labels.get(GPU_GROUP) or group_value(member, pinned_values(template.spec,
                                                                                    placement.label_key).values)
    size = profile.pods if profile.pods > 1 and declared_size(template.labels, template.annotations) is None else None
    # the topology key is the label the pin is written in: on a cluster labelled by GKE only, a pod
    # affinity over nvidia.com/gpu.product would find no node with that key and never schedule
    group = GroupAffinity(GPU_GROUP, value, placement.label_key, size)
    if has_group_term(template.spec, group) and template.labels.get(GPU_GROUP) == group.label_value \
            and size is None:
        return None
    findings.append(_Finding(Violation(
        MISSING_SELECTOR,
        f"{_describe(profile)} is a GPU member of {member.source} {member.name} whose pods may land on "
        f"different GPU products: label it {GPU_GROUP}={group.label_value} and add a required podAffinity "
        f"on that label with topologyKey {placement.label_key}",
        join(template.spec_pointer, "affinity"),
        fix=f"add required podAffinity on label {GPU_GROUP} (topologyKey {placement.label_key})"), fixable=True))
    return group


def _group_fit(profile: WorkloadProfile, template: PodTemplate, settings: Settings, placement: Placement,
               inventory: Inventory, findings: list[_Finding], warnings: list[str]) -> None:
    """A group kept on one product needs that product to hold all of it: ``profile.pods`` pods of
    ``gpus_per_pod`` GPUs each. With the nodes known, say so when no product of the placement can
    (by allocatable GPUs), with the numbers; ``inventory.groupFit`` says warn or deny."""
    slots = {v: inventory.member_slots(v, profile.gpus_per_pod) for v in placement.values}
    if any(s is None or s >= profile.pods for s in slots.values()):
        return
    have = ", ".join(f"{v}: {s}" for v, s in sorted(slots.items(), key=lambda kv: (-(kv[1] or 0), kv[0]))[:6])
    message = (f"{_describe(profile)} is a group of {profile.pods} pods x {counted(profile.gpus_per_pod, 'GPU')} that must "
               f"share one GPU product, but no product it may use has room for {profile.pods} such pods "
               f"(pods of {counted(profile.gpus_per_pod, 'GPU')} the nodes of each can hold: {have}): add nodes of one "
               f"product, or request fewer pods or GPUs per pod")
    if settings.group_fit == "deny":
        findings.append(_Finding(Violation(GROUP_DOES_NOT_FIT, message, template.spec_pointer,
                                           fix=f"add nodes of one product for {profile.pods} pods x "
                                               f"{profile.gpus_per_pod} GPUs, or request fewer")))
    else:
        warnings.append(f"{GROUP_DOES_NOT_FIT} (admitted, inventory.groupFit: warn): {message}")


def _finish(mode: str, tier: str | None, placement: Placement | None, patch_needed: bool,
            findings: Sequence[_Finding], warnings: list[str], fits: tuple[Fit, ...], mutate: bool,
            group: GroupAffinity | None = None, *, misplaced: str = "warn") -> Decision:
    """Apply the mode: fixable findings vanish under mutation; misplacements (kind ``misplaced``, not
    the trap) are admitted with their warning line under ``misplaced: warn``; audit turns violations
    into warnings.

    Without mutation a pod that needed the patch is not pinned, so where it may land is unknown
    (``placement=None``)."""
    kept: list[Violation] = []
    warned: list[Violation] = []
    for f in findings:
        if mutate and f.fixable:
            continue
        v = f.violation
        (warned if misplaced == "warn" and v.kind == MISPLACED and not v.trap else kept).append(v)
    violations, admitted = tuple(kept), tuple(warned)
    if admitted:
        warnings = [v.short() for v in admitted] + warnings
    audit = mode == "audit"
    if audit:
        warnings = [v.short() for v in violations] + warnings
    if patch_needed and not mutate:
        placement = None
    return Decision(
        allowed=audit or not violations,
        mode=mode,
        tier=tier,
        placement=placement,
        violations=violations,
        misplaced=admitted,
        warnings=tuple(dict.fromkeys(warnings)),
        fits=fits,
        patch_needed=patch_needed and placement is not None,
        group=group if mutate else None,
    )
