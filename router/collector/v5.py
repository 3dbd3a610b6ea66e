"""NetFlow v5: a fixed 24-octet header and up to 30 fixed 48-octet records, no templates.

A v5 record is what a v9 template of fixed fields would describe, so it is decoded as one: the
same compiled layout and flow-building loop as v9 and IPFIX, with the header's sampling rate.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from router.collector.clock import Clock
from router.collector.datasets import flow_records
from router.collector.flows import FlowRecord
from router.collector.layout import compile_layout
from router.collector.sampling import DomainOptions
from router.collector.templates import Field
from router.collector.wire import Malformed

HEADER = struct.Struct(">HHIIIIBBH")
# The v5 record as v9 field types; padding is paddingOctets (210), read by nobody.
RECORD_FIELDS = tuple(
    Field(element, 0, length)
    for element, length in (
        (8, 4),  # srcaddr
        (12, 4),  # dstaddr
        (15, 4),  # nexthop
        (10, 2),  # input
        (14, 2),  # output
        (2, 4),  # dPkts
        (1, 4),  # dOctets
        (22, 4),  # First
        (21, 4),  # Last
        (7, 2),  # srcport
        (11, 2),  # dstport
        (210, 1),  # pad1
        (6, 1),  # tcp_flags
        (4, 1),  # prot
        (5, 1),  # tos
        (16, 2),  # src_as
        (17, 2),  # dst_as
        (9, 1),  # src_mask
        (13, 1),  # dst_mask
        (210, 2),  # pad2
    )
)
RECORD_LENGTH = 48
MAX_RECORDS = 30
SAMPLING_INTERVAL_MASK = 0x3FFF


class V5Header(NamedTuple):
    record_count: int
    uptime_ms: int
    export_ms: int
    flow_sequence: int
    # engine_type << 8 | engine_id: what tells the flow caches of one exporter apart.
    domain: int
    sampling_rate: int


def header(data: bytes) -> V5Header:
    if len(data) < HEADER.size:
        raise Malformed("truncated header")
    _, count, uptime, secs, nsecs, sequence, engine_type, engine_id, sampling = HEADER.unpack_from(
        data
    )
    if not 0 < count <= MAX_RECORDS:
        raise Malformed("bad record count")
    if len(data) != HEADER.size + count * RECORD_LENGTH:
        raise Malformed("count mismatch")
    # The top two bits are the sampling mode; an interval of 0 means unsampled.
    rate = (sampling & SAMPLING_INTERVAL_MASK) or 1
    export_ms = secs * 1000 + nsecs // 1_000_000
    return V5Header(count, uptime, export_ms, sequence, engine_type << 8 | engine_id, rate)


def decode_v5(data: bytes) -> tuple[V5Header, list[FlowRecord]]:
    head = header(data)
    clock = Clock(head.export_ms, head.uptime_ms)
    options = DomainOptions(rate=head.sampling_rate)
    layout = compile_layout(RECORD_FIELDS)
    records, _ = flow_records(layout, data, HEADER.size, len(data), clock, options)
    return head, records
