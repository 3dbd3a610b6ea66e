"""`shardlog collector`: run the NetFlow/IPFIX collector in the foreground (router/collector)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from router.collector import service
from router.settings import Settings


def cmd_collector(settings: Settings, args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return service.run(settings)


def add_parsers(commands: Any) -> None:
    collector = commands.add_parser(
        "collector",
        help="receive NetFlow v5/v9 and IPFIX and write the flows (until SIGTERM or SIGINT); "
        "ports and limits: SHARDLOG_COLLECTOR__*",
    )
    collector.set_defaults(run=cmd_collector)
