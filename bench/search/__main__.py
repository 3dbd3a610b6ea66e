"""bench/search: >= 10M audit rows of a few owners over the 12 shards (512-character content
over 'abcdef ', ts spread over one day), and one more instance holding every row in one table
per owner. Measures, over random one-hour windows, p50/p95/p99 of: first pages (limit 100 and
1000) for range only, range + 1 pattern, range + 2 patterns; page 1000 vs page 1; estimate vs
exact count (and the estimate's error); fan-out vs fdw vs the one instance. Writes
bench/results/search.{json,png}.

    python -m bench.search [--rows 10000000] [--windows 60]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.harness import auth_for, bench_cluster, bench_settings, write_results
from router.catalog import store
from router.catalog import tables as day_tables
from router.db import catalog_login, ddl, pools, roles
from router.db.names import day_table
from router.search import sql
from router.search.query import AuditQuery, Keys, Window
from services.credentials import SecretStore
from services.postgres import InstanceSpec, PostgresInstance
from services.process import server_user

OWNERS = 4
CONTENT = 512
ALPHABET = "abcdef "
COPY_BATCH = 50_000
TARGETS = {
    "first_page_2_patterns_p95_ms": 40.0,
    "page1000_vs_page1": 1.5,
    "fanout_vs_fdw": 1.0,
    "estimate_speedup": 100.0,
}


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "p50": round(at(0.5), 2),
        "p95": round(at(0.95), 2),
        "p99": round(at(0.99), 2),
        "n": len(ordered),
    }


def batches(total: int, day: datetime, seed: int) -> Any:
    """(ts, content) rows in batches; content slices of a random pool, ts over the day."""
    rng = random.Random(seed)
    pool = "".join(rng.choice(ALPHABET) for _ in range(CONTENT * 256))
    made = 0
    while made < total:
        size = min(COPY_BATCH, total - made)
        rows = []
        for _ in range(size):
            start = rng.randrange(0, len(pool) - CONTENT)
            ts = day + timedelta(microseconds=rng.randrange(0, 86_400_000_000))
            rows.append((ts, pool[start : start + CONTENT], None))
        made += size
        yield rows


async def load(
    settings: Any, url: str, single: PostgresInstance, total: int, day: datetime
) -> dict[str, int]:
    """Owners are mapped through the API; rows go by binary COPY straight into their day
    tables (round-robin over the group's shards) and into the single instance."""
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        for n in range(OWNERS):
            await http.post(
                "/v1/audit",
                json=[{"owner": f"bench-{n}", "content": "warm", "ts": day.isoformat()}],
            )
        owners = {}
        for n in range(OWNERS):
            body = (
                await http.get("/v1/admin/owners", params={"kind": "audit", "key": f"bench-{n}"})
            ).json()
            owners[f"bench-{n}"] = (body["id"], body["group"])
    metadata = await catalog_login.open_pool(settings)
    snapshot = await store.load_snapshot(metadata)
    connections = {
        name: await asyncpg.connect(shard.dsn) for name, shard in snapshot.shards.items()
    }
    single_connection = await asyncpg.connect(single.spec.dsn())
    # Day tables belong to shardlog_tables (router/db/roles.py), here as on the shards.
    await roles.prepare(single_connection, single.spec.dsn(), settings.pools.passfile)
    per_owner = total // OWNERS
    for n, (key, (ident, group)) in enumerate(sorted(owners.items())):
        table = day_table("audit", ident, day)
        shards = snapshot.active_shards(group)
        for shard in shards:
            await ddl.ensure_table(connections[shard], table, "btree")
        await ddl.ensure_table(single_connection, table, "btree")
        started = time.perf_counter()
        for batch in batches(per_owner, day, seed=n):
            await asyncio.gather(
                *(
                    connections[shard].copy_records_to_table(
                        table.name, records=batch[i :: len(shards)], columns=ddl.AUDIT_COLUMNS
                    )
                    for i, shard in enumerate(shards)
                ),
                single_connection.copy_records_to_table(
                    table.name, records=batch, columns=ddl.AUDIT_COLUMNS
                ),
            )
        print(
            f"  loaded {per_owner:,} rows of {key} in {time.perf_counter() - started:.0f}s",
            flush=True,
        )
    for name, connection in connections.items():
        await connection.execute("VACUUM ANALYZE")
        known = snapshot.shards[name]
        login = pools.coordinator_login(known.dsn, settings.pools)
        await day_tables.sync(metadata, known, connection, login)
        await connection.close()
    await single_connection.execute("VACUUM ANALYZE")
    await single_connection.close()
    await metadata.close()
    return {key: ident for key, (ident, _) in owners.items()}


async def timed_get(
    http: httpx.AsyncClient, params: dict[str, Any], path: str = "/v1/audit/search"
) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    response = await http.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{response.status_code}: {response.text[:300]}")
    return elapsed, response.json()


def windows(day: datetime, count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    starts = [day + timedelta(seconds=rng.randrange(0, 23 * 3600)) for _ in range(count)]
    return [(s.isoformat(), (s + timedelta(hours=1)).isoformat()) for s in starts]


async def measure(
    url: str,
    single: PostgresInstance,
    owners: dict[str, int],
    day: datetime,
    count: int,
    deep_windows: int,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    spans = windows(day, count, seed=11)
    rng = random.Random(5)
    keys = sorted(owners)
    pick = [rng.choice(keys) for _ in spans]
    shapes = {"range": [], "1_pattern": ["abc"], "2_patterns": ["abc", "bcd"]}
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=auth_for(url)) as http:
        for _ in range(5):  # warm-up
            await timed_get(http, {"owner": keys[0], "from": spans[0][0], "to": spans[0][1]})
        for shape, patterns in shapes.items():
            for limit in (100, 1000):
                samples = [
                    (
                        await timed_get(
                            http,
                            {"owner": owner, "from": a, "to": b, "q": patterns, "limit": limit},
                        )
                    )[0]
                    for owner, (a, b) in zip(pick, spans, strict=True)
                ]
                results[f"first_page_{shape}_limit{limit}"] = percentiles(samples)
                print(
                    f"  first page {shape:10} limit {limit:4}: "
                    f"{results[f'first_page_{shape}_limit{limit}']}",
                    flush=True,
                )
        for backend in ("fanout", "fdw"):
            samples = [
                (
                    await timed_get(
                        http,
                        {
                            "owner": owner,
                            "from": a,
                            "to": b,
                            "q": shapes["2_patterns"],
                            "limit": 100,
                            "backend": backend,
                        },
                    )
                )[0]
                for owner, (a, b) in zip(pick, spans, strict=True)
            ]
            results[f"backend_{backend}"] = percentiles(samples)
            print(
                f"  {backend:6} 2 patterns limit 100: {results[f'backend_{backend}']}", flush=True
            )
        estimate, exact, errors = [], [], []
        for owner, (a, b) in zip(pick, spans, strict=True):
            base = {"owner": owner, "from": a, "to": b, "q": ["abc"], "limit": 1}
            t_none, _ = await timed_get(http, {**base, "count": "none"})
            t_est, est = await timed_get(http, {**base, "count": "estimate"})
            t_exact, ex = await timed_get(http, {**base, "count": "exact"})
            estimate.append(max(t_est - t_none, 0.01))
            exact.append(max(t_exact - t_none, 0.01))
            errors.append(
                abs(est["count"]["value"] - ex["count"]["value"]) / max(ex["count"]["value"], 1)
            )
        results["count_estimate_ms"] = percentiles(estimate)
        results["count_exact_ms"] = percentiles(exact)
        results["estimate_error"] = {
            "median": round(statistics.median(errors), 3),
            "max": round(max(errors), 3),
        }
        print(
            f"  count: estimate {results['count_estimate_ms']} exact "
            f"{results['count_exact_ms']} error {results['estimate_error']}",
            flush=True,
        )
        page1, page1000 = [], []
        for owner, (a, b) in list(zip(pick, spans, strict=True))[:deep_windows]:
            params = {"owner": owner, "from": a, "to": b, "limit": 100}
            first_ms, body = await timed_get(http, params)
            page1.append(first_ms)
            for _ in range(998):
                body = (await timed_get(http, {**params, "cursor": body["next_cursor"]}))[1]
            deep = [
                (await timed_get(http, {**params, "cursor": body["next_cursor"]}))[0]
                for _ in range(3)
            ]
            page1000.append(statistics.median(deep))
        results["page_1"] = percentiles(page1)
        results["page_1000"] = percentiles(page1000)
        print(f"  page 1 {results['page_1']} page 1000 {results['page_1000']}", flush=True)
    connection = await asyncpg.connect(single.spec.dsn())
    samples = []
    for owner, (a, b) in zip(pick, spans, strict=True):
        query = AuditQuery(
            Keys.of([owner]),
            Window(datetime.fromisoformat(a), datetime.fromisoformat(b)),
            ("abc", "bcd"),
            "substring",
            "asc",
        )
        text, arguments = sql.page_sql(
            query, [day_table("audit", owners[owner], day)], "single", None, False, 101
        )
        started = time.perf_counter()
        await connection.fetch(text, *arguments)
        samples.append((time.perf_counter() - started) * 1000)
    await connection.close()
    results["single_instance_sql"] = percentiles(samples)
    print(f"  one instance, SQL only: {results['single_instance_sql']}", flush=True)
    return results


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        axes = figure.add_subplot(1, 1, 1)
        names = [k for k, v in payload["results"].items() if isinstance(v, dict) and "p95" in v]
        for offset, q in enumerate(("p50", "p95", "p99")):
            axes.bar(
                [i + offset * 0.27 for i in range(len(names))],
                [payload["results"][n][q] for n in names],
                width=0.27,
                label=q,
            )
        axes.set_xticks([i + 0.27 for i in range(len(names))])
        axes.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        axes.set_yscale("log")
        axes.set_ylabel("ms")
        axes.set_title(f"search latency, {payload['rows']:,} rows, 12 shards")
        axes.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--windows", type=int, default=60)
    parser.add_argument("--deep-windows", type=int, default=8)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-search"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    settings = bench_settings(args.data_dir)
    day = (datetime.now(UTC) - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    single = PostgresInstance(
        InstanceSpec("single", settings.cluster.base_port + 20, "shard"),
        args.data_dir.absolute() / "postgres",
        server_user(settings.cluster.server_user),
        # The cluster's passwords, so that its password file serves this instance too.
        secrets=SecretStore(args.data_dir.absolute() / "secrets"),
    )
    try:
        with bench_cluster(settings) as (_cluster, router):
            assert router is not None
            single.start()
            print("loading", flush=True)
            owners = asyncio.run(load(settings, router.url, single, args.rows, day))
            print("measuring", flush=True)
            results = asyncio.run(
                measure(router.url, single, owners, day, args.windows, args.deep_windows)
            )
    finally:
        single.stop()
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    verdicts = {
        "first_page_2_patterns_p95_ms": results["first_page_2_patterns_limit100"]["p95"],
        "page1000_vs_page1": results["page_1000"]["p50"] / results["page_1"]["p50"],
        "fanout_vs_fdw": results["backend_fanout"]["p50"] / results["backend_fdw"]["p50"],
        "estimate_speedup": results["count_exact_ms"]["p50"] / results["count_estimate_ms"]["p50"],
    }
    met = {
        "first_page_2_patterns_p95_ms": verdicts["first_page_2_patterns_p95_ms"] <= 40,
        "page1000_vs_page1": verdicts["page1000_vs_page1"] <= 1.5,
        "fanout_vs_fdw": verdicts["fanout_vs_fdw"] <= 1.0,
        "estimate_speedup": verdicts["estimate_speedup"] >= 100,
    }
    for name, value in verdicts.items():
        print(
            f"  {name:30} {value:10.3f} target {TARGETS[name]}: {'met' if met[name] else 'MISSED'}"
        )
    payload = {
        "rows": args.rows,
        "owners": OWNERS,
        "windows": args.windows,
        "results": results,
        "targets": {
            n: {"value": round(v, 3), "target": TARGETS[n], "met": met[n]}
            for n, v in verdicts.items()
        },
    }
    json_path, png_path = write_results("search", payload, plot(payload))
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
