"""Prometheus metrics of one router, in a registry of its own (several apps per process in
tests must not collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from router import clock

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        clock.register_metrics(self.registry)
        self.requests = Counter(
            "shardlog_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "shardlog_http_request_duration_seconds",
            "HTTP request latency by route",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.catalog_version = Gauge(
            "shardlog_catalog_version",
            "Catalog version this router serves",
            registry=self.registry,
        )
        self.catalog_refreshes = Counter(
            "shardlog_catalog_refreshes", "Catalog snapshots loaded", registry=self.registry
        )
        self.shard_up = Gauge(
            "shardlog_shard_up",
            "1 when the last readiness probe reached the shard",
            ["shard", "group"],
            registry=self.registry,
        )
        self.shard_state = Gauge(
            "shardlog_shard_state",
            "Catalog state of each shard (1 for the current state)",
            ["shard", "group", "state"],
            registry=self.registry,
        )
        self.ingest_rows = Counter(
            "shardlog_ingest_rows", "Rows committed by kind", ["kind"], registry=self.registry
        )
        self.ingest_batches = Counter(
            "shardlog_ingest_batches",
            "COPY batches by kind, shard and outcome",
            ["kind", "shard", "outcome"],
            registry=self.registry,
        )
        self.ingest_fallbacks = Counter(
            "shardlog_ingest_fallbacks",
            "Audit batches moved off a failing shard",
            ["shard"],
            registry=self.registry,
        )
        self.ingest_failover_retries = Counter(
            "shardlog_ingest_failover_retries",
            "Batches written on a shard after waiting for its failover",
            ["shard"],
            registry=self.registry,
        )
        self.ingest_inflight_bytes = Gauge(
            "shardlog_ingest_inflight_bytes",
            "Request body bytes held by this router",
            registry=self.registry,
        )
        self.unexpected_errors = Counter(
            "shardlog_unexpected_errors",
            "Unexpected exceptions turned into 500 responses",
            registry=self.registry,
        )
        self.client_disconnects = Counter(
            "shardlog_client_disconnects",
            "Requests whose client went away before sending its whole body",
            registry=self.registry,
        )
        self.retention_runs = Counter(
            "shardlog_retention_runs",
            "Retention runs of this router by status",
            ["status"],
            registry=self.registry,
        )
        self.retention_tables = Counter(
            "shardlog_retention_tables_dropped",
            "Day tables dropped by retention",
            ["kind"],
            registry=self.registry,
        )
        self.retention_rows = Counter(
            "shardlog_retention_rows_dropped",
            "Rows in the day tables dropped by retention (from table statistics)",
            ["kind"],
            registry=self.registry,
        )
        self.retention_bytes = Counter(
            "shardlog_retention_bytes_dropped",
            "Bytes of the day tables dropped by retention",
            ["kind"],
            registry=self.registry,
        )
        self.retention_failures = Counter(
            "shardlog_retention_drop_failures",
            "Day tables retention could not drop (retried next run)",
            ["kind"],
            registry=self.registry,
        )
        self.self_audit_failures = Counter(
            "shardlog_self_audit_failures",
            "Admin actions whose audit row (owner shardlog.admin) could not be written",
            registry=self.registry,
        )
        self.shared_tables_made = Counter(
            "shardlog_shared_tables_made",
            "Shared tables and owner_days tables made on the shards by this router's job of "
            "shared tables ahead of their days",
            registry=self.registry,
        )
        self.shared_redirects = Counter(
            "shardlog_shared_redirects",
            "Parts bound for a shared table that went to their owner-day's own table instead: "
            "the owner-day was promoted since this router wrote it shared",
            registry=self.registry,
        )
        self.retention_last_run = Gauge(
            "shardlog_retention_last_run_timestamp_seconds",
            "When this router last finished a retention run",
            registry=self.registry,
        )

        self.tail_subscribers = Gauge(
            "shardlog_tail_subscribers", "Open tail streams", registry=self.registry
        )
        self.tail_events = Counter(
            "shardlog_tail_events_sent",
            "Rows sent to tail streams, by kind",
            ["kind"],
            registry=self.registry,
        )
        self.tail_overflows = Counter(
            "shardlog_tail_overflows",
            "Tail streams ended because their client fell too far behind",
            registry=self.registry,
        )
        self.tail_lag = Histogram(
            "shardlog_tail_delivery_lag_seconds",
            "From the start of a row's writing transaction on its shard to the row's send "
            "(the watermark included)",
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 1.5, 2, 3, 5, 10, 30),
        )
        self.tail_read_failures = Counter(
            "shardlog_tail_read_failures",
            "Failed reads of a shard's tail log (retried)",
            ["shard"],
            registry=self.registry,
        )

        self.protocol_messages = Counter(
            "shardlog_protocol_messages",
            "Log messages that came in by a shipper protocol (syslog, es_bulk, loki, otlp), "
            "by outcome: accepted (committed) or rejected (refused, named in the answer)",
            ["protocol", "outcome"],
            registry=self.registry,
        )
        self.protocol_bytes = Counter(
            "shardlog_protocol_bytes",
            "Bytes of shipper protocol requests or frames read, by protocol",
            ["protocol"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))
