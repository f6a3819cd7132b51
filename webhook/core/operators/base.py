"""What every operator reader shares: the :class:`Found` it yields, the one :data:`Reader` signature,
and the defensive readers of counts and fields (operators' objects are user input: no shape is trusted).
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


