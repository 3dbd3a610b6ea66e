"""Every statement in the shards' logs, with a prefix pgBadger reads, for one pass only. Both
settings apply on reload (no restart: the router's connections stay up and pick them up at
their next statement); they are reset when the pass ends, even when it fails."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from router.cluster_defaults import DATABASE
from services.postgres import PostgresInstance

# pgBadger's own example of a stderr prefix (pgbadger --help), handed to it as --prefix.
PGBADGER_PREFIX = "%t [%p]: user=%u,db=%d,app=%a,client=%h "
PASS_SETTINGS = {
    "log_min_duration_statement": "0",
    "log_line_prefix": PGBADGER_PREFIX,
    "log_connections": "on",
    "log_disconnections": "on",
    "log_autovacuum_min_duration": "0",
}
RELOAD_WAIT_S = 10.0


def _apply(instance: PostgresInstance, statements: list[str], expected_prefix: str) -> None:
    for statement in statements:
        instance.psql(DATABASE, statement)
    instance.psql(DATABASE, "SELECT pg_reload_conf()")
    deadline = time.monotonic() + RELOAD_WAIT_S
    while instance.psql(DATABASE, "SHOW log_line_prefix").rstrip("\n") != expected_prefix:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{instance.spec.name}: the reload did not apply")
        time.sleep(0.05)


@contextmanager
def verbose_logs(instances: list[PostgresInstance]) -> Iterator[dict[str, int]]:
    """The pass's logging on every instance; yields each log file's size at the start (the
    pass's lines are those after it), by instance name."""
    default_prefix = instances[0].psql(DATABASE, "SHOW log_line_prefix").rstrip("\n")
    try:
        for instance in instances:
            _apply(
                instance,
                [f"ALTER SYSTEM SET {name} = '{value}'" for name, value in PASS_SETTINGS.items()],
                PGBADGER_PREFIX,
            )
        yield {instance.spec.name: instance.log_file.stat().st_size for instance in instances}
    finally:
        for instance in instances:
            _apply(
                instance, [f"ALTER SYSTEM RESET {name}" for name in PASS_SETTINGS], default_prefix
            )


def pass_lines(instance: PostgresInstance, start: int) -> str:
    """What ``instance`` logged since byte ``start`` of its log file."""
    with instance.log_file.open("rb") as log:
        log.seek(start)
        return log.read().decode("utf-8", errors="replace")
