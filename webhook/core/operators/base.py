"""What every operator kind shares: the :class:`OperatorKind` that describes it, the :class:`Found`
its reader yields, the one :data:`Reader` signature, and the defensive readers of counts and fields
(operators' objects are user input: no shape is trusted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.counts import parse_count

MAX_COUNT_TEXT = 10**12 - 1
"""A count written as a string is read up to twelve digits (then capped at :data:`MAX_PODS`); a
longer one is no count at all."""
MAX_PODS = 100_000
"""More pods than any one job runs: counts above are capped here."""


@dataclass(frozen=True)
class Found:
    """One pod template of an operator object, as its reader found it."""

    path: tuple[str, ...]
    """From the object root to the template: the object holding ``metadata`` + ``spec``, or, when
    ``inline``, the PodSpec itself."""
    holder: Any
    role: str
    """The template's name inside the object (replica type, group name, task, component)."""
    pods: int
    """Pods this template makes."""
    inline: bool = False
    """``holder`` is a PodSpec written in place (KServe's predictor): its labels and annotations are
    the object's own."""
    synthesized: bool = False
    """``holder`` was built by the reader from the object's fields (an image, a GPU count, a runtime's
    template merged with overrides): the object holds no pod spec a patch could change."""
    group: int | None = None
    """Pods per group when the kind fixes it per template (1 = independent replicas); ``None``: the
    object's GPU pods form one group (a job)."""
    notes: tuple[str, ...] = ()
    """What the reader could not see (a runtime not in the input): reported as warnings."""


Context = Mapping[tuple[str, str, str], Any]
"""The other objects of the same input by (kind, namespace or "", name): a TrainJob's runtime, an
InferenceService's ServingRuntime (:func:`webhook.core.operators.context_of`)."""

Reader = Callable[[Mapping[str, Any], str, Context], Iterator[Found]]
"""``(object, kind, context) -> the templates found``: one signature for every kind, whether it
reads the context or not."""


@dataclass(frozen=True)
class Membership:
    """The multi-pod group a pod belongs to, as its controller (or its user) names it."""

    source: str
    """Who made the group, for messages (``Kubeflow job``, ``JobSet``, ``Ray cluster``, ...)."""
    name: str
    """The group's name as the controller labels it (job name, cluster name, group key)."""
    identity: str
    """What every member has in common and no other group has (namespace aside: pod affinity only
    selects pods of the pod's own namespace)."""
    always: bool = True
    """True for controllers whose pods are one job (a gang); False for controllers whose pods are
    one group only when the launch spans pods (KServe replicas, an Indexed Job)."""


Labels = Mapping[str, str]


@dataclass(frozen=True)
class PodGroup:
    """How a pod made by an operator says which job it belongs to: the label its controller puts on
    every pod of one job, whose value names the job."""

    label: str
    source: str
    """Who made the group, for messages."""
    prefix: str
    """Prefix of the group's identity, so two controllers' jobs of one name are different groups."""
    always: bool = True
    """See :attr:`Membership.always`."""
    read: Callable[[Labels, Labels], Membership | None] | None = None
    """A kind whose membership is more than one label (LeaderWorkerSet: a group per leader index);
    ``None``: the label's value is the group (:meth:`webhook.core.operators.Registry.membership`)."""


ENTRY_OPERATORS = "operators"
"""The webhook entry every operator kind is sent through unless its descriptor names its own."""


@dataclass(frozen=True)
class OperatorKind:
    """Everything the project knows about one operator kind, in one place: how to read its pod
    templates, what its controller stamps on the pods it makes, and how the webhook configurations
    route it. The shipped webhook rules are generated from these (``make webhook-rules``)."""

    api_version: str
    kind: str
    plural: str
    """The resource name of the CRD (``spec.names.plural``), what a webhook rule matches."""
    reader: Reader
    group: PodGroup | None = None
    """The label naming the job on the kind's pods, when they are one group."""
    per_copy_labels: frozenset[str] = frozenset()
    """Labels whose value differs between the pods of one template (the verdict memo's key skips
    them: :mod:`webhook.core.verdicts`)."""
    per_copy_annotations: frozenset[str] = frozenset()
    leaders: frozenset[str] = frozenset()
    """Template roles whose profile later templates of the object inherit when they name no model
    (an MPI launcher's mpirun names what its workers run; an LWS leader)."""
    entry: str | None = ENTRY_OPERATORS
    """The webhook entry the kind is sent through: :data:`ENTRY_OPERATORS`, another name (an entry of
    its own with a CEL condition, hand-written), or ``None`` for a kind no controller makes pods
    from directly (a runtime another kind refers to), read by ``check`` only."""
    source: str = ""
    """Where the facts above come from (repository, file, commit)."""

    @property
    def group_version(self) -> tuple[str, str]:
        group, _, version = self.api_version.rpartition("/")
        return group, version


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (readers never trust the shape)."""
    return value if isinstance(value, Mapping) else {}


def dig(obj: Any, *path: str) -> Any:
    """The value at ``path`` (object keys), ``None`` where any step is missing or not an object."""
    for key in path:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def name_of(value: Any, fallback: str) -> str:
    """A template's name from a ``name``-like field, or ``fallback`` when it is not a string."""
    return value if isinstance(value, str) and value else fallback


def merge_named(base: Any, extra: Any) -> list[Any]:
    """Lists keyed by ``name`` (env, volumeMounts) merged as the operators merge them (strategic
    merge, the trainer's ``UpsertEnvVars``): an ``extra`` item replaces the ``base`` item of its name
    and goes last."""
    out = list(base) if isinstance(base, list) else []
    for item in extra if isinstance(extra, list) else []:
        name = mapping(item).get("name")
        out = [e for e in out if not (isinstance(name, str) and mapping(e).get("name") == name)]
        out.append(item)
    return out


def count(value: Any, default: int = 1) -> int:
    """A pod or replica count as the operators write it (see the module docstring)."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        value = parse_count(value, cap=MAX_COUNT_TEXT, padded=True, signs="-")
    if not isinstance(value, int):
        return default
    return max(0, min(value, MAX_PODS))


def product(*counts: int) -> int:
    """Counts multiplied, capped at :data:`MAX_PODS`."""
    total = 1
    for c in counts:
        total = min(total * c, MAX_PODS)
    return total


