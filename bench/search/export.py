"""bench/search/export: the export of one owner's audit rows (512-character text, one day,
spread over a group's shards) through the router, as NDJSON and as CSV, against the floor:
the same rows read straight from the shards by psql (COPY of the same query to stdout, all
shards at once: the sum of their rates), both read by clients in C (curl, psql) into
/dev/null (one more export of each format is read by httpx to count its lines), and against
paging through the search with limit=10000. With --baseline-commit, a second router runs another
checkout's code (say a worktree of the commit before a change) on the same cluster, and its
exports are measured in the same rounds. Same run, alternated, medians. Target: export >=
0.5x the floor.
Writes bench/results/search_export.{json,png}.

    python -m bench.search.export [--rows 1000000] [--repeats 3] [--baseline-commit SHA]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import asyncpg
import httpx

from bench import baseline as checked_out
from bench.harness import (
    TOKENS,
    auth_for,
    bench_cluster,
    bench_settings,
    register_loaded,
    router_env,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from router import clock
from router.catalog import store
from router.db import catalog_login, ddl
from router.db.names import day_table
from services.router_process import RouterProcess

TARGET = 0.5
CONTENT = 512
COPY_BATCH = 50_000
OWNER = "bench-export"


def rows_of(total: int, day: datetime) -> Any:
    rng = random.Random(3)
    words = ["deny", "allow", "login", "logout", "sudo", "ssh", "GET", "POST", "/api/v1"]
    batch = []
    for n in range(total):
        text = " ".join(rng.choice(words) for _ in range(90))[:CONTENT].ljust(CONTENT, ".")
        ts = day + timedelta(microseconds=rng.randrange(86_400_000_000))
        batch.append((ts, text, f'{{"n": {n}}}'))
        if len(batch) == COPY_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def load(settings: Any, url: str, total: int, day: datetime) -> tuple[int, dict[str, str]]:
    """The owner's day table on every shard of its group, by binary COPY; (owner id, the
    shards' DSNs)."""
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        warm = [{"owner": OWNER, "content": "warm", "ts": day.isoformat()}]
        (await http.post("/v1/audit", json=warm)).raise_for_status()
        owner = (await http.get("/v1/admin/owners", params={"kind": "audit", "key": OWNER})).json()
    metadata = await catalog_login.open_pool(settings)
    snapshot = await store.load_snapshot(metadata)
    shards = snapshot.active_shards(owner["group"])
    connections = {name: await asyncpg.connect(snapshot.shards[name].dsn) for name in shards}
    table = day_table("audit", owner["id"], day)
    for connection in connections.values():
        await ddl.ensure_table(connection, table, "btree")
    for batch in rows_of(total, day):
        await asyncio.gather(
            *(
                connection.copy_records_to_table(
                    table.name, records=batch[i :: len(shards)], columns=["ts", "content", "attrs"]
                )
                for i, connection in enumerate(connections.values())
            )
        )
    await register_loaded(settings, metadata, snapshot, connections)
    await metadata.close()
    return owner["id"], {name: snapshot.shards[name].dsn for name in shards}


def floor(dsns: dict[str, str], table: str, start: datetime, end: datetime) -> float:
    """Seconds for psql to COPY the matching rows of every shard to stdout, all at once."""
    statement = (
        f"COPY (SELECT ts, id, content, attrs FROM {table} WHERE ts >= '{start.isoformat()}' "
        f"AND ts < '{end.isoformat()}' ORDER BY ts, id) TO STDOUT"
    )
    began = time.perf_counter()
    runs = [
        subprocess.Popen(
            ["psql", "-X", "-q", "-d", dsn, "-c", statement], stdout=subprocess.DEVNULL
        )
        for dsn in dsns.values()
    ]
    for run in runs:
        if run.wait() != 0:
            raise RuntimeError("psql failed")
    return time.perf_counter() - began


def export_by_curl(url: str, params: dict[str, Any]) -> tuple[float, int]:
    """Seconds and bytes of one export read by curl into /dev/null: a client in C, as psql is
    for the floor (a Python client's HTTP parsing would take cores from the router)."""
    headers = "".join(f"{k}: {v}\n" for k, v in auth_for(url).items())  # on stdin, not in ps
    command = ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}", "-H", "@-"]
    command.append(f"{url}/v1/audit/export?{urlencode(params)}")
    began = time.perf_counter()
    size = subprocess.run(command, input=headers, check=True, capture_output=True, text=True)
    return time.perf_counter() - began, int(size.stdout)


def export(url: str, params: dict[str, Any]) -> tuple[int, int]:
    """Lines and bytes of one export, read by httpx."""
    lines = size = 0
    with (
        httpx.Client(base_url=url, timeout=600, headers=auth_for(url)) as http,
        http.stream("GET", "/v1/audit/export", params=params) as response,
    ):
        response.raise_for_status()
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\n")
            size += len(chunk)
    return lines, size


def paging(url: str, params: dict[str, Any]) -> tuple[float, int]:
    began = time.perf_counter()
    rows, cursor = 0, None
    with httpx.Client(base_url=url, timeout=600, headers=auth_for(url)) as http:
        while True:
            page = {**params, "limit": 10_000, **({"cursor": cursor} if cursor else {})}
            body = http.get("/v1/audit/search", params=page).raise_for_status().json()
            rows += len(body["items"])
            cursor = body["next_cursor"]
            if cursor is None:
                return time.perf_counter() - began, rows


def profile(router: Any, run: Any, out: Path) -> None:
    """py-spy (a dev dependency) samples the router while ``run`` runs."""
    spy = subprocess.Popen(
        ["py-spy", "record", "--pid", str(router.pid()), "--format", "raw", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    run()
    spy.send_signal(2)
    spy.wait(timeout=60)


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        axes = figure.add_subplot(1, 1, 1)
        names = list(payload["rows_per_s"])
        axes.bar(names, [payload["rows_per_s"][n] for n in names])
        axes.set_ylabel("rows/s (median)")
        axes.set_title(f"export of {payload['rows']:,} audit rows ({CONTENT} chars), 12 shards")

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search.export")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-export"))
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy records the router during one more NDJSON export into this file (top "
        "functions as text)",
    )
    parser.add_argument(
        "--baseline-commit",
        help="a commit to compare with (checked out into a temporary git worktree, recorded by "
        "commit): its router runs beside this one's and its exports are measured in the same "
        "rounds (baseline_ndjson, baseline_csv)",
    )
    args = parser.parse_args()
    settings = bench_settings(args.data_dir)
    day = (clock.now() - timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    end = day + timedelta(days=1)
    params = {"owner": OWNER, "from": day.isoformat(), "to": end.isoformat()}
    samples: dict[str, list[float]] = {"floor_psql": [], "ndjson": [], "csv": [], "paging": []}
    if args.baseline_commit:
        samples = {**samples, "baseline_ndjson": [], "baseline_csv": []}
    baseline: RouterProcess | None = None
    other: checked_out.Baseline | None = None
    try:
        with ExitStack() as stack:
            router = stack.enter_context(bench_cluster(settings))[1]
            assert router is not None
            if args.baseline_commit:
                other = stack.enter_context(checked_out.checkout(args.baseline_commit))
                baseline = RouterProcess(
                    settings.cluster.data_dir / "baseline",
                    settings.server.host,
                    settings.server.port + 1,
                    env={**router_env(settings), "SHARDLOG_SERVER__PORT": str(router.port + 1)},
                    code=other.code,
                )
                baseline.start()
                TOKENS[baseline.url] = auth_for(router.url)
            print("loading", flush=True)
            owner, dsns = asyncio.run(load(settings, router.url, args.rows, day))
            table = day_table("audit", owner, day).quoted
            total = args.rows + 1  # and the warm-up row
            shards = len(dsns)
            print(f"measuring over {shards} shards", flush=True)
            csv_params = {**params, "format": "csv"}
            sizes: dict[str, set[int]] = {"ndjson": set(), "csv": set()}

            def timed(url: str, name: str, query: dict[str, Any]) -> float:
                seconds, size = export_by_curl(url, query)
                sizes[name].add(size)
                return seconds

            for repeat in range(args.repeats + 1):  # the first round warms up
                seconds = {
                    "floor_psql": floor(dsns, table, day, end),
                    "ndjson": timed(router.url, "ndjson", params),
                    "csv": timed(router.url, "csv", csv_params),
                    "paging": paging(router.url, params)[0],
                }
                if baseline is not None:
                    seconds["baseline_ndjson"] = timed(baseline.url, "ndjson", params)
                    seconds["baseline_csv"] = timed(baseline.url, "csv", csv_params)
                print(
                    f"  round {repeat}: " + ", ".join(f"{k} {v:.2f}s" for k, v in seconds.items())
                )
                if repeat:
                    for name, value in seconds.items():
                        samples[name].append(value)
            if args.profile:
                profile(router, lambda: export(router.url, params), args.profile)
            checks = (("ndjson", params, total), ("csv", csv_params, total + 1))  # + CSV header
            for name, query, expected in checks:
                lines, size = export(router.url, query)
                if lines != expected or sizes[name] != {size}:
                    raise RuntimeError(
                        f"the {name} export had {lines} lines, not {expected}, or its timed "
                        f"runs' sizes {sorted(sizes[name])} differ from {size}"
                    )
    finally:
        if baseline is not None:
            baseline.stop()
        shutil.rmtree(args.data_dir, ignore_errors=True)
    rate = {n: round(total / statistics.median(v)) for n, v in samples.items()}
    ratios = {n: round(rate[n] / rate["floor_psql"], 3) for n in samples if n != "floor_psql"}
    worst = min(ratios["ndjson"], ratios["csv"])
    target = verdict(worst, TARGET, at_most=False)
    print(f"  rows/s {rate}; vs the floor {ratios}")
    print(f"  export vs floor {worst:.3f} target {TARGET}: {'met' if target['met'] else 'MISSED'}")
    payload = {
        "rows": total,
        "shards": shards,
        "seconds": samples,
        "rows_per_s": rate,
        "vs_floor": ratios,
        "target": target,
        # The other checkout's exports (baseline_*) are figures of other code: context.
        "baseline": None if other is None else other.record(),
    }
    json_path, png_path = write_results(
        "search_export", payload, plot(payload), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
