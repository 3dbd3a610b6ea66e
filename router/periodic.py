"""A background task that runs one piece of work every interval (the first run an interval
after start) until stopped; a failed run of a database error is logged and the next one comes
at its time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from router.db.failures import DRIVER_ERRORS, describe

log = logging.getLogger(__name__)


class PeriodicTask:
    def __init__(
        self, name: str, interval_s: Callable[[], float], work: Callable[[], Awaitable[object]]
    ) -> None:
        self._name = name
        self._interval_s = interval_s
        self._work = work
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=self._name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s())
            try:
                await self._work()
            except DRIVER_ERRORS as exc:
                log.warning("%s failed: %s", self._name, describe(exc))
