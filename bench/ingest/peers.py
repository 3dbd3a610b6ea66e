"""The peers REST ingest is compared with, run against the same shards:

- the limit: raw binary COPY of the same rows from this one Python process, straight into
  day tables of the router's own shape on every shard, all shards in parallel;
- for flows, raw binary COPY of int-encoded flows (addresses as pairs of bigints, no merge);
- the seed's method: pgbench -M prepared calling a per-row plpgsql function that inserts into
  the per-owner daily table with dynamic SQL, creating it on SQLSTATE 42P01; 3 clients a shard.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from router import clock
from router.db import ddl
from router.db.names import day_table
from services.cluster import LocalCluster

RAW_OWNER_BASE = 900_000_000
COPY_BATCH = 10_000


def audit_tuples(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(datetime.fromisoformat(r["ts"]), r["content"], None) for r in records]


def _halves(address: str) -> tuple[int, int]:
    value = int(ipaddress.ip_address(address))
    high, low = value >> 64, value & ((1 << 64) - 1)
    return high - (1 << 63), low - (1 << 63)  # into signed bigint range


def int_flow_tuples(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for r in records:
        src_hi, src_lo = _halves(r["src_ip"])
        dst_hi, dst_lo = _halves(r["dst_ip"])
        rows.append(
            (
                src_hi,
                src_lo,
                dst_hi,
                dst_lo,
                r["src_port"],
                r["dst_port"],
                4 if "." in r["src_ip"] else 6,
                r["proto"],
                r["bytes"],
                r["packets"],
                datetime.fromisoformat(r["ts"]),
            )
        )
    return rows


INT_FLOW_COLUMNS = (
    "src_hi",
    "src_lo",
    "dst_hi",
    "dst_lo",
    "src_port",
    "dst_port",
    "ip_version",
    "proto",
    "bytes",
    "packets",
    "ts",
)


class RawCopy:
    """One connection per shard; rows dealt to shards round-robin in COPY batches."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.dsns = [shard.spec.dsn() for shard in cluster.shards]
        self.connections: list[asyncpg.Connection] = []

    async def open(self) -> None:
        self.connections = [await asyncpg.connect(dsn) for dsn in self.dsns]
        today = clock.today()
        for index, connection in enumerate(self.connections):
            table = day_table("audit", RAW_OWNER_BASE + index, today)
            await ddl.ensure_table(connection, table, "btree")
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS bench_int_flows (src_hi bigint, src_lo bigint, "
                "dst_hi bigint, dst_lo bigint, src_port integer, dst_port integer, "
                "ip_version smallint, proto smallint, bytes bigint, packets bigint, "
                "ts timestamptz); CREATE INDEX IF NOT EXISTS bench_int_flows_ts "
                "ON bench_int_flows USING brin (ts)"
            )

    async def close(self) -> None:
        for connection in self.connections:
            await connection.close()

    async def copy(self, rows: list[tuple[Any, ...]], kind: str) -> None:
        today = clock.today()

        async def one_shard(index: int, connection: asyncpg.Connection) -> None:
            mine = rows[index :: len(self.connections)]
            columns: tuple[str, ...]
            if kind == "audit":
                table, columns = (
                    day_table("audit", RAW_OWNER_BASE + index, today).name,
                    ddl.AUDIT_COLUMNS,
                )
            else:
                table, columns = "bench_int_flows", INT_FLOW_COLUMNS
            for start in range(0, len(mine), COPY_BATCH):
                await connection.copy_records_to_table(
                    table, records=mine[start : start + COPY_BATCH], columns=columns
                )

        await asyncio.gather(*(one_shard(i, c) for i, c in enumerate(self.connections)))


SEED_FUNCTION = r"""
CREATE OR REPLACE FUNCTION seed_insert(owner integer, content text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    table_name text := format('seed_%s_%s', owner, to_char(now(), 'YYYYMMDD'));
BEGIN
    EXECUTE format('INSERT INTO %I (ts, content) VALUES ($1, $2)', table_name)
        USING now(), content;
EXCEPTION WHEN undefined_table THEN
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I (id bigserial, ts timestamptz NOT NULL, '
                   'content text NOT NULL)', table_name);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I USING brin (ts)',
                   table_name || '_ts', table_name);
    EXECUTE format('INSERT INTO %I (ts, content) VALUES ($1, $2)', table_name)
        USING now(), content;
END;
$$;
"""


def seed_method(
    cluster: LocalCluster, content: str, seconds: int, bin_dir: Path, clients_per_shard: int = 3
) -> int:
    """Rows inserted by the seed's method in ``seconds`` over every shard at once."""
    for shard in cluster.shards:
        shard.psql("shardlog", SEED_FUNCTION)
        # Concurrent first calls race on CREATE TABLE IF NOT EXISTS (the seed's own flaw);
        # create its tables once, untimed, so the run measures the steady state.
        shard.psql("shardlog", "SELECT seed_insert(o, 'warm') FROM generate_series(1, 8) o")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("\\set owner random(1, 8)\n")
        script.write(f"SELECT seed_insert(:owner, '{content}');\n")
    runs = [
        subprocess.Popen(
            [
                str(bin_dir / "pgbench"),
                "-n",
                "-M",
                "prepared",
                "-c",
                str(clients_per_shard),
                "-j",
                "1",
                "-T",
                str(seconds),
                "-f",
                script.name,
                "-h",
                shard.spec.host,
                "-p",
                str(shard.spec.port),
                "-U",
                "shardlog",
                "shardlog",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for shard in cluster.shards
    ]
    total = 0
    for run in runs:
        out, err = run.communicate(timeout=seconds + 60)
        match = re.search(r"number of transactions actually processed: (\d+)", out)
        if run.returncode != 0 or match is None:
            raise RuntimeError(f"pgbench failed: {err or out}")
        total += int(match.group(1))
    Path(script.name).unlink()
    return total
