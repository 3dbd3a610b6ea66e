"""How a CLI command that reads or writes the catalog runs: one connection as the catalog role
(router/db/catalog_login.py) around one async action."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

import asyncpg

from router.db import catalog_login
from router.settings import Settings

Action = Callable[[Settings, argparse.Namespace, asyncpg.Connection], Awaitable[None]]


def with_catalog(action: Action) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, args: argparse.Namespace) -> int:
        async def go() -> None:
            connection = await catalog_login.connect(settings)
            try:
                await action(settings, args, connection)
            finally:
                await connection.close()

        asyncio.run(go())
        return 0

    return run
