"""What every shard connection is set up with, and the type both kinds of connection share."""

from __future__ import annotations

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from router.db.inet import install_codec

# A connection of our own or one lent by a pool: both run the same queries.
Connection = asyncpg.Connection | PoolConnectionProxy


async def prepare_shard_connection(connection: asyncpg.Connection) -> None:
    """Once per new shard connection: the binary inet codec."""
    await install_codec(connection)
