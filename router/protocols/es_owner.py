"""Which owner an Elasticsearch document belongs to: a small rule language
(SHARDLOG_ES_BULK__OWNER_RULE, docs/configuration.md). Pure.

A rule is alternatives separated by ``,``, tried left to right; the first that yields a
non-empty string is the owner:

- ``field:<path>``: the document's field; ``host.name`` is ``{"host": {"name": ...}}`` or the
  flat key ``"host.name"``; only a string counts;
- ``index``, optionally followed by steps ``| strip-date``, ``| data-stream``,
  ``| strip-prefix:<text>``, ``| strip-suffix:<text>``: the item's index (the action's
  ``_index``, else the path's) made into an owner;
- ``const:<owner>``: that owner.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# -2026.11.25, -2026.11, -2026-11-25, -20261125: Logstash's and Beats' daily and monthly indices.
_DATE_SUFFIX = re.compile(r"-(?:[0-9]{4}[.-][0-9]{2}(?:[.-][0-9]{2})?|[0-9]{8})$")
_KNOWN_INDICES = 1024
_DATA_STREAM_TYPES = ("logs", "metrics", "traces", "synthetics", "profiling")

Source = Callable[[str | None, dict[str, Any]], str | None]


class RuleError(ValueError):
    """An owner rule that does not parse; the message says where."""


def strip_date(index: str) -> str:
    return _DATE_SUFFIX.sub("", index)


def data_stream(index: str) -> str:
    """``logs-nginx.access-default`` -> ``nginx.access``; other names as they are."""
    parts = index.split("-")
    if len(parts) >= 3 and parts[0] in _DATA_STREAM_TYPES:
        return "-".join(parts[1:-1])
    return index


def _step(text: str) -> Callable[[str], str]:
    name, colon, argument = text.partition(":")
    name, argument = name.strip(), argument.strip()
    if name == "strip-date" and not colon:
        return strip_date
    if name == "data-stream" and not colon:
        return data_stream
    if name == "strip-prefix" and argument:
        return lambda index: index.removeprefix(argument)
    if name == "strip-suffix" and argument:
        return lambda index: index.removesuffix(argument)
    raise RuleError(
        f"unknown index step {text.strip()!r}: strip-date, data-stream, strip-prefix:<text> "
        "or strip-suffix:<text>"
    )


def _index_source(steps: list[Callable[[str], str]]) -> Source:
    # A request names a few indices over thousands of documents: each is worked out once.
    known: dict[str, str] = {}

    def owner(index: str | None, _document: dict[str, Any]) -> str | None:
        if index is None:
            return None
        found = known.get(index)
        if found is None:
            found = index
            for step in steps:
                found = step(found)
            if len(known) >= _KNOWN_INDICES:
                known.clear()
            known[index] = found
        return found

    return owner


def _field_source(path: str) -> Source:
    names = path.split(".")

    def owner(_index: str | None, document: dict[str, Any]) -> str | None:
        value = document.get(path)
        if value is None and len(names) > 1:
            value = document
            for name in names:
                value = value.get(name) if isinstance(value, dict) else None
        return value if isinstance(value, str) else None

    return owner


def _source(text: str) -> Source:
    head, *steps = text.strip().split("|")
    kind, colon, argument = head.strip().partition(":")
    argument = argument.strip()
    if kind == "index" and not colon:
        return _index_source([_step(step) for step in steps])
    if kind == "field" and argument and not steps:
        return _field_source(argument)
    if kind == "const" and argument and not steps:
        return lambda _index, _document: argument
    raise RuleError(
        f"unknown owner source {text.strip()!r}: field:<path>, index[| step ...] or const:<owner>"
    )


class OwnerRule:
    """A parsed rule: ``rule(index, document)`` is the owner, or None when no alternative
    yields one."""

    def __init__(self, text: str) -> None:
        alternatives = [part for part in text.split(",") if part.strip()]
        if not alternatives:
            raise RuleError("an owner rule needs at least one source")
        self.text = text
        self._sources = [_source(part) for part in alternatives]

    def __call__(self, index: str | None, document: dict[str, Any]) -> str | None:
        for source in self._sources:
            owner = source(index, document)
            if owner:
                return owner
        return None
