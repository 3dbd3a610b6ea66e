"""The one clock (router/clock.py): shifted, frozen, set from the environment, swapped."""

from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from router import clock
from router.clock import Clock
from router.settings import Settings
from services.collector_process import CollectorProcess
from services.syslog_process import SyslogProcess

# Two reads of two clocks a few statements apart: far less than this on any machine.
SLACK = timedelta(seconds=5)


def test_the_default_clock_is_the_wall_clock() -> None:
    wall = Clock()
    assert wall.is_wall
    assert abs(wall.now() - datetime.now(UTC)) < SLACK
    assert abs(wall.time() - time.time()) < SLACK.total_seconds()
    assert wall.now().tzinfo is UTC
    assert wall.drift_s() == 0


def test_an_offset_shifts_the_clock_and_it_keeps_running() -> None:
    shifted = Clock(offset_s=-(3 * 86400 + 43200.5))
    assert not shifted.is_wall
    expected = datetime.now(UTC) - timedelta(days=3, hours=12, seconds=0.5)
    assert abs(shifted.now() - expected) < SLACK
    assert abs(shifted.time() - expected.timestamp()) < SLACK.total_seconds()
    first = shifted.now()
    deadline = time.monotonic() + 5
    while shifted.now() == first and time.monotonic() < deadline:
        pass
    assert shifted.now() > first
    assert shifted.drift_s() == -(3 * 86400 + 43200.5)


def test_a_clock_set_at_an_instant_reads_it_now() -> None:
    target = datetime(2026, 10, 31, 23, 59, 50, tzinfo=UTC)
    shifted = Clock.at(target)
    assert target <= shifted.now() < target + SLACK
    assert shifted.today() == date(2026, 10, 31)


def test_a_frozen_clock_stands_still() -> None:
    instant = datetime(2026, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    frozen = Clock(offset_s=1000, frozen_at=instant)
    assert frozen.now() == frozen.now() == instant
    assert frozen.time() == instant.timestamp()
    assert frozen.today() == date(2026, 12, 31)
    assert not frozen.is_wall
    assert frozen.describe() == "frozen at 2026-12-31T23:59:59.999000+00:00"


def test_a_frozen_instant_must_name_its_zone() -> None:
    with pytest.raises(ValueError, match="time zone"):
        Clock(frozen_at=datetime(2026, 10, 31, 23, 59, 50))


@pytest.mark.parametrize(
    ("instant", "day"),
    [
        (datetime(2026, 10, 31, 23, 59, 59, 999_000, tzinfo=UTC), date(2026, 10, 31)),
        (datetime(2026, 11, 1, 0, 0, 0, tzinfo=UTC), date(2026, 11, 1)),
        (datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), date(2026, 12, 31)),
        (datetime(2027, 1, 1, 0, 0, 0, tzinfo=UTC), date(2027, 1, 1)),
        # The day is UTC's, whatever zone the instant was written in.
        (datetime.fromisoformat("2026-11-01T00:30:00+01:00"), date(2026, 10, 31)),
        (datetime.fromisoformat("2026-10-31T23:30:00-01:00"), date(2026, 11, 1)),
    ],
)
def test_today_is_the_utc_day_of_now(instant: datetime, day: date) -> None:
    with clock.using(Clock(frozen_at=instant)):
        assert clock.today() == day
        assert clock.now() == instant
        assert clock.now().tzinfo is UTC


def test_using_swaps_the_process_clock_and_puts_it_back() -> None:
    before = clock.current()
    instant = datetime(2026, 10, 31, 23, 59, 50, tzinfo=UTC)
    with clock.using(Clock(frozen_at=instant)) as frozen:
        assert clock.current() is frozen
        assert clock.now() == instant
        assert clock.time() == instant.timestamp()
    assert clock.current() is before


def test_the_environment_sets_every_process_clock(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SHARDLOG_CLOCK__OFFSET_S", "86400")
    settings = Settings()
    assert settings.clock.offset_s == 86400
    before = clock.current()
    try:
        with caplog.at_level(logging.WARNING, logger="router.clock"):
            configured = clock.configure(settings.clock)
        assert clock.current() is configured
        assert abs(clock.now() - (datetime.now(UTC) + timedelta(days=1))) < SLACK
        assert "not the wall clock" in caplog.text
        assert "+86400.000 s" in caplog.text
    finally:
        clock.install(before)


def test_a_frozen_instant_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_CLOCK__FROZEN_AT", "2026-10-31T23:59:50Z")
    assert Clock.of(Settings().clock).now() == datetime(2026, 10, 31, 23, 59, 50, tzinfo=UTC)
    monkeypatch.setenv("SHARDLOG_CLOCK__FROZEN_AT", "2026-10-31T23:59:50")
    with pytest.raises(ValidationError, match="frozen_at"):
        Settings()


def test_the_wall_clock_is_configured_without_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHARDLOG_CLOCK__OFFSET_S", raising=False)
    monkeypatch.delenv("SHARDLOG_CLOCK__FROZEN_AT", raising=False)
    before = clock.current()
    try:
        with caplog.at_level(logging.WARNING, logger="router.clock"):
            assert clock.configure(Settings().clock).is_wall
        assert caplog.text == ""
    finally:
        clock.install(before)


def test_the_drift_is_a_metric() -> None:
    registry = CollectorRegistry()
    clock.register_metrics(registry)
    with clock.using(Clock()):
        assert registry.get_sample_value("shardlog_clock_drift_seconds") == 0
    with clock.using(Clock(offset_s=-120.5)):
        assert registry.get_sample_value("shardlog_clock_drift_seconds") == -120.5
    frozen = datetime.now(UTC) + timedelta(hours=1)
    with clock.using(Clock(frozen_at=frozen)):
        drift = registry.get_sample_value("shardlog_clock_drift_seconds")
        assert drift is not None and 3600 - 5 < drift <= 3600


def test_the_collector_and_syslog_launchers_pass_the_clock_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """They start their process with a clean environment: the clock's settings of the tests'
    process go with it (the router's launcher passes its whole environment on)."""
    monkeypatch.setenv("SHARDLOG_CLOCK__OFFSET_S", "-42.5")
    monkeypatch.setenv("SHARDLOG_OTHER__SETTING", "not passed")
    for launcher in (CollectorProcess, SyslogProcess):
        started = launcher(tmp_path, "127.0.0.1", 1, {"SHARDLOG_COLLECTOR__METRICS_PORT": "1"})
        env = started._daemon.env
        assert env["SHARDLOG_CLOCK__OFFSET_S"] == "-42.5"
        assert "SHARDLOG_OTHER__SETTING" not in env
        explicit = launcher(tmp_path, "127.0.0.1", 1, {"SHARDLOG_CLOCK__OFFSET_S": "7"})
        assert explicit._daemon.env["SHARDLOG_CLOCK__OFFSET_S"] == "7"
