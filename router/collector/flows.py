"""The flow record every NetFlow version and IPFIX decode into."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

# Protocols whose headers carry ports; every other protocol's ports are reported as 0.
PORTED_PROTOCOLS = frozenset({6, 17, 33, 132, 136})  # TCP, UDP, DCCP, SCTP, UDP-Lite
# ICMP and ICMPv6 report type * 256 + code in dst_port, as most exporters already send it.
ICMP_PROTOCOLS = frozenset({1, 58})


class FlowRecord(NamedTuple):
    """One flow as the exporter reported it, with counts scaled up by the sampling rate. A
    tuple, not a frozen dataclass: one is made per flow, and a tuple is made 4x faster.

    src_ip and dst_ip are the raw 4 (IPv4) or 16 (IPv6) address bytes, always of one family.
    Ports are as sent for protocols with ports, 0 for others but ICMP, whose dst_port holds
    type * 256 + code: from its own element when the exporter sends one, else as sent.
    """

    src_ip: bytes
    dst_ip: bytes
    src_port: int
    dst_port: int
    proto: int
    bytes: int
    packets: int
    first_seen: datetime
    last_seen: datetime
    tcp_flags: int
    sampling_rate: int

    @property
    def ip_version(self) -> int:
        return 4 if len(self.src_ip) == 4 else 6
