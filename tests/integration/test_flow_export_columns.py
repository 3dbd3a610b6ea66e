"""What flow exporters add to a flow row (router/db/ddl.py FLOW_EXPORT_COLUMNS), merged by the
database as ddl.flow_merge_sql merges: TCP flags OR-ed, the sampling rate kept and a merge of
records of different sampling marked, REST records (no flags, no rate) changing neither; and
kept by retention's archives, archives of days stored before the columns restoring with them
NULL and false."""

from __future__ import annotations

import ipaddress
import itertools
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from router.db import ddl
from router.db.names import DayTable, day_table
from router.retention import archive
from services.cluster import LocalCluster
from tests.support import scratch_shard

DAY = datetime(2026, 3, 15, tzinfo=UTC)
_switch_ids = itertools.count(920_000_000 + os.getpid() % 1000 * 1000)


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> Any:
    async with scratch_shard(cluster) as scratch:
        yield scratch


def _flow(
    src: str, flags: int | None, rate: int | None, *, mixed: bool = False, seconds: int = 0
) -> tuple[Any, ...]:
    first = DAY + timedelta(seconds=seconds)
    address = ipaddress.ip_address(src)
    return (
        address,
        ipaddress.ip_address("192.0.2.1"),
        40000,
        443,
        4,
        6,
        1500,
        3,
        1,
        first,
        first + timedelta(seconds=5),
        flags,
        rate,
        mixed,
    )


async def _write(shard: Any, table: DayTable, rows: list[tuple[Any, ...]]) -> None:
    connection, _ = shard
    async with connection.transaction():
        await connection.execute(ddl.STAGE_DDL)
        await connection.copy_records_to_table(
            ddl.FLOW_STAGE, records=rows, columns=ddl.FLOW_WRITE_COLUMNS
        )
        await connection.execute(ddl.flow_merge_sql(table), table.name)


async def _table(shard: Any) -> DayTable:
    connection, made = shard
    table = day_table("flow", next(_switch_ids), DAY.date())
    await ddl.ensure_table(connection, table, "btree")
    made.append(table)
    return table


async def _row(shard: Any, table: DayTable, src: str) -> Any:
    return await shard[0].fetchrow(
        f"SELECT tcp_flags, sampling_rate, sampled, sampling_mixed, bytes, packets, flow_count "
        f"FROM {table.quoted} WHERE src_ip = $1",
        ipaddress.ip_address(src),
    )


async def test_flags_are_ored_and_equal_sampling_is_not_mixed(shard) -> None:
    table = await _table(shard)
    await _write(shard, table, [_flow("10.0.0.1", 0x02, 10)])
    await _write(shard, table, [_flow("10.0.0.1", 0x11, 10, seconds=30)])
    row = await _row(shard, table, "10.0.0.1")
    assert row["tcp_flags"] == 0x13
    assert (row["sampling_rate"], row["sampled"], row["sampling_mixed"]) == (10, True, False)
    assert (row["bytes"], row["packets"], row["flow_count"]) == (3000, 6, 2)


async def test_records_of_different_sampling_merge_marked(shard) -> None:
    table = await _table(shard)
    await _write(shard, table, [_flow("10.0.0.2", 0x10, 1)])
    row = await _row(shard, table, "10.0.0.2")
    assert (row["sampling_rate"], row["sampled"], row["sampling_mixed"]) == (1, False, False)
    await _write(shard, table, [_flow("10.0.0.2", None, 100)])
    row = await _row(shard, table, "10.0.0.2")
    assert (row["sampling_rate"], row["sampled"], row["sampling_mixed"]) == (100, True, True)
    assert row["tcp_flags"] == 0x10


async def test_rest_records_leave_the_exporters_columns_alone(shard) -> None:
    table = await _table(shard)
    await _write(shard, table, [_flow("10.0.0.3", None, None)])
    row = await _row(shard, table, "10.0.0.3")
    assert (row["tcp_flags"], row["sampling_rate"], row["sampled"]) == (None, None, False)
    await _write(shard, table, [_flow("10.0.0.3", 0x04, 1)])
    row = await _row(shard, table, "10.0.0.3")
    # Unsampled and "not said" are the same sampling: nothing to mark.
    assert (row["tcp_flags"], row["sampling_rate"], row["sampling_mixed"]) == (0x04, 1, False)


async def test_a_mixed_batch_stays_marked(shard) -> None:
    table = await _table(shard)
    await _write(shard, table, [_flow("10.0.0.4", None, 10, mixed=True)])
    await _write(shard, table, [_flow("10.0.0.4", None, 10, seconds=9)])
    row = await _row(shard, table, "10.0.0.4")
    assert row["sampling_mixed"] is True


async def _archived_and_restored(shard: Any, table: DayTable, tmp_path: Path) -> archive.Manifest:
    """Archive the table, drop it, load the archive into the table as ddl makes it now."""
    connection, _ = shard
    manifest = await archive.write(connection, table, "s", None, tmp_path, 1)
    path = archive.verify(tmp_path, manifest, table)
    await connection.execute(f"DROP TABLE {table.quoted}")
    await ddl.ensure_table(connection, table, "btree")
    async with connection.transaction():
        assert await archive.load(connection, table, manifest, path) == manifest.rows
    return manifest


async def test_archives_keep_the_exporters_columns(shard, tmp_path: Path) -> None:
    table = await _table(shard)
    await _write(shard, table, [_flow("10.0.1.1", 0x12, 100, mixed=True)])
    await _write(shard, table, [_flow("10.0.1.2", None, None)])
    before = [await _row(shard, table, src) for src in ("10.0.1.1", "10.0.1.2")]
    manifest = await _archived_and_restored(shard, table, tmp_path)
    assert set(ddl.FLOW_EXPORT_READ_COLUMNS) <= set(manifest.columns)
    assert [await _row(shard, table, src) for src in ("10.0.1.1", "10.0.1.2")] == before


async def test_archives_made_before_the_columns_restore(shard, tmp_path: Path) -> None:
    """A day archived by a router that had no exporters' columns: its manifest lists none;
    the restored rows read as a REST record's."""
    connection, made = shard
    table = day_table("flow", next(_switch_ids), DAY.date())
    statement = ddl.table_ddl(table, "btree")[0].replace(f"{ddl.FLOW_EXPORT_DDL},", "")
    assert "tcp_flags" not in statement
    await connection.execute(statement)
    made.append(table)
    await connection.execute(
        f"INSERT INTO {table.quoted} (src_ip, dst_ip, src_port, dst_port, ip_version, proto, "
        "bytes, packets, first_seen, last_seen) VALUES ('10.0.2.1', '192.0.2.1', 40000, 443, "
        "4, 6, 1500, 3, $1, $1)",
        DAY,
    )
    manifest = await _archived_and_restored(shard, table, tmp_path)
    assert not set(ddl.FLOW_EXPORT_READ_COLUMNS) & set(manifest.columns)
    row = await _row(shard, table, "10.0.2.1")
    assert tuple(row.values()) == (None, None, False, False, 1500, 3, 1)
