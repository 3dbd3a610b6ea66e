"""A client that leaves in the middle of a streamed report takes nothing with it: the shards'
read transactions of that report end, and their connections go back to the pools."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import orjson

from bench.shard_view import catalog_shards, shard_sql
from tests.support import eventually

NOW = datetime.now(UTC)
WINDOW = {
    "from": (NOW - timedelta(hours=2)).isoformat(),
    "to": (NOW + timedelta(hours=1)).isoformat(),
}


def _open_reader_transactions(api: httpx.Client) -> int:
    """Sessions of the reader role on every shard that hold a transaction open while idle."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE usename = 'shardlog_reader' "
        "AND state LIKE 'idle in transaction%'"
    )
    return sum(int(shard_sql(dsn, query)) for dsn in catalog_shards(api).values())


def test_a_client_leaving_mid_report_leaves_no_transaction_open(api: httpx.Client) -> None:
    switch = f"leave-{uuid.uuid4().hex[:8]}"
    ts = (NOW - timedelta(minutes=30)).isoformat()
    for part in range(6):
        flows = [
            {
                "switch": switch,
                "ts": ts,
                "src_ip": f"10.{part}.{n >> 8}.{n & 255}",
                "dst_ip": "192.0.2.1",
                "src_port": 1024 + n % 50_000,
                "dst_port": 443,
                "bytes": 100,
            }
            for n in range(10_000)
        ]
        body = b"".join(orjson.dumps(flow) + b"\n" for flow in flows)
        response = api.post(
            "/v1/flows", content=body, headers={"content-type": "application/x-ndjson"}
        )
        assert response.status_code == 200, response.text
    before = _open_reader_transactions(api)
    params = {"switch": switch, "group_by": ["src_ip", "src_port"], "format": "ndjson", **WINDOW}
    for _ in range(3):
        with api.stream("GET", "/v1/flows/report", params=params) as response:
            assert response.status_code == 200
            first = next(response.iter_bytes())
            assert first
    # Each report streams 60,000 groups (megabytes); the client read only a first chunk.
    eventually(lambda: _open_reader_transactions(api) <= before or None, timeout=10)
