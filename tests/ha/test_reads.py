"""Searches of a Patroni shard from its standby (SHARDLOG_POOLS__SEARCH_TARGET=prefer-standby):
the rows are found, the queries ran on the replica, and writes still go to the primary."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import httpx

from bench.load import auth_of
from bench.shard_view import day_tables, owner_id, shard_sql
from router import clock
from router.settings import Settings
from services.ha_cluster import HaCluster
from services.process import free_port
from services.router_process import RouterProcess
from tests.support import eventually, running_router, settings_env

ROWS = 60


def router_sessions(cluster: HaCluster, shard: str, *, primary: bool) -> int:
    """Sessions of the router on the shard's primary or on its replica."""
    node = cluster.primary(shard) if primary else None
    if node is None:
        node = next(n for n in cluster.nodes_of(shard) if not n.is_primary())
    dsn = f"postgresql://shardlog@{node.spec.host}:{node.spec.port}/shardlog"
    return int(
        shard_sql(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'shardlog-router'",
        )
    )


def test_searches_run_on_the_standby_when_configured(
    ha_settings: Settings, ha_cluster: HaCluster, ha_api: httpx.Client, tmp_path: Path
) -> None:
    owner = f"reads-{uuid.uuid4().hex[:8]}"
    body = [{"owner": owner, "content": f"row {i}"} for i in range(ROWS)]
    assert ha_api.post("/v1/audit", json=body).status_code == 200
    now = clock.now()
    window = {
        "owner": owner,
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=1)).isoformat(),
        "limit": 1000,
    }
    shards = [spec.name for spec in ha_cluster.topology.shards]
    before = {shard: router_sessions(ha_cluster, shard, primary=False) for shard in shards}
    env = {
        **settings_env(ha_settings),
        "SHARDLOG_CLUSTER__HA": "true",
        "SHARDLOG_POOLS__SEARCH_TARGET": "prefer-standby",
    }
    reader = RouterProcess(tmp_path, ha_settings.server.host, free_port(), env=env)
    with (
        running_router(reader),
        httpx.Client(base_url=reader.url, timeout=60, headers=auth_of(ha_api)) as api,
    ):

        def finds(rows: int) -> bool | None:
            page = api.get("/v1/audit/search", params=window).json()
            return (len(page["items"]) == rows and not page["partial"]) or None

        # A standby shows a row once it has replayed it: soon, not necessarily at once.
        eventually(lambda: finds(ROWS), timeout=30)
        holding = day_tables(api, "audit", owner_id(api, "audit", owner) or 0)
        assert holding, "no day table found"
        for shard in holding:  # a shard just back from a fault may have been left out
            assert router_sessions(ha_cluster, shard, primary=False) > before[shard], shard
        # Writes through the same router still go to the primaries.
        assert api.post("/v1/audit", json=body).status_code == 200
        eventually(lambda: finds(2 * ROWS), timeout=30)


def test_searches_on_the_primary_by_default(ha_api: httpx.Client) -> None:
    """The default search target: the reader role's pool of a multi-host shard finds the
    primary although the role's sessions are read-only (found by the compose test: asyncpg's
    read-write check matched no host)."""
    owner = f"reads-{uuid.uuid4().hex[:8]}"
    body = [{"owner": owner, "content": f"row {i}"} for i in range(ROWS)]
    assert ha_api.post("/v1/audit", json=body).status_code == 200
    now = clock.now()
    window = {
        "owner": owner,
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=1)).isoformat(),
        "limit": 1000,
        "partial": "false",
    }
    response = ha_api.get("/v1/audit/search", params=window)
    assert response.status_code == 200, response.text
    assert len(response.json()["items"]) == ROWS
