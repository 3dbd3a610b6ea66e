"""router/protocols/es_bulk.py, es_owner.py and encoding.py: the bulk body parsed item by
item, the owner rule, @timestamp, the answers, and gzip bodies bounded by the body limit."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.errors import BadRequest, Conflict, Forbidden, Invalid, TooLarge
from router.ingest.body import Body, ByteBudget
from router.protocols import es_bulk
from router.protocols.encoding import PIECE_BYTES, UnsupportedEncoding, decoded, decoder
from router.protocols.es_bulk import Bulk, BulkError, TimeError, parse_time
from router.protocols.es_owner import OwnerRule, RuleError

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
DEFAULT_RULE = OwnerRule("field:owner, index | strip-date")


def parsed(lines: list[bytes], path_index: str | None = None, max_items: int = 100) -> Bulk:
    bulk = Bulk(path_index, DEFAULT_RULE, NOW, max_items)
    bulk.feed(lines)
    bulk.finish()
    return bulk


@pytest.mark.parametrize(
    ("rule", "index", "document", "owner"),
    [
        ("field:owner, index | strip-date", "app-2026.11.25", {"owner": "o"}, "o"),
        ("field:owner, index | strip-date", "app-2026.11.25", {}, "app"),
        ("field:owner, index | strip-date", "app-2026-11-25", {"owner": 7}, "app"),
        ("index | strip-date", "app-20261125", {}, "app"),
        ("index | strip-date", "app-2026.11", {}, "app"),
        ("index | strip-date", "app-1234567890", {}, "app-1234567890"),
        ("index|data-stream", "logs-nginx.access-default", {}, "nginx.access"),
        ("index|data-stream", "logs-x-y-prod", {}, "x-y"),
        ("index|data-stream", "filebeat-8.19.0", {}, "filebeat-8.19.0"),
        ("index | strip-prefix:tenant- | strip-date", "tenant-acme-2026.11.25", {}, "acme"),
        ("index | strip-suffix:-logs", "acme-logs", {}, "acme"),
        ("field:host.name, const:unknown", None, {"host": {"name": "web-1"}}, "web-1"),
        ("field:host.name, const:unknown", None, {"host.name": "flat"}, "flat"),
        ("field:host.name, const:unknown", None, {"host": "web-1"}, "unknown"),
        ("field:owner", None, {"owner": ""}, None),
        ("index", None, {}, None),
    ],
)
def test_the_owner_rule(rule: str, index: str | None, document: dict, owner: str | None) -> None:
    assert OwnerRule(rule)(index, document) == owner


@pytest.mark.parametrize(
    "rule", ["", " , ", "field:", "host", "index | lower", "index | strip-prefix:", "const:a | x"]
)
def test_a_rule_that_does_not_parse_says_so(rule: str) -> None:
    with pytest.raises(RuleError):
        OwnerRule(rule)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, NOW),
        ("2026-11-25T10:00:00Z", datetime(2026, 11, 25, 10, tzinfo=UTC)),
        ("2026-11-25t10:00:00.5z", datetime(2026, 11, 25, 10, 0, 0, 500_000, tzinfo=UTC)),
        ("2026-11-25", datetime(2026, 11, 25, tzinfo=UTC)),
        ("2026-11-25T11:00:00,25+0100", datetime(2026, 11, 25, 10, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-11-25T10:00", datetime(2026, 11, 25, 10, tzinfo=UTC)),
        (1795600800000, datetime(2026, 11, 25, 10, tzinfo=UTC)),
        (1795600800000.5, datetime(2026, 11, 25, 10, 0, 0, 500, tzinfo=UTC)),
        ("1795600800000", datetime(2026, 11, 25, 10, tzinfo=UTC)),
    ],
)
def test_timestamps_as_elasticsearch_reads_them(value: object, expected: datetime) -> None:
    assert parse_time(value, NOW) == expected


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2026-13-01",
        "2026-W48-3",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31",
        1e20,
        True,
        [],
    ],
)
def test_timestamps_it_refuses(value: object) -> None:
    with pytest.raises(TimeError):
        parse_time(value, NOW)


def test_items_become_messages_or_refusals_by_position() -> None:
    bulk = parsed(
        [
            b'{"index":{}}',
            b'{"@timestamp":"2026-11-25T10:00:00Z","message":"hi","host":{"name":"h"}}',
            b'{"delete":{"_id":"1"}}',
            b'{"create":{"_index":"x","_id":"9","routing":"r","_type":"events"}}',
            b'{"owner":"al","n":1}',
            b'{"update":{"_id":"1"}}',
            b'{"doc":{}}',
            b"",
            b'{"index":{"if_seq_no":1}}',
            b'{"message":"versioned"}',
            b'{"index":{}}',
            b"not json",
            b'{"index":{}}',
            b'{"message":{"nested":true},"@timestamp":"no"}',
            b'{"index":{}}',
            b'{"message":42}',
        ],
        path_index="logs-2026.11.25",
    )
    assert [(m.owner, m.content, m.attrs) for m in bulk.messages] == [
        ("logs", "hi", {"host": {"name": "h"}}),
        ("al", '{"owner":"al","n":1}', None),  # no message: the document is the content
        ("logs", "42", None),
    ]
    assert bulk.positions == [0, 2, 7]
    assert bulk.messages[0].ts == datetime(2026, 11, 25, 10, tzinfo=UTC)
    assert bulk.messages[1].ts == NOW
    refused = {n: (item.status, item.error) for n, item in enumerate(bulk.items) if item.error}
    assert sorted(refused) == [1, 3, 4, 5, 6]
    assert "delete is not supported" in refused[1][1]["reason"]
    assert "[if_seq_no] is not supported" in refused[4][1]["reason"]
    assert refused[5][1]["type"] == "document_parsing_exception"
    assert "@timestamp" in refused[6][1]["reason"]


@pytest.mark.parametrize(
    ("lines", "status", "kind"),
    [
        ([b"not json"], 400, "x_content_parse_exception"),
        ([b'{"index":{}}', b"{}", b'"index"'], 400, "illegal_argument_exception"),
        ([b'{"index":{},"create":{}}', b"{}"], 400, "illegal_argument_exception"),
        ([b'{"upsert":{}}', b"{}"], 400, "illegal_argument_exception"),
        ([b'{"index":[]}', b"{}"], 400, "illegal_argument_exception"),
        ([b'{"index":{"colour":"red"}}', b"{}"], 400, "illegal_argument_exception"),
        ([b'{"index":{"_index":5}}', b"{}"], 400, "illegal_argument_exception"),
        ([b'{"index":{}}'], 400, "illegal_argument_exception"),
        ([b"", b"  "], 400, "action_request_validation_exception"),
        ([b'{"delete":{}}'] * 4, 413, "content_too_long_exception"),
        ([b""] * 8, 413, "content_too_long_exception"),
    ],
)
def test_a_malformed_body_is_refused_whole(lines: list[bytes], status: int, kind: str) -> None:
    with pytest.raises(BulkError) as refused:
        parsed(lines, max_items=3)
    assert (refused.value.status, refused.value.kind) == (status, kind)


def test_the_answer_is_elasticsearchs() -> None:
    lines = [b'{"index":{}}', b'{"message":"a"}', b'{"create":{"_id":"q\\"uote"}}']
    bulk = parsed(
        [*lines, b'{"message":"b"}', b'{"delete":{}}'],
        path_index="idx",
    )
    bulk.items[1].fail(403, "security_exception", "items[1]: owner 'idx' belongs to another")
    answer = orjson.loads(es_bulk.answer(bulk.items, 7, "abcdefabcdef"))
    assert answer["took"] == 7 and answer["errors"] is True
    first, second, third = (item for item in answer["items"])
    assert first == {
        "index": {
            "_index": "idx",
            "_id": "abcdefabcdef00000000",
            "_version": 1,
            "result": "created",
            "_shards": {"total": 1, "successful": 1, "failed": 0},
            "_seq_no": 0,
            "_primary_term": 1,
            "status": 201,
        }
    }
    assert second["create"]["_id"] == 'q"uote' and second["create"]["status"] == 403
    assert third["delete"]["error"]["type"] == "illegal_argument_exception"
    clean = parsed([b'{"index":{}}', b'{"message":"a"}'], path_index="idx")
    assert orjson.loads(es_bulk.answer(clean.items, 0, "x"))["errors"] is False


def test_shardlog_errors_in_elasticsearchs_words() -> None:
    assert es_bulk.request_error(Invalid("m", "f")) == (
        400,
        {
            "error": {
                "root_cause": [{"type": "illegal_argument_exception", "reason": "m"}],
                "type": "illegal_argument_exception",
                "reason": "m",
            },
            "status": 400,
        },
    )
    assert es_bulk.request_error(TooLarge("m"))[1]["error"]["type"] == "content_too_long_exception"
    assert es_bulk.request_error(Conflict("m", retry_after_s=1))[0] == 429
    assert es_bulk.request_error(Conflict("m"))[0] == 409
    assert es_bulk.item_error(Forbidden("m", "items[1].owner")) == (403, "security_exception")
    assert es_bulk.item_error(Invalid("m", "items[1].owner"))[1] == "illegal_argument_exception"
    assert es_bulk.item_error(Invalid("m", "items[1].ts"))[1] == "document_parsing_exception"


LINES = st.lists(
    st.one_of(
        st.sampled_from(
            [b'{"index":{}}', b'{"create":{"_index":"a-2026.11.25"}}', b'{"delete":{}}', b"{}"]
        ),
        st.dictionaries(
            st.sampled_from(["message", "@timestamp", "owner", "x"]),
            st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=False), st.none()),
            max_size=3,
        ).map(lambda document: json.dumps(document).encode()),
        st.binary(max_size=12),
    ),
    max_size=20,
)


@given(lines=LINES)
def test_any_body_parses_into_items_or_one_bulk_error(lines: list[bytes]) -> None:
    bulk = Bulk("p", DEFAULT_RULE, NOW, 8)
    try:
        bulk.feed(lines)
        bulk.finish()
    except BulkError as exc:
        assert exc.status in (400, 413)
        return
    assert len(bulk.messages) == len(bulk.positions)
    assert bulk.positions == sorted(set(bulk.positions))
    assert all(bulk.items[p].error is None for p in bulk.positions)
    assert len(bulk.items) - len(bulk.positions) == sum(1 for i in bulk.items if i.error)
    orjson.loads(es_bulk.answer(bulk.items, 0, "p"))


async def _stream(data: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def _read(body: Body) -> int:
    total = 0
    async for chunk in body.chunks():
        total += len(chunk)
    return total


def test_a_zip_bomb_stops_at_the_body_limit_having_decoded_little_more() -> None:
    bomb = gzip.compress(b"\0" * 2**30, 1)  # 1 GiB once decoded, about 1 MB sent
    budget = ByteBudget(2**30)
    body = Body(decoded(_stream(bomb), decoder("gzip")), 2**20, budget, 1)
    with pytest.raises(TooLarge):
        asyncio.run(_read(body))
    assert body.size <= 2**20 + PIECE_BYTES
    body.release()
    assert budget.used == 0


def test_gzip_and_deflate_bodies_are_decoded_and_bad_ones_refused() -> None:
    data = b'{"index":{}}\n{"message":"m"}\n' * 10_000
    body = Body(
        decoded(_stream(gzip.compress(data) * 2), decoder("GZIP")), 2**24, ByteBudget(2**30), 1
    )
    assert asyncio.run(_read(body)) == 2 * len(data)
    body = Body(
        decoded(_stream(zlib.compress(data)), decoder("deflate")), 2**24, ByteBudget(2**30), 1
    )
    assert asyncio.run(_read(body)) == len(data)
    assert decoder(None) is None and decoder("identity") is None
    with pytest.raises(UnsupportedEncoding):
        decoder("br")
    for bad in (gzip.compress(data)[:-9], b"plain text"):
        body = Body(decoded(_stream(bad), decoder("gzip")), 2**24, ByteBudget(2**30), 1)
        with pytest.raises(BadRequest):
            asyncio.run(_read(body))


def test_a_future_ts_is_left_to_the_audit_rules() -> None:
    # parse_time takes any instant; shipped.check refuses those too far ahead.
    later = (NOW + timedelta(days=1)).isoformat()
    assert parse_time(later, NOW) == NOW + timedelta(days=1)
