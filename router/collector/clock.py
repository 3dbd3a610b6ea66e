"""Flow times: absolute timestamps, or milliseconds of the exporter's uptime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Seconds from the NTP era's start (1900) to the Unix epoch.
NTP_TO_UNIX_S = 2_208_988_800
UPTIME_WRAP = 1 << 32
# RFC 7011 §6.1.9: the lower 11 bits of a dateTimeMicroseconds fraction carry no meaning.
MICROSECOND_FRACTION_MASK = 0xFFFFF800


class TimeKind(IntEnum):
    NONE = 0
    SECONDS = 1
    MILLISECONDS = 2
    MICROSECONDS = 3
    NANOSECONDS = 4
    UPTIME = 5


def uptime_age_ms(uptime_ms: int, at_ms: int) -> int:
    """How long before uptime_ms a switch time at_ms was, across the 32-bit wrap (49.7 days);
    a time slightly after the uptime (exporters round) comes out negative, not 49 days old."""
    age = (uptime_ms - at_ms) % UPTIME_WRAP
    return age - UPTIME_WRAP if age >= UPTIME_WRAP // 2 else age


# timedelta's arguments are passed by position (days, seconds, microseconds, milliseconds):
# keywords make a flow's two times cost several times more (the collector's hot path).


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(0, 0, 0, ms)


def _from_ntp(value: int, mask: int) -> datetime:
    micros = ((value & mask) * 1_000_000) >> 32
    return EPOCH + timedelta(0, (value >> 32) - NTP_TO_UNIX_S, micros)


@dataclass(frozen=True, slots=True)
class Clock:
    """What turns a message's time fields into instants: its export time, the v5/v9 header's
    sysUptime, and for IPFIX the exporter's systemInitTimeMilliseconds once an options record
    told it. OverflowError for times no datetime holds."""

    export_ms: int
    uptime_ms: int | None = None
    init_ms: int | None = None

    def converter(self, kind: TimeKind) -> Callable[[Any], datetime]:
        if kind == TimeKind.SECONDS:
            return lambda value: EPOCH + timedelta(0, value)
        if kind == TimeKind.MILLISECONDS:
            return from_ms
        if kind == TimeKind.MICROSECONDS:
            return lambda value: _from_ntp(value, MICROSECOND_FRACTION_MASK)
        if kind == TimeKind.NANOSECONDS:
            return lambda value: _from_ntp(value, 0xFFFFFFFF)
        if kind == TimeKind.UPTIME and self.uptime_ms is not None:
            export_ms, uptime_ms = self.export_ms, self.uptime_ms
            return lambda value: from_ms(export_ms - uptime_age_ms(uptime_ms, value))
        if kind == TimeKind.UPTIME and self.init_ms is not None:
            init_ms = self.init_ms
            return lambda value: from_ms(init_ms + value)
        exported = from_ms(self.export_ms)
        return lambda _: exported
