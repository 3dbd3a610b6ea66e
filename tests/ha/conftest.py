"""A session-scoped high-availability cluster for the fault tests: one shard group of two
shards, each a Patroni primary + replica, one etcd, one HAProxy, and a router whose catalog
holds the shards' multi-host DSNs. Recovery times are printed at the end of the run."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from router import bootstrap
from router.auth.scopes import SCOPES, SYSTEM_TENANT
from router.settings import (
    CatalogSettings,
    ClusterSettings,
    CompactionSettings,
    IngestSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
)
from services.ha_cluster import HaCluster
from services.ha_topology import HaTopology, build_ha_topology
from services.process import free_port, port_in_use, server_user
from services.router_process import RouterProcess
from tests.support import bearer, issue_token, running_router, settings_env

HA_SHARDS = 2
HA_GROUPS = 1
FAILOVER_WAIT_S = 90.0
RECOVERY: dict[str, list[float]] = {}


def _ports(topology: HaTopology) -> list[int]:
    ports = [topology.metadata.port, topology.etcd.client_port, topology.etcd.peer_port]
    ports.append(topology.stats_port)
    for shard in topology.shards:
        ports += [shard.write_port, shard.read_port]
        ports += [p for node in shard.nodes for p in (node.port, node.rest_port)]
    return ports


def _free_base() -> int:
    # Below the range the other tests draw their ports from (tests/support.py
    # free_port_range, 20000 and up): make test runs tests/ha beside them, and a node stopped
    # by a fault must find its port free when it starts again.
    for _ in range(200):
        base = random.randrange(15000, 19500)
        topology = build_ha_topology(HA_SHARDS, HA_GROUPS, 2, base)
        if not any(port_in_use("127.0.0.1", port) for port in _ports(topology)):
            return base
    raise RuntimeError("no free port plan for the HA cluster")


@pytest.fixture(scope="package")
def ha_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root: Path = tmp_path_factory.mktemp("shardlog-ha")
    return Settings(
        cluster=ClusterSettings(
            data_dir=root,
            ha=True,
            ha_shards=HA_SHARDS,
            groups=HA_GROUPS,
            base_port=_free_base(),
        ),
        server=ServerSettings(port=free_port()),
        catalog=CatalogSettings(poll_interval_s=3.0),
        ingest=IngestSettings(failover_wait_s=FAILOVER_WAIT_S),
        retention=RetentionSettings(enabled=False, archive_dir=root / "archive"),
        compaction=CompactionSettings(enabled=False),
    )


# Package scope: the HA cluster ends with tests/ha (its PGPASSFILE too), before the next
# directory's tests run against the session cluster.
@pytest.fixture(scope="package")
def ha_cluster(ha_settings: Settings) -> Iterator[HaCluster]:
    c = ha_settings.cluster
    cluster = HaCluster(
        build_ha_topology(c.ha_shards, c.groups, c.ha_nodes, c.base_port, c.host),
        c.data_dir,
        server_user(c.server_user),
        c.bin_dir,
        {"shared_buffers": "64MB"},
    )
    # Nobody is trusted: the tests' psql and direct connections read the launcher's password
    # file (the router and the CLI get it from their settings).
    previous = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(cluster.secrets.passfile)
    try:
        cluster.start()
        asyncio.run(bootstrap.migrate_all(ha_settings))
        asyncio.run(bootstrap.register_topology(ha_settings, cluster.topology))
        asyncio.run(bootstrap.migrate_all(ha_settings))
        yield cluster
    finally:
        cluster.stop()
        if previous is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = previous


@pytest.fixture(scope="package")
def ha_router(ha_settings: Settings, ha_cluster: HaCluster) -> Iterator[RouterProcess]:
    env = {
        **settings_env(ha_settings),
        "SHARDLOG_CLUSTER__HA": "true",
        "SHARDLOG_CLUSTER__HA_SHARDS": str(HA_SHARDS),
        "SHARDLOG_INGEST__FAILOVER_WAIT_S": str(FAILOVER_WAIT_S),
    }
    router = RouterProcess(
        ha_settings.cluster.data_dir, ha_settings.server.host, ha_settings.server.port, env=env
    )
    with running_router(router):
        yield router


@pytest.fixture(scope="package")
def ha_token(ha_settings: Settings, ha_cluster: HaCluster) -> str:
    return issue_token(ha_settings, SYSTEM_TENANT, SCOPES, name="ha tests: every scope")


@pytest.fixture(scope="package")
def ha_api(ha_router: RouterProcess, ha_token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ha_router.url, timeout=120, headers=bearer(ha_token)) as client:
        yield client


def record_recovery(fault: str, seconds: float) -> None:
    RECOVERY.setdefault(fault, []).append(seconds)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if RECOVERY:
        terminalreporter.section("HA recovery times")
        for fault, times in RECOVERY.items():
            shown = ", ".join(f"{t:.1f} s" for t in times)
            terminalreporter.write_line(f"{fault}: {shown}")
