"""What the cluster holds, read as the bootstrap superuser: each shard's database size and
relation count, and the metadata database's size (the catalog and the fdw coordinator, which
lives in it) with its system catalog's share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from router.catalog import store
from router.db import catalog_login, names, pools
from router.settings import Settings

_RELATIONS = "SELECT count(*) FROM pg_class"
_USER_TABLES = """
SELECT count(*) FROM pg_class
WHERE relkind IN ('r', 'p') AND relnamespace NOT IN ('pg_catalog'::regnamespace,
                                                     'information_schema'::regnamespace)
"""
_SYSTEM_CATALOG = """
SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class
WHERE relnamespace = 'pg_catalog'::regnamespace AND relkind = 'r'
"""
_DATABASE = "SELECT pg_database_size(current_database())"
# Where a shard's bytes are, by what the relations are (each with its indexes, TOAST and forks).
_PARTS = """
SELECT CASE WHEN relname ~ $1 THEN 'day tables'
            WHEN relname ~ $2 AND relname LIKE 'owner\\_days\\_%' THEN 'owner_days'
            WHEN relname ~ $2 THEN 'shared tables'
            WHEN relname IN ('tail_log', 'shard_owners', 'ingest_ledger') THEN relname::text
            ELSE 'other tables' END,
       sum(pg_total_relation_size(oid))
FROM pg_class
WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace
GROUP BY 1
"""


PARTS = (
    "shared tables",
    "owner_days",
    "day tables",
    "shard_owners",
    "tail_log",
    "ingest_ledger",
    "other tables",
    "system catalog",
)


@dataclass(frozen=True)
class Sizes:
    shard_bytes: dict[str, int]
    shard_relations: dict[str, int]
    shard_tables: dict[str, int]
    shard_parts: dict[str, int]  # summed over the shards
    metadata_bytes: int
    metadata_system_catalog_bytes: int


async def _shard(dsn: str, settings: Settings) -> tuple[int, int, int, dict[str, int]]:
    connection = await pools.connect(dsn, settings.pools)
    try:
        parts = {
            str(name): int(size)
            for name, size in await connection.fetch(
                _PARTS, names.day_table_regex(), names.shared_table_regex()
            )
        }
        parts["system catalog"] = int(await connection.fetchval(_SYSTEM_CATALOG))
        return (
            int(await connection.fetchval(_DATABASE)),
            int(await connection.fetchval(_RELATIONS)),
            int(await connection.fetchval(_USER_TABLES)),
            parts,
        )
    finally:
        await connection.close()


async def read(settings: Settings) -> Sizes:
    metadata = await catalog_login.open_pool(settings)
    try:
        snapshot = await store.load_snapshot(metadata)
    finally:
        await metadata.close()
    shard_names = sorted(snapshot.shards)
    shards = await asyncio.gather(*(_shard(snapshot.shards[n].dsn, settings) for n in shard_names))
    owner = await pools.connect(settings.metadata_dsn(), settings.pools)
    try:
        metadata_bytes = int(await owner.fetchval(_DATABASE))
        system_catalog = int(await owner.fetchval(_SYSTEM_CATALOG))
    finally:
        await owner.close()
    return Sizes(
        shard_bytes={n: s[0] for n, s in zip(shard_names, shards, strict=True)},
        shard_relations={n: s[1] for n, s in zip(shard_names, shards, strict=True)},
        shard_tables={n: s[2] for n, s in zip(shard_names, shards, strict=True)},
        shard_parts={part: sum(s[3].get(part, 0) for s in shards) for part in PARTS},
        metadata_bytes=metadata_bytes,
        metadata_system_catalog_bytes=system_catalog,
    )
