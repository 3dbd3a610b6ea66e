"""A client that leaves in the middle of a streamed report takes nothing with it: the shards'
read transactions of that report end, and their connections go back to the pools."""

from __future__ import annotations

import uuid

import httpx

from bench.shard_view import catalog_shards, shard_sql
from tests.support import eventually, past_day, post_distinct_flows, window_around


def _open_reader_transactions(api: httpx.Client) -> int:
    """Sessions of the reader role on every shard that hold a transaction open while idle."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE usename = 'shardlog_reader' "
        "AND state LIKE 'idle in transaction%'"
    )
    return sum(int(shard_sql(dsn, query)) for dsn in catalog_shards(api).values())


def test_a_client_leaving_mid_report_leaves_no_transaction_open(api: httpx.Client) -> None:
    switch = f"leave-{uuid.uuid4().hex[:8]}"
    day = past_day(2)
    post_distinct_flows(api, switch, day.isoformat(), 6)
    before = _open_reader_transactions(api)
    params = {
        "switch": switch,
        "group_by": ["src_ip", "src_port"],
        "format": "ndjson",
        **window_around(day),
    }
    for _ in range(3):
        with api.stream("GET", "/v1/flows/report", params=params) as response:
            assert response.status_code == 200
            first = next(response.iter_bytes())
            assert first
    # Each report streams 60,000 groups (megabytes); the client read only a first chunk.
    eventually(lambda: _open_reader_transactions(api) <= before or None, timeout=10)
