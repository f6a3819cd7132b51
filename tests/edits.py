"""Edits of a loaded data file by path, for the tests that refuse a broken catalog or table: each
returns a function that changes the data in place."""

from __future__ import annotations

from typing import Any, Callable


def set_at(path: tuple[Any, ...], value: Any) -> Callable[[Any], None]:
    """Set the value at ``path`` (keys and indexes) to ``value``."""
    def mutate(data: Any) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def delete_at(path: tuple[Any, ...]) -> Callable[[Any], None]:
    """Remove the member or item at ``path``."""
    def mutate(data: Any) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate
