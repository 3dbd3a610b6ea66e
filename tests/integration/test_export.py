"""Exports against the real cluster: every match of a search, in the search's order, equal to
paging through it (as items, in NDJSON and CSV), merged across shards in small batches and
large, and nothing left open on the shards by a client that leaves early."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import orjson
import pytest
from fastapi.testclient import TestClient

from router.app import create_app
from router.settings import SearchSettings
from tests.integration.test_reports_disconnect import _open_reader_transactions
from tests.integration.test_search import (
    DAY,
    FROM,
    TO,
    all_pages,
    audit_owner,  # noqa: F401  (a fixture)
    flow_switch,  # noqa: F401  (a fixture)
    post,
)
from tests.support import bearer, eventually

CASES = [
    ("/v1/audit", "owner", {}),
    ("/v1/audit", "owner", {"q": ["abc"], "order": "desc"}),
    ("/v1/audit", "owner", {"q": ["bcd", "cde"], "match": "substring"}),
    ("/v1/flows", "switch", {}),
    ("/v1/flows", "switch", {"dst_port": "1-30000", "order": "desc"}),
    ("/v1/flows", "switch", {"src_ip": "10.0.0.0/8", "either_direction": "true"}),
]


def _key(api, request, name: str) -> str:
    if name == "owner":
        return request.getfixturevalue("audit_owner")
    return request.getfixturevalue("flow_switch")[0]


def _paged(api, base: str, params: dict) -> list[dict]:
    pages = all_pages(api, f"{base}/search", {**params, "count": "exact"}, 97)
    items = [item for page in pages for item in page["items"]]
    assert pages[0]["count"]["value"] == len(items)
    return items


@pytest.mark.parametrize(("base", "name", "filters"), CASES)
def test_the_export_equals_every_page(api, request, base, name, filters) -> None:
    params = {name: _key(api, request, name), "from": FROM, "to": TO, **filters}
    expected = _paged(api, base, params)
    assert expected
    response = api.get(f"{base}/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert [orjson.loads(line) for line in response.content.splitlines()] == expected


@pytest.mark.parametrize(("base", "name", "filters"), CASES[:2] + CASES[3:5])
def test_small_batches_merge_to_the_same_export(
    api, request, settings, api_token, base, name, filters
) -> None:
    """Three rows per fetch: every round of the merge cuts the shards' streams, on equal
    timestamps too (the audit rows share a few seconds)."""
    params = {name: _key(api, request, name), "from": FROM, "to": TO, **filters}
    small = settings.model_copy(update={"search": SearchSettings(export_page_rows=3)})
    with TestClient(create_app(small), headers=bearer(api_token)) as client:
        batched = client.get(f"{base}/export", params=params)
    assert batched.status_code == 200, batched.text
    assert batched.content == api.get(f"{base}/export", params=params).content


@pytest.mark.parametrize(("base", "name"), [("/v1/audit", "owner"), ("/v1/flows", "switch")])
def test_csv_export_carries_the_items(api, request, base, name) -> None:
    params = {name: _key(api, request, name), "from": FROM, "to": TO}
    expected = _paged(api, base, params)
    response = api.get(f"{base}/export", params={**params, "format": "csv"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == len(expected)
    for row, item in zip(rows, expected, strict=True):
        assert int(row["id"]) == item["id"] and row["shard"] == item["shard"]
        if name == "owner":
            assert row["ts"] == item["ts"] and row["content"] == item["content"]
            assert orjson.loads(row["attrs"] or "null") == item["attrs"]
        else:
            assert row["first_seen"] == item["first_seen"]
            assert (row["src_ip"], int(row["dst_port"])) == (item["src_ip"], item["dst_port"])


def test_csv_cells_that_start_like_a_formula_are_quoted(api) -> None:
    owner = f"=export-{uuid.uuid4().hex[:8]}"
    ts = (DAY + timedelta(hours=3)).isoformat()
    post(api, "/v1/audit", [{"owner": owner, "ts": ts, "content": "+cmd|' /C calc'!A0"}])
    params = {"owner": owner, "from": FROM, "to": TO, "format": "csv"}
    rows = list(csv.DictReader(io.StringIO(api.get("/v1/audit/export", params=params).text)))
    assert [(r["owner"], r["content"]) for r in rows] == [("'" + owner, "'+cmd|' /C calc'!A0")]


def test_an_unknown_owner_exports_nothing(api) -> None:
    params = {"owner": f"nobody-{uuid.uuid4().hex}", "from": FROM, "to": TO}
    assert api.get("/v1/audit/export", params=params).content == b""
    csv_text = api.get("/v1/audit/export", params={**params, "format": "csv"}).text
    assert csv_text == "ts,id,owner,shard,content,attrs\n"


def test_a_bad_format_names_the_parameter(api) -> None:
    params = {"owner": "anyone", "from": FROM, "to": TO, "format": "xml"}
    response = api.get("/v1/audit/export", params=params)
    assert response.status_code == 422
    assert "format" in response.text


def test_a_client_leaving_mid_export_leaves_no_transaction_open(api) -> None:
    owner = f"leave-export-{uuid.uuid4().hex[:8]}"
    ts = (DAY + timedelta(hours=2)).isoformat()
    for _ in range(4):
        post(api, "/v1/audit", [{"owner": owner, "ts": ts, "content": "x" * 500}] * 5_000)
    before = _open_reader_transactions(api)
    params = {"owner": owner, "from": FROM, "to": TO}
    for _ in range(3):
        with api.stream("GET", "/v1/audit/export", params=params) as response:
            assert response.status_code == 200
            assert next(response.iter_bytes())
    # Each export is 20,000 rows of 500 characters (megabytes); the client read one chunk.
    eventually(lambda: _open_reader_transactions(api) <= before or None, timeout=10)
