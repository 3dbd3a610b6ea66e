"""Binary COPY of audit rows into a day table.

With the native extension (``native/``), the COPY stream is built in one native pass and sent
as it is; without it, asyncpg encodes the rows (``copy_records_to_table``), the reference the
native stream is held to in tests (tests/integration/test_audit_copy.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from router.db.connection import Connection
from router.db.ddl import AUDIT_COLUMNS
from router.native import extension as shardlog_native

# A COPY message of at most this much: asyncpg copies each into its own buffer.
CHUNK_BYTES = 1 << 20


async def _chunks(stream: bytes) -> AsyncIterator[bytes]:
    if len(stream) <= CHUNK_BYTES:
        yield stream
        return
    for start in range(0, len(stream), CHUNK_BYTES):
        yield stream[start : start + CHUNK_BYTES]


async def copy_audit_rows(
    connection: Connection, table: str, rows: Sequence[Sequence[Any]]
) -> None:
    """COPY ``rows`` (ts, content, attrs) into ``table`` (asyncpg quotes it)."""
    if shardlog_native is None:  # pragma: no cover - exercised where the extension is absent
        await connection.copy_records_to_table(table, records=rows, columns=AUDIT_COLUMNS)
        return
    # Rows are (ts, content, attrs) tuples; the extension refuses anything else (TypeError).
    stream = shardlog_native.audit_copy(rows if isinstance(rows, list) else list(rows))
    await connection.copy_to_table(
        table, source=_chunks(stream), columns=AUDIT_COLUMNS, format="binary"
    )
