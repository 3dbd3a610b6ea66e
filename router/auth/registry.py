"""The router's copy of the API tokens: loaded at start and again with every new catalog
version (the tokens table's trigger bumps it and NOTIFYs every router, so a revocation reaches
them within milliseconds; the catalog poll covers a lost notification). Authentication is a
dictionary lookup, one SHA-256 and a constant-time compare: no database round trip per
request. Last-used times are collected in memory and written in one statement every
SHARDLOG_AUTH__LAST_USED_FLUSH_S."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from prometheus_client import CollectorRegistry

from router import clock
from router.auth import store, tokens
from router.auth.leases import Lease, Leases, TokenState
from router.auth.limits import Limiters, LimitValues, TokenLimiter
from router.auth.scopes import Grant, everything
from router.catalog.snapshot import CatalogSnapshot
from router.db.failures import DRIVER_ERRORS, describe
from router.errors import Unauthorized
from router.settings import AuthSettings

log = logging.getLogger(__name__)

OPEN_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who made a request: the token (None in open mode) and what it may do."""

    token_id: str | None
    name: str
    grant: Grant
    limiter: TokenLimiter | None

    @property
    def actor(self) -> str:
        """How the self-audit names the caller (never with the secret)."""
        if self.token_id is None:
            return self.name
        return f"token {self.token_id} ({self.name}, tenant {self.grant.tenant})"


OPEN_CALLER = Caller(None, "anonymous (SHARDLOG_AUTH__MODE=open)", everything(OPEN_TENANT), None)


@dataclass(frozen=True, slots=True)
class _Entry:
    record: store.TokenRecord
    grant: Grant
    limits: LimitValues
    expires: float | None  # epoch seconds


class TokenRegistry:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        settings: AuthSettings,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        self._metadata = metadata
        self._settings = settings
        self.open = settings.mode == "open"
        self.limiters = Limiters(
            LimitValues(
                settings.rate_per_s,
                settings.rate_burst_s,
                settings.ingest_bytes_per_s,
                settings.max_searches,
            )
        )
        self._entries: dict[str, _Entry] = {}
        self._used: dict[str, float] = {}
        self._flusher: asyncio.Task[None] | None = None
        self.leases = Leases(metrics)

    # --- loading -------------------------------------------------------------------------

    async def on_catalog(self, _snapshot: CatalogSnapshot) -> None:
        await self.load()

    async def load(self) -> None:
        records = await store.load_tokens(self._metadata)
        entries = {}
        for token_id, record in records.items():
            entries[token_id] = _Entry(
                record,
                Grant.of(record.tenant, record.scopes),
                self.limiters.values(
                    record.limits.rate_per_s,
                    record.limits.ingest_bytes_per_s,
                    record.limits.max_searches,
                ),
                None if record.expires_at is None else record.expires_at.timestamp(),
            )
        self._entries = entries
        self.limiters.forget_others(set(entries))
        self.leases.review(self._state)

    def _state(self, token_id: str) -> TokenState | None:
        entry = self._entries.get(token_id)
        if entry is None:
            return None
        return TokenState(entry.grant, entry.record.revoked_at is not None, entry.expires)

    def lease(self, caller: Caller) -> Lease:
        """A hold on the caller's token for a stream it opens: ended when the token is revoked,
        expires, is removed or narrowed (router/auth/leases.py)."""
        if caller.token_id is None:
            return self.leases.take(None, caller.grant, None)
        return self.leases.take(caller.token_id, caller.grant, self._state(caller.token_id))

    # --- one request -----------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> Caller:
        """The caller of a request with this Authorization header; 401 unless it carries a
        known token that is neither revoked nor expired. Messages never repeat the token."""
        if self.open:
            return OPEN_CALLER
        text = tokens.credentials(authorization)
        if text is None:
            raise Unauthorized(
                "this endpoint needs 'Authorization: Bearer <token>' (or Basic with the token as "
                "the password; tokens come from "
                "`shardlog tokens create` or POST /v1/admin/tokens)",
                "authorization",
            )
        parsed = tokens.parse(text)
        entry = self._entries.get(parsed[0]) if parsed is not None else None
        if parsed is None or entry is None or not tokens.matches(parsed[1], entry.record.digest):
            raise Unauthorized("the credentials are not a valid shardlog token", "authorization")
        record = entry.record
        if record.revoked_at is not None:
            raise Unauthorized(f"token {record.id} was revoked", "authorization")
        now = clock.time()
        if entry.expires is not None and entry.expires <= now:
            raise Unauthorized(f"token {record.id} has expired", "authorization")
        self._used[record.id] = now
        return Caller(
            record.id, record.name, entry.grant, self.limiters.get(record.id, entry.limits)
        )

    # --- last used -------------------------------------------------------------------------

    def start(self) -> None:
        if not self.open:
            self._flusher = asyncio.create_task(self._flush_loop(), name="token-last-used")

    async def stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()

    async def flush(self) -> None:
        used, self._used = self._used, {}
        if not used:
            return
        try:
            await store.touch(
                self._metadata,
                {tid: datetime.fromtimestamp(at, UTC) for tid, at in used.items()},
            )
        except DRIVER_ERRORS as exc:
            log.warning(
                "token last-used times not written (kept for the next try): %s", describe(exc)
            )
            for token_id, at in used.items():
                self._used[token_id] = max(at, self._used.get(token_id, at))

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.last_used_flush_s)
            await self.flush()
