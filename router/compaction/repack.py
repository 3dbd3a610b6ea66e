"""One owner's rows taken out of a compacted shard-day's shared segments (docs/architecture.md,
"Compacting shared days", "Retention, erase, promotion, archive"): an erase or a shorter
policy's purge cannot drop segments that hold other owners' rows, so each segment holding the
owner (the GIN index on its owners) is rewritten from its unpacked rows less the owner's, in
one statement and transaction of its own (as the writer): its rows, owners, owner indexes,
filter and block made again, its bounds kept (still true of the rows left); a segment left
empty is deleted."""

from __future__ import annotations

from datetime import date

from router.compaction import layout
from router.compaction.pace import Pace
from router.db.connection import Connection
from router.db.names import DayTable, Kind
from router.settings import CompactionSettings

# The level the copy packs at by default: a repacked segment is a few of its rows fewer.
LEVEL = CompactionSettings.model_fields["zstd_level"].default

_REPACK = """
    WITH segment AS (
        SELECT * FROM {segments} WHERE seq = $1 FOR UPDATE
    ), unpacked AS (
        SELECT u.ord, {owner_at} AS owner_id, u.id, u.ts, u.content, u.attrs, u.created_xid
        FROM segment AS s CROSS JOIN LATERAL shardlog_unpack_audit(s.block) AS u
    ), kept AS (
        SELECT unpacked.*, (dense_rank() OVER (ORDER BY owner_id) - 1)::integer AS owner_index
        FROM unpacked WHERE owner_id <> $2
    ), packed AS (
        SELECT count(*)::integer AS n, array_agg(id ORDER BY ord) AS id,
            array_agg(ts ORDER BY ord) AS ts, array_agg(content ORDER BY ord) AS content,
            array_agg(attrs ORDER BY ord) AS attrs,
            array_agg(created_xid ORDER BY ord) AS created_xid,
            array_agg(DISTINCT owner_id ORDER BY owner_id) AS owners,
            string_agg(substring(int4send(owner_index) FROM 3 FOR 2), ''::bytea ORDER BY ord)
                AS owner_of
        FROM kept
    ), rewritten AS (
        UPDATE {segments} AS t SET rows = p.n, owners = p.owners, owner_of = p.owner_of,
            grams = shardlog_grams(p.content),
            block = shardlog_pack_audit(p.id, p.ts, p.content, p.attrs, p.created_xid, $3)
        FROM packed AS p WHERE t.seq = $1 AND p.n > 0 RETURNING 1
    ), emptied AS (
        DELETE FROM {segments} AS t USING packed AS p WHERE t.seq = $1 AND p.n = 0 RETURNING 1
    )
    SELECT (SELECT count(*) FROM unpacked) - (SELECT n FROM packed)
"""


def _shard_day(kind: Kind, day: date) -> DayTable:
    return DayTable(kind, 0, day, own=False, shared=True, shared_compacted=True)


async def _exists(connection: Connection, table: DayTable) -> bool:
    return bool(
        await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table.shared_segments)
    )


async def owner_rows(connection: Connection, kind: Kind, day: date, owner_id: int) -> int:
    """The owner's rows in the shard-day's shared segments (0 when it is not compacted)."""
    table = _shard_day(kind, day)
    if kind != "audit" or not await _exists(connection, table):
        return 0
    return int(
        await connection.fetchval(
            f"SELECT count(*) FROM {layout.shared_segments(table)} "
            f"WHERE {layout.shared_owned(owner_id)}"
        )
    )


async def without_owner(
    connection: Connection, kind: Kind, day: date, owner_id: int, throttle: Pace
) -> int:
    """The owner's rows taken out of the shard-day's shared segments, a segment per
    transaction at the throttle's pace; the rows taken."""
    table = _shard_day(kind, day)
    if kind != "audit" or not await _exists(connection, table):
        return 0
    holding = await connection.fetch(
        f"SELECT seq FROM {table.shared_segments} AS s "
        f"WHERE {layout.shared_holding(owner_id)} ORDER BY seq"
    )
    statement = _REPACK.format(segments=table.shared_segments, owner_at=layout.shared_owner_at())
    taken = 0
    for row in holding:
        async with connection.transaction():
            removed = int(await connection.fetchval(statement, row["seq"], owner_id, LEVEL))
        taken += removed
        await throttle.copied(removed)
    return taken
