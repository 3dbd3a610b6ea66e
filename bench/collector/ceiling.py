"""The database's bound on the collector, measured in the same run (bench/merge_peer.py): the
pool's flows written straight from Python with the write path's SQL into the same shards, in the
collector's batches (``batch_flows`` flows a batch, dealt over the shards by 5-tuple, the shards
in parallel, one batch after another, as the collector's writer goes). The first pass inserts
every flow; the passes after it merge into existing rows, which is the collector's steady state
when the pool is replayed. No decoding, no queue, no ledger, no catalog: the highest rate any
collector that merges flows into these shards could keep."""

from __future__ import annotations

import asyncio
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.collector.pool import five_tuple
from bench.merge_peer import MergePeer, Staged, dealt, staged_flow
from router import clock


def pool_rows(flows: int, now_s: float | None = None) -> list[Staged]:
    """The pool's flows (bench/collector/pool.py's 5-tuples, bytes and times) as staged rows."""
    now = datetime.fromtimestamp(clock.time() if now_s is None else now_s, UTC)
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for n in range(flows):
        src, dst, src_port, dst_port = five_tuple(n)
        last = max(now - timedelta(milliseconds=n % 60_000), day_start)
        first = max(last - timedelta(milliseconds=1_000 + n % 5_000), day_start)
        rows.append(staged_flow(src, dst, src_port, dst_port, 64 + n % 1_400, 1, first, last))
    return rows


async def _passes(
    dsns: list[str], rows: list[Staged], batch: int, merges: int
) -> tuple[list[float], tuple[int, int]]:
    """Seconds of each pass, and (rows, flows) stored at the end."""
    peer = MergePeer(dsns)
    await peer.open()
    try:
        chunks = [
            dealt(rows[start : start + batch], len(dsns)) for start in range(0, len(rows), batch)
        ]
        seconds = []
        for _ in range(1 + merges):
            took = 0.0
            for chunk in chunks:
                took += await peer.write(chunk, batch)
            seconds.append(took)
        return seconds, await peer.totals()
    finally:
        await peer.close()


def measure(dsns: list[str], flows: int, batch_flows: int, merges: int = 3) -> dict[str, Any]:
    rows = pool_rows(flows)
    seconds, (stored_rows, stored_flows) = asyncio.run(_passes(dsns, rows, batch_flows, merges))
    merge_rates = [round(flows / s) for s in seconds[1:]]
    return {
        "flows": flows,
        "batch_flows": batch_flows,
        "insert_flows_per_s": round(flows / seconds[0]),
        "merge_flows_per_s_runs": merge_rates,
        "merge_flows_per_s": round(statistics.median(merge_rates)),
        # One row per flow, each merged into once per pass after the first: the check that
        # the passes wrote what they were timed for.
        "rows_stored": stored_rows,
        "flow_count_stored": stored_flows,
    }
