"""Idempotency-Key records in the metadata database (see schema/metadata/0002_ingest.sql).

One attempt at a time holds a key (a lease, so that a crashed router does not hold it forever).
The first attempt records where each part goes; a retry writes every part to the recorded shard,
whose ingest_ledger says whether the part already committed, so no row is stored twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from router.db.failures import describe, is_transient, unavailable_when_unreachable
from router.errors import Conflict, Invalid

log = logging.getLogger(__name__)

MAX_KEY_CHARS = 255
FIELD = "Idempotency-Key"


def check_key(key: str) -> str:
    if not 1 <= len(key) <= MAX_KEY_CHARS or not key.isascii() or not key.isprintable():
        raise Invalid(f"{FIELD} must be 1-{MAX_KEY_CHARS} printable ASCII characters", FIELD)
    return key


def tenant_key(tenant: str, key: str) -> str:
    """The key as recorded: one tenant's keys never meet another's (a client cannot learn or
    block another tenant's keys), within the column's 255 characters."""
    return f"{tenant}:{hashlib.sha256(key.encode()).hexdigest()}"


def _reused() -> Invalid:
    return Invalid(
        f"{FIELD} was already used for a different request body; use a new key for new data",
        FIELD,
    )


@dataclass
class Claim:
    key: str
    first_attempt: bool
    placement: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None


class IdempotencyStore:
    def __init__(self, metadata: asyncpg.Pool, lease_s: float, retry_after_s: int) -> None:
        self._metadata = metadata
        self._lease_s = lease_s
        self._retry_after_s = retry_after_s

    async def claim(self, key: str, kind: str, body_hash: str, placement: dict[str, Any]) -> Claim:
        """Start an attempt. ``placement`` is recorded when this is the first one; a retry gets
        the recorded placement back, or the stored result when an earlier attempt finished."""
        with unavailable_when_unreachable("metadata database", self._retry_after_s):
            return await self._claim(key, kind, body_hash, placement)

    async def _claim(self, key: str, kind: str, body_hash: str, placement: dict[str, Any]) -> Claim:
        async with self._metadata.acquire() as connection, connection.transaction():
            inserted = await connection.fetchval(
                "INSERT INTO idempotency_requests (key, kind, body_hash, state, lease_until, "
                "placement) VALUES ($1, $2, $3, 'running', now() + make_interval(secs => $4), "
                "$5::jsonb) ON CONFLICT (key) DO NOTHING RETURNING true",
                key,
                kind,
                body_hash,
                self._lease_s,
                json.dumps(placement),
            )
            if inserted:
                return Claim(key, first_attempt=True, placement=placement)
            row = await connection.fetchrow(
                "SELECT kind, body_hash, state, lease_until > now() AS leased, placement, result "
                "FROM idempotency_requests WHERE key = $1 FOR UPDATE",
                key,
            )
            assert row is not None  # the INSERT above conflicted on this key
            if row["kind"] != kind or row["body_hash"] != body_hash:
                raise _reused()
            if row["state"] == "done":
                return Claim(key, first_attempt=False, result=json.loads(row["result"]))
            if row["state"] == "running" and row["leased"]:
                raise Conflict(
                    f"a request with this {FIELD} is still being written; retry after it ends",
                    FIELD,
                    retry_after_s=self._retry_after_s,
                )
            await connection.execute(
                "UPDATE idempotency_requests SET state = 'running', attempts = attempts + 1, "
                "lease_until = now() + make_interval(secs => $2), updated_at = now() "
                "WHERE key = $1",
                key,
                self._lease_s,
            )
            return Claim(key, first_attempt=False, placement=json.loads(row["placement"]))

    async def check_reuse(self, key: str, kind: str, body_hash: str) -> None:
        """Refuses (422) a key an earlier request with another body used, before this one
        claims anything (``claim`` refuses it too, after the placement is planned)."""
        with unavailable_when_unreachable("metadata database", self._retry_after_s):
            row = await self._metadata.fetchrow(
                "SELECT kind, body_hash FROM idempotency_requests WHERE key = $1", key
            )
        if row is not None and (row["kind"] != kind or row["body_hash"] != body_hash):
            raise _reused()

    async def recorded_now(self, key: str) -> datetime | None:
        """The time an earlier attempt with this key gave to records without a ts."""
        with unavailable_when_unreachable("metadata database", self._retry_after_s):
            text = await self._metadata.fetchval(
                "SELECT placement->>'now' FROM idempotency_requests WHERE key = $1", key
            )
        return datetime.fromisoformat(text) if text else None

    async def move_part(self, key: str, part: str, shard: str) -> None:
        await self._metadata.execute(
            "UPDATE idempotency_requests SET placement = jsonb_set(placement, "
            "ARRAY['parts', $2, 'shard'], to_jsonb($3::text)), updated_at = now() "
            "WHERE key = $1",
            key,
            part,
            shard,
        )

    async def finish(self, key: str, result: dict[str, Any] | None) -> None:
        """Record the outcome: ``result`` when every part committed, None when the attempt
        failed (the key is released at once for a retry)."""
        state = "done" if result is not None else "failed"
        try:
            await self._metadata.execute(
                "UPDATE idempotency_requests SET state = $2, result = $3::jsonb, "
                "updated_at = now() WHERE key = $1",
                key,
                state,
                None if result is None else json.dumps(result),
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if not is_transient(exc):
                raise
            # The rows are committed (or not) either way; the key stays 'running' until its
            # lease ends, and a retry then finds every committed part in the shards' ledgers.
            log.warning("could not record the outcome of %s: %s", key, describe(exc))

    async def forget_older_than(self, hours: float) -> int:
        removed = await self._metadata.fetchval(
            "WITH gone AS (DELETE FROM idempotency_requests "
            "WHERE created_at < now() - make_interval(secs => $1) AND state <> 'running' "
            "RETURNING 1) SELECT count(*) FROM gone",
            hours * 3600,
        )
        return int(removed)
