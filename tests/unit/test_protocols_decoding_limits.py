"""The protobuf decoders (Loki, OTLP) check the write API's limits while they decode: records
are counted and measured on the wire (router/protocols/wire.py) before each is parsed, and what
the decoded messages hold is charged as they are made (router/protocols/allowance.py). A record
past a limit is never parsed: the tests put bytes that are no record where the decoder must stop,
so a decoder that parsed first would answer 400 instead of 413."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime

import orjson
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ScopeLogs

from router.errors import Overloaded, TooLarge
from router.protocols import loki, otlp, wire
from router.protocols.allowance import Allowance
from router.settings import IngestSettings

NOW = datetime(2026, 11, 25, 13, tzinfo=UTC)
NANOS = 1795608000_123456789
# A length-delimited field 2 (a log record, an entry) whose bytes are no message.
GARBAGE_RECORD = b"\x12\x03\xff\xff\xff"


def allowance(charge: list[int] | None = None, **limits: int) -> Allowance:
    charges = [] if charge is None else charge
    return Allowance.of(IngestSettings(**limits), charges.append, "records")


def otlp_request(records: int, attributes: int = 0, owner: str = "checkout") -> bytes:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    name = resource_logs.resource.attributes.add(key="service.name")
    name.value.string_value = owner
    scope = resource_logs.scope_logs.add()
    for number in range(records):
        record = scope.log_records.add(time_unix_nano=NANOS)
        record.body.string_value = f"record {number}"
        for key in range(attributes):
            pair = record.attributes.add(key=f"k{key}")
            pair.value.int_value = key
    return bytes(request.SerializeToString())


def with_garbage_record(request: bytes) -> bytes:
    """The request's last ScopeLogs given one more log record that does not parse."""
    parsed = ExportLogsServiceRequest.FromString(request)
    scope_bytes = parsed.resource_logs[0].scope_logs[0].SerializeToString() + GARBAGE_RECORD
    parsed.resource_logs[0].ClearField("scope_logs")
    resource = parsed.resource_logs[0].SerializeToString()
    resource += b"\x12" + wire_length(len(scope_bytes)) + scope_bytes
    return b"\x0a" + wire_length(len(resource)) + resource


def wire_length(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def loki_push(entries: int, line: str = "fine", metadata: int = 0) -> bytes:
    request = loki.PushRequest()
    stream = request.streams.add(labels='{owner="acme"}')
    for _ in range(entries):
        entry = stream.entries.add(line=line)
        entry.timestamp.seconds = NANOS // 10**9
        for key in range(metadata):
            entry.structuredMetadata.add(name=f"k{key}", value="v")
    return bytes(request.SerializeToString())


# --- the wire format -----------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(max_size=20), max_size=5),
    st.text(max_size=10),
    st.integers(min_value=0, max_value=2**63),
)
def test_split_finds_what_protobuf_itself_parses(bodies: list[str], name: str, nanos: int) -> None:
    scope = ScopeLogs(schema_url=name)
    scope.scope.name = name
    for body in bodies:
        record = scope.log_records.add(time_unix_nano=nanos)
        record.body.string_value = body
    data = memoryview(scope.SerializeToString())
    others, records = wire.split(data, 0, len(data), 2)
    assert [LogRecord.FromString(bytes(data[r.start : r.stop])) for r in records] == list(
        scope.log_records
    )
    rest = ScopeLogs.FromString(wire.join(data, others))
    scope.ClearField("log_records")
    assert rest == scope


def test_bytes_that_are_no_wire_format_are_a_wire_error() -> None:
    for data in (b"\x0a\x05ab", b"\x80", b"\x00\x01", b"\x0b", b"\x09\x00", b"\xff" * 11):
        with pytest.raises(wire.WireError):
            list(wire.fields(memoryview(data), 0, len(data)))
    with pytest.raises(wire.WireError, match="not length-delimited"):
        wire.split(memoryview(b"\x10\x01"), 0, 2, 2)


# --- OTLP ----------------------------------------------------------------------------------


def test_otlp_records_past_max_records_are_refused_before_the_next_is_parsed() -> None:
    five = otlp_request(5)
    assert len(otlp.decode_protobuf(five, ("service.name",), NOW, allowance(max_records=5))[0][2])
    with pytest.raises(TooLarge) as refused:
        otlp.decode_protobuf(
            with_garbage_record(five), ("service.name",), NOW, allowance(max_records=5)
        )
    assert refused.value.field == "records"
    assert "more than 5 records" in refused.value.message
    document = json_format.MessageToDict(ExportLogsServiceRequest.FromString(otlp_request(6)))
    with pytest.raises(TooLarge, match="more than 5 records"):
        otlp.decode_json(orjson.dumps(document), ("service.name",), NOW, allowance(max_records=5))


def test_an_otlp_record_with_a_million_attributes_is_refused_unparsed() -> None:
    body = otlp_request(1, attributes=1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge) as refused:
            otlp.decode_protobuf(body, ("service.name",), NOW, allowance())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.field == "resourceLogs[0].scopeLogs[0].logRecords[0]"
    assert "SHARDLOG_INGEST__MAX_RECORD_BYTES" in refused.value.message
    # Nothing of the record was built: a few copies of its bytes at most, no dicts.
    assert peak < 4 * len(body)


def test_attributes_past_what_attrs_can_hold_are_refused_before_they_are_built() -> None:
    limits = {"max_attrs_bytes": 400, "max_record_bytes": 2**26}
    fitting, too_many = otlp_request(1, attributes=100), otlp_request(1, attributes=101)
    assert otlp.decode_protobuf(fitting, ("service.name",), NOW, allowance(**limits))
    with pytest.raises(TooLarge) as refused:
        otlp.decode_protobuf(too_many, ("service.name",), NOW, allowance(**limits))
    assert refused.value.field == "resourceLogs[0].scopeLogs[0].logRecords[0].attributes"
    assert "101 entries" in refused.value.message
    document = json_format.MessageToDict(ExportLogsServiceRequest.FromString(too_many))
    with pytest.raises(TooLarge, match="101 entries"):
        otlp.decode_json(orjson.dumps(document), ("service.name",), NOW, allowance(**limits))


def test_otlp_messages_are_charged_as_they_are_made() -> None:
    body = otlp_request(100, attributes=3)
    charges: list[int] = []
    groups = otlp.decode_protobuf(body, ("service.name",), NOW, allowance(charges))
    assert len(charges) == len(groups[0].messages) == 100
    assert sum(charges) > len(body)
    spent = 0

    def budget(amount: int) -> None:
        nonlocal spent
        if spent + amount > sum(charges) // 2:
            raise Overloaded("the router holds as many request bytes as it may")
        spent += amount

    with pytest.raises(Overloaded):
        otlp.decode_protobuf(
            body, ("service.name",), NOW, Allowance.of(IngestSettings(), budget, "records")
        )
    assert spent <= sum(charges) // 2


# --- Loki ----------------------------------------------------------------------------------


def test_loki_entries_past_max_records_are_refused_before_the_next_is_parsed() -> None:
    five = loki_push(5)
    [(_, messages)] = loki.decode_protobuf(five, ("owner",), allowance(max_records=5))
    assert len(messages) == 5
    stream = loki.PushRequest.FromString(five).streams[0].SerializeToString() + GARBAGE_RECORD
    with pytest.raises(TooLarge, match="more than 5 records"):
        loki.decode_protobuf(
            b"\x0a" + wire_length(len(stream)) + stream, ("owner",), allowance(max_records=5)
        )
    push = {"streams": [{"stream": {"owner": "acme"}, "values": [[str(NANOS), "x"]] * 6}]}
    with pytest.raises(TooLarge, match="more than 5 records"):
        loki.decode_json(orjson.dumps(push), ("owner",), allowance(max_records=5))


def test_a_loki_entry_longer_than_any_record_is_refused_unparsed() -> None:
    body = loki_push(1, line="x" * 2**21)
    with pytest.raises(TooLarge) as refused:
        loki.decode_protobuf(body, ("owner",), allowance())
    assert refused.value.field == "streams[0].entries[0]"
    with pytest.raises(TooLarge, match="entries"):
        loki.decode_protobuf(loki_push(1, metadata=200), ("owner",), allowance(max_attrs_bytes=400))


def test_loki_messages_are_charged_as_they_are_made() -> None:
    charges: list[int] = []
    [(_, messages)] = loki.decode_protobuf(
        loki_push(50, metadata=2), ("owner",), allowance(charges)
    )
    assert len(charges) == len(messages) == 50


def test_decoding_pauses_every_megabyte_of_messages_and_ends_with_them() -> None:
    body = otlp_request(3000, attributes=3)
    steps = otlp.protobuf_steps(body, ("service.name",), NOW, allowance())
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            groups = done.value
            break
        pauses += 1
    assert groups == otlp.decode_protobuf(body, ("service.name",), NOW)
    # Each message is charged about 1 KiB (its bytes, the message, three attributes).
    assert 2 <= pauses <= 4
    pushed = loki_push(4000, line="z" * 200)
    assert sum(1 for _ in loki.protobuf_steps(pushed, ("owner",), allowance())) >= 1
