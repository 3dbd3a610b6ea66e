"""bench/report: flows of two switches (one per group, so all 12 shards hold rows) over DAYS
days, loaded by binary COPY into their day tables (each split over its group's shards), twice:
once with SOURCES distinct source addresses (1x) and once with ten times as many (10x groups).
The same run measures three reports (top-20 src_ip by bytes over the whole window; rows per
hour over the last 7 days; distinct dst_ip per dst_port) three ways:

- shardlog: GET /v1/flows/report (fan-out, merge in the router);
- fdw: the same report with backend=fdw (one statement through the coordinator's parent tables);
- floor: the shards' own partial-aggregate statements run directly, in parallel, no merge.

Targets: fdw / shardlog >= 5; shardlog / floor <= 1.3; the router's peak RSS grows <= 50 MB
from the 1x to the 10x reports. Writes bench/results/report.{json,png}.

    python -m bench.report [--rows 9000000] [--days 30] [--sources 20000] [--repeats 3]
    python -m bench.report --quick     # 200,000 rows over 7 days: a check that it works
    python -m bench.report --keep      # leave the cluster's data; --reuse measures it again
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.harness import (
    auth_for,
    bench_cluster,
    bench_settings,
    context,
    register_loaded,
    timed,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from router import clock
from router.catalog import store
from router.catalog import tables as day_tables
from router.db import catalog_login, ddl
from router.db.names import day_table
from router.reports import sql
from router.reports.spec import build_spec
from router.search.query import FlowQuery, Keys, Window
from router.settings import Settings
from services.router_process import RouterProcess

TARGETS = {"shardlog_vs_floor": 1.3, "rss_growth_mb": 50.0}
# How much slower the same report is through the postgres_fdw coordinator: context, not a
# target. That path is slow by design (no LIMIT or aggregate pushed through an inheritance
# parent of foreign tables, docs/benchmarks.md), so "at least 5x slower" could not miss.
FDW_COMPARED_WITH = (
    "the same reports through the postgres_fdw coordinator (backend=fdw), a path slow by "
    "design: fdw seconds / shardlog seconds, median over the 1x reports"
)
PORTS = [22, 25, 53, 80, 123, 443, 993, 3306, 5432, 8080, 8443, 9000]
TARGETS_PER_SOURCE = 1000
COPY_BATCH = 50_000


def queries(first: datetime, last: datetime) -> dict[str, dict[str, Any]]:
    """The three reports, as query parameters (the window is added per data set)."""
    week = max(first, last - timedelta(days=7))
    return {
        "top20_src_by_bytes": {
            "group_by": "src_ip",
            "metrics": "bytes",
            "order_by": "bytes",
            "limit": 20,
        },
        "rows_per_hour_7d": {
            "group_by": "bucket",
            "bucket": "1h",
            "metrics": "rows",
            "from": week.isoformat(),
        },
        "distinct_dst_per_port": {"group_by": "dst_port", "metrics": "distinct(dst_ip)"},
    }


def address(n: int) -> str:
    value = 0x0A000000 + n * 37 + 1
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def rows_of(day: date, count: int, sources: int, seed: int) -> Any:
    """Flow rows of one day table, in batches; (src_ip, dst_ip, src_port) is unique."""
    rng = random.Random(seed)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    batch = []
    for i in range(count):
        first = start + timedelta(microseconds=rng.randrange(86_400_000_000))
        batch.append(
            (
                address(rng.randrange(sources)),
                address(10_000_000 + (i // 60_000) % TARGETS_PER_SOURCE * 7 + rng.randrange(3)),
                1024 + i % 60_000,
                rng.choice(PORTS),
                4,
                rng.choice((6, 17)),
                rng.randrange(40, 10**7),
                rng.randrange(1, 10**4),
                1,
                first,
                first + timedelta(seconds=rng.randrange(120)),
            )
        )
        if len(batch) == COPY_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def switches_per_group(http: httpx.AsyncClient, label: str, day: date) -> dict[str, str]:
    """A switch in each group (names tried until both groups have one), mapped by a write."""
    found: dict[str, str] = {}
    n = 0
    while len(found) < 2:
        name = f"bench-{label}-{n}"
        n += 1
        await http.post(
            "/v1/flows",
            json=[
                {
                    "switch": name,
                    "src_ip": "192.0.2.1",
                    "dst_ip": "192.0.2.2",
                    "src_port": 1,
                    "dst_port": 1,
                    "bytes": 1,
                    "ts": f"{day.isoformat()}T00:00:00Z",
                }
            ],
        )
        owner = (await http.get("/v1/admin/owners", params={"kind": "flow", "key": name})).json()
        found.setdefault(owner["group"], name)
    return found


async def load(
    settings: Settings, url: str, label: str, days: list[date], rows: int, sources: int
) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        by_group = await switches_per_group(http, label, days[0])
        owners = {}
        for switch in by_group.values():
            body = (
                await http.get("/v1/admin/owners", params={"kind": "flow", "key": switch})
            ).json()
            owners[switch] = (body["id"], body["group"])
    metadata = await catalog_login.open_pool(settings)
    snapshot = await store.load_snapshot(metadata)
    connections = {n: await asyncpg.connect(s.dsn) for n, s in snapshot.shards.items()}
    per_table = rows // (len(owners) * len(days))
    started = time.perf_counter()
    for s, (_switch, (ident, group)) in enumerate(sorted(owners.items())):
        shards = snapshot.active_shards(group)
        for d, day in enumerate(days):
            table = day_table("flow", ident, day)
            for shard in shards:
                await ddl.ensure_table(connections[shard], table, "brin")
            for batch in rows_of(day, per_table, sources, seed=s * 1000 + d):
                await asyncio.gather(
                    *(
                        connections[shard].copy_records_to_table(
                            table.name,
                            records=batch[i :: len(shards)],
                            columns=ddl.FLOW_STAGE_COLUMNS,
                        )
                        for i, shard in enumerate(shards)
                    )
                )
    print(
        f"  loaded {per_table * len(owners) * len(days):,} rows ({label}) in "
        f"{time.perf_counter() - started:.0f}s",
        flush=True,
    )
    await register_loaded(settings, metadata, snapshot, connections)
    await metadata.close()
    return sorted(owners)


class Floor:
    """The shards' partial-aggregate statements, run directly and in parallel over connections
    opened beforehand (untimed), rows fetched, no merge: what the router's fan-out costs at
    least."""

    def __init__(self, settings: Settings, switches: list[str], params: dict[str, Any]) -> None:
        self.settings = settings
        self.switches = switches
        self.params = params
        self.statements: dict[str, tuple[str, list[Any]]] = {}
        self.connections: dict[str, asyncpg.Connection] = {}

    async def open(self) -> None:
        params = self.params
        window = Window(
            datetime.fromisoformat(params["from"]), datetime.fromisoformat(params["to"])
        )
        filters = FlowQuery(
            switches=Keys.of(self.switches),
            window=window,
            src_ip=None,
            dst_ip=None,
            src_port=None,
            dst_port=None,
            ip_version=None,
            proto=None,
            either_direction=False,
            order="asc",
        )
        spec = build_spec(
            "flow",
            filters,
            group_by=[params["group_by"]],
            metrics=[params["metrics"]],
            bucket=params.get("bucket"),
            order_by=params.get("order_by"),
            order="desc",
            limit=params.get("limit"),
            format="json",
            max_buckets=10**6,
        )
        settings = self.settings
        metadata = await catalog_login.open_pool(settings)
        try:
            snapshot = await store.load_snapshot(metadata)
            tables: dict[str, list[tuple[str, str]]] = defaultdict(list)
            days = window.days()
            for switch in spec.keys.listed:
                ident = await metadata.fetchval(
                    "SELECT id FROM owners WHERE kind = 'flow' AND key = $1", switch
                )
                for shard, table in await day_tables.located(
                    metadata, "flow", [ident], days[0], days[-1]
                ):
                    tables[shard].append((switch, table.quoted))
        finally:
            await metadata.close()
        for shard, mine in tables.items():
            self.statements[shard] = sql.partial_sql(spec, mine)
            self.connections[shard] = await asyncpg.connect(snapshot.shards[shard].dsn)

    async def run(self) -> None:
        await asyncio.gather(
            *(
                self.connections[shard].fetch(text, *values)
                for shard, (text, values) in self.statements.items()
            )
        )

    async def close(self) -> None:
        for connection in self.connections.values():
            await connection.close()


def peak_rss_mb(router: RouterProcess) -> float:
    pid = router.pid()
    assert pid is not None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def measure(
    settings: Settings,
    router: RouterProcess,
    sets: dict[str, list[str]],
    first: datetime,
    last: datetime,
    repeats: int,
) -> dict[str, Any]:
    url = router.url
    results: dict[str, Any] = {}
    window = {"from": first.isoformat(), "to": last.isoformat()}

    async def get(params: dict[str, Any]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=600, headers=auth_for(url)) as http:
            response = await http.get("/v1/flows/report", params=params)
            if response.status_code != 200 or response.json()["partial"]:
                raise RuntimeError(f"{response.status_code}: {response.text[:300]}")

    for label, switches in sets.items():
        for name, query in queries(first, last).items():
            params = {**window, **query, "switch": switches}
            entry: dict[str, Any] = {}
            entry["shardlog_s"] = statistics.median(timed(partial(get, params), repeats))
            floor = Floor(settings, switches, params)
            entry["floor_s"] = statistics.median(
                timed(floor.run, repeats, setup=floor.open, teardown=floor.close)
            )
            if label == "1x":
                fdw = {**params, "backend": "fdw"}
                entry["fdw_s"] = statistics.median(timed(partial(get, fdw), repeats))
            results[f"{label}:{name}"] = {k: round(v, 4) for k, v in entry.items()}
            print(f"  {label} {name:24} {results[f'{label}:{name}']}", flush=True)
        results[f"rss_after_{label}_mb"] = round(peak_rss_mb(router), 1)
        print(f"  router peak RSS after {label}: {results[f'rss_after_{label}_mb']} MB", flush=True)
    return results


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        axes = figure.add_subplot(1, 1, 1)
        names = [n for n in payload["results"] if ":" in n]
        for i, way in enumerate(("floor_s", "shardlog_s", "fdw_s")):
            axes.bar(
                [k + i * 0.27 for k in range(len(names))],
                [payload["results"][n].get(way, 0) for n in names],
                width=0.27,
                label=way.removesuffix("_s"),
            )
        axes.set_xticks([k + 0.27 for k in range(len(names))])
        axes.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        axes.set_ylabel("s (median)")
        axes.set_title(f"reports, {payload['rows']:,} rows x 2 data sets, {payload['days']} days")
        axes.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("--rows", type=int, default=9_000_000, help="rows of each data set")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sources", type=int, default=20_000, help="distinct sources of 1x")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200,000 rows over 7 days")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-report"))
    parser.add_argument("--keep", action="store_true", help="leave the data directory")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the data a --keep run left (same sizes)"
    )
    args = parser.parse_args()
    if args.quick:
        args.rows, args.days, args.sources, args.repeats = 200_000, 7, 2_000, 2
    settings = bench_settings(args.data_dir)
    today = clock.today()
    days = [today - timedelta(days=n) for n in range(args.days, 0, -1)]
    loaded_file = args.data_dir / "bench-report-loaded.json"
    size = {"rows": args.rows, "days": args.days, "sources": args.sources}
    previous = json.loads(loaded_file.read_text()) if args.reuse and loaded_file.exists() else {}
    if previous and previous["size"] != size:
        print(f"--reuse: the data was loaded as {previous['size']}, not {size}", file=sys.stderr)
        return 2
    if previous:
        days = [date.fromisoformat(d) for d in previous["days"]]
    first = datetime(days[0].year, days[0].month, days[0].day, tzinfo=UTC)
    last = first + timedelta(days=args.days)
    try:
        # No retention job: the oldest day of the window may be as old as the default keep days.
        no_retention = {"SHARDLOG_RETENTION__ENABLED": "false"}
        with bench_cluster(settings, router_extra_env=no_retention) as (_cluster, router):
            assert router is not None
            if previous:
                sets = previous["sets"]
                print(f"reusing the data loaded {previous['days'][0]}..{previous['days'][-1]}")
            else:
                print("loading", flush=True)
                sets = {
                    "1x": asyncio.run(
                        load(settings, router.url, "a", days, args.rows, args.sources)
                    ),
                    "10x": asyncio.run(
                        load(settings, router.url, "b", days, args.rows, args.sources * 10)
                    ),
                }
                loaded_file.write_text(
                    json.dumps({"size": size, "days": [d.isoformat() for d in days], "sets": sets})
                )
            print("measuring", flush=True)
            results = measure(settings, router, sets, first, last, args.repeats)
    finally:
        if not (args.keep or args.reuse):
            shutil.rmtree(args.data_dir, ignore_errors=True)
    names = list(queries(first, last))
    fdw = statistics.median(
        results[f"1x:{n}"]["fdw_s"] / results[f"1x:{n}"]["shardlog_s"] for n in names
    )
    overhead = max(results[k]["shardlog_s"] / results[k]["floor_s"] for k in results if ":" in k)
    growth = results["rss_after_10x_mb"] - results["rss_after_1x_mb"]
    targets = {
        "shardlog_vs_floor": verdict(round(overhead, 3), TARGETS["shardlog_vs_floor"]),
        "rss_growth_mb": verdict(round(growth, 3), TARGETS["rss_growth_mb"]),
    }
    for name, judged in targets.items():
        state = "met" if judged["met"] else "MISSED"
        print(f"  {name:20} {judged['value']:10.3f} target {judged['target']}: {state}")
    print(f"  fdw_vs_shardlog      {fdw:10.3f} (context: {FDW_COMPARED_WITH})")
    payload = {
        "rows": args.rows,
        "days": args.days,
        "sources": args.sources,
        "quick": args.quick,
        "results": results,
        "targets": targets,
        "context": {"fdw_vs_shardlog": context(round(fdw, 3), FDW_COMPARED_WITH)},
    }
    json_path, png_path = write_results(
        "report", payload, plot(payload), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
