"""What compaction counts on /metrics (the router's job and its API; a CLI run reports on
its standard output)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from router.compaction.plan import Step


class CompactionMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.steps = Counter(
            "shardlog_compaction_steps",
            "Steps of compaction taken (copy, switch, clear), by step",
            ["step"],
            registry=registry,
        )
        self.failures = Counter(
            "shardlog_compaction_failures",
            "Owner-days whose step failed (retried next run; a copy that did not verify keeps "
            "nothing)",
            registry=registry,
        )
        self.rows = Counter(
            "shardlog_compaction_rows", "Rows copied into segments", registry=registry
        )
        self.bytes_before = Counter(
            "shardlog_compaction_bytes_before",
            "Bytes of the heaps copied (table and indexes)",
            registry=registry,
        )
        self.bytes_after = Counter(
            "shardlog_compaction_bytes_after",
            "Bytes of the segments they became (blocks and filters)",
            registry=registry,
        )
        self.shards_without_codec = Gauge(
            "shardlog_compaction_shards_without_codec",
            "Shards the router's last compaction run skipped: they lack the shardlog_segments "
            "extension",
            registry=registry,
        )
        self.seconds = Histogram(
            "shardlog_compaction_step_seconds",
            "Seconds one step of one owner-day took",
            ["step"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300),
            registry=registry,
        )

        self.shared_steps = Counter(
            "shardlog_compaction_shared_steps",
            "Steps of the compaction of shared days taken (copy, switch, clear), a shard-day "
            "each, by step",
            ["step"],
            registry=registry,
        )
        self.shared_failures = Counter(
            "shardlog_compaction_shared_failures",
            "Shard-days of shared rows whose compaction step failed (retried next run)",
            registry=registry,
        )
        self.shared_rows = Counter(
            "shardlog_compaction_shared_rows",
            "Rows of shared days copied into shared segments",
            registry=registry,
        )

    def step(self, step: Step, seconds: float) -> None:
        self.steps.labels(step).inc()
        self.seconds.labels(step).observe(seconds)

    def copied(self, rows: int, heap_bytes: int, packed_bytes: int) -> None:
        self.rows.inc(rows)
        self.bytes_before.inc(heap_bytes)
        self.bytes_after.inc(packed_bytes)

    def shared_step(self, step: Step, rows: int = 0) -> None:
        self.shared_steps.labels(step).inc()
        self.shared_rows.inc(rows)
