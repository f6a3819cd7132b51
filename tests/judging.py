"""The core's one entry (:func:`webhook.core.engine.judge`) in the shape most core tests ask in:
one object in, its template results out. A thin adapter over the entry, not a second path: every
call builds an :class:`engine.Request` and goes through :func:`engine.judge`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core import engine
from webhook.core.engine import Judgement, TemplateResult
from webhook.core.inventory import Inventory
from webhook.core.settings import Settings


def judge(obj: Any, settings: Settings, *, mode: str | None = None, mutate: bool | None = None,
          prefix: str = "", inventory: Inventory | None = None,
          context: Mapping[tuple[str, str, str], Any] | None = None) -> tuple[TemplateResult, ...]:
    """The results of ``obj`` judged as a CREATE (as ``check`` judges it)."""
    asked = engine.Request(obj, mode=mode, mutate=mutate, prefix=prefix, context=context)
    return engine.judge(asked, settings, inventory).results


def judge_update(obj: Any, old_obj: Any, settings: Settings, *, mode: str | None = None,
                 mutate: bool | None = None, inventory: Inventory | None = None) -> Judgement:
    """``obj`` judged as an UPDATE of the stored ``old_obj``."""
    return engine.judge(engine.Request(obj, "UPDATE", old_obj, mode=mode, mutate=mutate), settings, inventory)


def judge_review(obj: Any, settings: Settings, *, mode: str | None = None, mutate: bool | None = None,
                 inventory: Inventory | None = None) -> Judgement:
    """``obj`` judged as a CREATE, the whole :class:`Judgement` (secrets included)."""
    return engine.judge(engine.Request(obj, mode=mode, mutate=mutate), settings, inventory)
