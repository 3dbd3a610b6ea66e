"""Statements whose text carries a secret (a user mapping's password, a role's SCRAM verifier):
run with statement statistics and statement logging off for them alone.

pg_stat_statements keeps the text of every utility statement it tracks (on disk, in
``pg_stat_tmp/pgss_query_texts.stat``, readable by anyone granted ``pg_read_all_stats``), and the
server log gets a statement's text when it is slow (``log_min_duration_statement``), fails
(``log_min_error_statement``) or is DDL under ``log_statement``. These four parameters are
superuser-only; the catalog role is granted SET on them at bring-up (router/db/roles.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from router.db.connection import Connection

QUIET_SETTINGS = {
    "pg_stat_statements.track_utility": "off",
    "log_statement": "none",
    "log_min_duration_statement": "-1",
    "log_min_error_statement": "panic",
}


@asynccontextmanager
async def unrecorded(connection: Connection) -> AsyncIterator[None]:
    """Inside the connection's transaction (a savepoint when the caller has one open): the
    block's statements are neither tracked nor logged; the settings are put back after it."""
    async with connection.transaction():
        for name, value in QUIET_SETTINGS.items():
            await connection.execute(f"SET LOCAL {name} = '{value}'")
        yield
        for name in QUIET_SETTINGS:
            await connection.execute(f"SET LOCAL {name} TO DEFAULT")
