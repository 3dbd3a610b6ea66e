"""Session-scoped real servers: one local cluster (4 shards in 2 groups) and one router process
started by the project's own launcher."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from router import bootstrap, clock
from router.auth.scopes import ADMIN, DATA_SCOPES, SCOPES, SYSTEM_TENANT
from router.db import catalog_login
from router.settings import (
    AuthSettings,
    CatalogSettings,
    ClusterSettings,
    CompactionSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
)
from services.cluster import LocalCluster
from services.process import free_port
from services.router_process import RouterProcess
from tests.support import (
    await_token,
    bearer,
    issue_token,
    local_cluster,
    running_router,
    settings_env,
)

TEST_SHARDS = 4
TEST_GROUPS = 2
# Directories whose every test needs a server of its own that takes seconds to start: a headless
# chromium (console), Patroni clusters with etcd and HAProxy (ha).
SLOW_DIRECTORIES = ("console", "ha")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        if any(item.path.is_relative_to(tests / name) for name in SLOW_DIRECTORIES):
            item.add_marker(pytest.mark.slow)


# The tests read the clock the session's processes read: SHARDLOG_CLOCK__* set for pytest
# shifts this process too, and the launchers pass it on to every router, collector and syslog
# listener they start (tests take "now" from router.clock.now(), or tests.support.clock_env).
clock.configure(Settings().clock)


@pytest.fixture(scope="session")
def cluster_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shardlog")


@pytest.fixture(scope="session")
def settings(cluster_root: Path) -> Settings:
    from tests.support import free_port_range

    return Settings(
        cluster=ClusterSettings(
            data_dir=cluster_root,
            shards=TEST_SHARDS,
            groups=TEST_GROUPS,
            base_port=free_port_range(TEST_SHARDS + 1),
        ),
        server=ServerSettings(port=free_port()),
        # Long enough that a change seen within a second came by NOTIFY, not by polling.
        catalog=CatalogSettings(poll_interval_s=3.0),
        # The session router runs no retention job: tests run retention themselves.
        retention=RetentionSettings(enabled=False, archive_dir=cluster_root / "archive"),
        # Nor a compaction job: tests compact (with `shardlog compact`) what they mean to.
        compaction=CompactionSettings(enabled=False),
        # Tokens on (the default), last-used times written soon enough to be seen by a test.
        auth=AuthSettings(mode="tokens", last_used_flush_s=0.5),
    )


@pytest.fixture(scope="session")
def cluster(settings: Settings) -> Iterator[LocalCluster]:
    local = local_cluster(settings, shared_buffers="64MB")
    # Nobody is trusted: psql and direct connections of the tests read the password file the
    # launcher writes (the router and the CLI get it from their settings).
    previous = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(local.secrets.passfile)
    try:
        local.start()
        asyncio.run(bootstrap.migrate_all(settings))
        asyncio.run(bootstrap.register_topology(settings, local.topology))
        yield local
    finally:
        local.stop()
        if previous is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = previous


@pytest.fixture(scope="session")
def router_process(settings: Settings, cluster: LocalCluster) -> Iterator[RouterProcess]:
    router = RouterProcess(
        settings.cluster.data_dir,
        settings.server.host,
        settings.server.port,
        env=settings_env(settings),
    )
    with running_router(router):
        yield router


@pytest.fixture
async def catalog_pool(settings: Settings, cluster: LocalCluster) -> AsyncIterator[asyncpg.Pool]:
    """The pool the router's lifespan (and the collector) opens: the catalog role's."""
    pool = await catalog_login.open_pool(settings)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def api_token(settings: Settings, cluster: LocalCluster) -> str:
    """Every scope, admin included: a token of the system tenant (the only one that may hold
    admin), so the keys tests write belong to `system`."""
    return issue_token(settings, SYSTEM_TENANT, SCOPES, name="tests: every scope")


@pytest.fixture(scope="session")
def api(router_process: RouterProcess, api_token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=router_process.url, timeout=30, headers=bearer(api_token)) as client:
        yield client


@pytest.fixture(scope="session")
def admin_api(router_process: RouterProcess, settings: Settings) -> Iterator[httpx.Client]:
    """The admin scope alone."""
    token = issue_token(settings, SYSTEM_TENANT, [ADMIN], name="tests: admin")
    with httpx.Client(base_url=router_process.url, timeout=30, headers=bearer(token)) as client:
        yield client


@pytest.fixture(scope="session")
def default_api(router_process: RouterProcess, settings: Settings) -> Iterator[httpx.Client]:
    """Read and write of the tenant `default` (what `make up` hands out)."""
    token = issue_token(settings, "default", DATA_SCOPES, name="tests: default read/write")
    await_token(router_process.url, token)
    with httpx.Client(base_url=router_process.url, timeout=30, headers=bearer(token)) as client:
        yield client


@pytest.fixture
def anonymous(router_process: RouterProcess) -> Iterator[httpx.Client]:
    """No token at all."""
    with httpx.Client(base_url=router_process.url, timeout=30) as client:
        yield client
