"""A search page written by router/search/page.py reads byte for byte as its answer model
(AuditPage, FlowPage) writes it: every item's keys in the model's order, values in the model's
form, the model's validation passing; over pages of many rows (items made in chunks between
yields) and for flows of every nullable column."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import orjson
import pytest

from router import clock
from router.models.search import AuditPage, FlowPage
from router.search.page import CHUNK
from tests.integration.test_search import all_pages, key_of, oracle

DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
FROM, TO = DAY.isoformat(), (DAY + timedelta(days=2)).isoformat()


def post(api, path, records) -> None:
    response = api.post(
        path,
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def as_the_model_writes(model, body: bytes) -> bytes:
    return model.model_validate_json(body).model_dump_json().encode()


@pytest.fixture(scope="module")
def audit_owner(api) -> str:
    owner = f"pagebody-{uuid.uuid4().hex[:8]}"
    records = [
        {
            "owner": owner,
            "ts": (DAY + timedelta(seconds=n, microseconds=n % 3)).isoformat(),
            "content": f'row {n} "quoted" \\ tab\t é ✓ \u2028 line\nbreak',
            **({"attrs": {"n": n, "f": n / 7, "nested": {"a": [1, None, "x"]}}} if n % 2 else {}),
        }
        for n in range(3 * CHUNK + 17)
    ]
    for start in range(0, len(records), 500):
        post(api, "/v1/audit", records[start : start + 500])
    return owner


@pytest.mark.parametrize("limit", [1, 10, 3 * CHUNK + 17])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_audit_pages_are_what_the_model_writes(api, audit_owner, limit, order) -> None:
    params = {"owner": audit_owner, "from": FROM, "to": TO, "limit": limit, "order": order}
    response = api.get("/v1/audit/search", params={**params, "count": "exact"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.content == as_the_model_writes(AuditPage, response.content)
    body = response.json()
    assert len(body["items"]) == min(limit, 3 * CHUNK + 17)
    assert body["count"]["value"] == 3 * CHUNK + 17
    if body["next_cursor"]:
        following = api.get("/v1/audit/search", params={**params, "cursor": body["next_cursor"]})
        assert following.content == as_the_model_writes(AuditPage, following.content)
        assert following.json()["prev_cursor"] is not None


def test_an_empty_page_is_what_the_model_writes(api) -> None:
    params = {"owner": f"nobody-{uuid.uuid4().hex}", "from": FROM, "to": TO}
    response = api.get("/v1/audit/search", params=params)
    assert response.content == as_the_model_writes(AuditPage, response.content)


def test_flow_pages_are_what_the_model_writes(api) -> None:
    switch = f"pagebody-{uuid.uuid4().hex[:8]}"
    flows = [
        {
            "switch": switch,
            "ts": (DAY + timedelta(minutes=n)).isoformat(),
            "src_ip": "192.0.2.1" if n % 2 else "2001:db8::1",
            "dst_ip": "198.51.100.7" if n % 2 else "2001:db8::9",
            "src_port": 1000 + n,
            "dst_port": 443,
            "bytes": 10 * n + 1,
            **({"proto": 6, "tcp_flags": 18, "sampling_rate": 4} if n % 3 else {}),
        }
        for n in range(CHUNK + 30)
    ]
    post(api, "/v1/flows", flows)
    params = {"switch": switch, "from": FROM, "to": TO, "limit": CHUNK + 30}
    response = api.get("/v1/flows/search", params=params)
    assert response.status_code == 200, response.text
    assert response.content == as_the_model_writes(FlowPage, response.content)
    items = response.json()["items"]
    assert len(items) == CHUNK + 30
    assert {item["proto"] for item in items} == {None, 6}


@pytest.fixture(scope="module")
def skewed_owner(api) -> str:
    """One request of many rows (one part, one shard) beside small ones: one shard holds far
    more than its share of a 1,000-row page, so its first answer is completed by more."""
    owner = f"skewed-{uuid.uuid4().hex[:8]}"
    big = [
        {"owner": owner, "ts": (DAY + timedelta(seconds=n)).isoformat(), "content": f"big {n}"}
        for n in range(2_600)
    ]
    post(api, "/v1/audit", big)
    for request in range(12):
        small = [
            {
                "owner": owner,
                "ts": (DAY + timedelta(seconds=200 * request + n)).isoformat(),
                "content": f"small {request}-{n}",
            }
            for n in range(5)
        ]
        post(api, "/v1/audit", small)
    return owner


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("consistent", [False, True])
def test_pages_of_a_skewed_owner_equal_the_oracle(api, skewed_owner, order, consistent) -> None:
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "audit", skewed_owner, "content")]
    shards = Counter(r[1] for r in expected)
    assert max(shards.values()) > 2 * 1_001 // len(shards) + 16  # more than its share
    params = {"owner": skewed_owner, "from": FROM, "to": TO, "order": order}
    pages = all_pages(api, "/v1/audit/search", {**params, "consistent": consistent}, 1_000)
    got = [key_of(item) for body in pages for item in body["items"]]
    assert got == (expected if order == "asc" else expected[::-1])
    assert [len(body["items"]) for body in pages][:-1] == [1_000] * (len(pages) - 1)
