"""shardlog's side of "ingest rows per CPU-second" in bench/storage: the same rows posted as
NDJSON to the router's /v1/audit (one client, 10,000-row bodies) on one router and one shard,
counting the CPU of the router process and of every PostgreSQL process of the cluster (each
postmaster and its children: backends, writers, WAL), as VictoriaLogs' is its one process's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import auth_for, cpu_seconds
from bench.storage.corpus import Row

BODY_ROWS = 10_000
OWNER_PREFIX = "storage-"


def postgres_pids(cluster: Any) -> set[int]:
    """Every postmaster of the cluster and the processes it started."""
    postmasters = {pid for i in cluster.instances.values() if (pid := i.pid()) is not None}
    found = set(postmasters)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile
        if parent in postmasters:
            found.add(int(stat.parent.name))
    return found


def cpu_of(pids: set[int]) -> dict[int, float]:
    seen = {}
    for pid in pids:
        try:
            seen[pid] = cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return seen


def median_of(
    url: str, router_pid: int, cluster: Any, rows: list[Row], runs: int
) -> dict[str, Any]:
    """``runs`` posts of ``rows`` (each to owners of its own: new day tables, as VictoriaLogs
    gets a fresh instance each time); the figures of the run of median rows per CPU-second."""
    measured = [
        rows_per_cpu_s(url, router_pid, cluster, rows, f"{OWNER_PREFIX}{run}-")
        for run in range(runs)
    ]
    measured.sort(key=lambda m: m["shardlog_rest_rows_per_cpu_s"])
    return {
        **measured[len(measured) // 2],
        "shardlog_rest_rows_per_cpu_s_runs": [m["shardlog_rest_rows_per_cpu_s"] for m in measured],
    }


def rows_per_cpu_s(
    url: str, router_pid: int, cluster: Any, rows: list[Row], prefix: str
) -> dict[str, Any]:
    """Post ``rows``; rows per CPU-second of router + PostgreSQL, and each one's share."""
    records = [
        orjson.dumps({"owner": prefix + r.owner, "ts": r.ts.isoformat(), "content": r.content})
        for r in rows
    ]
    bodies = [
        b"\n".join(records[start : start + BODY_ROWS]) + b"\n"
        for start in range(0, len(records), BODY_ROWS)
    ]
    before = cpu_of(postgres_pids(cluster) | {router_pid})
    with httpx.Client(base_url=url, timeout=600, headers=auth_for(url)) as http:
        for body in bodies:
            answer = http.post(
                "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
            )
            if answer.status_code != 200:
                raise RuntimeError(f"/v1/audit: {answer.status_code} {answer.text[:300]}")
    after = cpu_of(postgres_pids(cluster) | {router_pid})
    spent = {pid: seconds - before.get(pid, 0.0) for pid, seconds in after.items()}
    router = spent.pop(router_pid, 0.0)
    postgres = sum(spent.values())
    return {
        "shardlog_rest_rows_per_cpu_s": round(len(rows) / (router + postgres)),
        "shardlog_rest_router_us_per_row": round(router / len(rows) * 1e6, 2),
        "shardlog_rest_postgres_us_per_row": round(postgres / len(rows) * 1e6, 2),
    }
