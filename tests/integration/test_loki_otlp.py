"""Loki push and OTLP/HTTP logs against the real router and shards: the OpenTelemetry SDK's
OTLP/HTTP exporter, and Loki pushes built from Loki's message definitions (encoded here, by
hand, from the field numbers of pkg/push/push.proto: independent of the router's decoder);
rows found by search exactly as sent; errors in each protocol's form with nothing stored; the
parsers fuzzed through the router."""

from __future__ import annotations

import base64
import gzip
import re
import uuid
import zlib
from datetime import datetime, timedelta
from typing import Any

import cramjam
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from router import clock
from router.protocols.otlp import Status
from tests.support import clock_now, window_around

NOW = clock.now().replace(microsecond=0)


def window() -> dict[str, str]:
    """From a day before the module's NOW (the rows' explicit times) to an hour after the
    search: rows the router stamps (no time sent) are in it however long the session ran."""
    return window_around(NOW - timedelta(days=1), clock_now(), margin=timedelta(hours=1))


PROTOBUF = {"content-type": "application/x-protobuf"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def nanos(when: datetime, extra: int = 789) -> int:
    """``when`` in Unix nanoseconds, with nanoseconds below the microsecond PostgreSQL keeps."""
    return (int(when.timestamp()) * 1_000_000 + when.microsecond) * 1000 + extra


def rows(api: httpx.Client, owner: str) -> list[dict[str, Any]]:
    page = api.get("/v1/audit/search", params={"owner": owner, **window(), "limit": 1000})
    assert page.status_code == 200, page.text
    return [
        {
            "owner": item["owner"],
            "ts": datetime.fromisoformat(item["ts"]),
            "content": item["content"],
            "attrs": item["attrs"],
        }
        for item in sorted(page.json()["items"], key=lambda item: item["content"])
    ]


def basic(token: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"promtail:{token}".encode()).decode()}


# --- Loki's wire format, by hand -----------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def push_request(streams: list[tuple[str, list[tuple[int, str, dict[str, str]]]]]) -> bytes:
    """logproto.PushRequest{streams=1: StreamAdapter{labels=1, entries=2: EntryAdapter{
    timestamp=1: Timestamp{seconds=1, nanos=2}, line=2, structuredMetadata=3: LabelPairAdapter{
    name=1, value=2}}}}"""
    body = b""
    for labels, entries in streams:
        stream = field(1, labels.encode())
        for ns, line, metadata in entries:
            stamp = field(1, ns // 10**9) + field(2, ns % 10**9)
            entry = field(1, stamp) + field(2, line.encode())
            for name, value in metadata.items():
                entry += field(3, field(1, name.encode()) + field(2, value.encode()))
            stream += field(2, entry)
        body += field(1, stream)
    return body


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


# --- Loki ----------------------------------------------------------------------------------


def test_a_protobuf_push_with_snappy_is_stored_exactly_as_sent(api, api_token) -> None:
    owner, other = unique("loki-pb"), unique("loki-job")
    first, second = NOW - timedelta(minutes=5, microseconds=123456), NOW - timedelta(minutes=1)
    body = push_request(
        [
            (
                f'{{env="prod", owner="{owner}", path="C:\\\\logs\\"x\\""}}',
                [
                    (nanos(first), "a: user bob logged in", {"trace_id": "0af7651916cd43dd"}),
                    (nanos(second), "b: ünïcode line", {}),
                ],
            ),
            (f'{{job="{other}"}}', [(nanos(second), "c: by job", {})]),
        ]
    )
    with httpx.Client(base_url=str(api.base_url), headers=basic(api_token)) as promtail:
        pushed = promtail.post("/loki/api/v1/push", content=snappy(body), headers=PROTOBUF)
    assert pushed.status_code == 204, pushed.text
    labels = {"env": "prod", "path": 'C:\\logs"x"'}
    assert rows(api, owner) == [
        {
            "owner": owner,
            "ts": first,
            "content": "a: user bob logged in",
            "attrs": {"labels": labels, "metadata": {"trace_id": "0af7651916cd43dd"}},
        },
        {"owner": owner, "ts": second, "content": "b: ünïcode line", "attrs": {"labels": labels}},
    ]
    assert rows(api, other) == [
        {"owner": other, "ts": second, "content": "c: by job", "attrs": None}
    ]
    # Promtail's retry of the same body (its answer lost) stores nothing twice.
    again = api.post("/loki/api/v1/push", content=snappy(body), headers=PROTOBUF)
    assert again.status_code == 204
    assert len(rows(api, owner)) == 2


def test_json_pushes_plain_and_gzipped(api) -> None:
    owner = unique("loki-json")
    when = NOW - timedelta(seconds=30, microseconds=5)
    push = {
        "streams": [
            {
                "stream": {"service_name": owner, "level": "warn"},
                "values": [[str(nanos(when)), "plain"], [str(nanos(when)), "meta", {"k": "v"}]],
            }
        ]
    }
    assert api.post("/loki/api/v1/push", json=push).status_code == 204
    push["streams"][0]["values"] = [[str(nanos(when)), "zipped"]]
    zipped = api.post(
        "/loki/api/v1/push",
        content=gzip.compress(orjson.dumps(push)),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert zipped.status_code == 204, zipped.text
    labels = {"labels": {"level": "warn"}}
    assert rows(api, owner) == [
        {
            "owner": owner,
            "ts": when,
            "content": "meta",
            "attrs": {**labels, "metadata": {"k": "v"}},
        },
        {"owner": owner, "ts": when, "content": "plain", "attrs": labels},
        {"owner": owner, "ts": when, "content": "zipped", "attrs": labels},
    ]


@pytest.mark.parametrize(
    ("content", "headers", "status", "says"),
    [
        ("pb-garbage", PROTOBUF, 400, "not a Loki PushRequest"),
        ("pb-unsnappy", PROTOBUF, 400, "snappy"),
        ("pb-labels", PROTOBUF, 400, "streams[0].labels"),
        ("pb-no-owner", PROTOBUF, 400, "none of the owner labels"),
        ("pb-bomb", PROTOBUF, 413, "inflates to more than"),
        ("json", {"content-type": "text/plain"}, 415, "content type"),
    ],
)
def test_a_bad_push_is_refused_whole(api, content, headers, status, says) -> None:
    owner = unique("loki-bad")
    good = (f'{{owner="{owner}"}}', [(nanos(NOW), "fine", {})])
    body = {
        "json": b"{}",
        "pb-garbage": snappy(push_request([good]) + b"\x0a\xff"),
        "pb-unsnappy": push_request([good]),
        "pb-labels": snappy(push_request([(f'{{owner="{owner}"', [(nanos(NOW), "x", {})])])),
        "pb-no-owner": snappy(push_request([('{env="x"}', [(nanos(NOW), "x", {})])])),
        # A snappy block that says it holds 2 GiB: refused before anything is inflated.
        "pb-bomb": varint(2**31) + b"\x00" * 64,
    }[content]
    response = api.post("/loki/api/v1/push", content=body, headers=headers)
    assert response.status_code == status, response.text
    assert says in response.text
    if status == 400:
        assert response.headers["content-type"].startswith("text/plain")
    assert rows(api, owner) == []


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_pushes_answer_4xx_or_write_nothing_when_refused(api, data) -> None:
    owner = unique("loki-fuzz")
    valid = push_request(
        [(f'{{owner="{owner}", a="b"}}', [(nanos(NOW), "line", {"m": "n"}), (nanos(NOW), "2", {})])]
    )
    body = bytearray(valid)
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    body = body[: data.draw(st.integers(0, len(body)))]
    as_json = data.draw(st.booleans())
    if as_json:
        sent, headers = bytes(body), {"content-type": "application/json"}
    else:
        sent, headers = snappy(bytes(body)), PROTOBUF
    response = api.post("/loki/api/v1/push", content=sent, headers=headers)
    assert response.status_code in (204, 400, 403, 413), response.text
    ignored = re.search(r"total ignored: (\d+) out of (\d+)$", response.text)
    if response.status_code == 400 and ignored is not None:
        # Some entries were read and broke the rules: the others are stored, no more.
        refused, sent_entries = int(ignored[1]), int(ignored[2])
        assert len(rows(api, owner)) <= sent_entries - refused
    elif response.status_code != 204:
        assert rows(api, owner) == []


def test_a_push_keeps_its_valid_entries_and_names_the_ignored_ones(api, admin_api) -> None:
    """One entry older than its owner's retention and one with a NUL in a push of 100: the
    98 others stored once, the two named in Loki's 400 (a shipper does not send a 400 again),
    the same again on a retry of the same body; an owner whose every entry was ignored is
    not claimed."""
    owner, ignored_only = unique("loki-part"), unique("loki-none")
    when = NOW - timedelta(minutes=3)
    old = NOW - timedelta(days=400)
    first = [[str(nanos(when, n)), f"a{n:02d}"] for n in range(50)]
    second = [[str(nanos(when, n)), f"b{n:02d}"] for n in range(49)]
    first[7][1] = "nul\x00"
    second[37][0] = str(nanos(old))
    push = {
        "streams": [
            {"stream": {"owner": owner}, "values": first},
            {"stream": {"owner": owner}, "values": second},
            {"stream": {"owner": ignored_only}, "values": [[str(nanos(old)), "too old"]]},
        ]
    }
    kept = sorted(line for _, line in first + second if line not in ("nul\x00", "b37"))
    for _ in range(2):
        answer = api.post("/loki/api/v1/push", json=push)
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        lines = answer.text.splitlines()
        assert lines[-1] == "total ignored: 3 out of 100"
        assert lines[0].startswith("streams[0].values[7]: content contains a NUL character")
        assert lines[1].startswith("streams[1].values[37]: ts ") and "retention" in lines[1]
        assert lines[2].startswith("streams[2].values[0]: ts ") and "retention" in lines[2]
        assert [row["content"] for row in rows(api, owner)] == kept
    unmapped = admin_api.get("/v1/admin/owners", params={"kind": "audit", "key": ignored_only})
    assert unmapped.status_code == 404, unmapped.text


# --- OTLP ----------------------------------------------------------------------------------


def test_the_opentelemetry_sdk_exports_records_found_exactly_as_sent(
    api, api_token, router_process
) -> None:
    owner = unique("otel-svc")
    provider = LoggerProvider(resource=Resource.create({"service.name": owner, "pod": "p-1"}))
    exporter = OTLPLogExporter(
        endpoint=f"{router_process.url}/v1/logs",
        headers={"Authorization": f"Bearer {api_token}"},
        compression=Compression.Gzip,
    )
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("shop.checkout", "2.1.0")
    span = trace.NonRecordingSpan(
        trace.SpanContext(
            0x5B8EFFF798038103D269B633813FC60C,
            0xEEE19B7EC3C1B174,
            is_remote=False,
            trace_flags=trace.TraceFlags(1),
        )
    )
    first, second = NOW - timedelta(minutes=3, microseconds=999999), NOW - timedelta(minutes=2)
    logger.emit(
        LogRecord(
            timestamp=nanos(first),
            context=trace.set_span_in_context(span),
            severity_number=SeverityNumber.WARN,
            severity_text="WARN",
            body="payment retried",
            attributes={"order": 7, "ok": False, "ratio": 0.5, "tags": ["a", "b"]},
        )
    )
    logger.emit(
        LogRecord(
            timestamp=nanos(second),
            severity_number=SeverityNumber.ERROR,
            severity_text="ERROR",
            body={"event": "refund", "amount": 12},
        )
    )
    assert provider.force_flush()
    provider.shutdown()
    resource = {
        "service.name": owner,
        "pod": "p-1",
        **{k: v for k, v in Resource.create().attributes.items() if k != "service.name"},
    }
    scope = {"name": "shop.checkout", "version": "2.1.0"}
    assert rows(api, owner) == [
        {
            "owner": owner,
            "ts": first,
            "content": "payment retried",
            "attrs": {
                "severity_number": 13,
                "severity_text": "WARN",
                "trace_id": "5b8efff798038103d269b633813fc60c",
                "span_id": "eee19b7ec3c1b174",
                "flags": 1,
                "attributes": {"order": 7, "ok": False, "ratio": 0.5, "tags": ["a", "b"]},
                "resource": resource,
                "scope": scope,
            },
        },
        {
            "owner": owner,
            "ts": second,
            "content": '{"event":"refund","amount":12}',
            "attrs": {
                "severity_number": 17,
                "severity_text": "ERROR",
                "resource": resource,
                "scope": scope,
            },
        },
    ]


def otlp_json(owner: str | None, *bodies: str) -> dict[str, Any]:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": owner}}]}
    records = [{"timeUnixNano": str(nanos(NOW)), "body": {"stringValue": body}} for body in bodies]
    return {
        "resourceLogs": [
            {**({"resource": resource} if owner else {}), "scopeLogs": [{"logRecords": records}]}
        ]
    }


def test_rejected_records_are_a_partial_success_and_the_others_are_written(api) -> None:
    owner = unique("otel-partial")
    request = otlp_json(owner, "good one", "nul\x00", "good two")
    request["resourceLogs"] += otlp_json(None, "no owner")["resourceLogs"]
    answer = api.post("/v1/logs", json=request)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == 2
    assert "resourceLogs[0].scopeLogs[0].logRecords[1]: content" in partial["errorMessage"]
    assert "resourceLogs[1].scopeLogs[0].logRecords[0]: owner" in partial["errorMessage"]
    assert [row["content"] for row in rows(api, owner)] == ["good one", "good two"]
    # All taken: an empty response, in protobuf for a protobuf request.
    from tests.unit.test_protocols_otlp import as_protobuf

    taken = api.post("/v1/logs", content=as_protobuf(otlp_json(owner, "three")), headers=PROTOBUF)
    assert taken.status_code == 200 and taken.headers["content-type"] == PROTOBUF["content-type"]
    assert ExportLogsServiceResponse.FromString(taken.content) == ExportLogsServiceResponse()
    assert len(rows(api, owner)) == 3


def test_a_record_older_than_its_owners_retention_is_rejected_alone(api) -> None:
    owner = unique("otel-old")
    request = otlp_json(owner, "recent", "ancient")
    old = NOW - timedelta(days=400)
    request["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]["timeUnixNano"] = str(nanos(old))
    answer = api.post("/v1/logs", json=request)
    assert answer.status_code == 200, answer.text
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedLogRecords"] == 1
    assert "resourceLogs[0]" in partial["errorMessage"] and "retention" in partial["errorMessage"]
    assert [row["content"] for row in rows(api, owner)] == ["recent"]


@pytest.mark.parametrize("protobuf", [True, False])
def test_a_malformed_export_is_a_400_status_and_nothing_is_stored(api, protobuf) -> None:
    owner = unique("otel-bad")
    from tests.unit.test_protocols_otlp import as_protobuf

    if protobuf:
        body, headers = as_protobuf(otlp_json(owner, "fine")) + b"\x0a\x05\x12", PROTOBUF
    else:
        request = otlp_json(owner, "fine", "bad id")
        request["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]["traceId"] = "not hex"
        body, headers = orjson.dumps(request), {"content-type": "application/json"}
    answer = api.post("/v1/logs", content=body, headers=headers)
    assert answer.status_code == 400, answer.text
    if protobuf:
        assert Status.FromString(answer.content).code == 3
    else:
        assert answer.json()["code"] == 3 and "traceId" in answer.json()["message"]
    assert rows(api, owner) == []


def test_a_gzip_bomb_is_413(api) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * 2**20
    # 300 MiB of zeros in about 300 KiB, more than SHARDLOG_INGEST__MAX_BODY_BYTES (256 MiB).
    bomb = b"".join(packer.compress(zeros) for _ in range(300)) + packer.flush()
    answer = api.post(
        "/v1/logs",
        content=bomb,
        headers={**PROTOBUF, "content-encoding": "gzip"},
    )
    assert answer.status_code == 413, answer.text


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_exports_answer_4xx_or_write_nothing_when_refused(api, data) -> None:
    from tests.unit.test_protocols_otlp import as_protobuf

    owner = unique("otel-fuzz")
    as_json = data.draw(st.booleans())
    valid = (
        orjson.dumps(otlp_json(owner, "a", "b")) if as_json else as_protobuf(otlp_json(owner, "a"))
    )
    body = bytearray(valid)
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    body = body[: data.draw(st.integers(0, len(body)))]
    headers = {"content-type": "application/json"} if as_json else PROTOBUF
    response = api.post("/v1/logs", content=bytes(body), headers=headers)
    assert response.status_code in (200, 400, 403), response.text
    if response.status_code == 400:
        assert rows(api, owner) == []
