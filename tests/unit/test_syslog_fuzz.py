"""Random and damaged syslog input: the parsers and framers never raise anything but their own
refusal, the listener's intake turns every frame into a row or a counted refusal, and stream
framing gives back exactly the frames that went in, however the bytes are cut."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from router.ingest.records import Limits
from router.metrics import Metrics
from router.protocols import relp, syslog
from router.protocols.syslog_framing import StreamFramer
from router.settings import SyslogSettings
from router.syslogd.intake import Intake, SyslogMetrics

NOW = datetime(2026, 1, 2, 12, tzinfo=UTC)
GOOD = b'<165>1 2026-01-02T10:00:00.5Z host app 12 ID [shardlog@32473 owner="acme" a="\\]"] hi'
BSD = b"<13>Jan  2 11:00:00 host sshd[1]: Accepted"
pieces = st.sampled_from(
    [b"<", b">", b"1 ", b" ", b"-", b"[", b"]", b'"', b"\\", b"=", b"\n", b"\xef\xbb\xbf",
     b"2026-01-02T10:00:00Z", b"Jan  2 11:00:00", b"13", b"x@1", b"\x00", b"\xff"]
)  # fmt: skip
noise = st.one_of(
    st.binary(max_size=300),
    st.lists(pieces, max_size=30).map(b"".join),
    st.tuples(st.sampled_from([GOOD, BSD]), st.integers(0, 120), st.binary(max_size=8)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
    ),
)


def intake() -> tuple[Intake, SyslogMetrics]:
    metrics = SyslogMetrics(Metrics())
    limits = Limits(
        max_content_bytes=1000,
        max_attrs_bytes=2000,
        max_owner_chars=64,
        future_skew=timedelta(minutes=5),
    )
    return Intake(SyslogSettings(max_message_bytes=512), lambda: limits, metrics), metrics


@settings(max_examples=400, deadline=None)
@given(noise)
def test_the_parser_refuses_or_parses(data: bytes) -> None:
    try:
        parsed = syslog.parse(data, NOW)
    except syslog.SyslogError as exc:
        assert exc.reason
        return
    syslog.message(parsed, syslog.owner_rules("sd:shardlog@32473:owner,hostname"), NOW)


@settings(max_examples=300, deadline=None)
@given(noise)
def test_the_intake_counts_every_refusal(data: bytes) -> None:
    checker, metrics = intake()
    row = checker.row(data, "192.0.2.1", NOW)
    (family,) = metrics.refused.collect()
    refused = family.samples
    counted = sum(sample.value for sample in refused if sample.name.endswith("_total"))
    if row is None:
        assert counted == 1
    else:
        assert counted == 0 and row.owner and "\x00" not in row.content


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=80), max_size=10),
    st.lists(st.integers(1, 50), min_size=1, max_size=20),
)
def test_octet_counted_frames_come_back_however_cut(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(str(len(frame)).encode() + b" " + frame for frame in frames)
    framer = StreamFramer(60)
    out: list[bytes] = []
    at, n = 0, 0
    while at < len(stream):
        size = cuts[n % len(cuts)]
        out += framer.feed(stream[at : at + size])
        at, n = at + size, n + 1
    assert out == [frame for frame in frames if len(frame) <= 60]
    assert framer.oversize == sum(len(frame) > 60 for frame in frames)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_framers_take_any_bytes(data: bytes, cut: int) -> None:
    stream, message = StreamFramer(32), relp.RelpFramer(32)
    for start in range(0, len(data), cut):
        for frame in stream.feed(data[start : start + cut]):
            assert len(frame) <= 32
        for command in message.feed(data[start : start + cut]):
            assert len(command.data) <= 32 and 0 <= command.txnr <= relp.MAX_TXNR
