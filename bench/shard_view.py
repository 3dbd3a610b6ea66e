"""What the shards hold, read past the router: an owner's day tables and rows on every shard
of the catalog, through psql. Tests and benchmarks use it to check the router's answers."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx


def owner_id(api: httpx.Client, kind: str, key: str) -> int | None:
    response = api.get("/v1/admin/owners", params={"kind": kind, "key": key})
    return response.json()["id"] if response.status_code == 200 else None


def catalog_shards(api: httpx.Client) -> dict[str, str]:
    """Every shard the catalog holds (the topology's and any added by tests): name -> DSN."""
    return {s["name"]: s["dsn"] for s in api.get("/v1/admin/shards").json()}


def shard_sql(dsn: str, sql: str, connect_wait_s: float = 30.0) -> str:
    """``sql``'s output. psql's exit status 2 is a failed connection: a shard that is still
    getting its primary back after a fault is waited for, up to ``connect_wait_s``."""
    deadline = time.monotonic() + connect_wait_s
    while True:
        result = subprocess.run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode != 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    result.check_returncode()
    return result.stdout


def day_tables(api: httpx.Client, kind: str, owner: int) -> dict[str, list[str]]:
    """The day tables of one owner on every shard of the catalog: {shard: [table, ...]}."""
    prefix = {"audit": "audit_o", "flow": "flow_s"}[kind] + f"{owner}\\_%"
    found = {}
    for name, dsn in catalog_shards(api).items():
        names = shard_sql(
            dsn,
            f"SELECT relname FROM pg_class WHERE relname LIKE '{prefix}' AND relkind = 'r' "
            "ORDER BY 1",
        ).split()
        if names:
            found[name] = names
    return found


def query_owner(
    api: httpx.Client, kind: str, owner: int, columns: str, where: str = "true"
) -> list[list[str]]:
    """Rows of every day table of one owner across the shards, as psql text fields."""
    dsns = catalog_shards(api)
    rows = []
    for shard, tables in day_tables(api, kind, owner).items():
        for table in tables:
            output = shard_sql(dsns[shard], f"SELECT {columns} FROM {table} WHERE {where}")
            rows += [line.split("|") for line in output.splitlines() if line]
    return rows


def ordered_rows(
    api: httpx.Client, kind: str, owner_ids: list[int], columns: str
) -> list[list[Any]]:
    """Every row of some owners' day tables on every shard of the catalog, as [ts (UTC text,
    microseconds), shard, owner id, id, *columns], sorted by (ts, shard, owner id, id): the
    order of every search."""
    if not owner_ids:
        return []
    names = {"audit": "audit_o", "flow": "flow_s"}[kind]
    names += f"({'|'.join(str(i) for i in owner_ids)})_[0-9]{{8}}$"
    time_column = "ts" if kind == "audit" else "first_seen"
    rows: list[list[Any]] = []
    for shard, dsn in catalog_shards(api).items():
        tables = shard_sql(
            dsn, f"SELECT relname FROM pg_class WHERE relname ~ '^{names}' AND relkind = 'r'"
        ).split()
        for table in tables:
            ident = int(table.split("_")[1][1:])
            out = shard_sql(
                dsn,
                f"SELECT to_char({time_column} AT TIME ZONE 'UTC', "
                f"'YYYY-MM-DD HH24:MI:SS.US'), id, {columns} FROM {table}",
            )
            for line in out.splitlines():
                ts, row_id, *rest = line.split("|")
                rows.append([ts, shard, ident, int(row_id), *rest])
    return sorted(rows, key=lambda r: (r[0], r[1], r[2], r[3]))
