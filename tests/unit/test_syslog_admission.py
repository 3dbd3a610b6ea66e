"""The syslog listener's connection caps: in all and per source address."""

from __future__ import annotations

from router.settings import SyslogSettings
from router.syslogd.admission import OVER_CAP, OVER_SOURCE_CAP, Admission, stream_limits


def test_a_source_over_its_cap_is_refused_while_others_are_admitted() -> None:
    admission = Admission(max_connections=5, max_per_source=2)
    assert [admission.admit("10.0.0.1") for _ in range(3)] == [None, None, OVER_SOURCE_CAP]
    assert admission.admit("10.0.0.2") is None
    assert admission.total == 3
    admission.release("10.0.0.1")
    assert admission.admit("10.0.0.1") is None


def test_the_cap_in_all_comes_first_and_places_come_back() -> None:
    admission = Admission(max_connections=3, max_per_source=3)
    assert [admission.admit(f"10.0.0.{n}") for n in range(4)] == [None, None, None, OVER_CAP]
    admission.release("10.0.0.0")
    assert admission.total == 2
    assert admission.admit("10.0.0.3") is None
    assert admission.admit("10.0.0.1") == OVER_CAP


def test_limits_follow_the_settings() -> None:
    limits = stream_limits(
        SyslogSettings(
            max_connections=100,
            max_connections_per_source=7,
            idle_timeout_s=9,
            accept_retry_s=0.5,
            accept_retry_max_s=0.1,  # less than the first pause: the first pause it is
        )
    )
    assert (limits.max_connections, limits.max_per_source, limits.idle_timeout_s) == (100, 7, 9)
    assert (limits.accept_retry_s, limits.accept_retry_max_s) == (0.5, 0.5)
