"""The compaction throttle (SHARDLOG_COMPACTION__MAX_ROWS_PER_S): a run waits after each
owner-day's copy so that the rows it has copied, over the seconds since it started, stay
within the setting. One pace per run, shared by its shards' sequences (which run in parallel
in one event loop): the limit is the run's, whatever the number of shards."""

from __future__ import annotations

import asyncio
import time


def pause_s(rows: int, elapsed_s: float, max_rows_per_s: float) -> float:
    """Seconds to wait so that ``rows`` copied in ``elapsed_s`` seconds (and the wait) come to
    at most ``max_rows_per_s``; 0 when unthrottled (0) or already slow enough."""
    if max_rows_per_s <= 0:
        return 0.0
    return max(0.0, rows / max_rows_per_s - elapsed_s)


class Pace:
    def __init__(self, max_rows_per_s: float) -> None:
        self._max_rows_per_s = max_rows_per_s
        self._started = time.monotonic()
        self._rows = 0

    async def copied(self, rows: int) -> None:
        """Count ``rows`` just copied and wait as long as the limit asks (the product's
        pacing: the wait is what the setting buys)."""
        self._rows += rows
        pause = pause_s(self._rows, time.monotonic() - self._started, self._max_rows_per_s)
        if pause > 0:
            await asyncio.sleep(pause)
