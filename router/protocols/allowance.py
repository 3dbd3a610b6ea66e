"""What decoding one request's records may take, checked while it decodes, record by record:
the write API's limits (SHARDLOG_INGEST__MAX_RECORDS, MAX_RECORD_BYTES, MAX_ATTRS_BYTES) and
the memory its decoded messages hold, charged to the router's in-flight budget as they are
made. A decoder asks before it parses a record, so a request past a limit is refused (413, or
429 when the budget is spent) before it costs more than one record's memory."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from router.errors import TooLarge
from router.settings import IngestSettings

# Each attribute (a JSON object's member, at least ``"k":0`` and a comma) takes this many bytes
# of attrs or more: a record with more attributes than max_attrs_bytes / this cannot fit, when
# its keys are distinct (as OTLP requires them).
ATTRIBUTE_JSON_BYTES = 4
# What a decoded message holds in memory besides its bytes as they came: the message, its
# timestamp and dicts (measured with tracemalloc on OTLP records: about 170 bytes, and 110-130
# per attribute; rounded up).
MESSAGE_BYTES = 256
ATTRIBUTE_BYTES = 160
# A decoder pauses (yields) after making about this many bytes of messages: a few milliseconds
# of work, after which the router's event loop may serve others (health checks among them).
STEP_BYTES = 2**20

T = TypeVar("T")
# A decoding in steps: it yields at each pause, and returns what it decoded.
Steps = Generator[None, None, T]


class Stepping(Generic[T]):
    """A decoding in steps to iterate, an item at each pause; what it decoded is ``value``
    once the iteration ended."""

    value: T

    def __init__(self, steps: Steps[T]) -> None:
        self._steps = steps

    def __iter__(self) -> Iterator[None]:
        self.value = yield from self._steps


def run(steps: Steps[T]) -> T:
    """A decoding in steps run to its end without pausing."""
    stepping = Stepping(steps)
    for _ in stepping:
        pass
    return stepping.value


def _nothing_charged(amount: int) -> None:
    """For a decoder run outside a request (tests, benchmarks): no budget to charge."""


@dataclass
class Allowance:
    max_records: int
    max_record_bytes: int
    max_attributes: int
    # Takes an amount from the in-flight budget, raising Overloaded (429) when it is spent.
    charge: Callable[[int], None] = _nothing_charged
    # How a refusal of too many records names the request's records ("resourceLogs").
    label: str = "records"
    records: int = 0
    since_pause: int = 0

    @classmethod
    def of(
        cls,
        settings: IngestSettings,
        charge: Callable[[int], None] = _nothing_charged,
        label: str = "records",
    ) -> Allowance:
        return cls(
            settings.max_records,
            settings.max_record_bytes,
            settings.max_attrs_bytes // ATTRIBUTE_JSON_BYTES,
            charge,
            label,
        )

    def record(self, where: str, wire_bytes: int) -> None:
        """One more record, ``wire_bytes`` long as it came, about to be parsed."""
        self.records += 1
        if self.records > self.max_records:
            raise TooLarge(f"more than {self.max_records} records in one request", self.label)
        self.part(where, wire_bytes)

    def part(self, where: str, wire_bytes: int) -> None:
        """A record or a part every record of it holds (an OTLP resource), before parsing."""
        if wire_bytes > self.max_record_bytes:
            raise TooLarge(
                f"{where} is {wire_bytes} bytes long, more than any valid record can take "
                f"(SHARDLOG_INGEST__MAX_RECORD_BYTES: {self.max_record_bytes})",
                where,
            )

    def attributes(self, where: str, count: int) -> None:
        """Attributes (or labels, or metadata) about to become one record's attrs."""
        if count > self.max_attributes:
            raise TooLarge(
                f"{where} has {count} entries, more than attrs within "
                f"SHARDLOG_INGEST__MAX_ATTRS_BYTES can hold (at most {self.max_attributes})",
                where,
            )

    def decoded(self, wire_bytes: int, attributes: int = 0) -> bool:
        """A message made from ``wire_bytes`` with ``attributes``: its memory charged. Whether
        the decoder is due to pause (STEP_BYTES made since it last did)."""
        cost = wire_bytes + MESSAGE_BYTES + ATTRIBUTE_BYTES * attributes
        self.charge(cost)
        self.since_pause += cost
        if self.since_pause < STEP_BYTES:
            return False
        self.since_pause = 0
        return True
