import json
import struct
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.collector.packets import (
    FieldSpec,
    Record,
    TemplateSpec,
    data_set,
    fields,
    flow_record,
    flow_template,
    ipfix_message,
    ipfix_template_set,
    ipfix_withdrawal,
)
from router.collector.decode import Decoder
from router.collector.sequences import Sequences
from router.collector.templates import Field, Template, TemplateCache

EXPORTER = "192.0.2.254"
EXPORT_S = 1_700_000_000
EXPORT_MS = EXPORT_S * 1000
EXPORTED = datetime.fromtimestamp(EXPORT_S, UTC)
A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
A6, B6 = (
    bytes.fromhex("20010db8000000000000000000000001"),
    bytes.fromhex("20010db8" + "00" * 11 + "02"),
)
FLOW4 = flow_template(256)
FLOW6 = flow_template(257, v6=True)


def message(*sets: bytes, sequence: int = 0, domain: int = 1) -> bytes:
    return ipfix_message(sets, EXPORT_S, sequence, domain)


def flow(
    src: bytes = A,
    dst: bytes = B,
    octets: int = 1500,
    start_ms: int = EXPORT_MS - 60_000,
    end_ms: int = EXPORT_MS - 1_000,
) -> Record:
    return flow_record(src, dst, 40000, 443, octets, start_ms, end_ms)


def test_ipv4_and_ipv6_flows_round_trip() -> None:
    decoder = Decoder()
    decoded = decoder.decode(
        EXPORTER,
        message(
            ipfix_template_set([FLOW4, FLOW6]),
            data_set(FLOW4, [flow(), flow(B, A, 80)]),
            data_set(FLOW6, [flow(A6, B6, 9000)]),
            sequence=41,
        ),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert (decoded.version, decoded.domain, decoded.sequence) == (10, 1, 41)
    assert decoded.flows_expected == 3
    first, second, third = decoded.records
    assert (first.src_ip, first.dst_ip, first.src_port, first.dst_port) == (A, B, 40000, 443)
    assert (first.proto, first.bytes, first.packets, first.tcp_flags) == (6, 1500, 3, 0x12)
    assert first.first_seen == EXPORTED - timedelta(minutes=1)
    assert first.last_seen == EXPORTED - timedelta(seconds=1)
    assert (second.src_ip, second.bytes) == (B, 80)
    assert (third.src_ip, third.dst_ip, third.ip_version, third.bytes) == (A6, B6, 6, 9000)


def test_reduced_size_integers_of_every_length() -> None:
    lengths = {1: 5, 2: 3, 7: 2, 11: 1, 4: 1, 6: 2, 151: 4}
    template = TemplateSpec(300, fields((8, 4), (12, 4), *lengths.items(), (150, 4)))
    octets, packets = 2**39 + 5, 2**23 + 1
    record: Record = {8: A, 12: B, 1: octets, 2: packets, 7: 1, 11: 2, 4: 17, 6: 0x102}
    record = {**record, 150: EXPORT_S - 5, 151: EXPORT_S}
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, [record])), 0.0
    )
    (got,) = decoded.records
    assert (got.bytes, got.packets, got.src_port, got.dst_port, got.proto) == (
        octets,
        packets,
        1,
        2,
        17,
    )
    assert got.tcp_flags == 0x02, "tcpControlBits' upper octet is not flags"
    assert (got.first_seen, got.last_seen) == (EXPORTED - timedelta(seconds=5), EXPORTED)


@pytest.mark.parametrize("length", range(1, 9))
def test_octet_counts_decode_from_any_length(length: int) -> None:
    template = TemplateSpec(301, fields((8, 4), (12, 4), (1, length)))
    value = 2 ** (8 * length) - 2
    decoded = Decoder().decode(
        EXPORTER,
        message(ipfix_template_set([template]), data_set(template, [{8: A, 12: B, 1: value}])),
        0.0,
    )
    assert decoded.records[0].bytes == value
    assert decoded.records[0].first_seen == EXPORTED, "no time fields: the export time"


def test_variable_length_and_enterprise_fields_are_skipped() -> None:
    template = TemplateSpec(
        302,
        [
            FieldSpec(8, 4),
            FieldSpec(96, 65535),  # applicationName, variable length
            FieldSpec(1, 4, enterprise=9),  # an enterprise's element 1 is not octetDeltaCount
            FieldSpec(12, 4),
            FieldSpec(82, 65535),  # interfaceName, long enough for the 3-octet length
            FieldSpec(1, 4),
            FieldSpec(7, 2, enterprise=29305),
        ],
    )
    records: list[Record] = [
        {8: A, 96: b"https", 12: B, 82: b"x" * 300, 1: 77},
        {8: B, 96: b"", 12: A, 82: b"eth0", 1: 78},
    ]
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, records)), 0.0
    )
    assert not decoded.malformed, decoded.reason
    assert [(r.src_ip, r.dst_ip, r.bytes, r.src_port) for r in decoded.records] == [
        (A, B, 77, 0),
        (B, A, 78, 0),
    ]


def test_padding_after_records_and_templates() -> None:
    decoded = Decoder().decode(
        EXPORTER,
        message(ipfix_template_set([FLOW4], padding=3), data_set(FLOW4, [flow()], padding=7)),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert len(decoded.records) == 1


def test_a_template_of_both_families_takes_the_one_in_use() -> None:
    template = TemplateSpec(303, fields((8, 4), (12, 4), (27, 16), (28, 16), (1, 4)))
    records: list[Record] = [{8: A, 12: B, 1: 1}, {27: A6, 28: B6, 1: 2}]
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, records)), 0.0
    )
    assert [(r.src_ip, r.dst_ip) for r in decoded.records] == [(A, B), (A6, B6)]


def test_records_without_addresses_are_counted_not_flows() -> None:
    template = TemplateSpec(304, fields((8, 4), (1, 4)))
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, [{1: 1}] * 3)), 0.0
    )
    assert (decoded.records, decoded.records_skipped, decoded.flows_expected) == ([], 3, 3)


def test_icmp_type_code_from_its_element() -> None:
    template = TemplateSpec(305, fields((8, 4), (12, 4), (4, 1), (7, 2), (11, 2), (32, 2)))
    records: list[Record] = [
        {8: A, 12: B, 4: 1, 7: 9, 11: 9, 32: 0x0800},
        {8: A, 12: B, 4: 47, 7: 9, 11: 9},
    ]
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, records)), 0.0
    )
    assert [(r.src_port, r.dst_port) for r in decoded.records] == [(0, 0x0800), (0, 0)]


SAMPLING = TemplateSpec(400, fields((48, 1), (305, 4), (306, 4)), scope_count=1)
DOMAIN_SAMPLING = TemplateSpec(401, fields((149, 4), (34, 4)), scope_count=1)
SAMPLED_FLOW = TemplateSpec(258, fields((8, 4), (12, 4), (1, 4), (2, 4), (48, 1)))


def test_options_records_set_the_sampling_rate_per_sampler_and_domain() -> None:
    decoder = Decoder()
    decoded = decoder.decode(
        EXPORTER,
        message(
            ipfix_template_set([SAMPLING]),
            ipfix_template_set([DOMAIN_SAMPLING]),
            ipfix_template_set([SAMPLED_FLOW, FLOW4]),
            data_set(SAMPLING, [{48: 7, 305: 1, 306: 99}, {48: 8, 305: 2, 306: 18}]),
            data_set(DOMAIN_SAMPLING, [{149: 1, 34: 1000}]),
            data_set(SAMPLED_FLOW, [{8: A, 12: B, 1: 50, 2: 1, 48: 7}]),
            data_set(SAMPLED_FLOW, [{8: A, 12: B, 1: 50, 2: 1, 48: 8}]),
            data_set(SAMPLED_FLOW, [{8: A, 12: B, 1: 50, 2: 1, 48: 9}]),
            data_set(FLOW4, [flow(octets=3)]),
        ),
        0.0,
    )
    assert not decoded.malformed, decoded.reason
    assert decoded.options_applied == 3
    assert decoded.flows_expected == 7, "options records are data records too"
    assert [(r.bytes, r.packets, r.sampling_rate) for r in decoded.records] == [
        (5000, 100, 100),
        (500, 10, 10),
        (50_000, 1000, 1000),
        (3000, 1000, 1000),
    ]
    later = decoder.decode(EXPORTER, message(data_set(SAMPLED_FLOW, [{8: A, 12: B, 2: 1}])), 1.0)
    assert later.records[0].packets == 1000, "the rate is remembered per domain"
    other = decoder.decode(
        EXPORTER, message(ipfix_template_set([FLOW4]), data_set(FLOW4, [flow()]), domain=2), 1.0
    )
    assert other.records[0].sampling_rate == 1


INIT_TIME = TemplateSpec(402, fields((149, 4), (160, 8)), scope_count=1)
UPTIME_FLOW = TemplateSpec(259, fields((8, 4), (12, 4), (22, 4), (21, 4)))


def test_uptime_times_from_the_system_init_time() -> None:
    decoder = Decoder()
    record: Record = {8: A, 12: B, 22: 5_000, 21: 9_000}
    before = decoder.decode(
        EXPORTER,
        message(
            ipfix_template_set([INIT_TIME]),
            ipfix_template_set([UPTIME_FLOW]),
            data_set(UPTIME_FLOW, [record]),
        ),
        0.0,
    )
    assert before.records[0].first_seen == EXPORTED, "unknown init time: the export time"
    decoded = decoder.decode(
        EXPORTER,
        message(
            data_set(INIT_TIME, [{149: 1, 160: EXPORT_MS - 60_000}]),
            data_set(UPTIME_FLOW, [record]),
        ),
        1.0,
    )
    (got,) = decoded.records
    assert got.first_seen == EXPORTED - timedelta(seconds=55)
    assert got.last_seen == EXPORTED - timedelta(seconds=51)


def _ntp(seconds: int, fraction: float) -> int:
    return (seconds + 2_208_988_800) << 32 | int(fraction * 2**32)


def test_absolute_times_in_ntp_format_are_preferred_to_uptime() -> None:
    template = TemplateSpec(260, fields((8, 4), (12, 4), (22, 4), (154, 8), (157, 8)))
    record: Record = {8: A, 12: B, 22: 1, 154: _ntp(EXPORT_S - 2, 0.25), 157: _ntp(EXPORT_S, 0.5)}
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(template, [record])), 0.0
    )
    (got,) = decoded.records
    assert got.first_seen == EXPORTED - timedelta(seconds=1.75)
    assert got.last_seen == EXPORTED + timedelta(seconds=0.5)


def test_data_before_its_template_is_held_then_decoded() -> None:
    decoder = Decoder(hold_s=30)
    early = decoder.decode(EXPORTER, message(data_set(FLOW4, [flow(), flow()])), 0.0)
    assert not early.malformed
    assert (early.records, early.sets_held, early.flows_expected) == ([], 1, None)
    late = decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4])), 5.0)
    assert (late.held_released, len(late.records), late.flows_expected) == (1, 2, 0)
    assert late.records[0].first_seen == EXPORTED - timedelta(minutes=1)
    assert decoder.expire(100.0) == {}


def test_data_held_in_the_message_of_its_template_is_decoded() -> None:
    decoded = Decoder().decode(
        EXPORTER, message(data_set(FLOW4, [flow()]), ipfix_template_set([FLOW4])), 0.0
    )
    assert (decoded.sets_held, decoded.held_released, len(decoded.records)) == (1, 1, 1)


def test_held_data_is_dropped_after_hold_s_and_beyond_its_octets() -> None:
    decoder = Decoder(hold_s=30, hold_bytes=100)
    decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()])), 0.0)
    decoder.decode("other", message(data_set(FLOW4, [flow()])), 20.0)
    assert decoder.expire(31.0) == {EXPORTER: 1}
    assert decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4])), 31.0).records == []
    for _ in range(5):
        decoder.decode("noisy", message(data_set(FLOW4, [flow()])), 40.0)
    assert decoder.expire(41.0) == {"noisy": 3}, "5 sets of 46 octets, 100 held at most"
    assert decoder.expire(80.0) == {"other": 1, "noisy": 2}


def test_a_set_larger_than_the_bound_is_not_held() -> None:
    decoder = Decoder(hold_bytes=10)
    assert decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()])), 0.0).sets_held == 1
    assert decoder.held.held(EXPORTER) == 0
    assert decoder.expire(0.0) == {EXPORTER: 1}


def test_withdrawn_templates_no_longer_decode() -> None:
    decoder = Decoder()
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4, FLOW6])), 0.0)
    decoder.decode(EXPORTER, message(ipfix_template_set([SAMPLING])), 0.0)
    decoded = decoder.decode(
        EXPORTER, message(ipfix_withdrawal(256), data_set(FLOW4, [flow()])), 1.0
    )
    assert (decoded.records, decoded.sets_held) == ([], 1)
    assert len(decoder.decode(EXPORTER, message(data_set(FLOW6, [flow(A6, B6)])), 1.0).records) == 1
    decoder.decode(EXPORTER, message(ipfix_withdrawal(2)), 2.0)
    assert decoder.decode(EXPORTER, message(data_set(FLOW6, [flow(A6, B6)])), 2.0).sets_held == 1
    assert decoder.templates.get(EXPORTER, 1, 400, 2.0) is not None, "options templates stay"
    decoder.decode(EXPORTER, message(ipfix_withdrawal(3, options=True)), 2.0)
    assert len(decoder.templates) == 0


def test_templates_expire_after_their_ttl() -> None:
    decoder = Decoder(TemplateCache(ttl_s=10))
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4])), 0.0)
    assert len(decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()])), 10.0).records) == 1
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4])), 15.0)
    assert len(decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()])), 25.0).records) == 1
    assert decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()])), 25.5).sets_held == 1
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW6])), 30.0)
    decoder.expire(41.0)
    assert len(decoder.templates) == 0


def test_templates_are_per_exporter_and_domain() -> None:
    decoder = Decoder()
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4]), domain=1), 0.0)
    assert decoder.decode(EXPORTER, message(data_set(FLOW4, [flow()]), domain=2), 0.0).sets_held
    assert decoder.decode("192.0.2.9", message(data_set(FLOW4, [flow()]), domain=1), 0.0).sets_held


def test_templates_survive_a_restart_through_their_state() -> None:
    decoder = Decoder()
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4, FLOW6])), 3.0)
    decoder.decode(EXPORTER, message(ipfix_template_set([SAMPLING])), 4.0)
    state = json.loads(json.dumps(decoder.templates.to_state()))
    restored = Decoder(TemplateCache.from_state(state, ttl_s=100))
    assert restored.templates.to_state() == state
    decoded = restored.decode(EXPORTER, message(data_set(FLOW6, [flow(A6, B6)])), 50.0)
    assert len(decoded.records) == 1
    assert restored.templates.get(EXPORTER, 1, 400, 50.0) == Template(
        400, (Field(48, 0, 1), Field(305, 0, 4), Field(306, 0, 4)), True, 1
    )
    assert restored.templates.get(EXPORTER, 1, 256, 104.0) is None, "refresh times kept"


STATE_ITEM = {
    "exporter": "e",
    "domain": 1,
    "template_id": 256,
    "options": False,
    "scope_count": 0,
    "fields": [[1, 0, 4]],
    "refreshed": 0,
}


@pytest.mark.parametrize(
    "state",
    [
        None,
        {"version": 2, "templates": []},
        {"version": 1},
        {"version": 1, "templates": [{"exporter": "e"}]},
        {"version": 1, "templates": [dict(STATE_ITEM, template_id=3)]},
        {"version": 1, "templates": [dict(STATE_ITEM, fields=[[1, 0, 0]])]},
        {"version": 1, "templates": [dict(STATE_ITEM, domain=-1)]},
        {"version": 1, "templates": [dict(STATE_ITEM, scope_count=2)]},
        {"version": 1, "templates": [dict(STATE_ITEM, refreshed="now")]},
    ],
)
def test_a_damaged_state_is_refused(state: Any) -> None:
    with pytest.raises(ValueError):
        TemplateCache.from_state(state)


def test_the_cache_drops_the_oldest_beyond_its_bounds() -> None:
    cache = TemplateCache(max_per_exporter=2, max_unmapped=3)
    template = Template(256, (Field(8, 0, 4),))
    for domain in range(3):
        cache.add("a", domain, template, float(domain))
    assert [cache.get("a", d, 256, 3.0) is not None for d in range(3)] == [False, True, True]
    cache.add("b", 0, template, 4.0)
    cache.add("a", 1, template, 5.0)  # refreshed: now the newest of a
    cache.add("c", 0, template, 6.0)
    assert len(cache) == 3
    assert cache.get("a", 2, 256, 7.0) is None
    assert cache.get("a", 1, 256, 7.0) is not None


def test_sequence_numbers_count_data_records() -> None:
    decoder, sequences = Decoder(), Sequences()
    decoder.decode(EXPORTER, message(ipfix_template_set([FLOW4])), 0.0)
    lost = []
    for sequence, count in [(2**32 - 3, 3), (0, 2), (7, 1), (8, 4)]:
        decoded = decoder.decode(
            EXPORTER, message(data_set(FLOW4, [flow()] * count), sequence=sequence), 0.0
        )
        lost.append(
            sequences.observe(
                EXPORTER, decoded.domain, 10, decoded.sequence, decoded.flows_expected
            ).lost
        )
    assert lost == [0, 0, 5, 0]


def test_a_held_set_leaves_the_next_gap_unjudged() -> None:
    sequences = Sequences()
    sequences.observe(EXPORTER, 1, 10, 100, None)
    assert sequences.observe(EXPORTER, 1, 10, 130, 10).lost == 0
    assert sequences.observe(EXPORTER, 1, 10, 150, 10).lost == 10


def _set_length(message: bytes, offset: int, length: int) -> bytes:
    return message[:offset] + struct.pack(">H", length) + message[offset + 2 :]


VALID = message(ipfix_template_set([FLOW4]), data_set(FLOW4, [flow(), flow()]))
ABSURD = struct.pack(">HHHHHH", 2, 12, 256, 65535, 8, 4)
THREE_SETS = message(
    ipfix_template_set([FLOW4]), data_set(FLOW4, [flow()]), data_set(FLOW4, [flow()])
)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (VALID[:15], "truncated header"),
        (VALID[:-1], "message length mismatch"),
        (_set_length(VALID[:-1], 2, len(VALID) - 1), "set length beyond message"),
        (_set_length(VALID, 18, 0), "set length below 4"),
        (_set_length(VALID, 18, 2000), "set length beyond message"),
        (message(ABSURD, data_set(FLOW4, [flow()])), "template beyond set"),
        (
            message(
                ipfix_template_set([TemplateSpec(255, fields((8, 4)))]), data_set(FLOW4, [flow()])
            ),
            "template id below 256",
        ),
        (
            message(ipfix_template_set([TemplateSpec(256, fields((8, 0)))])),
            "template of empty records",
        ),
        (message(struct.pack(">HHHHHHH", 3, 14, 400, 5, 1, 8, 4)), "template beyond set"),
        (
            message(ipfix_template_set([TemplateSpec(400, fields((8, 4), (1, 4)), scope_count=3)])),
            "bad scope field count",
        ),
        (VALID + b"\0\0", "message length mismatch"),
        (ipfix_message([b"\0\x02\0"], EXPORT_S), "truncated set header"),
    ],
)
def test_malformed_messages_give_no_records_and_learn_nothing(data: bytes, reason: str) -> None:
    decoder = Decoder()
    decoded = decoder.decode(EXPORTER, data, 0.0)
    assert (decoded.malformed, decoded.reason, decoded.records) == (True, reason, [])
    assert len(decoder.templates) == 0
    assert decoder.held.held(EXPORTER) == 0


def test_a_record_running_past_its_set_is_malformed() -> None:
    template = TemplateSpec(310, [FieldSpec(8, 4), FieldSpec(12, 4), FieldSpec(96, 65535)])
    record = data_set(template, [{8: A, 12: B, 96: b"abcdef"}])
    cut = _set_length(record[:-3], 2, len(record) - 3)
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([template]), data_set(FLOW4, []), cut), 0.0
    )
    assert (decoded.reason, decoded.records) == ("record beyond set", [])


def test_a_time_no_datetime_holds_is_malformed() -> None:
    record = flow(start_ms=2**63, end_ms=2**63)
    decoded = Decoder().decode(
        EXPORTER, message(ipfix_template_set([FLOW4]), data_set(FLOW4, [flow(), record])), 0.0
    )
    assert (decoded.reason, decoded.records) == ("time out of range", [])


def test_unknown_versions_are_malformed() -> None:
    assert Decoder().decode(EXPORTER, b"\x00\x0b" + VALID[2:], 0.0).reason == "unknown version"


def test_data_sets_of_one_template_in_a_row() -> None:
    assert len(Decoder().decode(EXPORTER, THREE_SETS, 0.0).records) == 2
