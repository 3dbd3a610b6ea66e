import struct
from datetime import UTC, datetime, timedelta

import pytest

from bench.collector.packets import (
    Record,
    TemplateSpec,
    data_set,
    fields,
    v9_message,
    v9_options_template_set,
    v9_template_set,
)
from router.collector.decode import Decoder
from router.collector.sequences import Sequences

EXPORTER = "2001:db8::fe"
EXPORT_S = 1_700_000_000
EXPORTED = datetime.fromtimestamp(EXPORT_S, UTC)
UPTIME_MS = 3_600_000
A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
A6, B6 = bytes.fromhex("20010db8" + "00" * 11 + "01"), bytes.fromhex("20010db8" + "00" * 11 + "02")
# IN_BYTES, IN_PKTS, PROTOCOL, TCP_FLAGS, L4 ports, addresses, LAST_ and FIRST_SWITCHED
FLOW4 = TemplateSpec(
    260, fields((1, 4), (2, 4), (4, 1), (6, 1), (7, 2), (11, 2), (8, 4), (12, 4), (21, 4), (22, 4))
)
FLOW6 = TemplateSpec(
    261, fields((1, 8), (2, 4), (4, 1), (7, 2), (11, 2), (27, 16), (28, 16), (21, 4), (22, 4))
)


def message(*sets: bytes, count: int, sequence: int = 0, source_id: int = 3) -> bytes:
    return v9_message(sets, count, UPTIME_MS, EXPORT_S, sequence, source_id)


def flow(
    src: bytes = A,
    dst: bytes = B,
    octets: int = 1500,
    first: int = UPTIME_MS - 60_000,
    last: int = UPTIME_MS - 2_000,
) -> Record:
    family: dict[int, int | bytes] = {8: src, 12: dst} if len(src) == 4 else {27: src, 28: dst}
    return family | {1: octets, 2: 3, 4: 17, 6: 0, 7: 53, 11: 5353, 21: last, 22: first}


def test_templates_and_data_of_both_families_with_uptime_times() -> None:
    decoded = Decoder().decode(
        EXPORTER,
        message(
            v9_template_set([FLOW4, FLOW6]),
            data_set(FLOW4, [flow(), flow(B, A)]),
            data_set(FLOW6, [flow(A6, B6, 2**40)]),
            count=5,
            sequence=17,
        ),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert (decoded.version, decoded.domain, decoded.sequence, decoded.flows_expected) == (
        9,
        3,
        17,
        5,
    )
    first, second, third = decoded.records
    assert (first.src_ip, first.dst_ip, first.src_port, first.dst_port) == (A, B, 53, 5353)
    assert (first.proto, first.bytes, first.packets) == (17, 1500, 3)
    assert first.first_seen == EXPORTED - timedelta(minutes=1)
    assert first.last_seen == EXPORTED - timedelta(seconds=2)
    assert second.src_ip == B
    assert (third.src_ip, third.dst_ip, third.bytes, third.ip_version) == (A6, B6, 2**40, 6)


def test_first_switched_before_the_uptime_wrapped() -> None:
    template_first = message(v9_template_set([FLOW4]), count=1)
    decoder = Decoder()
    decoder.decode(EXPORTER, template_first, 0.0)
    data = v9_message(
        [data_set(FLOW4, [flow(first=2**32 - 1_000, last=500)])], 1, 1_000, EXPORT_S, source_id=3
    )
    (record,) = decoder.decode(EXPORTER, data, 0.0).records
    assert record.first_seen == EXPORTED - timedelta(seconds=2)
    assert record.last_seen == EXPORTED - timedelta(milliseconds=500)


def test_padding_at_the_ends_of_sets() -> None:
    decoded = Decoder().decode(
        EXPORTER,
        message(v9_template_set([FLOW4], padding=2), data_set(FLOW4, [flow()], padding=3), count=2),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert len(decoded.records) == 1


# Scope: system (1), 4 octets. FLOW_SAMPLER_ID, FLOW_SAMPLER_MODE, FLOW_SAMPLER_RANDOM_INTERVAL.
SAMPLER = TemplateSpec(300, fields((1, 4), (48, 1), (49, 1), (50, 4)), scope_count=1)
INTERVAL = TemplateSpec(301, fields((1, 4), (34, 4)), scope_count=1)
SAMPLED = TemplateSpec(262, fields((8, 4), (12, 4), (1, 4), (2, 4), (48, 1)))


def test_options_records_set_sampling_per_sampler_id_and_source_id() -> None:
    decoder = Decoder()
    decoded = decoder.decode(
        EXPORTER,
        message(
            v9_options_template_set([SAMPLER, INTERVAL], padding=2),
            v9_template_set([SAMPLED, FLOW4]),
            data_set(SAMPLER, [{1: 0, 48: 1, 49: 2, 50: 10}, {48: 2, 49: 2, 50: 0}]),
            data_set(INTERVAL, [{34: 64}], padding=2),
            data_set(SAMPLED, [{8: A, 12: B, 1: 7, 2: 1, 48: 1}, {8: A, 12: B, 1: 7, 2: 1}]),
            data_set(FLOW4, [flow(octets=1)]),
            count=10,
        ),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert decoded.options_applied == 2, "a rate of 0 tells nothing"
    assert [(r.bytes, r.sampling_rate) for r in decoded.records] == [(70, 10), (448, 64), (64, 64)]
    other = decoder.decode(
        EXPORTER,
        message(v9_template_set([FLOW4]), data_set(FLOW4, [flow()]), count=2, source_id=4),
        0.0,
    )
    assert other.records[0].sampling_rate == 1


def test_data_before_its_template_is_held() -> None:
    decoder = Decoder()
    early = decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()]), count=1), 0.0)
    assert (early.records, early.sets_held, early.flows_expected) == ([], 1, 1)
    late = decoder.decode(EXPORTER, message(v9_template_set([FLOW4]), count=1), 1.0)
    assert (late.held_released, len(late.records)) == (1, 1)
    assert late.records[0].first_seen == EXPORTED - timedelta(minutes=1)


def test_templates_are_per_source_id() -> None:
    decoder = Decoder()
    decoder.decode(EXPORTER, message(v9_template_set([FLOW4]), count=1, source_id=1), 0.0)
    assert decoder.decode(
        EXPORTER, message(data_set(FLOW4, [flow()]), count=1, source_id=1), 0.0
    ).records
    assert decoder.decode(
        EXPORTER, message(data_set(FLOW4, [flow()]), count=1, source_id=2), 0.0
    ).sets_held


def test_sequence_counts_packets_and_loss_is_estimated_in_flows() -> None:
    sequences = Sequences()
    assert sequences.observe(EXPORTER, 3, 9, 2**32 - 1, 20).lost == 0
    assert sequences.observe(EXPORTER, 3, 9, 0, 25).lost == 0
    assert sequences.observe(EXPORTER, 3, 9, 3, 10).lost == 2 * 25, (
        "2 packets of the last 25 records"
    )
    assert sequences.observe(EXPORTER, 3, 9, 4, 10).lost == 0


def _template(template_id: int, count: int, *pairs: int) -> bytes:
    body = struct.pack(">HH", template_id, count) + struct.pack(f">{len(pairs)}H", *pairs)
    return struct.pack(">HH", 0, len(body) + 4) + body


VALID = message(v9_template_set([FLOW4]), data_set(FLOW4, [flow(), flow()]), count=3)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (VALID[:19], "truncated header"),
        (VALID[:-1], "set length beyond message"),
        (VALID + b"\0\0", "truncated set header"),
        (VALID[:22] + b"\0\0" + VALID[24:], "set length below 4"),
        (message(_template(256, 1000, 8, 4), count=1), "template beyond set"),
        (message(_template(256, 0), count=1), "template without fields"),
        (message(_template(100, 1, 8, 4), count=1), "template id below 256"),
        (message(_template(256, 1, 8, 0), count=1), "template of empty records"),
        (
            message(struct.pack(">HHHHH", 1, 14, 300, 6, 4) + b"\0\x01\0\x04", count=1),
            "bad options template lengths",
        ),
    ],
)
def test_malformed_messages_give_no_records_and_learn_nothing(data: bytes, reason: str) -> None:
    decoder = Decoder()
    decoded = decoder.decode(EXPORTER, data, 0.0)
    assert (decoded.malformed, decoded.reason, decoded.records) == (True, reason, [])
    assert len(decoder.templates) == 0


@pytest.mark.parametrize("count", [2, 4, 0])
def test_a_header_count_that_is_not_the_records_is_noted_not_dropped(count: int) -> None:
    """softflowd 1.1.0's v9 headers count otherwise than RFC 3954 says: the sets parse by
    their own lengths, so their flows are kept."""
    data = VALID[:2] + struct.pack(">H", count) + VALID[4:]
    decoded = Decoder().decode("192.0.2.1", data, 1.0)
    assert not decoded.malformed
    assert decoded.count_mismatch
    assert len(decoded.records) == 2
