"""Audit rows COPYed by the native stream (router/db/copy.py) land in a real day table exactly
as asyncpg's own binary COPY (``copy_records_to_table``, the path without the extension) puts
them: the same instants, texts and jsonb, whatever the offsets and characters; streams larger
than one COPY message arrive whole."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.db import ddl
from router.db.copy import CHUNK_BYTES, copy_audit_rows
from router.db.names import DayTable, day_table
from services.cluster import LocalCluster
from tests.support import scratch_shard

_owner_ids = itertools.count(930_000_000 + os.getpid() % 1000 * 1000)
READ_BACK = "SELECT ts, content, attrs::text FROM {} ORDER BY id"


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> AsyncIterator[Any]:
    async with scratch_shard(cluster) as scratch:
        yield scratch


async def fresh_table(shard: Any) -> DayTable:
    connection, made = shard
    table = day_table("audit", next(_owner_ids), date(2026, 3, 14))
    await ddl.ensure_table(connection, table, "btree")
    made.append(table)
    return table


async def both_ways(shard: Any, rows: list[tuple[datetime, str, str | None]]) -> None:
    connection, _ = shard
    native, reference = await fresh_table(shard), await fresh_table(shard)
    await copy_audit_rows(connection, native.name, rows)
    await connection.copy_records_to_table(reference.name, records=rows, columns=ddl.AUDIT_COLUMNS)
    got = await connection.fetch(READ_BACK.format(native.quoted))
    expected = await connection.fetch(READ_BACK.format(reference.quoted))
    assert [tuple(row) for row in got] == [tuple(row) for row in expected]
    assert len(got) == len(rows)


ZONES = st.one_of(
    st.just(UTC),
    st.timedeltas(timedelta(hours=-23, minutes=-59), timedelta(hours=23, minutes=59)).map(timezone),
)
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\0"))
ATTRS = st.dictionaries(TEXTS, st.one_of(st.integers(-(2**63), 2**63 - 1), TEXTS), max_size=3).map(
    lambda attrs: orjson.dumps(attrs).decode()
)
ROWS = st.lists(
    st.tuples(
        st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30), timezones=ZONES),
        TEXTS,
        st.one_of(st.none(), ATTRS),
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=ROWS)
async def test_rows_arrive_as_asyncpg_copies_them(shard: Any, rows: list[Any]) -> None:
    await both_ways(shard, rows)


async def test_a_stream_of_several_messages_arrives_whole(shard: Any) -> None:
    ts = datetime(2026, 3, 14, 9, tzinfo=UTC)
    rows = [(ts + timedelta(seconds=n), f"{n:08d}" + "x" * 60_000, None) for n in range(40)]
    assert sum(len(content) for _, content, _ in rows) > 2 * CHUNK_BYTES
    await both_ways(shard, rows)
