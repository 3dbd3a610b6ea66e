"""Idempotency keys and ledger rows are forgotten after their keep time, not before."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from bench.shard_view import catalog_shards, shard_sql
from router.app import create_app
from router.ingest.idempotency import tenant_key
from router.settings import Settings
from tests.support import bearer


def stored(key: str) -> str:
    """How the key of a write by the session's token (tenant system) is recorded."""
    return tenant_key("system", key)


def test_old_keys_and_ledger_rows_are_forgotten(
    settings: Settings, cluster, api, api_token
) -> None:
    old, new = f"old-{uuid.uuid4()}", f"new-{uuid.uuid4()}"
    shards = catalog_shards(api).values()
    with TestClient(create_app(settings), headers=bearer(api_token)) as client:
        for key in (old, new):
            response = client.post(
                "/v1/audit",
                json=[{"owner": f"hk-{key}", "content": "x"}],
                headers={"Idempotency-Key": key},
            )
            assert response.status_code == 200
        cluster.metadata.psql(
            "shardlog",
            "UPDATE idempotency_requests SET created_at = "
            f"now() - interval '49 hours' WHERE key = '{stored(old)}'",
        )
        for dsn in shards:
            shard_sql(
                dsn,
                "UPDATE ingest_ledger SET committed_at = now() - interval '49 hours' "
                f"WHERE request_key = '{stored(old)}'",
            )
        removed = client.portal.call(client.app.state.runtime.housekeeping.run_once)
    assert removed["keys"] >= 1
    keys = cluster.metadata.psql(
        "shardlog",
        f"SELECT key FROM idempotency_requests WHERE key IN ('{stored(old)}', '{stored(new)}')",
    )
    assert keys.split() == [stored(new)]
    ledger = "".join(
        shard_sql(
            dsn,
            "SELECT request_key FROM ingest_ledger "
            f"WHERE request_key IN ('{stored(old)}', '{stored(new)}')",
        )
        for dsn in shards
    )
    assert ledger.split() == [stored(new)]
