"""Deterministic packet captures of TCP and UDP conversations (IPv4 and IPv6), and the totals an
exporter reading them must report per directional 5-tuple.

A capture is classic libpcap (microsecond timestamps, little-endian, linktype Ethernet), written
with struct alone. Every header is valid: IPv4 header checksums and TCP/UDP checksums are
computed (softflowd 1.1.0 checks none of them, Wireshark and pmacct users will). TCP
conversations run SYN, SYN-ACK, ACK, data both ways, FIN-ACK each way and a last ACK; UDP ones
are a request/response exchange or one-way. No two conversations share a 5-tuple in either
direction, so an exporter that folds both directions into one flow (softflowd does) never merges
two of them.

Bytes are counted as softflowd counts them: the captured frame's original length less the link
header (``phdr->len - datalink_size`` in softflowd.c's flow_cb), which is the IP datagram's length
(IPv4 total length; IPv6 40 + payload length) unless the frame carries Ethernet padding. Frames
are written unpadded unless ``pad_frames`` asks for the 60-byte Ethernet minimum, and then the
padding counts too, as softflowd would count it.
"""

from __future__ import annotations

import ipaddress
import random
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from router import clock
from services.flowtools import FiveTuple, Totals

TCP, UDP = 6, 17
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
ETHERNET_HEADER = 14
ETHERNET_MINIMUM = 60  # frame without the FCS, as a capture shows it
MAX_SPAN_S = 3600.0

_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
_CLIENT_MAC = bytes.fromhex("020000000001")
_SERVER_MAC = bytes.fromhex("020000000002")
_UDP_PORTS = (53, 123, 443, 514, 2055)
_TCP_PORTS = (22, 80, 443)
_FILLER = bytes(range(32, 127)) * 16


@dataclass(frozen=True)
class Packet:
    ts_us: int  # microseconds since the epoch
    key: FiveTuple  # the direction this packet travels
    frame: bytes

    @property
    def wire_bytes(self) -> int:
        """What softflowd adds to its flow's octets for this packet."""
        return len(self.frame) - ETHERNET_HEADER

    @property
    def is_v6(self) -> bool:
        return ":" in self.key.src


@dataclass
class Capture:
    """The packets in capture order, and the conversations they came from (client side first)."""

    packets: list[Packet] = field(default_factory=list)
    conversations: list[FiveTuple] = field(default_factory=list)

    def write(self, path: Path) -> Path:
        write_pcap(path, self.packets)
        return path

    def expected(self, *, sample_rate: int = 1, track_v6: bool = True) -> dict[FiveTuple, Totals]:
        return expected_totals(self.packets, sample_rate=sample_rate, track_v6=track_v6)


def recent_base(now: datetime | None = None) -> datetime:
    """Noon UTC of the day before ``now``'s: whatever the hour, a capture of up to MAX_SPAN_S
    seconds from there lies within one UTC day, 11 hours or more from either of its
    midnights, in the past (12 to 36 hours old) and well within the days the platform keeps.
    (An hour before the current hour put a run started at 01:xx at 00:00:00, and flows whose
    exported times round down onto the day before.)"""
    now = (now or clock.now()).astimezone(UTC)
    return now.replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=1)


def generate(
    conversations: int,
    *,
    base: datetime,
    seed: int = 1,
    span_s: float = 180.0,
    v6_share: float = 0.3,
    udp_share: float = 0.4,
    max_payload: int = 1200,
    pad_frames: bool = False,
) -> Capture:
    """``conversations`` conversations starting within ``span_s`` seconds of ``base`` (aware,
    whole microseconds), the same for the same arguments."""
    if base.tzinfo is None:
        raise ValueError("base must be timezone-aware")
    if not 0 < span_s <= MAX_SPAN_S:
        raise ValueError(f"span_s must lie in (0, {MAX_SPAN_S}]")
    end = base + timedelta(seconds=span_s)
    if end.astimezone(UTC).date() != base.astimezone(UTC).date():
        raise ValueError("the capture must lie within one UTC day")
    rng = random.Random(seed)
    base_us = int(base.timestamp()) * 1_000_000 + base.microsecond
    span_us = int(span_s * 1_000_000)
    taken: set[FiveTuple] = set()
    capture = Capture()
    for _ in range(conversations):
        key = _new_key(rng, taken, v6_share, udp_share)
        capture.conversations.append(key)
        # Conversations last up to 5 s and end within the span.
        start = base_us + rng.randrange(max(1, span_us - 5_000_000))
        capture.packets.extend(_conversation(rng, key, start, max_payload, pad_frames))
    capture.packets.sort(key=lambda packet: packet.ts_us)  # stable: a conversation keeps its order
    return capture


def _new_key(
    rng: random.Random, taken: set[FiveTuple], v6_share: float, udp_share: float
) -> FiveTuple:
    """A 5-tuple no earlier conversation uses in either direction (a clash draws again)."""
    v6 = rng.random() < v6_share
    proto = UDP if rng.random() < udp_share else TCP
    while True:
        host = rng.randrange(1, 1 << 16)
        server = rng.randrange(1, 255)
        if v6:
            client, peer = f"2001:db8:1::{host:x}", f"2001:db8:2::{server:x}"
        else:
            client, peer = f"10.1.{host >> 8}.{host & 0xFF or 1}", f"192.0.2.{server}"
        dst_port = rng.choice(_UDP_PORTS if proto == UDP else _TCP_PORTS)
        key = FiveTuple(client, peer, rng.randrange(1024, 65536), dst_port, proto)
        if key not in taken and key.reversed() not in taken:
            taken.add(key)
            return key


def _conversation(
    rng: random.Random, key: FiveTuple, start_us: int, max_payload: int, pad: bool
) -> Iterator[Packet]:
    """One conversation's packets: (direction, flags, payload) steps a few ms apart."""
    back = key.reversed()
    steps: list[tuple[FiveTuple, int, int]] = []
    exchanges = rng.randrange(1, 6)
    if key.proto == TCP:
        steps += [(key, SYN, 0), (back, SYN | ACK, 0), (key, ACK, 0)]
        for _ in range(exchanges):
            steps.append((key, PSH | ACK, rng.randrange(1, max_payload + 1)))
            steps.append((back, PSH | ACK, rng.randrange(1, max_payload + 1)))
        steps += [(key, FIN | ACK, 0), (back, FIN | ACK, 0), (key, ACK, 0)]
    else:
        one_way = rng.random() < 0.25
        for _ in range(exchanges):
            steps.append((key, 0, rng.randrange(1, max_payload + 1)))
            if not one_way:
                steps.append((back, 0, rng.randrange(1, max_payload + 1)))
    seq = {key: rng.randrange(1 << 32), back: rng.randrange(1 << 32)}
    ts = start_us
    for direction, flags, size in steps:
        payload = _FILLER[:size]
        other = direction.reversed()
        ack = (seq[other] if flags & ACK else 0) & 0xFFFFFFFF
        frame = _frame(direction, flags, seq[direction] & 0xFFFFFFFF, ack, payload, pad)
        yield Packet(ts, direction, frame)
        seq[direction] += size + (1 if flags & (SYN | FIN) else 0)
        ts += rng.randrange(100, 50_000)


def _frame(key: FiveTuple, flags: int, seq: int, ack: int, payload: bytes, pad: bool) -> bytes:
    src, dst = ipaddress.ip_address(key.src), ipaddress.ip_address(key.dst)
    if key.proto == TCP:
        segment = struct.pack(
            "!HHIIBBHHH", key.src_port, key.dst_port, seq, ack, 5 << 4, flags, 65535, 0, 0
        )
    else:
        segment = struct.pack("!HHHH", key.src_port, key.dst_port, 8 + len(payload), 0)
    segment += payload
    pseudo = src.packed + dst.packed
    if src.version == 4:
        pseudo += struct.pack("!BBH", 0, key.proto, len(segment))
    else:
        pseudo += struct.pack("!IxxxB", len(segment), key.proto)
    checksum = _checksum(pseudo + segment)
    if key.proto == UDP and checksum == 0:
        checksum = 0xFFFF  # 0 means "no checksum" for UDP
    offset = 16 if key.proto == TCP else 6
    segment = segment[:offset] + struct.pack("!H", checksum) + segment[offset + 2 :]
    if src.version == 4:
        header = struct.pack(
            "!BBHHHBBH4s4s", 0x45, 0, 20 + len(segment), 0, 0x4000, 64, key.proto, 0,
            src.packed, dst.packed,
        )  # fmt: skip
        header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
        ethertype = 0x0800
    else:
        header = struct.pack("!IHBB", 6 << 28, len(segment), key.proto, 64)
        header += src.packed + dst.packed
        ethertype = 0x86DD
    macs = _SERVER_MAC + _CLIENT_MAC if src.packed < dst.packed else _CLIENT_MAC + _SERVER_MAC
    frame = macs + struct.pack("!H", ethertype) + header + segment
    if pad and len(frame) < ETHERNET_MINIMUM:
        frame += bytes(ETHERNET_MINIMUM - len(frame))
    return frame


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def write_pcap(path: Path, packets: Iterable[Packet]) -> None:
    with open(path, "wb") as out:
        out.write(_PCAP_HEADER)
        for packet in packets:
            seconds, micros = divmod(packet.ts_us, 1_000_000)
            size = len(packet.frame)
            out.write(struct.pack("<IIII", seconds, micros, size, size))
            out.write(packet.frame)


def expected_totals(
    packets: Iterable[Packet], *, sample_rate: int = 1, track_v6: bool = True
) -> dict[FiveTuple, Totals]:
    """Per directional 5-tuple: one flow, and the packets and bytes softflowd 1.1.0 counts.

    ``sample_rate`` N follows softflowd's ``-s N`` exactly: it keeps the packet when its running
    count (packets kept plus packets skipped) is a multiple of N, and a packet it keeps but cannot
    track (IPv6 when the export version cannot carry it and ``-6`` is absent) is taken back out of
    the count, so the next packet is kept instead. A direction none of whose packets were kept has
    no flow. ``track_v6`` is False for NetFlow v5 without ``-6``.
    """
    rate = sample_rate if sample_rate >= 2 else 0  # softflowd ignores -s 1 (and below)
    counted = 0
    sums: dict[FiveTuple, tuple[int, int]] = {}
    for packet in packets:
        if rate and counted % rate:
            counted += 1
            continue
        if packet.is_v6 and not track_v6:
            continue
        counted += 1
        packets_so_far, bytes_so_far = sums.get(packet.key, (0, 0))
        sums[packet.key] = (packets_so_far + 1, bytes_so_far + packet.wire_bytes)
    return {key: Totals(1, count, size) for key, (count, size) in sorted(sums.items())}


def read_pcap(path: Path) -> list[tuple[int, bytes]]:
    """(microseconds since the epoch, frame) of each record of a classic little-endian pcap."""
    data = path.read_bytes()
    if data[:4] != _PCAP_HEADER[:4]:
        raise ValueError(f"{path}: not a little-endian microsecond pcap")
    records, offset = [], len(_PCAP_HEADER)
    while offset < len(data):
        seconds, micros, size, _ = struct.unpack_from("<IIII", data, offset)
        offset += 16
        records.append((seconds * 1_000_000 + micros, data[offset : offset + size]))
        offset += size
    return records


def udp_payload(frame: bytes) -> bytes:
    """The payload of an Ethernet/IPv4/UDP frame (as write_datagrams writes them)."""
    ihl = (frame[ETHERNET_HEADER] & 0x0F) * 4
    start = ETHERNET_HEADER + ihl
    (length,) = struct.unpack_from("!H", frame, start + 4)
    return frame[start + 8 : start + length]


def write_datagrams(path: Path, datagrams: Iterable[bytes], ts_us: int, port: int = 2055) -> None:
    """Exported datagrams as a capture of UDP packets from 127.0.0.1 to ``port`` (Wireshark
    decodes NetFlow and IPFIX on 2055 and 4739), one microsecond apart."""
    key = FiveTuple("127.0.0.1", "127.0.0.1", 40000, port, UDP)
    write_pcap(
        path,
        (Packet(ts_us + i, key, _frame(key, 0, 0, 0, d, False)) for i, d in enumerate(datagrams)),
    )
