"""One row by its ref (router/search/refs.py): the owner's access checked as for a search of
it, then one point read on the one shard and day table the ref names."""

from __future__ import annotations

import contextlib
from typing import Any

import asyncpg

from router.auth.scopes import KEY_NAME, Grant, key_denial
from router.catalog import store
from router.catalog.cache import CatalogCache
from router.db.failures import DRIVER_ERRORS, describe, is_transient, unavailable_when_unreachable
from router.db.names import Kind
from router.db.pools import ShardPools
from router.errors import Forbidden, GatewayTimeout, NotFound, Unavailable
from router.search import items, refs
from router.settings import SearchSettings

GONE = "no such row: it never existed, or retention (or a deletion of flows) removed it"


class RowService:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        catalog: CatalogCache,
        pools: ShardPools,
        settings: SearchSettings,
    ) -> None:
        self._metadata = metadata
        self._catalog = catalog
        self._pools = pools
        self._settings = settings

    async def fetch(self, kind: Kind, text: str, grant: Grant) -> dict[str, Any]:
        ref = refs.decode(text, kind)
        with unavailable_when_unreachable("metadata database", retry_after_s=1):
            owner = await store.get_owner_by_id(self._metadata, kind, ref.owner_id)
        if owner is None:
            raise NotFound(GONE, "ref")
        if key_denial(grant, kind, owner.key, owner.tenant) is not None:
            # Not the key_denial message: it would name a key the caller may not know.
            raise Forbidden(
                f"the row of this ref belongs to another tenant, or to an {KEY_NAME[kind]} "
                "outside this token's prefixes",
                "ref",
            )
        if ref.shard not in self._catalog.snapshot.shards:
            raise NotFound(GONE, "ref")
        record = await self._read(ref)
        if record is None:
            raise NotFound(GONE, "ref")
        row = {**dict(record), "shard": ref.shard, KEY_NAME[kind]: owner.key}
        return items.public({**row, "ref": refs.encode(ref)})

    async def _read(self, ref: refs.RowRef) -> asyncpg.Record | None:
        """From the primary: a standby may not have replayed the row yet, and a 404 says the
        row is gone. The places a row can be, in the order rows move between them: the
        shard's shared table of the day (a small owner-day), its own day table (promoted), the
        day's segments (compacted), the day's shared segments (a compacted shard-day); each
        read after the one before, so a row that moves on in between is found in the next."""
        timeout = self._settings.shard_timeout_s
        try:
            pool = self._pools.reader(ref.shard, primary=True)
            async with pool.acquire(timeout=timeout) as connection:
                record: asyncpg.Record | None = None
                statements = (
                    refs.shared_point_sql(ref),
                    refs.point_sql(ref),
                    refs.segment_point_sql(ref),
                    refs.shared_segment_point_sql(ref),
                )
                for statement in statements:
                    if statement is None or record is not None:
                        break
                    # Retention dropped the day, or the day has no shared table or segments.
                    with contextlib.suppress(asyncpg.UndefinedTableError):
                        text, params = statement
                        record = await connection.fetchrow(text, *params, timeout=timeout)
                return record
        except (TimeoutError, asyncpg.QueryCanceledError):
            raise GatewayTimeout(
                f"shard {ref.shard} did not answer within {timeout:g}s "
                "(SHARDLOG_SEARCH__SHARD_TIMEOUT_S)"
            ) from None
        except DRIVER_ERRORS as exc:
            if not is_transient(exc):
                raise
            raise Unavailable(
                f"shard {ref.shard} unreachable: {describe(exc)}", retry_after_s=1
            ) from exc
