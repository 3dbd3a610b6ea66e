"""What a database is and what it holds, read before shardlog writes anything to it: the
server's system identifier and the database's oid (one database, whatever DSN reaches it), and
the objects in it that shardlog did not create. Queries only; the rules are in
catalog/shard_guard."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from router.db import pools
from router.db.migrate import LEDGER_TABLE
from router.db.names import day_table_regex
from router.settings import PoolSettings

Queryable = asyncpg.Connection | asyncpg.Pool | PoolConnectionProxy

# A database is a shardlog catalog when it recorded a metadata migration or holds both of
# these tables (names of the first metadata migration).
CATALOG_TABLES = ("catalog_version", "shard_groups")
# Objects listed in a refusal; the count covers the rest.
LISTED_OBJECTS = 10


@dataclass(frozen=True)
class DatabaseIdentity:
    """One database of one cluster. A primary and its standbys share the system identifier
    (and oids), so every node of a Patroni shard has the same identity."""

    system_identifier: int
    database_oid: int
    database: str

    def same_database(self, other: DatabaseIdentity) -> bool:
        return (self.system_identifier, self.database_oid) == (
            other.system_identifier,
            other.database_oid,
        )

    def describe(self) -> str:
        return (
            f"database {self.database!r} (oid {self.database_oid}) of the server with system "
            f"identifier {self.system_identifier}"
        )


@dataclass(frozen=True)
class Candidate:
    """A database offered as a shard, as found before anything was written to it."""

    identity: DatabaseIdentity
    is_template: bool
    in_recovery: bool
    stamped_as: str | None  # the shard name in its shard_identity table, if it has one
    holds_catalog: bool
    foreign_count: int  # objects shardlog did not create
    foreign_objects: tuple[str, ...]  # the first LISTED_OBJECTS of them, described


_IDENTITY_SQL = """
SELECT s.system_identifier, d.oid::bigint AS database_oid, d.datname::text AS database,
       d.datistemplate AS is_template, pg_is_in_recovery() AS in_recovery
FROM pg_control_system() AS s, pg_database AS d
WHERE d.datname = current_database()
"""


async def database_identity(db: Queryable) -> DatabaseIdentity:
    return _identity(await db.fetchrow(_IDENTITY_SQL))


def _identity(row: asyncpg.Record | None) -> DatabaseIdentity:
    assert row is not None  # current_database() is always in pg_database
    return DatabaseIdentity(row["system_identifier"], row["database_oid"], row["database"])


async def probe_identity(dsn: str, settings: PoolSettings) -> DatabaseIdentity:
    """Connect to ``dsn`` for the identity only (driver errors propagate)."""
    connection = await pools.connect(dsn, settings)
    try:
        return await database_identity(connection)
    finally:
        await connection.close()


async def probe_candidate(
    connection: asyncpg.Connection, shard_relations: Collection[str]
) -> Candidate:
    """Everything the rules need about a prospective shard. ``shard_relations``: the relations
    the shard migrations create; they count as shardlog's only where the migration ledger says
    shard migrations ran (day tables are recognised by name anywhere)."""
    row = await connection.fetchrow(_IDENTITY_SQL)
    assert row is not None
    migrated = await _ledger_targets(connection)
    own = {LEDGER_TABLE, *(shard_relations if "shard" in migrated else ())}
    count, listed = await _foreign_objects(connection, own)
    return Candidate(
        identity=_identity(row),
        is_template=row["is_template"],
        in_recovery=row["in_recovery"],
        stamped_as=await _stamped_as(connection) if "shard" in migrated else None,
        holds_catalog="metadata" in migrated or await _holds_catalog_tables(connection),
        foreign_count=count,
        foreign_objects=listed,
    )


async def _ledger_targets(connection: asyncpg.Connection) -> set[str]:
    """The targets (metadata, shard) whose migrations the database recorded."""
    if not await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", LEDGER_TABLE):
        return set()
    rows = await connection.fetch(f"SELECT DISTINCT target FROM {LEDGER_TABLE}")
    return {row["target"] for row in rows}


async def _stamped_as(connection: asyncpg.Connection) -> str | None:
    if not await connection.fetchval("SELECT to_regclass('shard_identity') IS NOT NULL"):
        return None
    name: str | None = await connection.fetchval("SELECT shard_name FROM shard_identity")
    return name


async def _holds_catalog_tables(connection: asyncpg.Connection) -> bool:
    tables = await connection.fetchval(
        "SELECT count(DISTINCT c.relname) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = ANY($1::text[]) AND c.relkind IN ('r', 'p') "
        "AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'",
        list(CATALOG_TABLES),
    )
    return bool(tables == len(CATALOG_TABLES))


# Tables, views, sequences not owned by a column, composite types, functions, procedures,
# domains, enums, ranges, event triggers and publications, outside the system schemas and not
# members of an extension; shardlog's own (by name) left out.
_FOREIGN_OBJECTS_SQL = """
WITH objects AS (
    SELECT c.relnamespace AS namespace, c.relname::text AS name, c.relname::text AS bare,
           CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
               WHEN 'f' THEN 'foreign table' WHEN 'S' THEN 'sequence' WHEN 'c' THEN 'type'
               ELSE 'table' END AS kind,
           'pg_class'::regclass AS classid, c.oid AS objid
    FROM pg_class c
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
      AND NOT (c.relkind = 'S' AND EXISTS (
          SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
          AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
    UNION ALL
    SELECT p.pronamespace, p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
           p.proname::text,
           CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate'
               ELSE 'function' END,
           'pg_proc'::regclass, p.oid
    FROM pg_proc p
    UNION ALL
    SELECT t.typnamespace, t.typname::text, t.typname::text, 'type', 'pg_type'::regclass, t.oid
    FROM pg_type t WHERE t.typtype IN ('d', 'e', 'r')
    UNION ALL
    SELECT NULL, e.evtname::text, e.evtname::text, 'event trigger',
           'pg_event_trigger'::regclass, e.oid
    FROM pg_event_trigger e
    UNION ALL
    SELECT NULL, p.pubname::text, p.pubname::text, 'publication', 'pg_publication'::regclass, p.oid
    FROM pg_publication p
)
SELECT o.kind || ' ' || coalesce(quote_ident(n.nspname) || '.', '') || o.name AS described,
       count(*) OVER () AS total
FROM objects o LEFT JOIN pg_namespace n ON n.oid = o.namespace
WHERE (o.namespace IS NULL OR (n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'))
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.deptype = 'e'
                  AND d.classid = o.classid AND d.objid = o.objid)
  AND NOT (o.bare = ANY($1::text[]) OR o.bare ~ $2)
ORDER BY n.nspname NULLS FIRST, o.kind, o.name
LIMIT $3
"""


async def _foreign_objects(
    connection: asyncpg.Connection, own_names: Collection[str]
) -> tuple[int, tuple[str, ...]]:
    rows = await connection.fetch(
        _FOREIGN_OBJECTS_SQL, sorted(own_names), day_table_regex(), LISTED_OBJECTS
    )
    total = int(rows[0]["total"]) if rows else 0
    return total, tuple(row["described"] for row in rows)
