"""Data sets into flow records (the hot path) and options records into option values."""

from __future__ import annotations

from router.collector.clock import Clock
from router.collector.elements import MAX_UNSIGNED_LENGTH
from router.collector.flows import ICMP_PROTOCOLS, PORTED_PROTOCOLS, FlowRecord
from router.collector.layout import Layout
from router.collector.sampling import OPTION_ELEMENTS, DomainOptions
from router.collector.templates import Template
from router.collector.wire import read_fields

_NO_IPV4 = bytes(4)


def flow_records(
    layout: Layout, data: bytes, start: int, end: int, clock: Clock, options: DomainOptions
) -> tuple[list[FlowRecord], int]:
    """The flows of a data set and how many data records it held (records of a template
    without addresses count, but make no flow). OverflowError for times out of range."""
    rows = layout.rows(data, start, end)
    if not layout.usable:
        return [], sum(1 for _ in rows)
    first_seen = clock.converter(layout.start_kind)
    last_seen = clock.converter(layout.end_kind)
    domain_rate, sampler_rates = options.rate, options.sampler_rates
    pick, defaults = layout.pick, layout.defaults
    records: list[FlowRecord] = []
    append = records.append
    for values in rows:
        (
            src,
            dst,
            src6,
            dst6,
            src_port,
            dst_port,
            proto,
            octets,
            packets,
            tcp_flags,
            icmp_type_code,
            started,
            ended,
            sampler,
        ) = pick(values + defaults)
        if src6 is not None and src == _NO_IPV4 and dst == _NO_IPV4:
            src, dst = src6, dst6
        if proto not in PORTED_PROTOCOLS:
            src_port = 0
            if proto not in ICMP_PROTOCOLS:
                dst_port = 0
            elif icmp_type_code is not None:
                dst_port = icmp_type_code
        rate = sampler_rates.get(sampler, domain_rate)
        append(
            FlowRecord(
                src,
                dst,
                src_port,
                dst_port,
                proto,
                octets * rate,
                packets * rate,
                first_seen(started),
                last_seen(ended),
                tcp_flags & 0xFF,
                rate,
            )
        )
    return records, len(records)


def options_values(template: Template, data: bytes, start: int, end: int) -> list[dict[int, int]]:
    """The option elements the decoder uses, per options record of a data set."""
    wanted = [
        (index, field.element)
        for index, field in enumerate(template.fields)
        if not field.enterprise
        and field.element in OPTION_ELEMENTS
        and 1 <= field.length <= MAX_UNSIGNED_LENGTH
    ]
    records = []
    offset, minimum = start, max(1, template.min_record_length)
    while end - offset >= minimum:
        octets, offset = read_fields(data, offset, end, template.fields)
        records.append({element: int.from_bytes(octets[index]) for index, element in wanted})
    return records
