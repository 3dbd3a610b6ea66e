"""Export lines rendered on a shard (router/search/lines.py) against the router's own rendering
of the same rows, byte for byte: the item as orjson writes it (attrs as stored, ref by
router/search/refs.py) and the CSV row as csv.writer writes it with formula-like cells quoted.
Rows chosen to break a renderer: unicode, control characters, quotes, commas, newlines and
backslashes in content, nested and NULL attrs, formula-like text, whole seconds, IPv6
addresses (the forms inet_ntop and PostgreSQL might print apart), a missing proto, TCP flags and
sampling rates missing or at their bounds, either value of sampled and sampling_mixed."""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import orjson
import pytest

from router.csv_cells import FORMULA_START, csv_cell
from router.db import ddl
from router.db.connection import prepare_shard_connection
from router.db.names import DayTable, Kind, day_table
from router.search import lines, refs, sql
from router.search.query import AuditQuery, FlowQuery, Keys, Window
from services.cluster import LocalCluster

DAY = datetime(2026, 3, 14, tzinfo=UTC)
WINDOW = Window(DAY, DAY + timedelta(days=1))
KEY = '=own"er, é\u00e9 日本'
_owner_ids = itertools.count(910_000_000 + os.getpid() % 1000 * 1000)

CONTENTS = [
    "plain",
    "",
    "uni é ü 日本 😀 \u2028\u2029",
    "controls \x01\x02\x1b\x1f\x7f",
    "escapes \b\f\n\r\t",
    '"quoted", with, commas',
    "backslashes \\ \\\\ \\n \\u0041",
    'line1\nline2,with "q"',
    *(f"{start}formula,1" for start in FORMULA_START),
    "'already quoted",
]
ATTRS = [
    None,
    "{}",
    "[]",
    '{"nested": {"a": [1, 2.5, {"b": null}], "s": "é\\u0001\\"\\\\"}, "k": "a,b"}',
    "-3",
    '"text"',
    "true",
    '{"big": 12345678901234567890, "f": 1.5e-7}',
]
SECONDS = [
    timedelta(0),
    timedelta(microseconds=1),
    timedelta(hours=1, microseconds=120_000),
    timedelta(hours=23, minutes=59, seconds=59, microseconds=999_999),
    timedelta(hours=12, seconds=30),
]
ADDRESSES = [
    ("10.0.0.1", "192.0.2.255"),
    ("0.0.0.0", "255.255.255.255"),
    ("2001:db8::1", "::1"),
    ("::ffff:1.2.3.4", "::2"),
    ("::1.2.3.4", "fe80::1:0:0:2"),
    ("2001:db8:0:0:1:0:0:1", "1:2:3:4:5:6:7:8"),
]


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> Any:
    connection = await asyncpg.connect(cluster.shards[0].spec.dsn())
    await prepare_shard_connection(connection)
    name = await connection.fetchval("SELECT current_database()")
    made: list[DayTable] = []
    yield connection, name, made
    for table in made:
        await connection.execute(f"DROP TABLE IF EXISTS {table.quoted}")
    await connection.close()


async def _table(shard: Any, kind: Kind) -> tuple[DayTable, int]:
    connection, _, made = shard
    owner_id = next(_owner_ids)
    table = day_table(kind, owner_id, DAY.date())
    await ddl.ensure_table(connection, table, "btree")
    made.append(table)
    return table, owner_id


def _old_audit(row: Any, shard: str, owner_id: int, format: str) -> str:
    """The router's rendering before the shards rendered lines."""
    if format == "csv":
        content = row["content"]
        if content.startswith(FORMULA_START):
            content = "'" + content
        cells = [row["ts"].isoformat(), row["id"], csv_cell(KEY), shard, content, row["attrs"]]
        return lines.csv_line(cells)
    attrs = row["attrs"]
    item = {
        "ts": row["ts"],
        "id": row["id"],
        "content": row["content"],
        "attrs": None if attrs is None else orjson.Fragment(attrs),
        "shard": shard,
        "owner": KEY,
        "ref": refs.of_row("audit", owner_id, {"ts": row["ts"], "shard": shard, "id": row["id"]}),
    }
    return orjson.dumps(item).decode() + "\n"


def _csv_value(value: Any) -> Any:
    """Booleans as JSON writes them, in CSV too."""
    return str(value).lower() if isinstance(value, bool) else value


def _old_flow(row: Any, shard: str, owner_id: int, format: str) -> str:
    values = list(row)[: len(lines.FLOW_FIELDS)]
    if format == "csv":
        cells = [values[0].isoformat(), csv_cell(KEY), shard, *values[1:11]]
        added = [_csv_value(v) for v in values[12:]]
        return lines.csv_line([*cells, values[11].isoformat(), *added])
    item = dict(zip(lines.FLOW_FIELDS, values, strict=True))
    item["shard"] = shard
    item["switch"] = KEY
    item["ref"] = refs.of_row("flow", owner_id, {**item, "ts": values[0]})
    return orjson.dumps(item).decode() + "\n"


async def _both(
    shard: Any, kind: Kind, table: DayTable, owner_id: int, format: lines.ExportFormat
) -> tuple[list[str], list[str]]:
    connection, name, _ = shard
    query: AuditQuery | FlowQuery
    if kind == "audit":
        query = AuditQuery(Keys.of([KEY]), WINDOW, (), "substring", "asc")
    else:
        query = FlowQuery(Keys.of([KEY]), WINDOW, None, None, None, None, None, None, False, "asc")
    old_text, old_params = sql.page_sql(query, [table], name, None, False, 10_000)
    render = _old_audit if kind == "audit" else _old_flow
    old = [render(r, name, owner_id, format) for r in await connection.fetch(old_text, *old_params)]
    columns = lines.columns(kind, format, name, {owner_id: KEY})
    text, params = sql.export_sql(query, [table], False, columns, lines.OUTPUT)
    rows = await connection.fetch(text, *params)
    bodies = lines.BODIES[format]([r["body"] for r in rows])
    new = [(r["head"] + body + r["tail"]).decode() for r, body in zip(rows, bodies, strict=True)]
    return old, new


@pytest.mark.parametrize("format", ["ndjson", "csv"])
async def test_audit_lines_are_the_routers_items(shard, format) -> None:
    table, owner_id = await _table(shard, "audit")
    last = DAY + timedelta(days=1, microseconds=-1)
    rows = [
        (
            min(DAY + SECONDS[n % len(SECONDS)] + timedelta(minutes=n), last),
            text,
            ATTRS[n % len(ATTRS)],
        )
        for n, text in enumerate(CONTENTS * 2)
    ]
    await shard[0].copy_records_to_table(
        table.name, records=rows, columns=["ts", "content", "attrs"]
    )
    old, new = await _both(shard, "audit", table, owner_id, format)
    assert len(old) == len(rows)
    assert new == old


@pytest.mark.parametrize("format", ["ndjson", "csv"])
async def test_flow_lines_are_the_routers_items(shard, format) -> None:
    table, owner_id = await _table(shard, "flow")
    rows = []
    for n, (src, dst) in enumerate(ADDRESSES * 3):
        first = DAY + SECONDS[n % len(SECONDS)]
        proto = [None, 6, 17, 255, 0][n % 5]
        port = [0, 443, 32768, 65535][n % 4]
        version = 6 if ":" in src else 4
        last = first + timedelta(seconds=n)
        flags = [None, 0, 0x12, 255, 0x02][n % 5]
        rate = [None, 1, 2**31 - 1, 1000][n % 4]
        sampled, mixed = n % 3 == 1, n % 2 == 1
        counts = (2**62 + n, n, n + 1)
        added = (flags, rate, sampled, mixed)
        rows.append((src, dst, port, 65535 - port, version, proto, *counts, first, last, *added))
    columns = [*ddl.FLOW_STAGE_COLUMNS, *ddl.FLOW_EXPORT_READ_COLUMNS]
    await shard[0].copy_records_to_table(table.name, records=rows, columns=columns)
    old, new = await _both(shard, "flow", table, owner_id, format)
    assert len(old) == len(rows)
    assert new == old
