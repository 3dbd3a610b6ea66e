"""The SQL of a small part (at most SHARDLOG_INGEST__ONE_STATEMENT_ROWS rows), written by
INSERT rather than COPY so that it takes as few round trips as can be: an audit part is one
statement (its ingest_ledger claim, its tail-log line, its rows and the transaction's
synchronous_commit), a flow part two (the claim, then the merge of its rows straight from
arrays, without the staging table). The rows go only where the ledger claim succeeded: a part
an earlier attempt committed writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.compaction import unfold
from router.db import ddl
from router.db.connection import Connection
from router.db.names import DayTable, owner_days_table, quote_ident

_CLAIM = """
    claimed AS (
        INSERT INTO ingest_ledger (request_key, part, table_name, rows)
        VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING true
    )"""
# The arrays' element types, in ddl.AUDIT_COLUMNS and ddl.FLOW_WRITE_COLUMNS order.
_AUDIT_TYPES = ("timestamptz", "text", "jsonb")
_FLOW_TYPES = (
    "inet",
    "inet",
    "integer",
    "integer",
    "smallint",
    "smallint",
    "bigint",
    "bigint",
    "bigint",
    "timestamptz",
    "timestamptz",
    "smallint",
    "integer",
    "boolean",
)
FLOW_CLAIM_SQL = f"WITH {_CLAIM} SELECT set_config('synchronous_commit', $5, true), " + (
    "EXISTS (SELECT FROM claimed)"
)


# The claims of a group's flow parts in one statement ($1..$4 arrays of the ledger columns):
# answers [request_key, part] of each part claimed now.
FLOW_GROUP_CLAIM_SQL = """
    WITH claimed AS (
        INSERT INTO ingest_ledger (request_key, part, table_name, rows)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[])
        ON CONFLICT DO NOTHING RETURNING request_key, part
    )
    SELECT set_config('synchronous_commit', $5, true),
        ARRAY(SELECT ARRAY[request_key, part] FROM claimed)
"""


def _arrays(types: Sequence[str], first: int) -> str:
    return ", ".join(f"${first + n}::{kind}[]" for n, kind in enumerate(types))


def audit_sql(table: DayTable) -> str:
    """$1..$4 the ledger row (key, part, table name, rows), $5/$6 the rows' first and last
    ts, $7 synchronous_commit, $8.. one array per column. Answers whether the part was
    claimed now."""
    columns = ", ".join(ddl.AUDIT_COLUMNS)
    return f"""
        WITH {_CLAIM},
        logged AS (
            INSERT INTO tail_log ({ddl.TAIL_LOG_COLUMNS}) SELECT $3, $5, $6, $4 FROM claimed
        ),
        written AS (
            INSERT INTO {table.quoted} ({columns})
            SELECT * FROM unnest({_arrays(_AUDIT_TYPES, 8)})
            WHERE EXISTS (SELECT FROM claimed)
        )
        SELECT set_config('synchronous_commit', $7, true), EXISTS (SELECT FROM claimed)
    """


def shared_audit_sql(table: DayTable) -> str:
    """audit_sql into the shard's shared table of the owner-day (``table.shared``), behind the
    fence of its owner_days row (docs/architecture.md, "The write"): the row is held FOR SHARE,
    so a promotion's UPDATE of it waits for this transaction, and a write that waited for a
    promotion re-reads the row, finds it promoted and writes nothing here. $8 the owner id.
    Answers whether the part was claimed now, and whether the owner-day is still shared (when
    not, nothing was written or claimed: the caller writes the part into its own table)."""
    columns = ", ".join(ddl.AUDIT_COLUMNS)
    return f"""
        WITH placed AS (
            SELECT 1 FROM {quote_ident(owner_days_table(table.day))}
            WHERE owner_id = $8 AND kind = 'audit' AND NOT promoted FOR SHARE
        ),
        claimed AS (
            INSERT INTO ingest_ledger (request_key, part, table_name, rows)
            SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT FROM placed)
            ON CONFLICT DO NOTHING RETURNING true
        ),
        logged AS (
            INSERT INTO tail_log ({ddl.TAIL_LOG_COLUMNS}, owner_id)
            SELECT $3, $5, $6, $4, $8 FROM claimed
        ),
        written AS (
            INSERT INTO {table.shared_quoted} (owner_id, {columns})
            SELECT $8, * FROM unnest({_arrays(_AUDIT_TYPES, 9)})
            WHERE EXISTS (SELECT FROM claimed)
        )
        SELECT set_config('synchronous_commit', $7, true), EXISTS (SELECT FROM claimed),
            EXISTS (SELECT FROM placed)
    """


# The opening statement of a COPY into a shared table: the fence (as shared_audit_sql), the
# part's tail-log line, the transaction's synchronous_commit and owner (the shared table's
# owner_id default, router/db/ddl.py). $1 synchronous_commit, $2.. the tail log's columns, $6
# the owner id. Answers whether the owner-day is still shared (nothing logged when not).
def shared_opening_sql(table: DayTable) -> str:
    return f"""
        WITH placed AS (
            SELECT 1 FROM {quote_ident(owner_days_table(table.day))}
            WHERE owner_id = $6 AND kind = 'audit' AND NOT promoted FOR SHARE
        ),
        logged AS (
            INSERT INTO tail_log ({ddl.TAIL_LOG_COLUMNS}, owner_id)
            SELECT $2, $3, $4, $5, $6 FROM placed
        )
        SELECT set_config('synchronous_commit', $1, true),
            set_config('{ddl.SHARED_OWNER_SETTING}', $6::text, true),
            EXISTS (SELECT FROM placed)
    """


def flow_sql(table: DayTable) -> str:
    """The merge of ddl.flow_merge_sql ($1 the table's name) from $2.., one array per column,
    instead of from the staging table."""
    columns = ", ".join(ddl.FLOW_WRITE_COLUMNS)
    source = f"unnest({_arrays(_FLOW_TYPES, 2)}) AS staged ({columns})"
    return ddl.flow_merge_sql(table, source)


def columns_of(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(column) for column in zip(*rows, strict=True)]


async def write(
    connection: Connection,
    table: DayTable,
    part_id: str,
    rows: Sequence[Sequence[Any]],
    request_key: str,
    synchronous_commit: str,
) -> bool | None:
    """Write one small part inside the caller's transaction; False when the ledger shows an
    earlier attempt committed it (nothing is written then). Into the shared table when
    ``table.shared`` (audit): None when its owner-day was promoted (nothing claimed or
    written: the caller writes the part into its own table)."""
    if table.kind == "audit":
        times = [row[0] for row in rows]
        name, text, owner = (
            (table.shared_name, shared_audit_sql(table), [table.owner_id])
            if table.shared
            else (table.name, audit_sql(table), [])
        )
        answer = await connection.fetchrow(
            text,
            request_key,
            part_id,
            name,
            len(rows),
            min(times),
            max(times),
            synchronous_commit,
            *owner,
            *columns_of(rows),
        )
        assert answer is not None
        return bool(answer[1]) if not table.shared or answer[2] else None
    ledger = (request_key, part_id, table.name, len(rows))
    claim = await connection.fetchrow(FLOW_CLAIM_SQL, *ledger, synchronous_commit)
    assert claim is not None
    if not claim[1]:
        return False
    await unfold.before_merge(connection, table, rows)
    await connection.execute(flow_sql(table), table.name, *columns_of(rows))
    return True


async def write_flows(
    connection: Connection,
    parts: Sequence[tuple[DayTable, str, Sequence[Sequence[Any]], str]],
    synchronous_commit: str,
) -> list[bool]:
    """Write a group's small flow parts (table, part id, rows, request key) inside the
    caller's transaction: their claims in one statement, then a merge for each part claimed
    now. Answers, per part, whether it was written now."""
    ledger = columns_of(
        [(key, part_id, table.name, len(rows)) for table, part_id, rows, key in parts]
    )
    answer = await connection.fetchrow(FLOW_GROUP_CLAIM_SQL, *ledger, synchronous_commit)
    assert answer is not None
    claimed = {(key, part_id) for key, part_id in answer[1]}
    written = []
    for table, part_id, rows, key in parts:
        now = (key, part_id) in claimed
        if now:
            await unfold.before_merge(connection, table, rows)
            await connection.execute(flow_sql(table), table.name, *columns_of(rows))
        written.append(now)
    return written
