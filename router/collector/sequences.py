"""Flows lost in transit, from the sequence numbers in message headers.

What a sequence number counts differs by version: NetFlow v5's flow_sequence and IPFIX's
sequence number count flows (IPFIX: data records) sent before the message, so the next message
should carry this one's number plus its record count. NetFlow v9's counts export packets, so
a gap is a number of lost packets; the flows they held are estimated as that number times the
record count of the last message received (v9's header count includes template records).

Sequence numbers are 32-bit and wrap. A number behind the expected one is either a late
(reordered) message, which changes nothing, or, when it is more than restart_gap behind, an
exporter that restarted and counts afresh: neither is loss. restart_gap is in the
sequence number's own unit (flows, or v9 packets).
"""

from __future__ import annotations

from dataclasses import dataclass

SEQUENCE_SPACE = 1 << 32


@dataclass(slots=True)
class _Stream:
    expected: int | None
    last_records: int


class Sequences:
    def __init__(self, restart_gap: int = 100_000, max_streams: int = 65536) -> None:
        self.restart_gap = restart_gap
        self.max_streams = max_streams
        self._streams: dict[tuple[str, int, int], _Stream] = {}

    def observe(
        self, exporter: str, domain: int, version: int, sequence: int, records: int | None
    ) -> int:
        """Flows lost between the last message of this stream and this one (0 for the first).

        records is how many records this message holds (v9: the header's count); None when it
        is not known (a data set held for its template), so the next gap is not judged."""
        key = (exporter, domain, version)
        stream = self._streams.get(key)
        step = 1 if version == 9 else records
        following = None if step is None else (sequence + step) % SEQUENCE_SPACE
        if stream is None:
            if len(self._streams) >= self.max_streams:
                del self._streams[next(iter(self._streams))]
            self._streams[key] = _Stream(following, records or 0)
            return 0
        lost = 0
        if stream.expected is not None:
            ahead = (sequence - stream.expected) % SEQUENCE_SPACE
            behind = SEQUENCE_SPACE - ahead
            if ahead < SEQUENCE_SPACE // 2:
                lost = ahead * stream.last_records if version == 9 else ahead
            elif behind <= self.restart_gap:
                return 0
        stream.expected = following
        stream.last_records = records or 0
        return lost
