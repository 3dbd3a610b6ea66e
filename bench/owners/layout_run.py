"""One layout at one number of owners, on a running cluster: its own router (shared tables on
or off), the owners' first pass and the sizes it added, a second pass over the same owners,
first writes of new owners, one-owner 1-hour searches, pages of many owners (none named, a
prefix of 10 % and of 1 % of them), a retention dry run and the run that drops one of the 3
days; the router's RSS after each pass."""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx

from bench import harness
from bench.ingest import small
from bench.owners import compacted, rows, sizes
from bench.tail.__main__ import router_rss_mb
from router.settings import Settings
from services.router_process import RouterProcess

LAYOUTS = {"shared": "true", "per-owner": "false"}
CLIENTS = 4


@dataclass(frozen=True)
class Plan:
    owners: int
    per_request: int
    first_writes: int
    searches: int
    today: date
    seed: int = 1


def router_for(settings: Settings, layout: str) -> RouterProcess:
    env = {
        **harness.router_env(settings),
        "SHARDLOG_SHARED__ENABLED": LAYOUTS[layout],
        # The bench runs retention itself, timed; the router's own job would race it.
        "SHARDLOG_RETENTION__ENABLED": "false",
    }
    return RouterProcess(
        settings.cluster.data_dir, settings.server.host, settings.server.port, env=env
    )


def quantiles(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "max_ms": round(ordered[-1], 2),
    }


def write_pass(url: str, label: str, plan: Plan, tag: str) -> float:
    """Seconds to write every owner's rows of the 3 days, CLIENTS clients posting requests of
    ``plan.per_request`` owners; anything but 200 ends the run."""
    bodies = rows.bodies(label, range(plan.owners), rows.days(plan.today), plan.per_request, tag)
    progress = harness.Progress(f"{label} {tag}", plan.owners, "owners")

    async def client(mine: list[bytes]) -> None:
        async with httpx.AsyncClient(
            base_url=url, timeout=900, headers=harness.auth_for(url)
        ) as http:
            for body in mine:
                response = await http.post(
                    "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
                )
                if response.status_code != 200:
                    raise RuntimeError(f"write: {response.status_code} {response.text[:300]}")
                progress.advance(plan.per_request)

    async def clients() -> None:
        await asyncio.gather(*(client(bodies[i::CLIENTS]) for i in range(CLIENTS)))

    started = time.perf_counter()
    asyncio.run(clients())
    return time.perf_counter() - started


def first_writes(url: str, label: str, start: int, count: int, day: date) -> list[float]:
    """Milliseconds of each new owner's first request (its 3 rows of ``day``), one at a time."""
    bodies = [
        b"\n".join(rows.owner_lines(label, index, [day], "first")) + b"\n"
        for index in range(start, start + count)
    ]
    load = small.Load("first writes", "/v1/audit", "application/x-ndjson", bodies)
    _, latencies = asyncio.run(small.run_load(url, load, clients=1))
    return latencies


async def searches(url: str, label: str, plan: Plan, expected_rows: int) -> list[float]:
    """Milliseconds of one-owner 1-hour searches of random owners and days; each must find the
    owner's rows of that day (``expected_rows``), an oracle independent of the router's."""
    rng = random.Random(plan.seed)
    on = rows.days(plan.today)
    latencies = []
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=harness.auth_for(url)) as http:
        for _ in range(plan.searches):
            index, day = rng.randrange(plan.owners), rng.choice(on)
            start, end = rows.window(index, day)
            params = {
                "owner": rows.owner_key(label, index),
                "from": start.isoformat(),
                "to": end.isoformat(),
            }
            elapsed, page = await harness.timed_get(http, params)
            if len(page["items"]) != expected_rows:
                raise RuntimeError(
                    f"search {params}: {len(page['items'])} rows, {expected_rows} written"
                )
            latencies.append(elapsed)
    return latencies


# Rows a page of many owners asks for, and pages timed after the first at each share.
MANY_PAGE_ROWS = 100
MANY_PAGES_FOLLOWED = 10


def share_prefix(label: str, owners: int, share: float) -> tuple[str, int]:
    """A key prefix covering about ``share`` of ``owners`` (keys ``label-NNNNNNN``), and how
    many of them it covers."""
    digits = max(0, min(7, 7 - round(math.log10(max(1.0, owners * share)))))
    prefix = "0" * digits
    covered = sum(1 for index in range(owners) if f"{index:07d}".startswith(prefix))
    return f"{label}-{prefix}", covered


async def many_pages(url: str, label: str, plan: Plan) -> dict[str, Any]:
    """Pages of MANY_PAGE_ROWS rows of one written day naming no owner, and by prefixes
    covering about 10 % and 1 % of the owners: the first page and MANY_PAGES_FOLLOWED pages
    after it through the cursor, timed. The 1 % prefix is followed to its end, and its rows
    must be the covered owners' rows of the day (an oracle of the writer's); every page must
    be full and in time order until then. A search the router refuses (the per-owner layout
    past SHARDLOG_SEARCH__MAX_MATCHED_OWNERS) is recorded as refused."""
    day = rows.days(plan.today)[1]
    start = datetime.combine(day, datetime.min.time(), UTC)
    window = {"from": start.isoformat(), "to": (start + timedelta(days=1)).isoformat()}
    found: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=600, headers=harness.auth_for(url)) as http:
        for name, share in (("all", 1.0), ("prefix_10pct", 0.1), ("prefix_1pct", 0.01)):
            params: dict[str, Any] = {**window, "limit": MANY_PAGE_ROWS}
            covered = plan.owners
            if share < 1:
                params["owner_prefix"], covered = share_prefix(label, plan.owners, share)
            first = await http.get("/v1/audit/search", params=params)
            if first.status_code == 400:
                found[name] = {"refused": first.json()["error"]["message"], "owners": covered}
                continue
            latencies, seen, cursor, to_end = [], 0, None, share == 0.01
            while True:
                paged = {**params, "cursor": cursor} if cursor else params
                elapsed, page = await harness.timed_get(http, paged)
                latencies.append(elapsed)
                stamps = [item["ts"] for item in page["items"]]
                if stamps != sorted(stamps) or (
                    page["next_cursor"] and len(stamps) < MANY_PAGE_ROWS
                ):
                    raise RuntimeError(f"pages of {name}: a page out of order or short")
                seen += len(stamps)
                cursor = page["next_cursor"]
                if cursor is None or (not to_end and len(latencies) > MANY_PAGES_FOLLOWED):
                    break
            expected = covered * 2 * rows.ROWS_PER_OWNER_DAY
            if to_end and seen != expected:
                raise RuntimeError(f"pages of {name}: {seen} rows, {expected} written")
            found[name] = {
                "owners": covered,
                "first_page_ms": round(latencies[0], 2),
                "pages": quantiles(latencies),
            }
    return found


def admin(url: str, method: str, path: str, body: Any = None) -> Any:
    response = httpx.request(
        method, f"{url}/v1/admin{path}", json=body, headers=harness.auth_for(url), timeout=3600
    )
    if response.status_code >= 300:
        raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
    return response.json() if response.content else None


def set_group_policies(url: str, keep_days: int | None) -> None:
    """Every group's audit policy: ``keep_days``, or none (the default) when None."""
    if keep_days is None:
        for policy in admin(url, "GET", "/retention/policies"):
            if policy["owner"] is None and policy["kind"] == "audit":
                admin(url, "DELETE", f"/retention/policies/{policy['id']}")
        return
    for group in admin(url, "GET", "/groups"):
        body = {"kind": "audit", "group": group["name"], "owner": None, "keep_days": keep_days}
        admin(url, "PUT", "/retention/policies", body)


def retention(url: str, today: date) -> dict[str, Any]:
    """The group policies set so the oldest of the 3 days expires as of ``today``: a dry run,
    then the run (forced past the max drop share: a third of the tables is the point), timed."""
    set_group_policies(url, rows.DAYS - 1)
    found: dict[str, Any] = {}
    for name, dry in (("dry_run", True), ("run", False)):
        started = time.perf_counter()
        report = admin(
            url,
            "POST",
            "/retention/run",
            {"dry_run": dry, "force": True, "as_of": today.isoformat()},
        )
        seconds = time.perf_counter() - started
        found[name] = {
            "seconds": round(seconds, 3),
            "status": report["status"],
            "tables_total": report["tables_total"],
            "tables_listed": len(report["drops"]),
            "tables_dropped": report["tables_dropped"],
            "shared_days_listed": len(report["shared_drops"]),
            "shared_days_dropped": report["shared_days_dropped"],
            "failed": report["tables_failed"] + report["shared_days_failed"],
        }
    set_group_policies(url, None)
    return found


def clear_days(url: str, today: date) -> None:
    """Drop what is left of the written days (the newer two), so the next layout measured on
    this cluster starts from the same ground: one-day policies as of tomorrow (today's tables
    and those made ahead stay)."""
    set_group_policies(url, 1)
    report = admin(
        url,
        "POST",
        "/retention/run",
        {"force": True, "as_of": (today + timedelta(days=1)).isoformat()},
    )
    if report["tables_failed"] or report["shared_days_failed"]:
        raise RuntimeError(f"clearing the written days failed: {report}")
    set_group_policies(url, None)


def measure(settings: Settings, layout: str, plan: Plan) -> dict[str, Any]:
    """Every figure of ``layout`` at ``plan.owners`` owners; the router stopped afterwards."""
    label = f"{layout[0]}{plan.owners}"
    on = rows.days(plan.today)
    owner_days = plan.owners * len(on)
    router = router_for(settings, layout)
    router.start()
    harness.TOKENS[router.url] = harness.bench_token(settings)
    try:
        url, pid = router.url, router.pid()
        assert pid is not None
        before = asyncio.run(sizes.read(settings))
        first_s = write_pass(url, label, plan, "pass1")
        rss_first = router_rss_mb(pid)
        after = asyncio.run(sizes.read(settings))
        second_s = write_pass(url, label, plan, "pass2")
        rss_second = router_rss_mb(pid)
        print(f"  {layout}: first writes, searches, retention", flush=True)
        firsts = first_writes(url, label, plan.owners, plan.first_writes, on[0])
        found = asyncio.run(searches(url, label, plan, 2 * rows.ROWS_PER_OWNER_DAY))
        paged = asyncio.run(many_pages(url, label, plan))
        kept = retention(url, plan.today)
        if kept["run"]["status"] != "done" or kept["run"]["failed"]:
            raise RuntimeError(f"retention of one day: {kept}")
        # The older day retention kept (closed whatever the hour), compacted.
        closed = compacted.compact_day(settings, on[1], plan.owners) if layout == "shared" else None
        payload = rows.payload_bytes(range(plan.owners), on, "pass1")
        shard_growth = sum(after.shard_bytes.values()) - sum(before.shard_bytes.values())
        metadata_growth = after.metadata_bytes - before.metadata_bytes
        system_growth = after.metadata_system_catalog_bytes - before.metadata_system_catalog_bytes
        result = {
            "layout": layout,
            "owners": plan.owners,
            "owner_days": owner_days,
            "rows": owner_days * rows.ROWS_PER_OWNER_DAY,
            "first_pass_s": round(first_s, 2),
            "first_pass_owners_per_s": round(plan.owners / first_s, 1),
            "second_pass_s": round(second_s, 2),
            "disk": {
                "shard_bytes_added": shard_growth,
                "bytes_per_owner_day": round(shard_growth / owner_days, 1),
                "payload_bytes_per_owner_day": round(payload / owner_days, 1),
                "overhead_bytes_per_owner_day": round((shard_growth - payload) / owner_days, 1),
                # Where the bytes went (each relation with its indexes, TOAST and forks); the
                # rest is free space the database files hold beyond them.
                "by_part_per_owner_day": {
                    part: round(
                        (after.shard_parts[part] - before.shard_parts[part]) / owner_days, 1
                    )
                    for part in sizes.PARTS
                },
            },
            "relations_per_shard": {
                "before": max(before.shard_relations.values()),
                "after": max(after.shard_relations.values()),
                "tables_after": max(after.shard_tables.values()),
            },
            "catalog": {
                "metadata_bytes_added": metadata_growth,
                "system_catalog_bytes_added": system_growth,
                "bytes_per_owner": round(metadata_growth / plan.owners, 1),
                "system_catalog_bytes_per_owner": round(system_growth / plan.owners, 1),
            },
            "first_write": quantiles(firsts),
            "search_1h": quantiles(found),
            "many_owner_pages": paged,
            "retention": kept,
            **({"compacted_day": closed} if closed is not None else {}),
            "router_rss_mb": {
                "first_pass": round(rss_first, 1),
                "second_pass": round(rss_second, 1),
            },
        }
        if layout == "shared":
            clear_days(url, plan.today)
        return result
    finally:
        router.stop()
