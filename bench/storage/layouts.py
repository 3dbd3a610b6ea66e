"""shardlog's layouts of the same rows on one PostgreSQL shard, each measured on disk with
everything counted (heap, indexes, TOAST, filters, segment metadata):

- heap: today's day tables as router/db/ddl.py makes them (one per owner-day, its (ts, id)
  btree), filled by binary COPY as bench/ingest/storage.py fills them;
- lz4 arrays: one row per 1,000 consecutive (ts, id) rows of one owner: ids, ts, content,
  attrs and created_xid as arrays with lz4 compression, the primary key (owner_id, seq);
- zstd segments: the design's segment table (docs/architecture.md "Compacted days"): first
  and last (ts, id), rows, the trigram filter ``shardlog_grams(contents, 8)`` and the block
  ``shardlog_pack_audit(...)`` of the extension shardlog_segments (stored as the router's
  segment tables store them: router/compaction/statements.py storage_ddl), cut at
  1,000 rows and 256 KiB of content, the primary key (owner_id, seq)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

import asyncpg

from bench.storage.corpus import Row
from router.compaction import statements
from router.db import ddl
from router.db.names import DayTable, day_table, segment_table

OWNER_BASE = 940_000_000
COPY_BATCH = 10_000
SEGMENT_ROWS = 1_000
SEGMENT_CONTENT_BYTES = 256 * 1024
LZ4_TABLE = "bench_lz4_segments"
EXTENSION = "shardlog_segments"
ZSTD_LEVEL = 3
GRAM_BITS = 8


@dataclass(frozen=True)
class Loaded:
    """The rows of a data set as day tables of one day on one shard, by owner."""

    day: date
    tables: dict[str, DayTable]
    rows: int

    @property
    def owner_ids(self) -> list[int]:
        return [t.owner_id for t in self.tables.values()]


def owner_tables(rows: list[Row], day: date, base: int) -> dict[str, DayTable]:
    owners = sorted({r.owner for r in rows})
    return {owner: day_table("audit", base + i + 1, day) for i, owner in enumerate(owners)}


async def load_heap(
    connection: asyncpg.Connection, rows: list[Row], day: date, base: int
) -> Loaded:
    """Fresh day tables of every owner, filled in (ts) order: id order is ts order."""
    tables = owner_tables(rows, day, base)
    for table in tables.values():
        await connection.execute(f"DROP TABLE IF EXISTS {table.quoted}")
        await ddl.ensure_table(connection, table, "btree")
    for owner, table in tables.items():
        mine = sorted((r.ts, r.content, None) for r in rows if r.owner == owner)
        for start in range(0, len(mine), COPY_BATCH):
            await connection.copy_records_to_table(
                table.name, records=mine[start : start + COPY_BATCH], columns=ddl.AUDIT_COLUMNS
            )
    for table in tables.values():
        await connection.execute(f"VACUUM ANALYZE {table.quoted}")
    return Loaded(day, tables, len(rows))


async def total_bytes(connection: asyncpg.Connection, relations: list[str]) -> int:
    total = 0
    for relation in relations:
        total += await connection.fetchval("SELECT pg_total_relation_size($1::regclass)", relation)
    return int(total)


def cuts(contents: list[str], rows: int, content_bytes: int | None) -> list[int]:
    """The segment number of each row in (ts, id) order: a new segment after ``rows`` rows
    or before the content would pass ``content_bytes`` (never an empty segment)."""
    seqs: list[int] = []
    seq, count, size = 0, 0, 0
    for content in contents:
        length = len(content.encode())
        if count and (count == rows or (content_bytes and size + length > content_bytes)):
            seq, count, size = seq + 1, 0, 0
        seqs.append(seq)
        count += 1
        size += length
    return seqs


async def _cut_of(
    connection: asyncpg.Connection, table: DayTable, content_bytes: int | None
) -> list[int]:
    contents = [
        r["content"]
        for r in await connection.fetch(f"SELECT content FROM {table.quoted} ORDER BY ts, id")
    ]
    return cuts(contents, SEGMENT_ROWS, content_bytes)


# The rows of one owner-day with their segment number ($1: the numbers in (ts, id) order).
_NUMBERED = """(SELECT h.*, ($1::int[])[row_number() OVER (ORDER BY ts, id)] AS seq
               FROM {table} h) AS numbered"""
_BOUNDS = """(array_agg(ts ORDER BY ts, id))[1], (array_agg(id ORDER BY ts, id))[1],
             (array_agg(ts ORDER BY ts DESC, id DESC))[1],
             (array_agg(id ORDER BY ts DESC, id DESC))[1], count(*)::int"""


async def pack_lz4(connection: asyncpg.Connection, loaded: Loaded) -> int:
    """The lz4 array layout of every owner-day; its bytes on disk."""
    await connection.execute(f"DROP TABLE IF EXISTS {LZ4_TABLE}")
    await connection.execute(
        f"""CREATE TABLE {LZ4_TABLE} (
            owner_id bigint, seq int, first_ts timestamptz, first_id bigint,
            last_ts timestamptz, last_id bigint, rows int,
            ids bigint[] COMPRESSION lz4, ts timestamptz[] COMPRESSION lz4,
            contents text[] COMPRESSION lz4, attrs jsonb[] COMPRESSION lz4,
            xids xid8[] COMPRESSION lz4, PRIMARY KEY (owner_id, seq))"""
    )
    for table in loaded.tables.values():
        await connection.execute(
            f"""INSERT INTO {LZ4_TABLE}
                SELECT {table.owner_id}, seq, {_BOUNDS},
                       array_agg(id ORDER BY ts, id), array_agg(ts ORDER BY ts, id),
                       array_agg(content ORDER BY ts, id), array_agg(attrs ORDER BY ts, id),
                       array_agg(created_xid ORDER BY ts, id)
                FROM {_NUMBERED.format(table=table.quoted)} GROUP BY seq""",
            await _cut_of(connection, table, None),
        )
    await connection.execute(f"VACUUM ANALYZE {LZ4_TABLE}")
    return await total_bytes(connection, [LZ4_TABLE])


async def lz4_parts(connection: asyncpg.Connection) -> dict[str, float]:
    """Where the lz4 arrays' bytes go, per row: the integer columns (ids, ts, created_xid),
    the text, and the rest (attrs, metadata, tuple headers, the primary key)."""
    found = await connection.fetchrow(
        "SELECT sum(rows) AS rows, "
        "sum(pg_column_size(ids) + pg_column_size(ts) + pg_column_size(xids)) AS integers, "
        f"sum(pg_column_size(contents)) AS contents FROM {LZ4_TABLE}"
    )
    assert found is not None
    return {
        "integers_bytes_per_row": round(found["integers"] / found["rows"], 2),
        "contents_bytes_per_row": round(found["contents"] / found["rows"], 2),
    }


async def has_extension(connection: asyncpg.Connection) -> str | None:
    """None when shardlog_segments is created (or now creatable) here, else why not."""
    available = await connection.fetchval(
        "SELECT count(*) FROM pg_available_extensions WHERE name = $1", EXTENSION
    )
    if not available:
        return f"the extension {EXTENSION} is not installed on this PostgreSQL (make install)"
    await connection.execute(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}")
    return None


async def pack_zstd(connection: asyncpg.Connection, loaded: Loaded) -> tuple[str, int]:
    """The design's segment table of the day, every owner-day packed; its name and bytes."""
    name = segment_table("audit", loaded.day)
    await connection.execute(f"DROP TABLE IF EXISTS {name}")
    await connection.execute(
        f"""CREATE TABLE {name} (
            owner_id bigint NOT NULL, seq int NOT NULL,
            first_ts timestamptz NOT NULL, first_id bigint NOT NULL,
            last_ts timestamptz NOT NULL, last_id bigint NOT NULL,
            rows int NOT NULL, grams bytea NOT NULL, block bytea NOT NULL,
            PRIMARY KEY (owner_id, seq))"""
    )
    for statement in statements.storage_ddl(name):
        await connection.execute(statement)
    for table in loaded.tables.values():
        await connection.execute(
            f"""INSERT INTO {name}
                SELECT {table.owner_id}, seq, {_BOUNDS},
                       shardlog_grams(array_agg(content ORDER BY ts, id), {GRAM_BITS}),
                       shardlog_pack_audit(array_agg(id ORDER BY ts, id),
                                           array_agg(ts ORDER BY ts, id),
                                           array_agg(content ORDER BY ts, id),
                                           array_agg(attrs ORDER BY ts, id),
                                           array_agg(created_xid ORDER BY ts, id), {ZSTD_LEVEL})
                FROM {_NUMBERED.format(table=table.quoted)} GROUP BY seq""",
            await _cut_of(connection, table, SEGMENT_CONTENT_BYTES),
        )
    await connection.execute(f"VACUUM ANALYZE {name}")
    return name, await total_bytes(connection, [name])


async def zstd_parts(connection: asyncpg.Connection, name: str) -> dict[str, Any]:
    """Where a segment table's bytes go, per row: blocks, filters, and the rest (metadata,
    tuple headers, the primary key, free space)."""
    found = await connection.fetchrow(
        f"SELECT sum(rows) AS rows, count(*) AS segments, sum(octet_length(block)) AS block, "
        f"sum(octet_length(grams)) AS grams FROM {name}"
    )
    assert found is not None
    rows = int(found["rows"])
    return {
        "segments": int(found["segments"]),
        "block_bytes_per_row": round(found["block"] / rows, 2),
        "grams_bytes_per_row": round(found["grams"] / rows, 2),
    }


async def heap_bytes(connection: asyncpg.Connection, loaded: Loaded) -> int:
    return await total_bytes(connection, [t.quoted for t in loaded.tables.values()])
