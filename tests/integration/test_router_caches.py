"""The router's memory of owners and tables is bounded (docs/architecture.md, "The catalog and
the router's memory"). Day tables: a writer that remembers 3 tables writes into twice as many
owner-days, then into all of them again, several parts at once (keyed parts retried, unkeyed
ones each in its own transaction), after retention dropped one table it had forgotten and one
it remembered. Every row is stored once, in its day's table, and found by a search; the writer
never remembers more than 3 tables, and the gauge says how many it does. The tail hub's owners:
a hub that holds 2 maps 3 owners at once right, and holds 2. And the router reports its caches'
sizes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.cache_entries import CacheEntries
from router.db.names import DayTable, day_table
from router.ingest.writer import Part
from router.metrics import Metrics
from router.retention.dropper import Dropper
from router.settings import Settings
from router.tail.hub import TailHub
from tests.support import in_process_writer, past_day, search_items, window_around

KNOWN = 3
DAYS = range(1, 2 * KNOWN + 1)
GAUGE = "shardlog_router_cache_entries"
CACHES = ("known_tables", "owners", "owner_days", "placements", "tail_owners", "tail_interests")


def new_owner(api: httpx.Client) -> tuple[str, int, str]:
    """A new owner with one row ('first', a day ago): its key, id and the shard of that row."""
    key = f"known-{uuid.uuid4().hex[:10]}"
    response = api.post(
        "/v1/audit", json=[{"owner": key, "content": "first", "ts": past_day(1).isoformat()}]
    )
    assert response.status_code == 200, response.text
    ident = owner_id(api, "audit", key)
    assert ident is not None
    (shard,) = day_tables(api, "audit", ident)
    return key, ident, shard


def search_contents(api: httpx.Client, key: str) -> list[str]:
    params = {"owner": key, **window_around(past_day(DAYS[-1]), past_day(1)), "limit": 500}
    return sorted(item["content"] for item in search_items(api, "audit", params))


async def test_a_writer_remembering_three_tables_writes_every_row_once(
    settings: Settings, api: httpx.Client
) -> None:
    key, owner, shard = new_owner(api)
    expected: dict[int, list[str]] = {day: [] for day in DAYS}
    expected[1].append("first")
    registry = CollectorRegistry()
    entries = CacheEntries(registry)

    def table(day: int) -> DayTable:
        return day_table("audit", owner, past_day(day).date())

    async with in_process_writer(settings, known_tables=KNOWN) as opened:
        writer = opened.writer
        entries.watch("known_tables", lambda: len(writer.tables))

        def remembered() -> int:
            reported = registry.get_sample_value(GAUGE, {"cache": "known_tables"})
            assert reported == len(writer.tables) <= KNOWN
            return len(writer.tables)

        async def write(day: int, label: str, keyed: bool) -> bool:
            rows = [(past_day(day) + timedelta(seconds=n), f"{label} {n}", None) for n in (1, 2)]
            part = Part(f"{table(day).name}:{label}", table(day), rows, shard)
            written = await writer.write(part, shard, f"{key}:{label}" if keyed else None)
            remembered()
            return written

        for day in DAYS:
            assert await write(day, f"d{day} first", keyed=True)
            expected[day] += [f"d{day} first 1", f"d{day} first 2"]
        assert remembered() == KNOWN

        # Retention drops the first day's table after the second (forgotten by now) and the
        # last day's (remembered): both are made again by their next write.
        dropper = Dropper(opened.metadata, opened.shard_pools, settings.retention)
        for day in (2, DAYS[-1]):
            dropped = await dropper.drop(opened.catalog.snapshot, table(day), shard)
            assert dropped.outcome == "dropped", dropped
            expected[day] = []

        # Every day again, three parts each at once: one keyed (group commit) and two unkeyed
        # (COPY, each in its own transaction, racing to ensure the table); then the keyed ones
        # retried, which the ledger skips.
        again = [(day, f"d{day} again {n}", n == 0) for day in DAYS for n in range(3)]
        assert await asyncio.gather(*(write(*a) for a in again)) == [True] * len(again)
        retried = [a for a in again if a[2]]
        assert await asyncio.gather(*(write(*a) for a in retried)) == [False] * len(retried)
        for day, label, _ in again:
            expected[day] += [f"{label} 1", f"{label} 2"]

    dsn = catalog_shards(api)[shard]
    for day in DAYS:
        stored = shard_sql(dsn, f"SELECT content FROM {table(day).quoted} ORDER BY content")
        assert stored.splitlines() == sorted(expected[day]), day
    assert search_contents(api, key) == sorted(c for day in DAYS for c in expected[day])


async def test_a_tail_hub_holding_two_owners_maps_three_at_once(
    settings: Settings, api: httpx.Client
) -> None:
    made = [new_owner(api) for _ in range(3)]
    expected = {ident: key for key, ident, _ in made} | {0: None}  # 0: no owner has that id
    async with in_process_writer(settings) as opened:
        hub = TailHub(
            opened.catalog,
            opened.shard_pools,
            opened.metadata,
            settings.pools,
            settings.tail,
            Metrics(),
            max_cached_owners=2,
        )
        for _ in range(2):  # from the catalog, then partly from the cache
            found = await hub.mappings("audit", set(expected))
            assert {i: m.key if m else None for i, m in found.items()} == expected
            assert hub.cached_owners() == 2
        for mapping in found.values():
            if mapping is not None:
                assert hub.interest(mapping).wanted == []  # no tail subscribes
        assert hub.cached_interests() == 2


def test_the_router_reports_the_size_of_each_cache(api: httpx.Client) -> None:
    new_owner(api)
    response = api.get("/metrics")
    assert response.status_code == 200
    (family,) = [f for f in text_string_to_metric_families(response.text) if f.name == GAUGE]
    sizes = {sample.labels["cache"]: sample.value for sample in family.samples}
    assert sorted(sizes) == sorted(CACHES)
    # The owner's first write: its table, its mapping and its owner-day's count.
    assert sizes["known_tables"] >= 1 and sizes["owners"] >= 1 and sizes["owner_days"] >= 1
