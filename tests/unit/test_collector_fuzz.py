"""Random and damaged datagrams: the decoder never raises, and a message it calls malformed
gives no records."""

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.collector.packets import (
    FieldSpec,
    TemplateSpec,
    V5Flow,
    data_set,
    fields,
    flow_record,
    flow_template,
    ipfix_message,
    ipfix_template_set,
    v5_message,
    v9_message,
    v9_options_template_set,
    v9_template_set,
)
from router.collector.decode import Decoder

EXPORT_S = 1_700_000_000
A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
A6, B6 = bytes(15) + b"\x01", bytes(15) + b"\x02"
FLOW4, FLOW6 = flow_template(256), flow_template(257, v6=True)
ODD = TemplateSpec(
    258,
    [
        FieldSpec(8, 4),
        FieldSpec(96, 65535),
        FieldSpec(12, 4),
        FieldSpec(1, 3),
        FieldSpec(5, 2, enterprise=9),
        FieldSpec(22, 4),
        FieldSpec(48, 1),
    ],
)
SAMPLING = TemplateSpec(400, fields((48, 1), (305, 4), (306, 4), (160, 8)), scope_count=1)
V9_FLOW = TemplateSpec(300, fields((8, 4), (12, 4), (1, 4), (2, 4), (4, 1), (21, 4), (22, 4)))
V9_OPTIONS = TemplateSpec(301, fields((1, 4), (48, 1), (50, 4)), scope_count=1)


def _flows(count: int, v6: bool = False) -> list[dict[int, int | bytes]]:
    src, dst = (A6, B6) if v6 else (A, B)
    now_ms = EXPORT_S * 1000
    return [
        flow_record(src, dst, 1000 + i, 80, 100 * i, now_ms - 5000, now_ms) for i in range(count)
    ]


IPFIX = ipfix_message(
    [
        ipfix_template_set([FLOW4, FLOW6, ODD], padding=2),
        ipfix_template_set([SAMPLING]),
        data_set(SAMPLING, [{48: 1, 305: 1, 306: 9, 160: EXPORT_S * 1000 - 10_000}]),
        data_set(FLOW4, _flows(5), padding=3),
        data_set(FLOW6, _flows(3, v6=True)),
        data_set(ODD, [{8: A, 96: b"name", 12: B, 1: 70000, 22: 3000, 48: 1}] * 2),
    ],
    EXPORT_S,
    sequence=99,
    domain=7,
)
IPFIX_DATA = ipfix_message([data_set(FLOW4, _flows(10))], EXPORT_S, 104, 7)
V9 = v9_message(
    [
        v9_template_set([V9_FLOW]),
        v9_options_template_set([V9_OPTIONS], padding=2),
        data_set(V9_OPTIONS, [{48: 1, 50: 100}]),
        data_set(V9_FLOW, [{8: A, 12: B, 1: 5, 2: 1, 4: 6, 21: 900, 22: 100}] * 4, padding=1),
    ],
    7,
    1000,
    EXPORT_S,
    5,
    2,
)
V5 = v5_message([V5Flow(A, B, 1, 2, 6, 10, 1, 10, 20)] * 5, 100, EXPORT_S, sampling=(1 << 14) | 10)
VALID = [IPFIX, IPFIX_DATA, V9, V5]


def mutated(data: bytes, edits: list[tuple[str, int, bytes]]) -> bytes:
    for kind, at, chunk in edits:
        at %= len(data) + 1
        if kind == "flip" and at < len(data):
            data = (
                data[:at]
                + bytes([data[at] ^ (1 << (chunk[0] % 8) if chunk else 1)])
                + data[at + 1 :]
            )
        elif kind == "cut":
            data = data[:at]
        elif kind == "insert":
            data = data[:at] + chunk + data[at:]
        elif kind == "replace":
            data = data[:at] + chunk + data[at + len(chunk) :]
        elif kind == "splice":
            other = VALID[chunk[0] % len(VALID)] if chunk else VALID[0]
            data = data[:at] + other[at:]
        if not data:
            break
    return data


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["flip", "cut", "insert", "replace", "splice"]),
        st.integers(0, 2000),
        st.binary(max_size=8),
    ),
    min_size=1,
    max_size=6,
)


def check(decoder: Decoder, data: bytes) -> None:
    decoded = decoder.decode("192.0.2.1", data, 0.0)
    if decoded.malformed:
        assert decoded.records == []
        assert decoded.reason
    for record in decoded.records:
        assert len(record.src_ip) == len(record.dst_ip) in (4, 16)
        assert 0 <= record.tcp_flags <= 255
        assert record.sampling_rate >= 1
        assert record.first_seen.utcoffset() is not None


def test_the_valid_messages_are_valid() -> None:
    decoder = Decoder()
    counts = [len(decoder.decode("192.0.2.1", data, 0.0).records) for data in VALID]
    assert counts == [10, 10, 4, 5]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600), st.sampled_from([b"", b"\x00\x05", b"\x00\x09", b"\x00\x0a"]))
def test_random_bytes(data: bytes, version: bytes) -> None:
    check(Decoder(), version + data)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(VALID), EDITS, st.booleans())
def test_damaged_messages(
    original: bytes, edits: list[tuple[str, int, bytes]], templates_known: bool
) -> None:
    decoder = Decoder()
    if templates_known:
        decoder.decode("192.0.2.1", IPFIX, 0.0)
        decoder.decode("192.0.2.1", V9, 0.0)
    check(decoder, mutated(original, edits))
    check(decoder, IPFIX_DATA)
    decoder.expire(1000.0)
