"""The `shardlog` command: run a local cluster, migrate, serve, and administer the catalog. One
module per command group; each adds its own parsers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import asyncpg

from router import clock
from router.cli import (
    auth,
    catalog,
    cluster,
    collector,
    compaction,
    exporters,
    lifecycle,
    local_tls,
    report,
    sharing,
    syslog,
    syslog_senders,
    tail,
)
from router.db.migrate import MigrationError
from router.errors import ShardlogError
from router.settings import Settings
from services.process import ServiceError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardlog", description="Sharded audit-log and flow storage on PostgreSQL."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (
        cluster, catalog, lifecycle, compaction, auth, report, tail, exporters, collector, syslog,
        syslog_senders, sharing,
    ):  # fmt: skip
        group.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = local_tls.apply(Settings())
        clock.configure(settings.clock)
        code: int = args.run(settings, args)
    except ShardlogError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"shardlog: error{where}: {exc.message}", file=sys.stderr)
        return 2
    except (
        ServiceError,
        MigrationError,
        ValueError,
        RuntimeError,
        OSError,
        asyncpg.PostgresError,
    ) as exc:
        print(f"shardlog: error: {exc}", file=sys.stderr)
        return 1
    return code
