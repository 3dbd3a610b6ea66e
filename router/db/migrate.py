"""Numbered SQL migrations per target (schema/metadata, schema/shard), applied in order, each
in its own transaction, recorded with a checksum so that an edited applied file is refused."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncpg

Target = Literal["metadata", "shard"]
TARGETS: tuple[Target, ...] = ("metadata", "shard")

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any constant works; it only has to be the same for every migrator of a database.
_MIGRATION_LOCK_KEY = 0x5348_4C4F_474D_4947
# Every migrated database holds this ledger: one row per applied migration and target.
LEDGER_TABLE = "shardlog_migrations"

_LEDGER_DDL = f"""
CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (
    target     text NOT NULL,
    version    integer NOT NULL,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (target, version)
)
"""


class MigrationError(RuntimeError):
    """The database and the migration files disagree; nothing further was applied."""


@dataclass(frozen=True)
class Migration:
    target: Target
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(schema_dir: Path, target: Target) -> list[Migration]:
    directory = schema_dir / target
    if not directory.is_dir():
        raise MigrationError(f"no migrations directory {directory}")
    migrations: list[Migration] = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files are named NNNN_name.sql")
        migrations.append(
            Migration(target, int(match.group(1)), match.group(2), path.read_text("utf-8"))
        )
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise MigrationError(f"{directory}: versions must run 1, 2, 3 ... without gaps")
    return migrations


# CREATE [UNLOGGED] TABLE / VIEW / SEQUENCE / FUNCTION ... name, after comments are stripped.
_CREATED_RELATION = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:UNLOGGED\s+)?"
    r"(?:TABLE|VIEW|MATERIALIZED\s+VIEW|SEQUENCE|FUNCTION)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(?:[a-z_][a-z0-9_]*\.)?([a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)


def created_relations(migrations: Iterable[Migration]) -> frozenset[str]:
    """The names of the tables, views, sequences and functions the migrations create (without
    schema)."""
    names: set[str] = set()
    for migration in migrations:
        sql = re.sub(r"--[^\n]*", "", migration.sql)
        names.update(match.lower() for match in _CREATED_RELATION.findall(sql))
    return frozenset(names)


async def pending(
    connection: asyncpg.Connection | asyncpg.Pool, schema_dir: Path, target: Target
) -> list[Migration]:
    """Migrations the database lacks, read without taking the migration lock or creating the
    ledger (a database that has none lacks every migration)."""
    exists = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", LEDGER_TABLE)
    applied: set[int] = set()
    if exists:
        rows = await connection.fetch(
            f"SELECT version FROM {LEDGER_TABLE} WHERE target = $1", target
        )
        applied = {row["version"] for row in rows}
    return [m for m in load_migrations(schema_dir, target) if m.version not in applied]


async def migrate(
    connection: asyncpg.Connection, schema_dir: Path, target: Target
) -> list[Migration]:
    """Apply what is missing; return what was applied (empty when up to date)."""
    migrations = load_migrations(schema_dir, target)
    await connection.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK_KEY)
    try:
        await connection.execute(_LEDGER_DDL)
        rows = await connection.fetch(
            f"SELECT version, name, checksum FROM {LEDGER_TABLE} WHERE target = $1",
            target,
        )
        applied = {row["version"]: row for row in rows}
        known = {m.version for m in migrations}
        unknown = sorted(set(applied) - known)
        if unknown:
            raise MigrationError(
                f"{target} database has migrations {unknown} that {schema_dir / target} lacks; "
                "it was migrated by a newer shardlog"
            )
        done: list[Migration] = []
        for migration in migrations:
            row = applied.get(migration.version)
            if row is not None:
                if row["checksum"] != migration.checksum:
                    raise MigrationError(
                        f"{target} migration {migration.version:04d}_{migration.name} was "
                        "changed after it was applied (checksum differs); add a new migration "
                        "instead of editing an applied one"
                    )
                continue
            async with connection.transaction():
                await connection.execute(migration.sql)
                await connection.execute(
                    f"INSERT INTO {LEDGER_TABLE} (target, version, name, checksum) "
                    "VALUES ($1, $2, $3, $4)",
                    target,
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            done.append(migration)
        return done
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK_KEY)
