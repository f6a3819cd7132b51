"""The rules: each one reads a :class:`Case` and returns an :class:`Outcome`.

A rule never writes into another rule's state: it returns its findings (violations, marked fixable
when the mutating patch resolves them), its warnings, and, for the few rules that choose something
later rules read (the mode, the tier, where the pod may land, its group affinity), what it chose in
``decided``. :data:`webhook.core.policy.RULES` lists them in order and :func:`webhook.core.policy.decide`
composes them; adding a rule is one function here and one row there.

Codes are stable (scripts and dashboards match on them; they are defined in
:mod:`webhook.core.placing`):

- ``missing-homogeneous-selector``: multi-GPU pod whose node selection does not pin the GPU product
  to its tier (fixable: the mutating patch pins it);
- ``tier-mismatch``: the pod pins products outside its tier (never silently overridden);
- ``tp-exceeds-gpus``: the declared parallelism needs more GPUs than the pod (group) requests;
- ``model-does-not-fit``: no product of the tier holds the model at that parallelism;
- ``tier-not-in-cluster``: the GPU inventory shows no node that offers the tier's fitting products
  with enough GPUs per node (only when an inventory is known);
- ``group-does-not-fit``: no product of the placement has room for the whole group (``inventory.groupFit``);
- ``numa-unaligned``: the kubelet cannot give the pod CPUs on its GPUs' NUMA node (``numa: deny``);
- ``invalid-gpu-request`` / ``invalid-annotation``: malformed input, reported where it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any, NamedTuple

from webhook.core import numa as numa_binding, pinned, pins, schemes, tiering
from webhook.core.domain import MISPLACED, GroupAffinity, Placement, Violation, WorkloadProfile, counted
from webhook.core.fixes import FIX_BUDGET, fix_line
from webhook.core.groups import GPU_GROUP, Membership, declared_size, group_label, group_value
from webhook.core.inference import MODE, PREFIX, TIER
from webhook.core.inventory import Inventory
from webhook.core.patches import has_group_term
from webhook.core.placing import (
    DOES_NOT_FIT,
    GROUP_DOES_NOT_FIT,
    INVALID_ANNOTATION,
    MISSING_SELECTOR,
    NOT_IN_CLUSTER,
    NUMA_UNALIGNED,
    TIER_MISMATCH,
    TP_EXCEEDS,
    Finding,
    TierChoice,
    describe,
    does_not_fit,
    evaluate,
    holds_on,
    shown,
    shown_list,
    tight_warning,
    unavailable,
)
from webhook.core.resources import pod_gpus, requested_names
from webhook.core.selection import excludes_everywhere, pinned_values
from webhook.core.settings import MODES, Settings, Tier
from webhook.core.tiering import is_multi
from webhook.core.workloads import PodTemplate, join


class Case(NamedTuple):
    """What a rule reads: the workload, its template, the policy and the cluster's GPU nodes (when
    known), and what the rules before it chose.

    Immutable like the core's dataclasses, but a named tuple: a rule's choices are applied with
    ``_replace``, which costs a microsecond where ``dataclasses.replace`` cost five, and
    :func:`webhook.core.policy.decide` makes two to five of them for every template it judges."""

    profile: WorkloadProfile
    template: PodTemplate
    settings: Settings
    inventory: Inventory | None
    member: Membership | None
    """The multi-pod group the template's labels put it in (:func:`webhook.core.groups.membership`)."""
    mode: str
    """``enforce`` or ``audit``, after the pod's own audit annotation (rule ``mode``)."""
    key: str
    """The node label the placement's values are values of: the policy's, or the scheme the user
    pinned in (rule ``placement``)."""
    choice: TierChoice = TierChoice(None)
    """The policy tier of the workload (rule ``tier``); ``TierChoice(None)``: not placed."""
    placement: Placement | None = None
    """Where the pod may land (rules ``placement``, ``untrusted-nodes``)."""
    patch_needed: bool = False
    """Whether the pod's node selection must be patched to get there."""
    group: GroupAffinity | None = None
    """The pod affinity the pod still needs to stay with its group (rule ``group``)."""


NO_DECISION: Mapping[str, Any] = MappingProxyType({})


class Outcome(NamedTuple):
    """What one rule found, and what it chose for the rules after it (fields of :class:`Case`).
    A named tuple for the reason :class:`Case` is one: every rule makes one for every template."""

    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    decided: Mapping[str, Any] = NO_DECISION


NOTHING = Outcome()


def _found(violation: Violation, *, fixable: bool = False) -> Outcome:
    return Outcome(findings=(Finding(violation, fixable=fixable),))


def _warned(*lines: str) -> Outcome:
    return Outcome(warnings=lines)


# -- mode ------------------------------------------------------------------------------------------

def mode(case: Case) -> Outcome:
    """The request's mode, softened to audit by the pod's ``gpu-admission.io/mode`` annotation only
    where the policy allows it (``allowAuditAnnotation``); an annotation that is ignored says so."""
    requested = case.mode
    wanted = case.template.annotations.get(MODE)
    if wanted is None or wanted == requested:
        return NOTHING
    if wanted == "audit" and requested == "enforce":
        if case.settings.allow_audit_annotation:
            return Outcome(decided={"mode": "audit"})
        return _warned(f"annotation {MODE}=audit ignored: the policy does not allow pods to soften "
                       f"enforcement (allowAuditAnnotation: false)")
    if wanted not in MODES:
        return _warned(f"annotation {MODE}={wanted[:20]!r} ignored: use \"audit\"")
    return NOTHING


# -- tier ------------------------------------------------------------------------------------------

def tier(case: Case) -> Outcome:
    """The tier the workload belongs on: its ``gpu-admission.io/tier`` annotation, else the policy's
    rules (multi-GPU, large model, small model; escalated when the small tier cannot hold it).
    Under ``inventory.absentTier: warn`` a tier nothing in the cluster offers is placed as if no
    inventory were known; GPUs of a vendor the policy's label does not cover are counted, not placed."""
    profile, settings = case.profile, case.settings
    chosen = _choose_tier(case)
    choice = chosen.decided.get("choice", TierChoice(None))
    findings, warnings = chosen.findings, list(chosen.warnings)
    absent = _absent_tier(choice, profile, settings, case.inventory)
    if absent is not None:
        warnings.append(absent)
        choice = replace(choice, present=None)
    vendor = _other_vendor(case.template.spec, settings) if choice.tier is not None else None
    if vendor is not None:
        # the tier's products are pinned by a label this vendor's nodes do not carry: a pin would make
        # the pod unschedulable, so it is counted (parallelism is checked) but not placed
        warnings.append(f"{vendor} GPUs are counted but not placed: the policy pins {settings.label_key}, which "
                        f"{vendor} nodes do not carry; to judge them, use a policy with productLabel "
                        f"{settings.catalog.schemes.get('amd', 'amd.com/gpu.product-name')} and {vendor} products "
                        f"in its tiers")
        choice = TierChoice(None)
    return Outcome(findings, tuple(warnings), {"choice": choice})


def _choose_tier(case: Case) -> Outcome:
    profile, template, settings, inventory = case.profile, case.template, case.settings, case.inventory
    multi = is_multi(profile)
    if profile.tier_override is not None:
        annotation = join(template.pointer, "metadata", "annotations", TIER)
        wanted = settings.tier(profile.tier_override)
        if wanted is None:
            names = ", ".join(t.name for t in settings.tiers)
            return Outcome(findings=(Finding(Violation(
                INVALID_ANNOTATION,
                f"annotation {TIER}={profile.tier_override[:40]!r} names no tier: use one of {names}",
                annotation, fix=f"set annotation {TIER} to one of {names}"[:FIX_BUDGET - len(INVALID_ANNOTATION) - 2])),),
                decided={"choice": _policy_tier(case)})
        if multi and not wanted.multi_gpu:
            target, _ = tiering.multi_gpu_tier(profile, settings)
            return Outcome(findings=(Finding(Violation(
                TIER_MISMATCH,
                f"{describe(profile)} uses {counted(profile.gpus_per_pod, 'GPU')} x {counted(profile.pods, 'pod')}, "
                f"but tier {wanted.name} is for single-GPU work (multiGpu: false): remove annotation {TIER} or set "
                f"it to {target}",
                annotation, fix=f"remove annotation {TIER} or set it to {target}", kind=MISPLACED)),),
                decided={"choice": TierChoice(None)})
        chosen = evaluate(wanted, profile, settings, inventory)
        trap = pinned.tier_annotation_trap(profile, settings, chosen, annotation=TIER, inventory=inventory,
                                           path=annotation)
        return Outcome(findings=(Finding(trap),) if trap is not None else (), decided={"choice": chosen})
    return Outcome(decided={"choice": _policy_tier(case)})


def _policy_tier(case: Case) -> TierChoice:
    """The tier the policy's rules give the workload (an invalid tier annotation falls back to it)."""
    profile, settings, inventory = case.profile, case.settings, case.inventory
    if is_multi(profile):
        name, _ = tiering.multi_gpu_tier(profile, settings)
    elif profile.params_b is not None:
        name = settings.large_model_tier if profile.params_b > settings.large_model_params_b else settings.small_model_tier
    elif profile.kind in ("embedding", "diffusion"):
        # a one-GPU embedding or image server whose checkpoint is not readable (TEI, ComfyUI): these
        # are models of a few billion parameters at most, the small-model tier's work
        name = settings.small_model_tier
    else:
        return TierChoice(None)  # a single-GPU pod whose model is unknown is not constrained
    chosen_tier = settings.tier(name)
    assert chosen_tier is not None  # settings validation guarantees rule tiers exist
    choice = evaluate(chosen_tier, profile, settings, inventory)
    if (name == settings.small_model_tier and settings.escalate and name != settings.large_model_tier
            and not choice.usable()):
        bigger = settings.tier(settings.large_model_tier)
        assert bigger is not None
        escalated = evaluate(bigger, profile, settings, inventory)
        if escalated.usable():
            return TierChoice(escalated.tier, escalated.options, escalated.fits, escalated_from=name,
                              present=escalated.present)
    return choice


def _absent_tier(choice: TierChoice, profile: WorkloadProfile, settings: Settings,
                 inventory: Inventory | None) -> str | None:
    """``inventory.absentTier: warn``: the warning for a tier that would hold the model but that
    nothing in the cluster offers (no node, no NodePool, no scalable product); the tier is then
    placed as if no inventory were known. The Pending pod is what makes an autoscaler add the node,
    and a denial would block that scale-up."""
    if (settings.absent_tier != "warn" or inventory is None or choice.tier is None or choice.present is None
            or choice.usable() or not any(f.fits for f in choice.fits)):
        return None
    wanted = [f.value for f in choice.fits if f.fits]
    return (f"{NOT_IN_CLUSTER} (admitted, inventory.absentTier: warn): no node of the cluster offers "
            f"[{shown(choice, wanted)}] (tier {choice.tier.name}) with {counted(profile.gpus_per_pod, 'GPU')} "
            f"yet; the pod stays Pending until one joins. The cluster has: {inventory.describe()}")


_VENDOR_RESOURCES: Mapping[str, tuple[str, str]] = {"amd.com/": ("AMD", "amd")}
"""GPU resource prefix -> (vendor, catalog label scheme of that vendor's nodes)."""


def _other_vendor(spec: Mapping[str, Any], settings: Settings) -> str | None:
    """The vendor of the pod's GPUs when all of them are counted by a resource of another vendor than
    the policy's label scheme labels (``amd.com/gpu`` under the GFD scheme), else ``None``. Counted
    by :func:`webhook.core.resources.pod_gpus`, as every GPU of the pod is."""
    for prefix, (vendor, scheme) in _VENDOR_RESOURCES.items():
        if settings.label_scheme == scheme or not any(n.startswith(prefix) for n in requested_names(spec)):
            continue  # most pods name no resource of that vendor: no count needed
        others = tuple(r for r in settings.gpu_resources if not r.startswith(prefix))
        if len(others) < len(settings.gpu_resources) and pod_gpus(spec, "", others).gpus == 0:
            return vendor
    return None


# -- placement -------------------------------------------------------------------------------------

def placement(case: Case) -> Outcome:
    """Where the pod may land on its tier: a pin the user wrote is judged (:mod:`webhook.core.pinned`);
    otherwise the tier's fitting values, which a multi-GPU pod must pin (a fixable finding). Decides
    the placement, whether the patch is needed for it, and the label key its values are values of."""
    profile, template, settings, choice = case.profile, case.template, case.settings, case.choice
    assert choice.tier is not None
    spec_path = template.spec_pointer
    unplaced = {"placement": None, "patch_needed": False, "key": settings.label_key}
    pin, pin_warning = _pin_of(template, settings, case.inventory)
    said = (pin_warning,) if pin_warning else ()
    if pin is False:
        return Outcome(warnings=said, decided=unplaced)
    if isinstance(pin, pinned.Pin):
        judged = pinned.judge(profile, template, settings, choice, pin, inventory=case.inventory)
        return Outcome(judged.findings, said + judged.warnings,
                       _placed(profile, settings, pin.key, judged.values, choice, judged.narrow))
    fitting = choice.usable()
    warnings: tuple[str, ...] = ()
    if not fitting:
        held = [h for h in holds_on(profile, choice.options, settings)
                if h.fits and (choice.present is None or h.value in choice.present)]
        if not held:
            violation = (unavailable(profile, choice, spec_path, case.inventory)
                         or does_not_fit(profile, choice, settings, spec_path))
            if violation.code == DOES_NOT_FIT and pinned.assumed_training(profile):
                return Outcome(warnings=(pinned.assumed_warning(profile, violation),), decided=unplaced)
            return Outcome(findings=(Finding(violation),), decided=unplaced)
        # the weights fit, the policy's margins do not: pin it there, and say so
        warnings = (tight_warning(profile, max(held, key=lambda h: h.usable_gib)),)
        fitting = [h.value for h in held]
    decided = _placed(profile, settings, settings.label_key, tuple(fitting), choice, True)
    if not is_multi(profile):
        return Outcome(warnings=warnings, decided=decided)
    return Outcome((Finding(Violation(
        MISSING_SELECTOR,
        f"{describe(profile)} uses {counted(profile.gpus_per_pod, 'GPU')} per pod"
        + (f" x {profile.pods} pods" if profile.pods > 1 else "")
        + f" but does not pin {settings.label_key}: add a required nodeAffinity "
        f"{settings.label_key} In [{shown(choice, fitting)}] (tier {choice.tier.name})",
        spec_path, fix=fix_line(MISSING_SELECTOR, f"add required nodeAffinity {settings.label_key} In ",
                                shown_list(choice, fitting))), fixable=True),), warnings, decided)


def _placed(profile: WorkloadProfile, settings: Settings, key: str, values: tuple[str, ...] | None,
            choice: TierChoice, patch: bool) -> dict[str, Any]:
    """The placement rule's decision: the placement with its reason and the products' short names
    (one per product), ``None`` when no value is left."""
    if not values:
        return {"placement": None, "patch_needed": patch, "key": key}
    scheme = next((name for name, k in settings.catalog.schemes.items() if k == key), settings.label_scheme)
    products = tuple(dict.fromkeys(p for v in values for p in settings.catalog.named_products(v, scheme)))
    pods = f" x {profile.pods} pods" if profile.pods > 1 else ""
    name = choice.tier.name if choice.tier else "none"
    reason = f"tier {name}: {describe(profile)}, {counted(profile.gpus_per_pod, 'GPU')} per pod{pods}"
    return {"placement": Placement(key, values, reason=reason, products=products), "patch_needed": patch, "key": key}


def _pin_of(template: PodTemplate, settings: Settings,
            inventory: Inventory | None) -> tuple[pinned.Pin | None | bool, str | None]:
    """The product pin the spec writes (:func:`webhook.core.pins.read_pin`) as :mod:`webhook.core.pinned`
    judges it: in the policy's label, another scheme the catalog knows, or the products of the nodes
    its own selection lands on (with an inventory). ``None``: no pin. ``False``: a pin that cannot
    be read (an unknown instance type, a custom node-group label without an inventory): warned (the
    second value), and nothing is added beside it (the pod has chosen its nodes)."""
    catalog = settings.catalog
    read = pins.read_pin(template.spec, catalog=catalog, label_key=settings.label_key, scheme=settings.label_scheme,
                         inventory=inventory)
    if read.kind in (pins.POLICY, pins.RESOLVED):
        # RESOLVED: the nodes its selection admits carry the policy's label, judged as a pin of those values
        return pinned.Pin(settings.label_key, settings.label_scheme,
                          {v: catalog.named_products(v, settings.label_scheme) for v in read.values},
                          read.via_node_selector, policy_scheme=True), None
    if read.kind == pins.FOREIGN and read.foreign is not None:
        return pinned.Pin(read.foreign.key, read.foreign.scheme, schemes.products_of(read.foreign, catalog),
                          read.foreign.via_node_selector, policy_scheme=False), None
    if read.kind == pins.UNREADABLE:
        mentioned = {settings.label_key, *catalog.schemes.values()} & {read.key, *read.selecting}
        if any(pinned_values(template.spec, key).values is None for key in mentioned):
            # a product label in some term, another term open beside it (ORed terms, an empty term, a
            # node by name): the pin has holes, and the mutating patch closes them in every term
            return None, None
        return False, pins.warning(read)
    return None, None


def node_name(case: Case) -> Outcome:
    """A multi-GPU pod with ``spec.nodeName`` skips the scheduler: its node, and so its GPU product,
    was chosen by hand and cannot be checked at admission. Deny it rather than trust it."""
    profile, template = case.profile, case.template
    node = template.spec.get("nodeName")
    if not is_multi(profile) or not isinstance(node, str) or not node:
        return NOTHING
    return _found(Violation(
        MISSING_SELECTOR,
        f"{describe(profile)} sets spec.nodeName={node[:63]!r}, which bypasses the scheduler and the GPU "
        f"product pin: remove nodeName and let the scheduler place the pod on its tier",
        join(template.spec_pointer, "nodeName"), fix="remove spec.nodeName; the scheduler places the pod on its tier"))


# -- parallelism -----------------------------------------------------------------------------------

def parallelism(case: Case) -> Outcome:
    """The GPUs the launch uses (TP x PP x DP, or processes) against the GPUs the pod (group)
    requests: more is a violation, fewer a warning, and a launch that may span pods of a group whose
    size cannot be read is not judged as one pod (a warning that says how to state the size)."""
    profile, template, settings, member = case.profile, case.template, case.settings, case.member
    if profile.gpus_used is None or profile.gpus_per_pod <= 0:
        return NOTHING
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
        return _warned(f"{layout} = {profile.gpus_used} GPUs, more than the pod's {profile.gpus_per_pod}: spans "
                       f"pods? The pod count of {name} cannot be read: set annotation gpu-admission.io/group-size "
                       f"so the total can be checked")
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
        return _found(Violation(TP_EXCEEDS, message, _container_path(template, profile.container), fix=fix))
    if profile.gpus_used < available:
        return _warned(
            f"{profile.gpus_per_pod * profile.pods} GPUs requested but {profile.framework or 'the launcher'} "
            f"uses {layout} = {profile.gpus_used}: set the parallelism to {available} or request fewer GPUs")
    return NOTHING


def _container_path(template: PodTemplate, container: str | None) -> str:
    containers = template.spec.get("containers")
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        if isinstance(c, Mapping) and c.get("name") == container:
            return join(template.spec_pointer, "containers", i)
    return join(template.spec_pointer, "containers")


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


# -- NUMA ------------------------------------------------------------------------------------------

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


def on_gpu_links(case: Case) -> bool:
    """Does the tier give this pod GPUs joined by NVLink (or Infinity Fabric)? The single-NUMA binding
    is the NVLink tier's promise; a 7B model at TP2 on two PCIe cards is not held to it."""
    chosen: Tier | None = case.choice.tier
    return (chosen is not None and chosen.multi_gpu
            and tiering.has_gpu_links(chosen.products, case.settings.catalog, case.profile.gpus_per_pod))


def numa(case: Case) -> Outcome:
    """The design's single-NUMA binding: a multi-GPU pod on the NVLink tier, of a workload where it
    pays (:func:`numa_pays`), that the kubelet cannot give CPUs on its GPUs' NUMA node
    (:mod:`webhook.core.numa`); policy ``numa`` says warn, deny or off."""
    settings = case.settings
    if settings.numa == "off" or not numa_pays(case.profile):
        return NOTHING
    text = numa_binding.numa_warning(case.template.spec, case.profile.gpus_per_pod, settings.gpu_resources)
    if text is None:
        return NOTHING
    if settings.numa == "deny":
        return _found(Violation(NUMA_UNALIGNED, text, case.template.spec_pointer,
                                fix="set cpu and memory limits = requests in every container, whole CPUs"))
    return _warned(f"{NUMA_UNALIGNED}: {text}")


# -- what the judgement rests on -------------------------------------------------------------------

def notes(case: Case) -> Outcome:
    """What the verdict could not check, and why: an unknown model size of a multi-GPU pod, values
    known only at run time, inference's own notes, a tier escalated to."""
    profile, choice = case.profile, case.choice
    warnings = []
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
        warnings.append(f"{describe(profile)} fits no GPU of tier {choice.escalated_from}; "
                        f"placed on tier {choice.tier.name}")
    return Outcome(warnings=tuple(warnings))


# -- the nodes -------------------------------------------------------------------------------------

def pinned_by_policy_label(case: Case) -> bool:
    """A placement in the policy's own label, so the inventory (indexed by it) can say where it lands."""
    return case.placement is not None and case.inventory is not None and case.key == case.settings.label_key


def untrusted_nodes(case: Case) -> Outcome:
    """Mixed or mislabeled nodes carrying one of the placement's values: report them and, unless the
    policy says only to warn, keep the pod off them by hostname (the placement and whether the pod
    still needs that exclusion patched in)."""
    assert case.placement is not None and case.inventory is not None
    bad = case.inventory.untrusted(case.placement.values)
    if not bad:
        return NOTHING
    names = tuple(n.name for n in bad)
    reasons = "; ".join(f"{n.name}: {n.anomalies[0]}" for n in bad[:3])
    if case.settings.mixed_nodes == "warn":
        return _warned(f"multi-GPU pod may land on untrusted GPU nodes ({reasons})")
    excluded = not excludes_everywhere(case.template.spec, frozenset(names))
    return Outcome(warnings=(f"kept off untrusted GPU nodes ({reasons})",),
                   decided={"placement": replace(case.placement, exclude_nodes=names),
                            "patch_needed": case.patch_needed or excluded})


# -- the group -------------------------------------------------------------------------------------

def group(case: Case) -> Outcome:
    """The label and pod affinity a GPU member of a multi-pod group still needs (a fixable finding).

    Members are found by their controller's labels (:func:`webhook.core.groups.membership`); only
    GPU pods get here, so the group label and the affinity that selects it are on GPU members only.
    A controller whose pods are one group only when the launch spans pods (KServe replicas, an
    Indexed Job) is grouped only then. The value hashes the controller's group identity with the
    user's own product pin, so members pinned to different products are never forced together."""
    profile, template, member, placed = case.profile, case.template, case.member, case.placement
    spans_pods = profile.pods > 1 or (profile.gpus_used or 0) > profile.gpus_per_pod
    if member is None or placed is None or (not member.always and not spans_pods):
        return NOTHING
    # a value already there is kept: ours from an earlier invocation (the pin our own patch added
    # must not change it) or one the user chose
    value = template.labels.get(GPU_GROUP) or group_value(member, pinned_values(template.spec,
                                                                                    placed.label_key).values)
    size = profile.pods if profile.pods > 1 and declared_size(template.labels, template.annotations) is None else None
    # the topology key is the label the pin is written in: on a cluster labelled by GKE only, a pod
    # affinity over nvidia.com/gpu.product would find no node with that key and never schedule
    affinity = GroupAffinity(GPU_GROUP, value, placed.label_key, size)
    if has_group_term(template.spec, affinity) and template.labels.get(GPU_GROUP) == affinity.label_value \
            and size is None:
        return NOTHING
    return Outcome(findings=(Finding(Violation(
        MISSING_SELECTOR,
        f"{describe(profile)} is a GPU member of {member.source} {member.name} whose pods may land on "
        f"different GPU products: label it {GPU_GROUP}={affinity.label_value} and add a required podAffinity "
        f"on that label with topologyKey {placed.label_key}",
        join(template.spec_pointer, "affinity"),
        fix=f"add required podAffinity on label {GPU_GROUP} (topologyKey {placed.label_key})"), fixable=True),),
        decided={"group": affinity})


def group_fit(case: Case) -> Outcome:
    """A group kept on one product needs that product to hold all of it: ``profile.pods`` pods of
    ``gpus_per_pod`` GPUs each. With the nodes known, say so when no product of the placement can
    (by allocatable GPUs), with the numbers; ``inventory.groupFit`` says warn or deny."""
    profile, placed, inventory = case.profile, case.placement, case.inventory
    assert placed is not None and inventory is not None
    slots = {v: inventory.member_slots(v, profile.gpus_per_pod) for v in placed.values}
    if any(s is None or s >= profile.pods for s in slots.values()):
        return NOTHING
    have = ", ".join(f"{v}: {s}" for v, s in sorted(slots.items(), key=lambda kv: (-(kv[1] or 0), kv[0]))[:6])
    message = (f"{describe(profile)} is a group of {profile.pods} pods x {counted(profile.gpus_per_pod, 'GPU')} that "
               f"must share one GPU product, but no product it may use has room for {profile.pods} such pods "
               f"(pods of {counted(profile.gpus_per_pod, 'GPU')} the nodes of each can hold: {have}): add nodes of one "
               f"product, or request fewer pods or GPUs per pod")
    if case.settings.group_fit == "deny":
        return _found(Violation(GROUP_DOES_NOT_FIT, message, case.template.spec_pointer,
                                fix=f"add nodes of one product for {profile.pods} pods x "
                                    f"{profile.gpus_per_pod} GPUs, or request fewer"))
    return _warned(f"{GROUP_DOES_NOT_FIT} (admitted, inventory.groupFit: warn): {message}")
