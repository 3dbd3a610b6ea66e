"""The messages bench/collector replays, built once before any is sent: IPFIX or NetFlow v9
data messages of FLOWS_PER_MESSAGE TCP flows each (every flow of the pool a distinct IPv4
5-tuple, started and ended within the last minutes, in the current UTC day) and the template
message that announces their template. The sender patches each message's sequence number as
it goes (``stamped``), so an exporter's sequence stays gap-free however often the pool is
replayed. Pure."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from bench.collector import packets
from router import clock

Version = Literal["ipfix", "v9"]
VERSIONS: tuple[Version, ...] = ("ipfix", "v9")
FLOWS_PER_MESSAGE = 30
TEMPLATE_ID = 300
DOMAIN = 1
# Where the header's 32-bit sequence number sits: IPFIX counts data records sent before the
# message, v9 counts export packets (templates included).
SEQUENCE_OFFSET: dict[Version, int] = {"ipfix": 8, "v9": 12}
_SEQUENCE = struct.Struct(">I")


@dataclass(frozen=True)
class Pool:
    version: Version
    template: bytes
    messages: tuple[bytes, ...]
    flows_per_message: int = FLOWS_PER_MESSAGE

    @property
    def flows(self) -> int:
        return len(self.messages) * self.flows_per_message


def five_tuple(n: int) -> tuple[bytes, bytes, int, int]:
    """Flow ``n``'s addresses and ports: 10.x.y.z -> 172.16.y.z, distinct for every n below
    2**24."""
    src = bytes([10, (n >> 16) & 0xFF, (n >> 8) & 0xFF, n & 0xFF])
    dst = bytes([172, 16 + (n >> 20) % 16, (n >> 8) & 0xFF, (n * 7) & 0xFF])
    return src, dst, 1024 + n % 60000, (80, 443, 53, 22)[n % 4]


def build(version: Version, messages: int, now_s: float | None = None) -> Pool:
    """``messages`` data messages (and the template message) stamped with ``now_s``; flows end
    in the last minute before it, but never before the UTC day began (the platform files a
    flow under its day)."""
    now_s = clock.time() if now_s is None else now_s
    now_ms = int(now_s * 1000)
    day_start_ms = int(now_s // 86400 * 86400 * 1000)
    template = packets.flow_template(TEMPLATE_ID)
    built = []
    for m in range(messages):
        records = []
        for k in range(FLOWS_PER_MESSAGE):
            n = m * FLOWS_PER_MESSAGE + k
            src, dst, src_port, dst_port = five_tuple(n)
            end_ms = max(now_ms - n % 60_000, day_start_ms + 1)
            start_ms = max(end_ms - 1_000 - n % 5_000, day_start_ms)
            octets = 64 + n % 1_400
            records.append(
                packets.flow_record(src, dst, src_port, dst_port, octets, start_ms, end_ms)
            )
        built.append(_message(version, [packets.data_set(template, records)], len(records), now_s))
    if version == "ipfix":
        announce = _message(version, [packets.ipfix_template_set([template])], 1, now_s)
    else:
        announce = _message(version, [packets.v9_template_set([template])], 1, now_s)
    return Pool(version, announce, tuple(built))


def _message(version: Version, sets: list[bytes], count: int, now_s: float) -> bytes:
    if version == "ipfix":
        return packets.ipfix_message(sets, int(now_s), domain=DOMAIN)
    # v9: sysUptime of an hour; flow times are absolute (elements 152/153) all the same.
    return packets.v9_message(sets, count, 3_600_000, int(now_s), source_id=DOMAIN)


def stamped(version: Version, message: bytes, sequence: int) -> bytes:
    """``message`` with its header's sequence number set to ``sequence`` (mod 2**32)."""
    at = SEQUENCE_OFFSET[version]
    return message[:at] + _SEQUENCE.pack(sequence & 0xFFFFFFFF) + message[at + 4 :]


def advance(version: Version, data_records: int) -> int:
    """How far one message moves its exporter's sequence number."""
    return data_records if version == "ipfix" else 1
