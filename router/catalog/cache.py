"""The router's copy of the catalog. Loaded at start, reloaded when the metadata database
announces a new version (LISTEN shardlog_catalog), with a periodic version check as a fallback
for a lost notification or a dropped listener connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from router.catalog import store
from router.catalog.snapshot import CatalogSnapshot
from router.db.dsn import as_uri
from router.db.failures import DRIVER_ERRORS
from router.settings import CatalogSettings

log = logging.getLogger(__name__)

CHANNEL = "shardlog_catalog"
LISTENER_APPLICATION_NAME = "shardlog-catalog-listener"
Subscriber = Callable[[CatalogSnapshot], Awaitable[None]]


class CatalogCache:
    def __init__(
        self, pool: asyncpg.Pool, dsn_for_listener: str, settings: CatalogSettings
    ) -> None:
        self._pool = pool
        self._listener_dsn = dsn_for_listener
        self._settings = settings
        self._snapshot: CatalogSnapshot | None = None
        self._subscribers: list[Subscriber] = []
        self._listener: asyncpg.Connection | None = None
        self._poller: asyncio.Task[None] | None = None
        self._reload_lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()
        self.refreshes = 0

    @property
    def snapshot(self) -> CatalogSnapshot:
        if self._snapshot is None:
            raise RuntimeError("catalog cache used before start()")
        return self._snapshot

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    async def start(self) -> None:
        await self.reload()
        await self._listen()
        self._poller = asyncio.create_task(self._poll(), name="catalog-poll")

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self._listener is not None and not self._listener.is_closed():
            await self._listener.close()

    async def reload(self, min_version: int | None = None) -> CatalogSnapshot:
        async with self._reload_lock:
            current = self._snapshot
            if current is not None and min_version is not None and current.version >= min_version:
                return current
            snapshot = await store.load_snapshot(self._pool)
            if current is None or snapshot.version != current.version:
                self._snapshot = snapshot
                self.refreshes += 1
                log.info("catalog version %d loaded", snapshot.version)
                for subscriber in self._subscribers:
                    await subscriber(snapshot)
            return self.snapshot

    async def _listen(self) -> None:
        try:
            self._listener = await asyncpg.connect(
                as_uri(self._listener_dsn),
                timeout=5,
                server_settings={"application_name": LISTENER_APPLICATION_NAME},
            )
            await self._listener.add_listener(CHANNEL, self._on_notify)
        except DRIVER_ERRORS as exc:
            self._listener = None
            log.warning("catalog listener not connected (%s); relying on polling", exc)

    def _on_notify(self, _connection: Any, _pid: int, _channel: str, payload: object) -> None:
        text = str(payload)
        version = int(text) if text.isdigit() else None
        task = asyncio.get_running_loop().create_task(self._reload_quietly(version))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _reload_quietly(self, version: int | None) -> None:
        try:
            await self.reload(version)
        except DRIVER_ERRORS as exc:
            log.warning("catalog reload failed: %s", exc)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._settings.poll_interval_s)
            if self._listener is None or self._listener.is_closed():
                await self._listen()
            try:
                version = await store.catalog_version(self._pool)
            except DRIVER_ERRORS as exc:
                log.warning("catalog version check failed: %s", exc)
                continue
            if self._snapshot is None or version != self._snapshot.version:
                await self._reload_quietly(version)
