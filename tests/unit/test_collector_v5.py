import random
from datetime import UTC, datetime, timedelta

import pytest

from bench.collector.packets import V5Flow, v5_message
from router.collector.decode import Decoded, Decoder
from router.collector.sequences import Gap, Sequences

EXPORT_S = 1_700_000_000
EXPORTED = datetime.fromtimestamp(EXPORT_S, UTC)
A = bytes([192, 0, 2, 1])
B = bytes([198, 51, 100, 7])


def decode(message: bytes) -> Decoded:
    return Decoder().decode("192.0.2.254", message, 0.0)


def test_records_round_trip_with_times_from_sysuptime() -> None:
    flows = [
        V5Flow(A, B, 40000, 443, 6, 1500, 3, first_ms=40_000, last_ms=90_000, tcp_flags=0x1B),
        V5Flow(B, A, 53, 5353, 17, 80, 1, first_ms=99_000, last_ms=100_000),
    ]
    message = v5_message(
        flows, uptime_ms=100_000, export_s=EXPORT_S, export_ns=250_000_000, sequence=7
    )
    decoded = decode(message)
    assert not decoded.malformed
    assert (decoded.version, decoded.sequence, decoded.flows_expected) == (5, 7, 2)
    first, second = decoded.records
    export = EXPORTED + timedelta(milliseconds=250)
    assert first.first_seen == export - timedelta(seconds=60)
    assert first.last_seen == export - timedelta(seconds=10)
    assert (first.src_ip, first.dst_ip, first.src_port, first.dst_port) == (A, B, 40000, 443)
    assert (first.proto, first.bytes, first.packets, first.tcp_flags) == (6, 1500, 3, 0x1B)
    assert (first.sampling_rate, first.ip_version) == (1, 4)
    assert second.last_seen == export
    assert second.first_seen.tzinfo is UTC


def test_switch_times_before_the_uptime_wrapped() -> None:
    flow = V5Flow(A, B, 1, 2, 6, 10, 1, first_ms=2**32 - 5_000, last_ms=1_000)
    (record,) = decode(v5_message([flow], uptime_ms=5_000, export_s=EXPORT_S)).records
    assert record.first_seen == EXPORTED - timedelta(seconds=10)
    assert record.last_seen == EXPORTED - timedelta(seconds=4)


def test_a_last_switched_slightly_after_the_uptime_is_not_49_days_old() -> None:
    flow = V5Flow(A, B, 1, 2, 6, 10, 1, first_ms=900, last_ms=1_002)
    (record,) = decode(v5_message([flow], uptime_ms=1_000, export_s=EXPORT_S)).records
    assert record.last_seen == EXPORTED + timedelta(milliseconds=2)


@pytest.mark.parametrize(
    ("sampling", "rate"), [(0, 1), ((1 << 14) | 100, 100), ((2 << 14) | 1000, 1000), (1 << 14, 1)]
)
def test_sampling_interval_from_the_header_scales_counts(sampling: int, rate: int) -> None:
    flow = V5Flow(A, B, 1, 2, 6, 1000, 4)
    message = v5_message([flow], uptime_ms=0, export_s=EXPORT_S, sampling=sampling)
    (record,) = decode(message).records
    assert (record.bytes, record.packets, record.sampling_rate) == (1000 * rate, 4 * rate, rate)


@pytest.mark.parametrize(
    ("proto", "sent", "kept"),
    [(1, (0, 0x0303), (0, 0x0303)), (47, (5, 6), (0, 0)), (132, (5, 6), (5, 6))],
)
def test_ports_of_protocols_without_ports(
    proto: int, sent: tuple[int, int], kept: tuple[int, int]
) -> None:
    flow = V5Flow(A, B, sent[0], sent[1], proto, 10, 1)
    (record,) = decode(v5_message([flow], uptime_ms=0, export_s=EXPORT_S)).records
    assert (record.src_port, record.dst_port) == kept


def test_engine_type_and_id_are_the_domain() -> None:
    message = v5_message([V5Flow(A, B)], 0, EXPORT_S, engine_type=1, engine_id=2)
    assert decode(message).domain == 0x0102


def _message(count: int) -> bytes:
    return v5_message([V5Flow(A, B, 1, 2, 6, 10, 1)] * count, 0, EXPORT_S)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"", "truncated header"),
        (b"\x00", "truncated header"),
        (_message(1)[:20], "truncated header"),
        (_message(2)[:-1], "count mismatch"),
        (_message(2) + b"\0", "count mismatch"),
        (_message(2)[:2] + b"\x00\x03" + _message(2)[4:], "count mismatch"),
        (_message(31), "bad record count"),
        (_message(1)[:2] + b"\x00\x00" + _message(1)[4:24], "bad record count"),
        (b"\x00\x07" + _message(1)[2:], "unknown version"),
    ],
)
def test_malformed_messages_give_no_records(message: bytes, reason: str) -> None:
    decoded = decode(message)
    assert decoded.malformed
    assert decoded.reason == reason
    assert decoded.records == []


def test_sequences_count_lost_flows_across_the_wrap() -> None:
    sequences = Sequences()
    assert sequences.observe("e", 0, 5, 2**32 - 30, 30).lost == 0
    assert sequences.observe("e", 0, 5, 0, 30).lost == 0
    assert sequences.observe("e", 0, 5, 60, 30).lost == 30
    assert sequences.observe("e", 1, 5, 500, 30).lost == 0, "another engine is another stream"


def test_late_messages_and_restarts_are_not_loss() -> None:
    sequences = Sequences(max_gap=1000)
    sequences.observe("e", 0, 5, 1_000_000, 30)
    assert sequences.observe("e", 0, 5, 1_000_060, 30).lost == 30
    assert sequences.observe("e", 0, 5, 1_000_030, 30).lost == 0, "late, reordered"
    assert sequences.observe("e", 0, 5, 1_000_090, 30).lost == 0, "the late one did not move on"
    assert sequences.observe("e", 0, 5, 0, 30).lost == 0, "restart"
    assert sequences.observe("e", 0, 5, 30, 30).lost == 0
    assert sequences.observe("e", 0, 5, 90, 30).lost == 30


def test_resets_and_implausible_jumps_are_breaks_not_loss() -> None:
    """A restarted exporter counting afresh from 0 (expected 3,000,000,030: ahead by 1.29
    billion, once counted as loss) is a reset; a number past max_gap ahead is a jump; both
    leave the stream going on from the new number, and a gap of max_gap is still loss."""
    sequences = Sequences(max_gap=1000)
    sequences.observe("e", 0, 5, 3_000_000_000, 30)
    assert sequences.observe("e", 0, 5, 0, 30) == Gap(0, "reset")
    assert sequences.observe("e", 0, 5, 30 + 1000, 30) == Gap(1000, None)
    assert sequences.observe("e", 0, 5, 1060 + 1001, 30) == Gap(0, "jump")
    assert sequences.observe("e", 0, 5, 2091, 30) == Gap(0, None)


def test_random_sequence_numbers_count_no_loss() -> None:
    """Datagrams with random sequence numbers (forged, or garbage that parses): each is a jump;
    876 million flows were once counted lost from 3,000 of them."""
    sequences, rng = Sequences(), random.Random(12)
    gaps = [sequences.observe("e", 0, 5, rng.randrange(1 << 32), 30) for _ in range(3000)]
    assert sum(gap.lost for gap in gaps) == 0
    assert sum(gap.broken is not None for gap in gaps) == 2999
