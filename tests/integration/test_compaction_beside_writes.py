"""Compaction never blocks writes (docs/architecture.md, "Compacted days"): the clear of a
compacted owner-day needs its heap table alone (ACCESS EXCLUSIVE), and a search may hold the
table for long; the clear waits at most SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS per attempt and
tries again later, so the writes queued behind its request are let through within that time.
Here a transaction holds every day table of the owner while `shardlog compact --clear-now`
tries to clear them: late writes to the same owner-day are acknowledged promptly and stored
once, and the clear completes once the transaction ends."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from tests.integration.test_compaction import DAY, compact, found, owner, states, write
from tests.integration.test_search import post
from tests.support import cli_env

__all__ = ["owner"]  # the fixture
LOCK_TIMEOUT_MS = 300


def waiting_exclusive_locks(dsn: str) -> int:
    return int(
        shard_sql(
            dsn,
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'AccessExclusiveLock' "
            "AND locktype = 'relation'",
        )
    )


def test_writes_beside_a_clear_that_waits_for_a_reader_are_let_through(
    api, settings, owner
) -> None:
    written = write(api, owner, 60)
    switched = compact(settings, "--owner", owner)  # copied and switched, not yet cleared
    assert states(switched, owner) == {"wait"}, switched
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    dsns = catalog_shards(api)
    held = day_tables(api, "audit", ident)
    holders = []
    for shard, names in held.items():
        holder = subprocess.Popen(
            ["psql", "-X", "-q", "-d", dsns[shard]],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        assert holder.stdin is not None
        reads = " ".join(f"SELECT count(*) FROM {name};" for name in names)
        holder.stdin.write(f"BEGIN; {reads} SELECT 'held';\n")
        holder.stdin.flush()
        holders.append(holder)
    clearing = subprocess.Popen(
        [sys.executable, "-m", "router.cli", "compact", "--json", "--owner", owner, "--clear-now"],
        env={
            **cli_env(settings),
            "SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS": str(LOCK_TIMEOUT_MS),
            "SHARDLOG_COMPACTION__ATTEMPTS": "1000",
            "SHARDLOG_COMPACTION__RETRY_BACKOFF_S": "0.05",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    late = []
    try:
        deadline = time.monotonic() + 60
        while not any(waiting_exclusive_locks(dsns[shard]) for shard in held):
            assert clearing.poll() is None, clearing.communicate()
            assert time.monotonic() < deadline, "the clear never asked for its lock"
            time.sleep(0.02)
        for n in range(8):
            records = [
                {
                    "owner": owner,
                    "ts": (DAY + timedelta(hours=3, seconds=10 * n + i)).isoformat(),
                    "content": f"{owner} beside the clear {n}.{i}",
                }
                for i in range(5)
            ]
            started = time.monotonic()
            post(api, "/v1/audit", records)
            # Held back by the clear's queued request for one lock timeout at most (and a
            # loaded machine's slack), never until the reader ends.
            assert time.monotonic() - started < LOCK_TIMEOUT_MS / 1000 + 5
            late += [r["content"] for r in records]
        assert clearing.poll() is None, "the clear did not wait for the reader"
    finally:
        for holder in holders:
            assert holder.stdin is not None
            holder.stdin.write("COMMIT;\n")
            holder.stdin.close()
            holder.wait(timeout=30)
    _, err = clearing.communicate(timeout=120)
    assert clearing.returncode == 0, err
    assert sorted(found(api, owner)) == sorted(written + late)
    assert states(compact(settings, "--dry-run", "--owner", owner), owner) == {"done"}
