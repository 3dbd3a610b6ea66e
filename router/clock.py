"""The one clock: "now" as every shardlog process reads it (router, collector, syslog listener,
retention, the CLI).

The wall clock in production. Tests shift it (``SHARDLOG_CLOCK__OFFSET_S``: it keeps running,
so a process set to 23:59:50 crosses midnight) or freeze it (``SHARDLOG_CLOCK__FROZEN_AT``), in
every process alike; in-process tests swap it with ``using``. Durations and pacing are not
"now": they keep ``time.monotonic()`` and the event loop's time.
"""

from __future__ import annotations

import contextlib
import logging
import time as _time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

from prometheus_client import CollectorRegistry, Gauge

from router.settings import ClockSettings

log = logging.getLogger("router.clock")


class Clock:
    """The wall clock shifted by ``offset_s``, or stopped at ``frozen_at`` (aware)."""

    def __init__(self, offset_s: float = 0.0, frozen_at: datetime | None = None) -> None:
        if frozen_at is not None and frozen_at.tzinfo is None:
            raise ValueError("frozen_at must carry a time zone")
        self.offset_s = offset_s
        self._offset = timedelta(seconds=offset_s)
        self.frozen_at = None if frozen_at is None else frozen_at.astimezone(UTC)

    @classmethod
    def at(cls, instant: datetime) -> Clock:
        """A running clock that reads ``instant`` now."""
        return cls(offset_s=(instant - datetime.now(UTC)).total_seconds())

    @classmethod
    def of(cls, settings: ClockSettings) -> Clock:
        return cls(settings.offset_s, settings.frozen_at)

    @property
    def is_wall(self) -> bool:
        return self.frozen_at is None and self.offset_s == 0

    def now(self) -> datetime:
        if self.frozen_at is not None:
            return self.frozen_at
        return datetime.now(UTC) + self._offset

    def today(self) -> date:
        return self.now().date()

    def time(self) -> float:
        """Epoch seconds: for instants compared across processes (a tail cursor's issue time)."""
        if self.frozen_at is not None:
            return self.frozen_at.timestamp()
        return _time.time() + self.offset_s

    def drift_s(self) -> float:
        """How far this clock reads from the wall clock, in seconds (0 in production)."""
        if self.frozen_at is None:
            return self.offset_s
        return (self.frozen_at - datetime.now(UTC)).total_seconds()

    def describe(self) -> str:
        if self.frozen_at is not None:
            return f"frozen at {self.frozen_at.isoformat()}"
        return f"the wall clock shifted by {self.offset_s:+.3f} s"


_current = Clock()


def current() -> Clock:
    return _current


def now() -> datetime:
    """The aware UTC instant this process calls now."""
    return _current.now()


def today() -> date:
    """The UTC day of ``now()``."""
    return _current.now().date()


def time() -> float:
    return _current.time()


def real_now() -> datetime:
    """The machine's wall clock whatever this process's clock reads: what real external
    clients (a browser, logger, softflowd) and PostgreSQL's ``now()`` stamp with."""
    return datetime.now(UTC)


def install(clock: Clock) -> Clock:
    """Make ``clock`` this process's clock; returns the one it replaces."""
    global _current
    previous, _current = _current, clock
    return previous


@contextlib.contextmanager
def using(clock: Clock) -> Iterator[Clock]:
    """This process reads ``clock`` inside the block (in-process tests)."""
    previous = install(clock)
    try:
        yield clock
    finally:
        install(previous)


def configure(settings: ClockSettings) -> Clock:
    """Install the clock the settings ask for; a clock that is not the wall clock is a test
    setting, so say so loudly."""
    clock = Clock.of(settings)
    install(clock)
    if not clock.is_wall:
        log.warning(
            "the clock is not the wall clock: %s (SHARDLOG_CLOCK__*, a test-only setting)",
            clock.describe(),
        )
    return clock


def register_metrics(registry: CollectorRegistry) -> None:
    """``shardlog_clock_drift_seconds`` in ``registry``: non-zero is a test clock in production."""
    drift = Gauge(
        "shardlog_clock_drift_seconds",
        "How far this process's clock reads from the wall clock (SHARDLOG_CLOCK__*; 0 unless "
        "a test shifted or froze it)",
        registry=registry,
    )
    drift.set_function(lambda: _current.drift_s())
