"""Loki and OTLP bodies against the write API's limits and the in-flight budget, on an
in-process router with small limits against the real cluster: snappy (block and framed) charged
as it inflates, records counted and measured as they are decoded; a refusal writes nothing and
every byte charged is given back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import cramjam
import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from router import clock
from router.app import create_app
from router.protocols import loki
from router.settings import IngestSettings, Settings
from tests.support import bearer

PROTOBUF = {"content-type": "application/x-protobuf"}
LIMITS = IngestSettings(
    max_body_bytes=2**21,
    max_records=5,
    max_record_bytes=4096,
    max_attrs_bytes=1024,
    inflight_budget_bytes=2**18,
    retry_after_s=2,
)


@pytest.fixture(scope="module")
def small(settings: Settings, cluster: Any, api_token: str) -> Iterator[TestClient]:
    limited = settings.model_copy(update={"ingest": LIMITS})
    with TestClient(create_app(limited), headers=bearer(api_token)) as client:
        yield client


def budget_used(client: TestClient) -> int:
    return int(client.app.state.runtime.ingest_budget.used)  # type: ignore[attr-defined]


def stored(client: TestClient, owner: str) -> list[str]:
    now = clock.now()
    window = {
        "from": (now - timedelta(days=1)).isoformat(),
        "to": (now + timedelta(hours=1)).isoformat(),
    }
    page = client.get("/v1/audit/search", params={"owner": owner, **window, "limit": 100})
    assert page.status_code == 200, page.text
    return sorted(item["content"] for item in page.json()["items"])


def nanos_now() -> int:
    return int((clock.now() - timedelta(minutes=1)).timestamp() * 10**9)


def push(owner: str, lines: list[str]) -> bytes:
    request = loki.PushRequest()
    stream = request.streams.add(labels=f'{{owner="{owner}"}}')
    at = nanos_now()
    for line in lines:
        entry = stream.entries.add(line=line)
        entry.timestamp.seconds, entry.timestamp.nanos = divmod(at, 10**9)
    return bytes(request.SerializeToString())


def export(owner: str, records: int, attributes: int = 0) -> bytes:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.add(key="service.name").value.string_value = owner
    scope = resource_logs.scope_logs.add()
    at = nanos_now()
    for number in range(records):
        record = scope.log_records.add(time_unix_nano=at)
        record.body.string_value = f"record {number}"
        for key in range(attributes):
            record.attributes.add(key=f"k{key}").value.int_value = key
    return bytes(request.SerializeToString())


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("framing", ["block", "framed"])
def test_snappy_past_the_inflight_budget_is_429_and_writes_nothing(small, framing) -> None:
    owner = unique("snappy-budget")
    # Within the body limit once inflated, past the budget: 1 MiB of a line in a few KiB.
    body = push(owner, ["x" * 2**20])
    compress = cramjam.snappy.compress_raw if framing == "block" else cramjam.snappy.compress
    answer = small.post("/loki/api/v1/push", content=bytes(compress(body)), headers=PROTOBUF)
    assert answer.status_code == 429, answer.text
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["code"] == "overloaded"
    assert budget_used(small) == 0
    assert stored(small, owner) == []


def test_a_framed_snappy_push_is_stored(small) -> None:
    owner = unique("snappy-framed")
    body = bytes(cramjam.snappy.compress(push(owner, ["one", "two"])))
    answer = small.post("/loki/api/v1/push", content=body, headers=PROTOBUF)
    assert answer.status_code == 204, answer.text
    assert stored(small, owner) == ["one", "two"]
    assert budget_used(small) == 0


def test_a_loki_entry_longer_than_any_record_is_413(small) -> None:
    owner = unique("loki-long")
    body = bytes(cramjam.snappy.compress_raw(push(owner, ["fine", "y" * 5000])))
    answer = small.post("/loki/api/v1/push", content=body, headers=PROTOBUF)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["field"] == "streams[0].entries[1]"
    assert stored(small, owner) == []
    assert budget_used(small) == 0


def test_loki_honours_max_records(small) -> None:
    owner = unique("loki-records")
    body = bytes(cramjam.snappy.compress_raw(push(owner, [f"line {n}" for n in range(6)])))
    answer = small.post("/loki/api/v1/push", content=body, headers=PROTOBUF)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["field"] == "streams"
    assert stored(small, owner) == []


def test_otlp_honours_max_records(small) -> None:
    owner = unique("otlp-records")
    answer = small.post("/v1/logs", content=export(owner, 6), headers=PROTOBUF)
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == {
        "code": "too_large",
        "message": "more than 5 records in one request",
        "field": "resourceLogs",
    }
    # The same limit, in the same words, as the write API's own NDJSON.
    lines = b"".join(b'{"owner":"%s","content":"x"}\n' % owner.encode() for _ in range(6))
    ndjson = small.post(
        "/v1/audit", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert ndjson.status_code == 413
    assert ndjson.json()["error"]["message"] == answer.json()["error"]["message"]
    assert stored(small, owner) == []
    assert small.post("/v1/logs", content=export(owner, 5), headers=PROTOBUF).status_code == 200
    assert stored(small, owner) == [f"record {n}" for n in range(5)]
    assert budget_used(small) == 0


def test_an_otlp_record_with_too_many_attributes_is_413(small) -> None:
    owner = unique("otlp-attributes")
    # 260 attributes of about 13 bytes: within the record's bytes (4096), more than attrs of
    # 1024 bytes can hold (256).
    body = export(owner, 2, attributes=260)
    assert len(body) < 2 * 4096
    answer = small.post("/v1/logs", content=body, headers=PROTOBUF)
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["field"] == "resourceLogs[0].scopeLogs[0].logRecords[0].attributes"
    assert "260 entries" in error["message"]
    assert stored(small, owner) == []
    assert budget_used(small) == 0
