"""``evolve``: a changed copy of one of the core's frozen dataclasses, at a fraction of the cost of
``dataclasses.replace``.

``dataclasses.replace`` reads every field, builds keyword arguments and runs ``__init__``, whose
frozen ``__setattr__`` goes through ``object.__setattr__`` once per field: about 4 us for the
launchers' contexts and specs, which the engine copies two to three times for every container it
reads. A dataclass without ``__post_init__`` has nothing in ``__init__`` but those assignments, so
copying the fields' values into a new instance gives the same object. Only fields are copied: a
``functools.cached_property`` value computed on the original describes the original's fields and
is left behind.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def evolve(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for a dataclass instance without ``__post_init__``
    (others go through ``dataclasses.replace``); a name that is not a field is a ``TypeError``."""
    cls = type(obj)
    fields: dict[str, Any] = cls.__dataclass_fields__  # type: ignore[attr-defined]
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    for name in changes:
        if name not in fields:
            raise TypeError(f"{cls.__name__} has no field {name!r}")
    new = object.__new__(cls)
    values = new.__dict__
    values.update({name: value for name, value in obj.__dict__.items() if name in fields})
    values.update(changes)
    return new
