"""Templates per exporter, observation domain (v9: source id) and template id.

Templates sent over UDP are only valid while the exporter keeps refreshing them, so entries
expire after a TTL. The cache is bounded so that no exporter can push out another's templates:

- each exporter holds at most max_per_exporter; past it, its own entry refreshed longest ago
  goes (an exporter that churns template ids pushes out only its own);
- exporters an operator mapped to a switch hold theirs apart from everyone else: nothing
  another address sends evicts them;
- unmapped exporters (any address can send: UDP sources are spoofable) share max_unmapped;
  past it, the unmapped exporter holding the most gives up its oldest entry, so a flood from
  many addresses pushes out the flood's templates before those of an exporter holding a few.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from router.collector.elements import VARIABLE_LENGTH
from router.collector.shares import Shares

TemplateKey = tuple[str, int, int]
# Whether an exporter (its address) is mapped to a switch by an operator.
Mapped = Callable[[str], bool]
STATE_VERSION = 1
# Lower ids name sets, not templates (RFC 3954 §5.1, RFC 7011 §3.3.2).
MIN_TEMPLATE_ID = 256


class Field(NamedTuple):
    element: int
    enterprise: int
    length: int


@dataclass(frozen=True, slots=True)
class Template:
    """A template or options template as announced; scope_count counts the leading scope fields
    of an options template (0 for a data template)."""

    template_id: int
    fields: tuple[Field, ...]
    options: bool = False
    scope_count: int = 0

    @property
    def min_record_length(self) -> int:
        return min_record_length(self.fields)


def min_record_length(fields: tuple[Field, ...]) -> int:
    """A variable-length field takes at least its one length octet."""
    return sum(1 if f.length == VARIABLE_LENGTH else f.length for f in fields)


class _Entry:
    __slots__ = ("refreshed", "template")

    def __init__(self, template: Template, refreshed: float) -> None:
        self.template = template
        self.refreshed = refreshed


def _unmapped(_exporter: str) -> bool:
    return False


class TemplateCache:
    def __init__(
        self, ttl_s: float = 1800.0, max_per_exporter: int = 1024, max_unmapped: int = 4096
    ) -> None:
        self.ttl_s = ttl_s
        self.max_per_exporter = max_per_exporter
        self.max_unmapped = max_unmapped
        self._mapped: Mapped = _unmapped
        # Both orders run from the entry refreshed longest ago to the latest.
        self._entries: OrderedDict[TemplateKey, _Entry] = OrderedDict()
        self._by_exporter: dict[str, OrderedDict[TemplateKey, None]] = {}
        # The unmapped exporters' entries, per exporter.
        self._pool = Shares()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, exporter: str, domain: int, template_id: int, now: float) -> Template | None:
        key = (exporter, domain, template_id)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now - entry.refreshed > self.ttl_s:
            self._remove(key)
            return None
        return entry.template

    @property
    def unmapped_entries(self) -> int:
        return self._pool.total

    def remap(self, mapped: Mapped) -> None:
        """Tells which exporters are mapped (the mappings changed): the others share
        max_unmapped, fitted into it from the next template added."""
        self._mapped = mapped
        for exporter, keys in self._by_exporter.items():
            self._classify(exporter, len(keys))

    def add(self, exporter: str, domain: int, template: Template, now: float) -> None:
        """Adds or refreshes a template, dropping entries beyond the bounds (see above)."""
        key = (exporter, domain, template.template_id)
        entry = self._entries.get(key)
        keys = self._by_exporter.get(exporter)
        if keys is None:
            keys = self._by_exporter[exporter] = OrderedDict()
            # Known exporters were classified by remap: the mapping is only read for new ones.
            self._classify(exporter, 0)
        if entry is None:
            self._entries[key] = _Entry(template, now)
            keys[key] = None
            self._pool.change(exporter, 1)
        else:
            entry.template = template
            entry.refreshed = now
            self._entries.move_to_end(key)
            keys.move_to_end(key)
        while len(keys) > self.max_per_exporter:
            self._remove(next(iter(keys)))
        self._fit_pool()

    def _classify(self, exporter: str, entries: int) -> None:
        mapped = self._mapped(exporter)
        if mapped and exporter in self._pool:
            self._pool.leave(exporter)
        elif not mapped and exporter not in self._pool:
            self._pool.join(exporter, entries)

    def _fit_pool(self) -> None:
        while self._pool.total > self.max_unmapped:
            largest = self._pool.largest()
            if largest is None:
                return
            self._remove(next(iter(self._by_exporter[largest])))

    def withdraw(self, exporter: str, domain: int, template_id: int) -> bool:
        key = (exporter, domain, template_id)
        if key not in self._entries:
            return False
        self._remove(key)
        return True

    def withdraw_all(self, exporter: str, domain: int, options: bool) -> int:
        """IPFIX's withdrawal of every template (or every options template) of a domain."""
        doomed = [
            key
            for key in self._by_exporter.get(exporter, ())
            if key[1] == domain and self._entries[key].template.options == options
        ]
        for key in doomed:
            self._remove(key)
        return len(doomed)

    def expire(self, now: float) -> int:
        expired = [key for key, e in self._entries.items() if now - e.refreshed > self.ttl_s]
        for key in expired:
            self._remove(key)
        return len(expired)

    def _remove(self, key: TemplateKey) -> None:
        exporter = key[0]
        del self._entries[key]
        keys = self._by_exporter[exporter]
        del keys[key]
        self._pool.change(exporter, -1)
        if not keys:
            del self._by_exporter[exporter]
            self._pool.leave(exporter)

    def to_state(self) -> dict[str, Any]:
        """Every entry as JSON-able values, oldest first, for a collector to persist."""
        return {
            "version": STATE_VERSION,
            "templates": [
                {
                    "exporter": exporter,
                    "domain": domain,
                    "template_id": entry.template.template_id,
                    "options": entry.template.options,
                    "scope_count": entry.template.scope_count,
                    "fields": [list(f) for f in entry.template.fields],
                    "refreshed": entry.refreshed,
                }
                for (exporter, domain, _), entry in self._entries.items()
            ],
        }

    @classmethod
    def from_state(
        cls,
        state: Any,
        ttl_s: float = 1800.0,
        max_per_exporter: int = 1024,
        max_unmapped: int = 4096,
    ) -> TemplateCache:
        """The cache to_state saved; ValueError if the state is not one (a damaged file).

        The saved entries are loaded whole: which exporters are mapped (remap) is known only
        once the catalog answers, and the pool is fitted from the next template added."""
        cache = cls(ttl_s, max_per_exporter, max_unmapped=1 << 62)
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"not a template cache state of version {STATE_VERSION}")
        items = state.get("templates")
        if not isinstance(items, list):
            raise ValueError("template cache state has no list of templates")
        for index, item in enumerate(items):
            try:
                exporter, domain, template, refreshed = _entry_from_state(item)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"templates[{index}] is not a template: {exc}") from None
            cache.add(exporter, domain, template, refreshed)
        cache.max_unmapped = max_unmapped
        return cache


def _entry_from_state(item: dict[str, Any]) -> tuple[str, int, Template, float]:
    exporter = item["exporter"]
    domain = _uint(item["domain"], 32)
    fields = tuple(
        Field(_uint(element, 16), _uint(enterprise, 32), _uint(length, 16))
        for element, enterprise, length in item["fields"]
    )
    options = item["options"]
    scope_count = _uint(item["scope_count"], 16)
    refreshed = item["refreshed"]
    if not isinstance(exporter, str) or not isinstance(options, bool):
        raise TypeError("exporter must be a string, options a boolean")
    if not isinstance(refreshed, int | float) or scope_count > len(fields):
        raise ValueError("refreshed must be a number, scope_count at most the fields")
    template = Template(_uint(item["template_id"], 16), fields, options, scope_count)
    if template.template_id < MIN_TEMPLATE_ID or template.min_record_length == 0:
        raise ValueError("not a template a message could have announced")
    return exporter, domain, template, float(refreshed)


def _uint(value: Any, bits: int) -> int:
    if type(value) is not int or not 0 <= value < 1 << bits:
        raise ValueError(f"{value!r} is not an unsigned {bits}-bit integer")
    return value
