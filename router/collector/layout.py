"""A data template compiled once into what decodes its records fast.

A template of fixed-length fields becomes one struct.Struct: a data set's records unpack with
iter_unpack, fields the decoder does not read are pad bytes, and one itemgetter puts the values
it reads (or their defaults) into the fixed order of ROW. Variable-length templates walk each
record field by field into the same tuple: slower, and rare for flow data.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter
from typing import Any

from router.collector.clock import TimeKind
from router.collector.elements import MAX_UNSIGNED_LENGTH, VARIABLE_LENGTH, Element
from router.collector.templates import Field, min_record_length
from router.collector.wire import read_fields

# The order of the values a layout picks from each record.
ROW = (
    "src",
    "dst",
    "src6",
    "dst6",
    "src_port",
    "dst_port",
    "proto",
    "octets",
    "packets",
    "tcp_flags",
    "icmp_type_code",
    "start",
    "end",
    "sampler_id",
)
_DEFAULTS: dict[str, Any] = {
    "src6": None,
    "dst6": None,
    "src_port": 0,
    "dst_port": 0,
    "proto": 0,
    "octets": 0,
    "packets": 0,
    "tcp_flags": 0,
    "icmp_type_code": None,
    "start": None,
    "end": None,
    "sampler_id": None,
}
# The elements that may fill a value, most wanted first; addresses are chosen by family.
_SOURCES: dict[str, tuple[Element, ...]] = {
    "src_port": (Element.SOURCE_TRANSPORT_PORT,),
    "dst_port": (Element.DESTINATION_TRANSPORT_PORT,),
    "proto": (Element.PROTOCOL_IDENTIFIER,),
    "octets": (
        Element.OCTET_DELTA_COUNT,
        Element.POST_OCTET_DELTA_COUNT,
        Element.OCTET_TOTAL_COUNT,
    ),
    "packets": (
        Element.PACKET_DELTA_COUNT,
        Element.POST_PACKET_DELTA_COUNT,
        Element.PACKET_TOTAL_COUNT,
    ),
    "tcp_flags": (Element.TCP_CONTROL_BITS,),
    "icmp_type_code": (Element.ICMP_TYPE_CODE_IPV4, Element.ICMP_TYPE_CODE_IPV6),
    "sampler_id": (Element.SAMPLER_ID,),
}
_START_TIMES = (
    (Element.FLOW_START_MILLISECONDS, TimeKind.MILLISECONDS),
    (Element.FLOW_START_SECONDS, TimeKind.SECONDS),
    (Element.FLOW_START_MICROSECONDS, TimeKind.MICROSECONDS),
    (Element.FLOW_START_NANOSECONDS, TimeKind.NANOSECONDS),
    (Element.FLOW_START_SYS_UP_TIME, TimeKind.UPTIME),
)
_END_TIMES = (
    (Element.FLOW_END_MILLISECONDS, TimeKind.MILLISECONDS),
    (Element.FLOW_END_SECONDS, TimeKind.SECONDS),
    (Element.FLOW_END_MICROSECONDS, TimeKind.MICROSECONDS),
    (Element.FLOW_END_NANOSECONDS, TimeKind.NANOSECONDS),
    (Element.FLOW_END_SYS_UP_TIME, TimeKind.UPTIME),
)
_NTP_TIMES = frozenset(
    {
        Element.FLOW_START_MICROSECONDS,
        Element.FLOW_END_MICROSECONDS,
        Element.FLOW_START_NANOSECONDS,
        Element.FLOW_END_NANOSECONDS,
    }
)
_ADDRESS_LENGTHS = {
    Element.SOURCE_IPV4_ADDRESS: 4,
    Element.DESTINATION_IPV4_ADDRESS: 4,
    Element.SOURCE_IPV6_ADDRESS: 16,
    Element.DESTINATION_IPV6_ADDRESS: 16,
}
_STRUCT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_READ = frozenset(_ADDRESS_LENGTHS) | {e for names in _SOURCES.values() for e in names}
_READ |= {element for element, _ in _START_TIMES + _END_TIMES}


@dataclass(frozen=True, slots=True)
class Layout:
    """usable is False for templates without a source and destination address of one family:
    their records are counted, never turned into flows."""

    usable: bool
    min_record_length: int
    fixed: struct.Struct | None
    # (field index, whether its octets are an unsigned integer) of each value read, in order.
    kept: tuple[tuple[int, bool], ...]
    # Positions in a fixed record's values of integers struct has no code for (3, 5-7 octets).
    odd: frozenset[int]
    pick: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    defaults: tuple[Any, ...]
    start_kind: TimeKind
    end_kind: TimeKind
    fields: tuple[Field, ...]

    def rows(self, data: bytes, start: int, end: int) -> Iterable[tuple[Any, ...]]:
        """The values read from each record of a data set, in the order of kept; what remains
        after the last whole record is padding."""
        if self.fixed is None:
            return self._walk(data, start, end)
        size = self.fixed.size
        whole = memoryview(data)[start : start + (end - start) // size * size]
        if not self.odd:
            return self.fixed.iter_unpack(whole)
        return (self._widen(values) for values in self.fixed.iter_unpack(whole))

    def _widen(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        odd = self.odd
        return tuple(int.from_bytes(v) if i in odd else v for i, v in enumerate(values))

    def _walk(self, data: bytes, offset: int, end: int) -> Iterator[tuple[Any, ...]]:
        while end - offset >= self.min_record_length:
            octets, offset = read_fields(data, offset, end, self.fields)
            yield tuple(
                int.from_bytes(octets[i]) if number else bytes(octets[i]) for i, number in self.kept
            )


def _readable(field: Field) -> bool:
    if field.enterprise or field.element not in _READ or field.length == VARIABLE_LENGTH:
        return False
    if field.element in _ADDRESS_LENGTHS:
        return field.length == _ADDRESS_LENGTHS[Element(field.element)]
    if field.element in _NTP_TIMES:
        return field.length == MAX_UNSIGNED_LENGTH
    return 1 <= field.length <= MAX_UNSIGNED_LENGTH


def _first(found: dict[int, int], elements: Sequence[int]) -> int | None:
    return next((found[e] for e in elements if e in found), None)


def _time(
    found: dict[int, int], choices: Sequence[tuple[Element, TimeKind]]
) -> tuple[int, TimeKind] | None:
    return next(((found[e], kind) for e, kind in choices if e in found), None)


@lru_cache(maxsize=4096)
def compile_layout(fields: tuple[Field, ...]) -> Layout:
    """Exporters re-send the same few templates: one compilation serves them all."""
    found: dict[int, int] = {}  # element -> position among the values read
    kept: list[tuple[int, bool]] = []
    for index, field in enumerate(fields):
        if _readable(field) and field.element not in found:
            found[field.element] = len(kept)
            kept.append((index, field.element not in _ADDRESS_LENGTHS))
    chosen: dict[str, int] = {}
    v4 = {Element.SOURCE_IPV4_ADDRESS, Element.DESTINATION_IPV4_ADDRESS} <= found.keys()
    v6 = {Element.SOURCE_IPV6_ADDRESS, Element.DESTINATION_IPV6_ADDRESS} <= found.keys()
    if v4:
        chosen["src"] = found[Element.SOURCE_IPV4_ADDRESS]
        chosen["dst"] = found[Element.DESTINATION_IPV4_ADDRESS]
    if v6:
        # A template of both families (unused addresses zero) tries IPv4 first, per record.
        chosen["src6" if v4 else "src"] = found[Element.SOURCE_IPV6_ADDRESS]
        chosen["dst6" if v4 else "dst"] = found[Element.DESTINATION_IPV6_ADDRESS]
    for name, elements in _SOURCES.items():
        position = _first(found, elements)
        if position is not None:
            chosen[name] = position
    start, end = _time(found, _START_TIMES), _time(found, _END_TIMES)
    start, end = start or end, end or start
    if start is not None and end is not None:
        chosen["start"], chosen["end"] = start[0], end[0]
    defaults = tuple(_DEFAULTS.get(name) for name in ROW)
    indices = [chosen.get(name, len(kept) + i) for i, name in enumerate(ROW)]
    fixed = None
    odd: set[int] = set()
    if all(f.length != VARIABLE_LENGTH for f in fields):
        codes = []
        kept_at = {index: number for index, number in kept}
        for index, field in enumerate(fields):
            if index not in kept_at:
                codes.append(f"{field.length}x")
            elif kept_at[index] and field.length in _STRUCT_CODES:
                codes.append(_STRUCT_CODES[field.length])
            else:
                if kept_at[index]:
                    odd.add(sum(1 for i in kept_at if i < index))
                codes.append(f"{field.length}s")
        fixed = struct.Struct(">" + "".join(codes))
    return Layout(
        usable=v4 or v6,
        min_record_length=min_record_length(fields),
        fixed=fixed,
        kept=tuple(kept),
        odd=frozenset(odd),
        pick=itemgetter(*indices),
        defaults=defaults,
        start_kind=TimeKind.NONE if start is None else start[1],
        end_kind=TimeKind.NONE if end is None else end[1],
        fields=fields,
    )
