"""`shardlog syslog`: run the syslog listener in the foreground (router/syslogd)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from router.settings import Settings
from router.syslogd import service


def cmd_syslog(settings: Settings, args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return service.run(settings)


def add_parsers(commands: Any) -> None:
    syslog = commands.add_parser(
        "syslog",
        help="receive syslog (UDP, TCP, TLS, RELP) and write the messages as audit rows (until "
        "SIGTERM or SIGINT); ports, owner rule and limits: SHARDLOG_SYSLOG__*",
    )
    syslog.set_defaults(run=cmd_syslog)
