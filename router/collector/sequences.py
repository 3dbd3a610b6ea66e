"""Flows lost in transit, from the sequence numbers in message headers.

What a sequence number counts differs by version: NetFlow v5's flow_sequence and IPFIX's
sequence number count flows (IPFIX: data records) sent before the message, so the next message
should carry this one's number plus its record count. NetFlow v9's counts export packets, so
a gap is a number of lost packets; the flows they held are estimated as that number times the
record count of the last message received (v9's header count includes template records).

Sequence numbers are 32-bit and wrap, and anyone can send a datagram with any number in it, so
only a plausible gap is loss: one of at most max_gap ahead (in the sequence number's own unit:
flows, or v9 packets). A number at most max_gap behind is a late (reordered) message, which
changes nothing. Anything else is a break, never loss: a reset when the number is below
max_gap (an exporter that restarted and counts afresh), else a jump (a forged or garbled
datagram, or a stream that lost more than max_gap); the stream goes on from the new number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

SEQUENCE_SPACE = 1 << 32
Break = Literal["reset", "jump"]


class Gap(NamedTuple):
    """What one message's sequence number says: flows lost before it, or a break."""

    lost: int = 0
    broken: Break | None = None


NO_GAP = Gap()


@dataclass(slots=True)
class _Stream:
    expected: int | None
    last_records: int


class Sequences:
    def __init__(self, max_gap: int = 100_000, max_streams: int = 65536) -> None:
        self.max_gap = max_gap
        self.max_streams = max_streams
        self._streams: dict[tuple[str, int, int], _Stream] = {}

    def observe(
        self, exporter: str, domain: int, version: int, sequence: int, records: int | None
    ) -> Gap:
        """The gap between the last message of this stream and this one (none for the first).

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
            return NO_GAP
        gap = NO_GAP
        if stream.expected is not None:
            ahead = (sequence - stream.expected) % SEQUENCE_SPACE
            if ahead <= self.max_gap:
                gap = Gap(ahead * stream.last_records if version == 9 else ahead)
            elif SEQUENCE_SPACE - ahead <= self.max_gap:
                return NO_GAP
            else:
                gap = Gap(0, "reset" if sequence < self.max_gap else "jump")
        stream.expected = following
        stream.last_records = records or 0
        return gap
