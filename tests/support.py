"""Helpers for tests that run real servers: settings as environment, the CLI as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import orjson
import pytest

from bench.load import window
from bench.shard_view import catalog_shards, shard_sql
from router import bootstrap, clock
from router.auth import store as auth_store
from router.auth.store import TokenLimits
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login, pools
from router.db.connection import prepare_shard_connection
from router.db.names import (
    DayTable,
    Kind,
    day_table,
    owner_days_table,
    quote_ident,
    shared_segment_table,
    shared_table,
)
from router.errors import BUG_MARKER, ShardlogError
from router.ingest.body import LineBlock
from router.ingest.records import Limits, Location
from router.ingest.writer import PartWriter
from router.retention.shared_days import group_keep_days
from router.search import fdw
from router.settings import (
    CatalogSettings,
    ClusterSettings,
    CompactionSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
)
from services.cluster import LocalCluster
from services.collector_process import CLOCK_PREFIX, CollectorProcess
from services.process import free_port, port_in_use, server_user
from services.router_process import RouterProcess
from services.topology import build_topology

T = TypeVar("T")
R = TypeVar("R")
REPO = Path(__file__).resolve().parent.parent


def clock_now() -> datetime:
    """The tests' one reading of now (UTC): the clock every shardlog process reads
    (router/clock.py, shifted alike by SHARDLOG_CLOCK__*), taken when a test runs, never at
    import."""
    return clock.now()


def real_now() -> datetime:
    """The machine's real wall clock (UTC), as a real external client (logger, rsyslog,
    softflowd, a browser) stamps what it sends: ``clock_now()`` without the test shift of
    SHARDLOG_CLOCK__* (the same instant without a shift)."""
    return clock.real_now()


def stamped_window(margin: timedelta = timedelta(hours=1)) -> tuple[datetime, datetime]:
    """From ``margin`` before the earlier of ``clock_now()`` and ``real_now()`` to ``margin``
    after the later: holds rows a real client stamped as well as rows the processes stamped."""
    now, real = clock_now(), real_now()
    return min(now, real) - margin, max(now, real) + margin


def past_day(days: int = 2, hour: int = 12) -> datetime:
    """``hour`` o'clock UTC of the day ``days`` before today: with days >= 1 it is in the past
    and its day is the same on either side of a midnight the test crosses; the router accepts
    such a ``ts`` (up to SHARDLOG_INGEST__DEFAULT_KEEP_DAYS back)."""
    midnight = clock_now().replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=days) + timedelta(hours=hour)


def window_around(
    start: datetime, end: datetime | None = None, margin: timedelta = timedelta(hours=1)
) -> dict[str, str]:
    """A search's ``from``/``to`` from ``margin`` before ``start`` to ``margin`` after ``end``
    (``start`` when not given): take ``start`` before a write without ``ts`` (the router stamps
    it) and ``end`` after it, whatever the hour and however long the session has run."""
    return {
        "from": (start - margin).isoformat(),
        "to": ((end or start) + margin).isoformat(),
    }


def recent_window() -> dict[str, str]:
    """A search's ``from``/``to`` an hour either side of now, taken as the search is made: it
    holds what the test wrote without ``ts`` moments before, however long the session ran."""
    return window_around(clock_now())


@contextlib.contextmanager
def running_router(router: RouterProcess) -> Iterator[RouterProcess]:
    """The router for a test session; the session fails if its log shows an unexpected error."""
    router.start()
    try:
        yield router
    finally:
        router.stop()
        log = router.log_file.read_text(errors="replace")
        assert not logged_bugs(log), f"the router logged an unexpected error:\n{log[-4000:]}"


# uvicorn's access log: a request line quotes the client's URL, which may hold anything (a
# fuzzer draws strings from the code's own constants, BUG_MARKER among them).
_ACCESS_LINE = re.compile(r'INFO: +\S+ - "')


def logged_bugs(log: str) -> list[str]:
    """The lines of a router log that report an unexpected error (BUG_MARKER outside an access
    log line)."""
    return [
        line for line in log.splitlines() if BUG_MARKER in line and not _ACCESS_LINE.match(line)
    ]


def free_port_range(count: int, low: int = 20000, high: int = 32000) -> int:
    """A base port whose next ``count`` ports are all free on loopback, below the ephemeral
    range so that no outgoing connection takes one of them."""
    for _ in range(200):
        base = random.randrange(low, high - count)
        if not any(port_in_use("127.0.0.1", base + i) for i in range(count)):
            return base
    raise RuntimeError("no free port range")


def clock_env(instant: datetime) -> dict[str, str]:
    """The settings that set a shardlog process's clock (router/clock.py) running from
    ``instant`` now; give every process of a test the same one."""
    offset = (instant - clock.now()).total_seconds() + clock.current().drift_s()
    return {"SHARDLOG_CLOCK__OFFSET_S": f"{offset:.6f}"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def issue_token(
    settings: Settings,
    tenant: str,
    scopes: Iterable[str],
    *,
    name: str = "tests",
    expires_at: datetime | None = None,
    limits: TokenLimits | None = None,
) -> str:
    """A new token of ``tenant`` (created when missing), straight in the catalog (as the CLI
    does): tests may give it an expiry in the past."""

    async def create() -> str:
        connection = await pools.connect_metadata(settings.metadata_dsn(), settings.metadata)
        try:
            await auth_store.ensure_tenant(connection, tenant)
            _, text = await auth_store.create_token(
                connection,
                tenant,
                name,
                list(scopes),
                "tests",
                expires_at=expires_at,
                limits=limits or TokenLimits(),
            )
            return text
        finally:
            await connection.close()

    return asyncio.run(create())


def await_token(url: str, token: str, deadline_s: float = 15.0) -> str:
    """``token`` once the router at ``url`` knows it. A token made straight in the catalog
    reaches a running router by the catalog's NOTIFY (at worst its poll), not at once: a
    request sent right after ``issue_token`` can meet a 401."""
    give_up = time.monotonic() + deadline_s
    while True:
        answer = httpx.get(f"{url}/v1/whoami", headers=bearer(token), timeout=10)
        if answer.status_code == 200 or time.monotonic() > give_up:
            assert answer.status_code == 200, answer.text
            return token
        time.sleep(0.05)


def settings_env(settings: Settings) -> dict[str, str]:
    env = {
        "SHARDLOG_CLUSTER__DATA_DIR": str(settings.cluster.data_dir),
        "SHARDLOG_CLUSTER__SHARDS": str(settings.cluster.shards),
        "SHARDLOG_CLUSTER__GROUPS": str(settings.cluster.groups),
        "SHARDLOG_CLUSTER__BASE_PORT": str(settings.cluster.base_port),
        "SHARDLOG_SERVER__HOST": settings.server.host,
        "SHARDLOG_SERVER__PORT": str(settings.server.port),
        "SHARDLOG_CATALOG__POLL_INTERVAL_S": str(settings.catalog.poll_interval_s),
        "SHARDLOG_RETENTION__ENABLED": str(settings.retention.enabled).lower(),
        "SHARDLOG_RETENTION__INTERVAL_S": str(settings.retention.interval_s),
        "SHARDLOG_RETENTION__ARCHIVE_DIR": str(settings.retention.archive_dir),
        "SHARDLOG_COMPACTION__ENABLED": str(settings.compaction.enabled).lower(),
        "SHARDLOG_AUTH__MODE": settings.auth.mode,
        "SHARDLOG_AUTH__LAST_USED_FLUSH_S": str(settings.auth.last_used_flush_s),
        "SHARDLOG_POOLS__PASSFILE": str(settings.pools.passfile),
        "SHARDLOG_COLLECTOR__NETFLOW_PORT": str(settings.collector.netflow_port),
        "SHARDLOG_COLLECTOR__IPFIX_PORT": str(settings.collector.ipfix_port),
        "SHARDLOG_COLLECTOR__METRICS_PORT": str(settings.collector.metrics_port),
        "SHARDLOG_SYSLOG__UDP_PORT": str(settings.syslog.udp_port),
        "SHARDLOG_SYSLOG__TCP_PORT": str(settings.syslog.tcp_port),
        "SHARDLOG_SYSLOG__METRICS_PORT": str(settings.syslog.metrics_port),
    }
    if settings.metadata.dsn:
        env["SHARDLOG_METADATA__DSN"] = settings.metadata.dsn
    optional = {
        "SHARDLOG_SERVER__TLS_CERT_FILE": settings.server.tls_cert_file,
        "SHARDLOG_SERVER__TLS_KEY_FILE": settings.server.tls_key_file,
        "SHARDLOG_POOLS__TLS_MODE": settings.pools.tls_mode,
        "SHARDLOG_POOLS__TLS_CA_FILE": settings.pools.tls_ca_file,
    }
    env.update({key: str(value) for key, value in optional.items() if value is not None})
    return env


def another_router(settings: Settings, home: Path, env: dict[str, str]) -> RouterProcess:
    """A router of its own (its home, a free port) on the session's catalog and shards, with
    ``env`` over the session's settings; start it with ``running_router``."""
    port = free_port()
    full = {**settings_env(settings), "SHARDLOG_SERVER__PORT": str(port), **env}
    return RouterProcess(home, settings.server.host, port, env=full)


def cli_env(settings: Settings) -> dict[str, str]:
    """The environment of a CLI process of the session: its settings come from ``settings``
    alone, but the clock is the one every process of the session shares (SHARDLOG_CLOCK__*)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SHARDLOG_") or k.startswith(CLOCK_PREFIX)
    }
    return {**clean, **settings_env(settings)}


def run_cli(
    settings: Settings, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "router.cli", *args],
        env={**cli_env(settings), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def eventually(check: Callable[[], T | None], timeout: float = 10.0, interval: float = 0.1) -> T:
    """Poll until ``check`` returns something truthy; fail with its last value otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")


async def eventually_async(check: Callable[[], bool], within_s: float = 10.0) -> None:
    """Poll ``check`` on the running loop (which goes on meanwhile) until it holds."""
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, f"condition not met within {within_s}s"
        await asyncio.sleep(0.01)


def assert_round_trip(client: httpx.Client, prefix: str) -> None:
    """500 audit rows (NDJSON) and a flow sent twice (CSV) go in through ``client``'s router and
    are found again: the pattern's one row with an exact count, the flow merged once."""
    owner, switch = f"{prefix}-{uuid.uuid4().hex[:8]}", f"sw-{uuid.uuid4().hex[:8]}"
    lines = b"".join(
        orjson.dumps({"owner": owner, "content": f"user {i} logged in"}) + b"\n" for i in range(500)
    )
    response = client.post(
        "/v1/audit", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert response.json() == {"accepted": 500}
    response = client.post(
        "/v1/flows",
        params={"switch": switch},
        content=b"10.0.0.1,10.0.0.2,1000,443\n10.0.0.1,10.0.0.2,1000,443\n",
        headers={"content-type": "text/csv"},
    )
    assert response.json() == {"accepted": 2}
    found = client.get(
        "/v1/audit/search",
        params={"owner": owner, "q": "user 42 ", "count": "exact", **window()},
    ).json()
    assert [item["content"] for item in found["items"]] == ["user 42 logged in"]
    assert found["count"] == {"value": 1, "exact": True, "method": "count", "bounds": None}, found
    flows = client.get("/v1/flows/search", params={"switch": switch, **window()}).json()
    assert [(f["src_port"], f["flow_count"]) for f in flows["items"]] == [(1000, 2)]


# --- least privilege: statements a role must not run ---------------------------------------

DENIED = "42501"  # insufficient_privilege
READ_ONLY = "25006"  # read_only_sql_transaction
# Statements PostgreSQL runs outside transaction blocks only.
_NO_TRANSACTION = ("CREATE DATABASE", "DROP DATABASE", "ALTER SYSTEM")


async def refused(connection: asyncpg.Connection, sql: str, code: str = DENIED) -> None:
    """``sql`` fails with SQLSTATE ``code`` (in a transaction rolled back either way, where
    PostgreSQL allows one)."""
    alone = sql.startswith(_NO_TRANSACTION)
    transaction = connection.transaction()
    if not alone:
        await transaction.start()
    try:
        with pytest.raises(asyncpg.PostgresError) as caught:
            await connection.execute(sql)
        assert caught.value.sqlstate == code, f"{sql}: {caught.value.sqlstate} {caught.value}"
    finally:
        if not alone:
            await transaction.rollback()


def scrape(metrics_url: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples at ``metrics_url``/metrics whose labels include
    ``labels`` (0 when there is none)."""
    text = httpx.get(f"{metrics_url}/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        metric, _, rest = series.partition("{")
        if metric == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += float(value)
    return total


class TestedHelper(CollectorProcess):
    """A helper process of the tests (the collector, the syslog listener): its log checked for
    unexpected errors, its metrics read."""

    def check_log(self) -> None:
        log = self.log_file.read_text(errors="replace")
        assert not logged_bugs(log) and "Traceback" not in log, log[-4000:]

    def metric(self, name: str, **labels: str) -> float:
        return scrape(self.metrics_url, name, **labels)


def search_items(api: httpx.Client, kind: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of a search of ``kind`` with ``params``, its pages followed to the end."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        paged = {**params, "cursor": cursor} if cursor else params
        response = api.get(f"/v1/{kind}/search", params=paged)
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def map_audit_owner(api: httpx.Client, prefix: str, kind: str = "audit") -> tuple[str, str]:
    """A new audit owner (or switch, of ``kind`` flow) mapped by hand (tenant system) to the
    first group of the local topology (other tests add groups without shards): its key and
    group."""
    key = f"{prefix}-{uuid.uuid4().hex[:10]}"
    group = sorted(
        s["group"]
        for s in api.get("/v1/admin/shards").json()
        if s["name"].startswith("shard") and s["state"] == "active"
    )[0]
    response = api.put(
        "/v1/admin/owners", json={"kind": kind, "key": key, "group": group, "tenant": "system"}
    )
    assert response.status_code == 200, response.text
    return key, group


@contextlib.asynccontextmanager
async def scratch_shard(
    cluster: LocalCluster,
) -> AsyncIterator[tuple[asyncpg.Connection, list[DayTable]]]:
    """A superuser connection to the first shard and a list of the day tables a test makes
    there: dropped on the way out."""
    connection = await asyncpg.connect(cluster.shards[0].spec.dsn())
    await prepare_shard_connection(connection)
    made: list[DayTable] = []
    try:
        yield connection, made
    finally:
        for table in made:
            await connection.execute(f"DROP TABLE IF EXISTS {table.quoted}")
        await connection.close()


@dataclass
class InProcessWriter:
    """The router's part writer in the test's process, with the pools and catalog copy it
    writes through (the catalog role's, as the router's)."""

    writer: PartWriter
    metadata: asyncpg.Pool
    shard_pools: pools.ShardPools
    catalog: CatalogCache


@contextlib.asynccontextmanager
async def in_process_writer(
    settings: Settings, known_tables: int | None = None
) -> AsyncIterator[InProcessWriter]:
    """A PartWriter of its own (``known_tables``: its bound, else the settings'), closed on the
    way out."""
    metadata = await catalog_login.open_pool(settings)
    shard_pools = pools.ShardPools(settings.pools)
    try:
        catalog = CatalogCache(metadata, catalog_login.catalog_dsn(settings), settings.catalog)
        await shard_pools.reconcile(await catalog.reload())
        shared = settings.shared
        if known_tables is not None:
            shared = shared.model_copy(update={"known_tables": known_tables})
        writer = PartWriter(shard_pools, metadata, catalog, settings.ingest, shared)
        try:
            yield InProcessWriter(writer, metadata, shard_pools, catalog)
        finally:
            await writer.close()
    finally:
        await shard_pools.close()
        await metadata.close()


def per_line_rows(
    row_of: Callable[[Any, Location, datetime, Limits], R],
    block: bytes,
    first: int,
    now: datetime,
    limits: Limits,
) -> list[R] | None:
    """What the per-line path (orjson, then ``row_of``: records.audit_row or flow_row) makes
    of an NDJSON block: the reference the block decoders are held to; None where it refuses a
    record."""
    try:
        return [
            row_of(raw, Location("records", number), now, limits)
            for number, raw in LineBlock(block).records(first)
        ]
    except ShardlogError:
        return None


@contextlib.contextmanager
def sharing_client(
    settings: Settings, home: Path, api: httpx.Client, env: dict[str, str] | None = None
) -> Iterator[httpx.Client]:
    """A client, with the session's token, of a router of its own that writes small audit
    owner-days shared (``env`` over that), its retention job off; the shared days it made
    are dropped after."""
    full = {"SHARDLOG_SHARED__ENABLED": "true", "SHARDLOG_RETENTION__ENABLED": "false"}
    router = another_router(settings, home, {**full, **(env or {})})
    with (
        shared_days_dropped_after(settings, catalog_shards(api)),
        running_router(router),
        httpx.Client(
            base_url=router.url, headers={"Authorization": api.headers["Authorization"]}
        ) as session,
    ):
        yield session


def post_audit_rows(
    client: httpx.Client, owner: str, at: datetime, rows: int, content: str | None = None
) -> None:
    """``rows`` audit rows of ``owner``, a second apart from ``at``, in one NDJSON request
    (no key: the router COPYs a part past its one-statement size); each row's content is
    ``content``, else the owner's key."""
    body = b"".join(
        orjson.dumps(
            {
                "owner": owner,
                "ts": (at + timedelta(seconds=n)).isoformat(),
                "content": owner if content is None else content,
            }
        )
        + b"\n"
        for n in range(rows)
    )
    answer = client.post(
        "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert answer.status_code == 200, answer.text


def post_distinct_flows(client: httpx.Client, switch: str, ts: str, batches: int) -> int:
    """``batches`` x 10,000 flows of one switch at ``ts``, each its own (src_ip, src_port):
    a report grouped by them, or an export, of megabytes. How many were written."""
    for part in range(batches):
        flows = [
            {
                "switch": switch,
                "ts": ts,
                "src_ip": f"10.{part}.{n >> 8}.{n & 255}",
                "dst_ip": "192.0.2.1",
                "src_port": 1024 + n,
                "dst_port": 443,
                "bytes": 100,
            }
            for n in range(10_000)
        ]
        body = b"".join(orjson.dumps(flow) + b"\n" for flow in flows)
        response = client.post(
            "/v1/flows", content=body, headers={"content-type": "application/x-ndjson"}
        )
        assert response.status_code == 200, response.text
    return batches * 10_000


def local_cluster(settings: Settings, shared_buffers: str) -> LocalCluster:
    """The local cluster ``settings`` describe, as the tests run it: speed over durability."""
    c = settings.cluster
    return LocalCluster(
        build_topology(c.shards, c.groups, c.base_port, c.host),
        c.data_dir,
        server_user(c.server_user),
        c.bin_dir,
        {"fsync": "off", "synchronous_commit": "off", "shared_buffers": shared_buffers},
    )


@contextlib.contextmanager
def cluster_of_its_own(
    root: Path, shards: int, groups: int
) -> Iterator[tuple[Settings, LocalCluster]]:
    """A cluster for one module (the metadata instance, ``shards`` shards in ``groups`` groups
    under ``root``), started, migrated and registered, with settings naming it (a port for a
    router of its own); stopped on the way out."""
    own = Settings(
        cluster=ClusterSettings(
            data_dir=root, shards=shards, groups=groups, base_port=free_port_range(shards + 1)
        ),
        server=ServerSettings(port=free_port()),
        catalog=CatalogSettings(poll_interval_s=3.0),
        retention=RetentionSettings(enabled=False, archive_dir=root / "archive"),
        compaction=CompactionSettings(enabled=False),
    )
    cluster = local_cluster(own, shared_buffers="32MB")
    try:
        cluster.start()
        asyncio.run(bootstrap.migrate_all(own))
        asyncio.run(bootstrap.register_topology(own, cluster.topology))
        yield own, cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def holding(dsn: str, statements: str) -> Iterator[None]:
    """A psql session that opens a transaction, runs ``statements`` in it and holds it (and
    its locks) until the block ends, then commits."""
    session = subprocess.Popen(
        ["psql", "-X", "-q", "-d", dsn], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert session.stdin is not None
    session.stdin.write(f"BEGIN; {statements}\n")
    session.stdin.flush()
    try:
        yield
    finally:
        session.stdin.write("COMMIT;\n")
        session.stdin.close()
        session.wait(timeout=30)


async def drop_shared_days(
    metadata: asyncpg.Pool, shards: Mapping[str, str], days: Iterable[date]
) -> None:
    """What the shared tables ahead job made for ``days``: the shared and owner_days tables on
    every shard of ``shards`` (name -> superuser DSN), their shared_tables rows and their
    children on the coordinator."""
    days = list(days)
    kinds: tuple[Kind, ...] = ("audit", "flow")
    for dsn in shards.values():
        connection = await asyncpg.connect(dsn)
        try:
            for day in days:
                # A compacted shard-day's view, segments and record first (the view depends
                # on the shared table).
                await connection.execute(
                    f'DROP VIEW IF EXISTS "{shared_table("audit", day)}_all"; '
                    f"DROP TABLE IF EXISTS {shared_segment_table('audit', day)}; "
                    f"DELETE FROM compacted_days WHERE owner_id = 0 AND day = '{day}'"
                )
                for name in (*(shared_table(k, day) for k in kinds), owner_days_table(day)):
                    await connection.execute(f'DROP TABLE IF EXISTS "{name}"')
        finally:
            await connection.close()
    async with metadata.acquire() as meta, meta.transaction():
        await meta.execute("DELETE FROM shared_tables WHERE day = ANY($1::date[])", days)
        for day in days:
            for kind in kinds:
                for shard in shards:
                    await fdw.detach_shared(meta, kind, day, shard)


async def _registered_shared_days(settings: Settings) -> set[date]:
    metadata = await catalog_login.open_pool(settings)
    try:
        return {r["day"] for r in await metadata.fetch("SELECT DISTINCT day FROM shared_tables")}
    finally:
        await metadata.close()


@contextlib.contextmanager
def shared_days_dropped_after(settings: Settings, shards: Mapping[str, str]) -> Iterator[None]:
    """The shared days registered while the block runs (a sharing router's ahead job, its
    writes into past days) dropped after it as drop_shared_days drops them: tables, registry
    rows and coordinator children, on ``shards`` (name -> superuser DSN)."""
    before = asyncio.run(_registered_shared_days(settings))
    try:
        yield
    finally:

        async def drop() -> None:
            made = await _registered_shared_days(settings) - before
            if not made:
                return
            metadata = await catalog_login.open_pool(settings)
            try:
                await drop_shared_days(metadata, shards, made)
            finally:
                await metadata.close()

        asyncio.run(drop())


def placed_ids(
    dsns: Mapping[str, str], kind: Kind, owner_id: int, day: date
) -> dict[str, list[int]]:
    """Where an owner-day's rows are on the shards of ``dsns`` (name -> superuser DSN): the
    ids in the shared tables of the day, the ids in the owner's own day tables. One connection
    per shard, all at once; a shard without the tables, or stopped by another test, holds
    none."""
    shared = quote_ident(shared_table(kind, day))
    own = day_table(kind, owner_id, day).quoted

    async def on(dsn: str) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {"shared": [], "own": []}
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return found
        try:
            for place, table, where in (
                ("shared", shared, f"WHERE owner_id = {int(owner_id)}"),
                ("own", own, ""),
            ):
                if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
                    rows = await connection.fetch(f"SELECT id FROM {table} {where}")
                    found[place] = [row["id"] for row in rows]
            return found
        finally:
            await connection.close()

    async def everywhere() -> dict[str, list[int]]:
        answers = await asyncio.gather(*(on(dsn) for dsn in dsns.values()))
        return {p: [i for a in answers for i in a[p]] for p in ("shared", "own")}

    return asyncio.run(everywhere())


def placed_counts(api: httpx.Client, owner_id: int, day: datetime) -> tuple[int, int]:
    """How many of an owner-day's rows are in the shared tables of its day and in its own
    tables, on every shard of the catalog (``placed_ids``)."""
    found = placed_ids(catalog_shards(api), "audit", owner_id, day.date())
    return len(found["shared"]), len(found["own"])


def expired_shared_day(snapshot: CatalogSnapshot, default_keep_days: int, margin: int) -> date:
    """A day ``margin`` days older than any group's policy keeps (the default for kinds and
    groups without one): no owner's day table can be there (ingest refuses it)."""
    keep = max(
        group_keep_days(snapshot, kind, shard.group, default_keep_days)
        for kind in ("audit", "flow")
        for shard in snapshot.shards.values()
    )
    return clock.today() - timedelta(days=keep + margin)


def explain_analyze(dsn: str, text: str, params: list[Any]) -> str:
    """EXPLAIN (ANALYZE, COSTS OFF) of a statement on one shard, its plan's lines joined."""

    async def explain() -> str:
        connection = await asyncpg.connect(dsn)
        try:
            rows = await connection.fetch(f"EXPLAIN (ANALYZE, COSTS OFF) {text}", *params)
            return "\n".join(r[0] for r in rows)
        finally:
            await connection.close()

    return asyncio.run(explain())


def backends(dsn: str, pattern: str) -> list[str]:
    """The pids of the shard's other backends whose statement is LIKE ``pattern``."""
    return shard_sql(
        dsn,
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
        f"AND query LIKE '{pattern}'",
    ).split()


@contextlib.contextmanager
def locks_held(dsns: Iterable[str], table: str, mode: str = "SHARE") -> Iterator[None]:
    """A psql session on each shard of ``dsns`` holding ``table`` locked in ``mode`` inside a
    transaction for the block (at most a minute). Its backend is ended first after it: it
    would sleep on with the lock once psql goes."""
    sleep = "SELECT pg_sleep(60);"
    holders = []
    try:
        for dsn in dsns:
            holder = subprocess.Popen(
                ["psql", "-X", "-q", "-d", dsn],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            holders.append((dsn, holder))
            assert holder.stdin is not None
            holder.stdin.write(f"BEGIN; LOCK TABLE {table} IN {mode} MODE; {sleep}\n")
            holder.stdin.flush()
        yield
    finally:
        for dsn, holder in holders:
            for pid in backends(dsn, f"{sleep}%"):
                shard_sql(dsn, f"SELECT pg_terminate_backend({pid})")
            holder.kill()
            holder.wait(timeout=10)


def kill_once_waiting(
    process: subprocess.Popen[Any], dsns: Iterable[str], pattern: str, within_s: float = 60
) -> None:
    """SIGKILL ``process`` once one of its statements LIKE ``pattern`` runs on a shard of
    ``dsns``. Its backend stays until its statement ends (a statement waiting on a lock:
    until the lock is granted), see ``statements_gone``."""
    shards = list(dsns)
    deadline = time.monotonic() + within_s
    try:
        while not any(backends(dsn, pattern) for dsn in shards):
            assert process.poll() is None, f"the process ended before {pattern!r} ran"
            assert time.monotonic() < deadline, f"{pattern!r} never ran"
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait(timeout=10)


def statements_gone(dsns: Iterable[str], pattern: str, within_s: float = 60) -> None:
    """Wait until no statement LIKE ``pattern`` runs on the shards of ``dsns``."""
    shards = list(dsns)
    deadline = time.monotonic() + within_s
    while any(backends(dsn, pattern) for dsn in shards):
        assert time.monotonic() < deadline, f"{pattern!r} still runs"
        time.sleep(0.05)
