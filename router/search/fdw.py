"""The postgres_fdw path: the metadata instance as coordinator.

``attach`` makes a shard's day table visible there (foreign server and user mapping for the
shard, the owner's parent table, the foreign child with a CHECK on its day); ``detach`` removes
it. ``attach_shared`` and ``detach_shared`` do the same for a shard's shared table of a kind
and day, under the kind's shared parent (fdw.audit_shared, fdw.flow_shared: docs/
architecture.md, "Reading both layouts"). All are idempotent and serialised per child by an
advisory lock, so concurrent routers neither fail nor duplicate. Queries go through the owners'
parent tables and, for their rows in shared tables, the shared parent by owner_id.

Run as the catalog role (router/db/catalog_login.py), which owns the servers, parent and
foreign tables it makes here. The coordinator logs in to shards as the read-only role, its
password in the catalog role's user mapping (readable by superusers and that role only),
over TLS as the router connects (the foreign server's sslmode and sslrootcert);
``refresh_login`` sets both anew (the router does whenever the catalog loads, so a changed
password or TLS setting reaches the coordinator with a restart).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, timedelta

from router.catalog.snapshot import Shard
from router.db.connection import Connection
from router.db.dsn import parse_dsn
from router.db.names import (
    DayTable,
    Kind,
    foreign_table,
    parent_table,
    quote_catalog_name,
    quote_literal,
    shared_foreign_table,
    shared_parent,
    shared_table,
)
from router.db.pools import CoordinatorLogin
from router.db.unrecorded import unrecorded

# ddl.FLOW_EXPORT_READ_COLUMNS, as schema/metadata/0012_flow_export_columns.sql adds them to
# the parent tables made before.
FLOW_EXPORT_PARENT_COLUMNS = (
    "tcp_flags smallint, sampling_rate integer, sampled boolean, sampling_mixed boolean"
)
PARENT_COLUMNS = {
    "audit": "id bigint, ts timestamptz, content text, attrs jsonb",
    "flow": (
        "id bigint, src_ip inet, dst_ip inet, src_port integer, dst_port integer, "
        "ip_version smallint, proto smallint, bytes bigint, packets bigint, "
        "flow_count bigint, first_seen timestamptz, last_seen timestamptz, "
        f"{FLOW_EXPORT_PARENT_COLUMNS}"
    ),
}
_TIME_COLUMN = {"audit": "ts", "flow": "first_seen"}
_USER_OPTIONS = ("user", "password", "passfile")
# Server options refresh_login keeps in step with the router's settings.
_TLS_OPTIONS = ("sslmode", "sslrootcert")


@dataclass(frozen=True)
class _OnShard:
    """What a foreign child reads: a relation of a shard, its kind and day."""

    kind: Kind
    day: date
    name: str


def _shared_day(kind: Kind, day: date) -> _OnShard:
    return _OnShard(kind, day, shared_table(kind, day))


def _lock_key(name: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True
    )


def server_options(dsn: str) -> tuple[dict[str, str], dict[str, str]]:
    """libpq options of a shard DSN, split into server options and user-mapping options (the
    DSN's; attach uses the login it is given)."""
    parsed = parse_dsn(dsn)
    options = {
        "host": ",".join(h for h, _ in parsed.hosts),
        "port": ",".join(str(p) for _, p in parsed.hosts),
        "dbname": parsed.dbname or "shardlog",
    }
    for key, value in parsed.params.items():
        if key not in ("host", "hostaddr", "port", "dbname", "server_settings", *_USER_OPTIONS):
            options[key] = value
    user = {"user": parsed.user or "shardlog"}
    if "password" in parsed.params:
        user["password"] = parsed.params["password"]
    return options, user


def _options(values: dict[str, str]) -> str:
    return ", ".join(f"{key} {quote_literal(value)}" for key, value in values.items())


async def attach(
    connection: Connection, table: DayTable, shard: Shard, login: CoordinatorLogin
) -> None:
    """Run inside the caller's transaction on the coordinator. ``login``: the server and
    user-mapping options of a server made here (ShardPools.coordinator_login)."""
    child = foreign_table(table, shard.name)
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(child))
    if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", child):
        return
    server = await _server(connection, shard, login)
    parent = parent_table(table.kind, table.owner_id)
    await _child(connection, child, parent, PARENT_COLUMNS[table.kind], table, server)
    await connection.execute(
        "INSERT INTO fdw.children (child, kind, owner_id, day, shard) "
        "VALUES ($1::regclass, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        child,
        table.kind,
        table.owner_id,
        table.day,
        shard.name,
    )


async def attach_shared(
    connection: Connection, kind: Kind, day: date, shard: Shard, login: CoordinatorLogin
) -> bool:
    """The foreign child of a shard's shared table of ``kind`` and ``day`` under the kind's
    shared parent (both made when missing), recorded in fdw.children without an owner; True
    when made now. Run inside the caller's transaction, as ``attach``."""
    child = shared_foreign_table(kind, day, shard.name)
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(child))
    if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", child):
        return False
    server = await _server(connection, shard, login)
    columns = f"owner_id bigint, {PARENT_COLUMNS[kind]}"
    await _child(connection, child, shared_parent(kind), columns, _shared_day(kind, day), server)
    await connection.execute(
        "INSERT INTO fdw.children (child, kind, owner_id, day, shard) "
        "VALUES ($1::regclass, $2, NULL, $3, $4) ON CONFLICT DO NOTHING",
        child,
        kind,
        day,
        shard.name,
    )
    return True


async def _server(connection: Connection, shard: Shard, login: CoordinatorLogin) -> str:
    """The shard's foreign server and this role's user mapping, made when missing."""
    server = quote_catalog_name(shard.name)
    options, _ = server_options(login.dsn)
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(f"server {shard.name}"))
    if not await connection.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = $1)", shard.name
    ):
        await connection.execute(
            f"CREATE SERVER {server} FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
            f"({_options(options)})"
        )
        async with unrecorded(connection):
            await connection.execute(
                f"CREATE USER MAPPING IF NOT EXISTS FOR CURRENT_USER SERVER {server} "
                f"OPTIONS ({_options(login.user)})"
            )
    return server


async def _child(
    connection: Connection,
    child: str,
    parent: str,
    columns: str,
    table: DayTable | _OnShard,
    server: str,
) -> None:
    """The parent (made when missing, under its own lock) and the foreign child reading
    ``table.name`` on the server, with a CHECK on its day so the planner skips other days."""
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(parent))
    await connection.execute(f"CREATE TABLE IF NOT EXISTS {parent} ({columns})")
    column = _TIME_COLUMN[table.kind]
    first, after = table.day, table.day + timedelta(days=1)
    await connection.execute(
        f"CREATE FOREIGN TABLE {child} (CONSTRAINT day_range CHECK ({column} >= "
        f"'{first.isoformat()}T00:00:00+00' AND {column} < '{after.isoformat()}T00:00:00+00')) "
        f"INHERITS ({parent}) SERVER {server} "
        f"OPTIONS (schema_name 'public', table_name {quote_literal(table.name)})"
    )


def _as_dict(options: list[str] | None) -> dict[str, str]:
    return dict(option.split("=", 1) for option in options or [])


async def refresh_login(connection: Connection, shard: str, login: CoordinatorLogin) -> bool:
    """Give the shard's foreign server (when there is one) this user mapping and TLS options;
    True when either changed. Run inside the caller's transaction."""
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(f"server {shard}"))
    row = await connection.fetchrow(
        "SELECT s.srvoptions, m.umoptions FROM pg_foreign_server s LEFT JOIN pg_user_mappings m "
        "ON m.srvid = s.oid AND m.umuser = (SELECT oid FROM pg_roles WHERE rolname = "
        "current_user) WHERE s.srvname = $1",
        shard,
    )
    if row is None:
        return False
    server = quote_catalog_name(shard)
    changed = await _refresh_tls(connection, server, _as_dict(row["srvoptions"]), login.dsn)
    if _as_dict(row["umoptions"]) == login.user:
        return changed
    await connection.execute(f"DROP USER MAPPING IF EXISTS FOR CURRENT_USER SERVER {server}")
    async with unrecorded(connection):
        await connection.execute(
            f"CREATE USER MAPPING FOR CURRENT_USER SERVER {server} OPTIONS ({_options(login.user)})"
        )
    return True


async def _refresh_tls(connection: Connection, server: str, have: dict[str, str], dsn: str) -> bool:
    wanted, _ = server_options(dsn)
    steps = []
    for key in _TLS_OPTIONS:
        if key in wanted and key not in have:
            steps.append(f"ADD {key} {quote_literal(wanted[key])}")
        elif key in wanted and have[key] != wanted[key]:
            steps.append(f"SET {key} {quote_literal(wanted[key])}")
        elif key in have and key not in wanted:
            steps.append(f"DROP {key}")
    if steps:
        await connection.execute(f"ALTER SERVER {server} OPTIONS ({', '.join(steps)})")
    return bool(steps)


async def detach(connection: Connection, table: DayTable, shard: str) -> None:
    child = foreign_table(table, shard)
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(child))
    await connection.execute(
        "DELETE FROM fdw.children WHERE kind = $1 AND owner_id = $2 AND day = $3 AND shard = $4",
        table.kind,
        table.owner_id,
        table.day,
        shard,
    )
    await connection.execute(f"DROP FOREIGN TABLE IF EXISTS {child}")


async def detach_shared(connection: Connection, kind: Kind, day: date, shard: str) -> None:
    """Remove a shard's shared table of ``kind`` and ``day`` from the coordinator."""
    child = shared_foreign_table(kind, day, shard)
    await connection.execute("SELECT pg_advisory_xact_lock($1)", _lock_key(child))
    await connection.execute(
        "DELETE FROM fdw.children WHERE kind = $1 AND owner_id IS NULL AND day = $2 AND shard = $3",
        kind,
        day,
        shard,
    )
    await connection.execute(f"DROP FOREIGN TABLE IF EXISTS {child}")
