"""What this router has recently seen of each shard: a shard that just failed a write is
avoided by random placement for a short cool-down, so one dead shard does not cost every
request a connect timeout."""

from __future__ import annotations

import time
from collections.abc import Sequence


class ShardHealth:
    def __init__(self, cooldown_s: float = 5.0) -> None:
        self._cooldown_s = cooldown_s
        self._failed_at: dict[str, float] = {}

    def failed(self, shard: str) -> None:
        self._failed_at[shard] = time.monotonic()

    def succeeded(self, shard: str) -> None:
        self._failed_at.pop(shard, None)

    def usable(self, shards: Sequence[str]) -> list[str]:
        """The shards not failed within the cool-down; all of them when every one failed
        (better to try again than to refuse without trying)."""
        now = time.monotonic()
        fresh = [s for s in shards if now - self._failed_at.get(s, -1e9) > self._cooldown_s]
        return fresh or list(shards)
