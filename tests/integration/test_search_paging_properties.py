"""Paging properties, drawn by hypothesis against the real cluster: for any rows (many equal
timestamps, several shards), any page size and either order, the forward pages hold every row
exactly once in order, and walking back from the end returns the same pages."""

from __future__ import annotations

import uuid
from datetime import timedelta

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router import clock

DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}

requests_strategy = st.lists(
    st.lists(st.integers(0, 5), min_size=1, max_size=25),  # seconds: many ties
    min_size=1,
    max_size=6,
)


def keys(items) -> list[tuple[str, str, int]]:
    return [(i["ts"], i["shard"], i["id"]) for i in items]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests_strategy, st.integers(1, 12), st.sampled_from(["asc", "desc"]))
def test_pages_hold_every_row_once_in_order_both_ways(api, requests, limit, order) -> None:
    owner = f"prop-{uuid.uuid4().hex[:10]}"
    total = 0
    for number, seconds in enumerate(requests):  # each request lands on some shard
        body = b"".join(
            orjson.dumps(
                {
                    "owner": owner,
                    "content": f"{number}-{i}",
                    "ts": (DAY + timedelta(hours=3, seconds=s)).isoformat(),
                }
            )
            + b"\n"
            for i, s in enumerate(seconds)
        )
        response = api.post(
            "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
        )
        assert response.status_code == 200
        total += len(seconds)
    params = {"owner": owner, **WINDOW, "order": order, "limit": limit}
    pages, cursor = [], None
    while True:
        page = api.get(
            "/v1/audit/search", params={**params, **({"cursor": cursor} if cursor else {})}
        ).json()
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    forward = [key for page in pages for key in keys(page["items"])]
    assert len(forward) == len(set(forward)) == total
    assert forward == sorted(forward, reverse=order == "desc")
    assert all(len(page["items"]) == limit for page in pages[:-1])
    back, cursor = [keys(pages[-1]["items"])], pages[-1]["prev_cursor"]
    while cursor:
        page = api.get("/v1/audit/search", params={**params, "cursor": cursor}).json()
        back.insert(0, keys(page["items"]))
        cursor = page["prev_cursor"]
    assert [key for page in back for key in page] == forward
