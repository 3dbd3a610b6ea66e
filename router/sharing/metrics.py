"""Metrics of the promotion of shared owner-days (docs/operations.md, "Metrics")."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from router.sharing.promote import PromotionReport


class PromotionMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.promotions = Counter(
            "shardlog_shared_promotions",
            "Owner-days a promotion run took out of a shared table, by result (moved, failed: "
            "left to the next run)",
            ["result"],
            registry=registry,
        )
        self.rows = Counter(
            "shardlog_shared_promoted_rows",
            "Rows moved from shared tables to own tables",
            registry=registry,
        )
        self.move_seconds = Histogram(
            "shardlog_shared_promotion_move_seconds",
            "Seconds of one owner-day's move (its writes on that shard wait meanwhile)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=registry,
        )

    def observe(self, report: PromotionReport) -> None:
        for promoted in report.promoted:
            self.promotions.labels("moved").inc()
            self.rows.inc(promoted.rows)
            self.move_seconds.observe(promoted.seconds)
        if report.failed:
            self.promotions.labels("failed").inc(len(report.failed))
