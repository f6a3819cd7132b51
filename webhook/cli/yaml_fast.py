"""PyYAML's safe ``load_all``, built straight from the C parser's events: the same documents, faster.

Why: with the C parser (``CSafeLoader``) PyYAML still composes a node tree and then walks it again
in Python to build the objects; for the plain manifests ``check`` reads (mappings, sequences,
strings, a few numbers) building dicts and lists from the event stream directly takes ~40% less time,
and YAML was most of the time of a large ``check``.

Same result, by construction: the implicit tag of every plain scalar comes from the loader's own
resolver, any scalar that is not a string goes through the loader's own ``construct_object``, and
anchors and aliases share objects exactly as SafeConstructor does (per document). Everything this
shortcut does not model makes it give up and run ``yaml.load_all`` on the whole text, which then
returns the documents or raises its usual error: explicit tags on collections (``!!set``,
``!!omap``, custom tags), merge keys (``<<``), unhashable keys, undefined aliases, and any parser
error. ``tests/test_yaml_fast.py`` holds it equal to ``yaml.load_all`` over examples and generated
streams.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent, DocumentEndEvent, DocumentStartEvent, MappingEndEvent, MappingStartEvent, ScalarEvent,
    SequenceEndEvent, SequenceStartEvent, StreamEndEvent, StreamStartEvent,
)
from yaml.nodes import ScalarNode

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_MAP_TAGS = (None, "tag:yaml.org,2002:map", "!")
_SEQ_TAGS = (None, "tag:yaml.org,2002:seq", "!")
_NO_KEY = object()


class _GiveUp(Exception):
    """A construct the shortcut does not model: let ``yaml.load_all`` do it."""


def load_all(text: str) -> list[Any]:
    """Every document of ``text`` as ``list(yaml.load_all(text, Loader=LOADER))`` gives them."""
    try:
        return _from_events(text)
    except Exception:  # noqa: BLE001 - any doubt: the reference loader decides (and raises its error)
        return list(yaml.load_all(text, Loader=LOADER))


def _from_events(text: str) -> list[Any]:
    loader = LOADER(text)
    try:
        return _build(loader)
    finally:
        loader.dispose()


def _build(loader: Any) -> list[Any]:
    """The documents of the loader's stream, from its events.

    Scalars are remembered for the stream: manifests repeat them (every key: ``name``, ``image``,
    ``resources``; values such as ``nvidia.com/gpu``, ``"1"`` or ``true``), and for each one the
    resolver runs its list of regular expressions and PyYAML's constructor builds numbers and
    booleans: about a sixth of the YAML time of a large ``check`` (py-spy), which the memos take
    off. The tag of a plain scalar depends on nothing but its text and implicit flags when the loader
    has no *path* resolvers (they look at where a node sits; :data:`LOADER` has none, and a loader
    that has some is asked every time), and every scalar SafeConstructor builds is immutable (int,
    float, bool, None, bytes, date, datetime), so one object can stand for every copy."""
    construct, get_event, resolve = loader.construct_object, loader.get_event, loader.resolve
    tags: dict[tuple[str, Any], str] | None = None if getattr(loader, "yaml_path_resolvers", None) else {}
    built: dict[tuple[str, str], Any] = {}  # (tag, text) -> the scalar PyYAML's constructor made
    docs: list[Any] = []
    stack: list[Any] = []  # open mappings and sequences
    keys: list[Any] = []  # per open mapping: the key waiting for its value, or _NO_KEY
    anchors: dict[str, Any] = {}
    if not isinstance(get_event(), StreamStartEvent):
        raise _GiveUp("no stream start")
    while True:
        ev = get_event()
        cls = ev.__class__
        if cls is ScalarEvent:
            value: Any = ev.value
            tag = ev.tag
            if tag is None or tag == "!":  # as PyYAML's composer: the resolver decides
                if tags is None:
                    tag = resolve(ScalarNode, value, ev.implicit)
                else:
                    seen = (value, ev.implicit)
                    tag = tags.get(seen)
                    if tag is None:
                        tag = tags[seen] = resolve(ScalarNode, value, ev.implicit)
            if tag != _STR:  # numbers, booleans, null, timestamps, explicit scalar tags: PyYAML's own constructor
                made = built.get((tag, value), _NO_KEY)
                if made is _NO_KEY:
                    made = built[(tag, value)] = construct(
                        ScalarNode(tag, value, ev.start_mark, ev.end_mark, ev.style), deep=True)
                value = made
            if ev.anchor is not None:
                anchors[ev.anchor] = value
        elif cls is AliasEvent:
            value = anchors[ev.anchor]  # KeyError (undefined alias): give up, the reference raises
        elif cls is MappingStartEvent or cls is SequenceStartEvent:
            if ev.tag not in (_MAP_TAGS if cls is MappingStartEvent else _SEQ_TAGS):
                raise _GiveUp(f"tagged collection {ev.tag}")
            container: Any = {} if cls is MappingStartEvent else []
            if ev.anchor is not None:
                anchors[ev.anchor] = container
            stack.append(container)
            keys.append(_NO_KEY)
            continue
        elif cls is MappingEndEvent or cls is SequenceEndEvent:
            value = stack.pop()
            if keys.pop() is not _NO_KEY:
                raise _GiveUp("key without value")
        elif cls is DocumentStartEvent or cls is DocumentEndEvent:
            anchors = {}  # anchors are per document, as in PyYAML's composer
            continue
        elif cls is StreamEndEvent:
            return docs
        else:
            raise _GiveUp(f"unexpected event {cls.__name__}")
        # attach the finished value to its parent (or it is a document)
        if not stack:
            docs.append(value)
            continue
        parent = stack[-1]
        if parent.__class__ is list:
            parent.append(value)
        elif keys[-1] is _NO_KEY:
            if value.__class__ is dict or value.__class__ is list:
                raise _GiveUp("unhashable key")
            if value == "<<" and ev.__class__ is ScalarEvent and ev.tag is None and ev.implicit[0]:
                raise _GiveUp("merge key")
            keys[-1] = value
        else:
            parent[keys[-1]] = value
            keys[-1] = _NO_KEY
