"""NetFlow v5: a fixed 24-octet header and up to 30 fixed 48-octet records, no templates."""

from __future__ import annotations

import struct
from typing import NamedTuple

from router.collector.clock import from_ms, uptime_age_ms
from router.collector.flows import FlowRecord, ports
from router.collector.wire import Malformed

HEADER = struct.Struct(">HHIIIIBBH")
# srcaddr, dstaddr, (nexthop, input, output), dPkts, dOctets, First, Last, srcport, dstport,
# (pad1), tcp_flags, prot, (tos, src_as, dst_as, src_mask, dst_mask, pad2)
RECORD = struct.Struct(">4s4s8xIIIIHHxBB9x")
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
    if len(data) != HEADER.size + count * RECORD.size:
        raise Malformed("count mismatch")
    # The top two bits are the sampling mode; an interval of 0 means unsampled.
    rate = (sampling & SAMPLING_INTERVAL_MASK) or 1
    export_ms = secs * 1000 + nsecs // 1_000_000
    return V5Header(count, uptime, export_ms, sequence, engine_type << 8 | engine_id, rate)


def decode_v5(data: bytes) -> tuple[V5Header, list[FlowRecord]]:
    head = header(data)
    rate = head.sampling_rate
    records = []
    view = memoryview(data)[HEADER.size :]
    for src, dst, packets, octets, first, last, sport, dport, flags, proto in RECORD.iter_unpack(
        view
    ):
        src_port, dst_port = ports(proto, sport, dport, None)
        records.append(
            FlowRecord(
                src,
                dst,
                src_port,
                dst_port,
                proto,
                octets * rate,
                packets * rate,
                from_ms(head.export_ms - uptime_age_ms(head.uptime_ms, first)),
                from_ms(head.export_ms - uptime_age_ms(head.uptime_ms, last)),
                flags,
                rate,
            )
        )
    return head, records
