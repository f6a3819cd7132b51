"""``evolve``: the same object ``dataclasses.replace`` gives, without running ``__init__``."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from webhook.core.domain import LaunchSpec
from webhook.core.evolve import evolve
from webhook.core.launchers.context import Ctx


@dataclasses.dataclass(frozen=True)
class _Shape:
    a: int
    b: tuple[str, ...] = ()

    @functools.cached_property
    def doubled(self) -> int:
        return self.a * 2


@dataclasses.dataclass(frozen=True)
class _Checked:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("negative")


CTX = Ctx(env={"A": "1"}, unknown=frozenset(), sources={}, env_from=(), withheld=frozenset(), image="img")
SPEC = LaunchSpec(framework="vllm", model="meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize(("obj", "changes"), [
    pytest.param(CTX, {"argvs": (("vllm", "serve", "m"),), "files": {"/a": "x"}}, id="launch-context"),
    pytest.param(SPEC, {"model": None, "notes": ("withheld",)}, id="launch-spec"),
    pytest.param(_Shape(1, ("x",)), {"a": 3}, id="one-field"),
    pytest.param(_Shape(1), {}, id="no-change"),
])
def test_the_same_object_replace_gives(obj: Any, changes: dict[str, Any]) -> None:
    made = evolve(obj, **changes)
    assert made == dataclasses.replace(obj, **changes)
    assert type(made) is type(obj) and made is not obj
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = 0  # type: ignore[misc,union-attr]


def test_a_cached_property_of_the_original_is_left_behind() -> None:
    shape = _Shape(2)
    assert shape.doubled == 4
    assert evolve(shape, a=5).doubled == 10


def test_a_name_that_is_not_a_field_is_refused() -> None:
    with pytest.raises(TypeError, match="no field 'c'"):
        evolve(_Shape(1), c=2)


def test_post_init_still_runs_where_a_class_has_one() -> None:
    with pytest.raises(ValueError, match="negative"):
        evolve(_Checked(1), a=-1)
