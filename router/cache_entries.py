"""``shardlog_router_cache_entries{cache}``: how many entries each of the router's caches of
owners and tables holds, read when /metrics is scraped. Each of them is bounded (docs/
operations.md, "The router's memory"); the gauge shows how close to its bound each runs."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge


class CacheEntries:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._gauge = Gauge(
            "shardlog_router_cache_entries",
            "Entries held by each bounded cache of owners and tables of this process",
            ["cache"],
            registry=registry,
        )

    def watch(self, cache: str, entries: Callable[[], int]) -> None:
        """Report ``entries()`` under ``cache`` at every scrape."""
        self._gauge.labels(cache).set_function(entries)
