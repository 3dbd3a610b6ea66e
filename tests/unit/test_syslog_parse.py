"""router/protocols/syslog.py: RFC 5424 and RFC 3164 messages, table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from router.protocols.syslog import (
    SyslogError,
    attrs_of,
    message,
    owner_of,
    owner_rules,
    parse,
)

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
RULES = owner_rules("sd:shardlog@32473:owner,app_name,hostname")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (  # RFC 5424 §6.5, example 1: no SD, a BOM before the MSG
            b"<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - "
            b"\xef\xbb\xbf'su root' failed for lonvick on /dev/pts/8",
            {
                "ts": datetime(2003, 10, 11, 22, 14, 15, 3000, tzinfo=UTC),
                "facility": 4, "severity": 2, "hostname": "mymachine.example.com",
                "app_name": "su", "procid": None, "msgid": "ID47", "sd": {},
                "msg": "'su root' failed for lonvick on /dev/pts/8",
            },
        ),
        (  # example 2: an offset, microseconds
            b"<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - %% It's time",
            {
                "ts": datetime(2003, 8, 24, 12, 14, 15, 3, tzinfo=UTC),
                "facility": 20, "severity": 5, "procid": "8710", "msgid": None,
                "msg": "%% It's time",
            },
        ),
        (  # example 3: structured data, no MSG
            b'<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 '
            b'[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"]',
            {
                "sd": {"exampleSDID@32473": {
                    "iut": "3", "eventSource": "Application", "eventID": "1011"}},
                "msg": "",
            },
        ),
        (  # two elements, escapes, a backslash before another character kept
            b'<13>1 2026-01-02T10:00:00Z h a p m [a@1 x="q\\"u\\\\o\\]te" y="c:\\d"]'
            b'[b@1 z=""] text',
            {"sd": {"a@1": {"x": 'q"u\\o]te', "y": "c:\\d"}, "b@1": {"z": ""}}, "msg": "text"},
        ),
        (  # a parameter named twice: both values
            b'<13>1 2026-01-02T10:00:00Z h a p m [a@1 ip="1" ip="2"] x',
            {"sd": {"a@1": {"ip": ["1", "2"]}}},
        ),
        (  # every header field NIL: no ts (the receiving time stands in)
            b"<0>1 - - - - - -",
            {"ts": None, "hostname": None, "app_name": None, "facility": 0, "severity": 0},
        ),
        (  # bytes that are not UTF-8, a trailing LF
            b"<13>1 - h a - - - caf\xe9\n",
            {"msg": "caf\ufffd"},
        ),
        (  # RFC 3164 §5.4
            b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8",
            {
                "format": "rfc3164", "ts": datetime(2025, 10, 11, 22, 14, 15, tzinfo=UTC),
                "hostname": "mymachine", "app_name": "su", "procid": None,
                "msg": "'su root' failed for lonvick on /dev/pts/8",
            },
        ),
        (  # a space-padded day, a pid
            b"<13>Jan  2 11:59:00 host sshd[4242]: Accepted key",
            {
                "ts": datetime(2026, 1, 2, 11, 59, tzinfo=UTC), "app_name": "sshd",
                "procid": "4242", "msg": "Accepted key",
            },
        ),
        (  # no hostname: the first word is the tag
            b"<13>Jan  2 11:59:00 cron[1]: ran",
            {"hostname": None, "app_name": "cron", "procid": "1", "msg": "ran"},
        ),
        (  # no tag: all of it is the message
            b"<13>Jan  2 11:59:00 host just words here",
            {"hostname": "host", "app_name": None, "msg": "just words here"},
        ),
        (  # syslog-ng's frac-digits(6): microseconds after the seconds
            b"<134>Nov 27 22:25:32.123456 web-7 app[1]: x",
            {
                "format": "rfc3164", "ts": datetime(2025, 11, 27, 22, 25, 32, 123456, tzinfo=UTC),
                "hostname": "web-7", "app_name": "app", "procid": "1", "msg": "x",
            },
        ),
        (  # frac-digits(3): milliseconds
            b"<134>Jan  2 11:59:00.5 web-7 app: x",
            {"ts": datetime(2026, 1, 2, 11, 59, 0, 500000, tzinfo=UTC), "hostname": "web-7"},
        ),
        (  # rsyslog's forward format: an RFC 3339 timestamp in 3164's place
            b"<86>2026-01-02T11:00:00.250+01:00 web-1 sudo: pam_unix",
            {
                "format": "rfc3164", "ts": datetime(2026, 1, 2, 10, 0, 0, 250000, tzinfo=UTC),
                "hostname": "web-1", "app_name": "sudo", "facility": 10, "severity": 6,
            },
        ),
    ],
)  # fmt: skip
def test_messages(raw: bytes, expected: dict[str, Any]) -> None:
    parsed = parse(raw, NOW)
    for name, value in expected.items():
        assert getattr(parsed, name) == value, name


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "no PRI"),
        (b"no pri at all", "no PRI"),
        (b"<192>1 - - - - - -", "no PRI"),
        (b"<013>1 - - - - - -", "no PRI"),
        (b"<13", "no PRI"),
        (b"<13>1 - h a p", "bad header"),
        (b"<13>1 2026-13-01T00:00:00Z h a p m -", "bad timestamp"),
        (b"<13>1 2026-01-01 00:00:00Z h a p m -", "bad timestamp"),
        (b"<13>1 2026-01-01T00:00:00+24:00 h a p m -", "bad timestamp"),
        (b"<13>1 - h a p m [x", "bad structured data"),
        (b'<13>1 - h a p m [x@1 a="unclosed]', "bad structured data"),
        (b"<13>1 - h a p m [x@1 a=1]", "bad structured data"),
        (b"<13>1 - h a p m [x@1]tail", "bad structured data"),
        (b"<13>1 - h a p m nope", "bad structured data"),
        (b"<13>1 - h " + b"a" * 49 + b" p m -", "bad header"),
        (b"<13>Foo 11 22:14:15 host x: y", "bad timestamp"),
        (b"<13>Feb 30 22:14:15 host x: y", "bad timestamp"),
        (b"<13>Feb 29 22:14:15 host x: y", "bad timestamp"),  # none of 2025..2027 has one
        (b"<13>hello world", "bad timestamp"),
        (b"<13>Jan  2 11:59:00.1234567 host x: y", "bad timestamp"),  # finer than microseconds
        (b"<13>Jan  2 11:59:00. host x: y", "bad timestamp"),
    ],
)
def test_refusals(raw: bytes, reason: str) -> None:
    with pytest.raises(SyslogError) as caught:
        parse(raw, NOW)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("now", "stamp", "year"),
    [
        (datetime(2026, 1, 1, 0, 5, tzinfo=UTC), b"Dec 31 23:59:59", 2025),  # last year's
        (datetime(2026, 12, 31, 23, 59, tzinfo=UTC), b"Jan  1 00:00:30", 2027),  # a fast clock
        (datetime(2026, 6, 1, tzinfo=UTC), b"Jun  2 23:00:00", 2026),  # a day ahead: this year
        (datetime(2026, 6, 1, tzinfo=UTC), b"Jun  4 00:00:00", 2025),  # 3 days ahead: last year
        (datetime(2028, 3, 1, tzinfo=UTC), b"Feb 29 12:00:00", 2028),
    ],
)
def test_the_3164_year_rule(now: datetime, stamp: bytes, year: int) -> None:
    assert parse(b"<13>" + stamp + b" h t: m", now).ts.year == year  # type: ignore[union-attr]


def test_the_3164_zone_is_a_setting() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    summer = parse(b"<13>Jul  1 12:00:00 h t: m", datetime(2026, 7, 2, tzinfo=UTC), berlin)
    winter = parse(b"<13>Jan  1 12:00:00 h t: m", datetime(2026, 1, 2, tzinfo=UTC), berlin)
    assert summer.ts == datetime(2026, 7, 1, 10, tzinfo=UTC)
    assert winter.ts == datetime(2026, 1, 1, 11, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "rule", "owner"),
    [
        (b'<13>1 - host app - - [shardlog@32473 owner="acme"] m', RULES, "acme"),
        (b'<13>1 - host app - - [other@1 owner="x"] m', RULES, "app"),
        (b"<13>1 - host - - - - m", RULES, "host"),
        (b"<13>1 - - - - - - m", RULES, None),
        (b'<13>1 - host app - - [shardlog@32473 owner=""] m', RULES, "app"),
        (b"<13>1 - host app - - - m", owner_rules("hostname"), "host"),
        (b'<13>1 - h a - - [t@9 o="1" o="2"] m', owner_rules("sd:t@9:o"), "1"),
    ],
)
def test_owner_rules(raw: bytes, rule: Any, owner: str | None) -> None:
    assert owner_of(parse(raw, NOW), rule) == owner


@pytest.mark.parametrize("bad", ["host", "sd:only", "sd::p", "app_name,", "msgid"])
def test_owner_rules_refuse_what_they_do_not_know(bad: str) -> None:
    with pytest.raises(ValueError, match="owner rule"):
        owner_rules(bad)


def test_the_message_and_its_attrs() -> None:
    parsed = parse(b'<190>1 - web app 12 LOGIN [shardlog@32473 owner="acme"] hi', NOW)
    assert attrs_of(parsed) == {
        "facility": "local7",
        "severity": "info",
        "hostname": "web",
        "app_name": "app",
        "procid": "12",
        "msgid": "LOGIN",
        "sd": {"shardlog@32473": {"owner": "acme"}},
    }
    received = NOW - timedelta(seconds=1)
    assert message(parsed, RULES, received)[:3] == ("acme", received, "hi")
