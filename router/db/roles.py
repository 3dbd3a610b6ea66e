"""shardlog's PostgreSQL roles on a shard's server and on the metadata server, and the one place
that creates them.

Roles are cluster-wide objects, so they are made at bring-up (``shardlog up`` / ``migrate`` and
shard registration), by the bootstrap superuser the shard's DSN names, before the shard
migrations; what each role may do inside a database is granted by schema/shard/0003_roles.sql.
The router's shard pools log in as the three login roles (router/db/pools.py), never as the
superuser. On the metadata server the router (and the CLI's catalog commands) log in as
CATALOG, granted by schema/metadata/0009_catalog_role.sql (router/db/catalog_login.py).
docs/architecture.md ("PostgreSQL roles") says what each may do and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import asyncpg

from router.db import passfile
from router.db.unrecorded import QUIET_SETTINGS, unrecorded
from services.credentials import scram_matches, scram_verifier

# Owns every day table; nobody logs in as it.
TABLES = "shardlog_tables"
# Ingest, DDL of day tables, the ledger, restores: member of TABLES.
WRITER = "shardlog_writer"
# Searches, counts, exports, table listings: SELECT only, read-only transactions by default.
READER = "shardlog_reader"
# Retention: SELECT on day tables, and their lock and drop through two SECURITY DEFINER functions.
RETENTION = "shardlog_retention"
LOGIN_ROLES = (WRITER, READER, RETENTION)
# The metadata server's: the catalog's rows, the fdw coordinator's objects (no DDL on the catalog).
CATALOG = "shardlog_catalog"

# What none of them may be or do, whoever changed it by hand.
_ATTRIBUTES = {
    "rolsuper": "SUPERUSER",
    "rolcreatedb": "CREATEDB",
    "rolcreaterole": "CREATEROLE",
    "rolreplication": "REPLICATION",
    "rolbypassrls": "BYPASSRLS",
}
# role -> the roles it is a member of, exactly.
_MEMBERSHIPS: dict[str, frozenset[str]] = {
    TABLES: frozenset(),
    WRITER: frozenset({TABLES}),
    READER: frozenset(),
    RETENTION: frozenset(),
}
# role -> its own settings (ALTER ROLE ... SET), exactly these.
_ROLE_SETTINGS: dict[str, dict[str, str]] = {READER: {"default_transaction_read_only": "on"}}
# Retention shortens deadlock_timeout so that an autovacuum in its way is cancelled sooner
# (router/retention/dropper.py); PostgreSQL 15 lets a role set one superuser parameter.
_PARAMETER_GRANTS = {RETENTION: ("deadlock_timeout",)}
# The catalog role writes the coordinator's user mappings (a shard password in their text) with
# statement statistics and logging off for them (router/db/unrecorded.py).
_CATALOG_PARAMETER_GRANTS = tuple(QUIET_SETTINGS)


class RoleError(RuntimeError):
    """The roles cannot be set up: no superuser, or a password is missing."""


def passwords(path: Path, dsn: str) -> dict[str, str]:
    """The login roles' passwords for the server ``dsn`` points at, from the password file."""
    try:
        return {role: passfile.lookup(path, dsn, role) for role in LOGIN_ROLES}
    except passfile.PassfileError as exc:
        raise RoleError(f"{exc}: shardlog up writes it (docs/operations.md, passwords)") from exc


async def prepare(connection: asyncpg.Connection, dsn: str, path: Path | None) -> list[str]:
    """``ensure_roles`` with the passwords the password file holds for ``dsn``'s server."""
    if path is None:
        raise RoleError("no password file is configured (SHARDLOG_POOLS__PASSFILE)")
    return await ensure_roles(connection, passwords(path, dsn))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def prepare_catalog(connection: asyncpg.Connection, dsn: str, path: Path | None) -> list[str]:
    """``ensure_catalog_role`` with the password the password file holds for ``dsn``'s server
    (the metadata server's)."""
    if path is None:
        raise RoleError("no password file is configured (SHARDLOG_POOLS__PASSFILE)")
    try:
        password = passfile.lookup(path, dsn, CATALOG)
    except passfile.PassfileError as exc:
        raise RoleError(f"{exc}: shardlog up writes it (docs/operations.md, passwords)") from exc
    return await ensure_catalog_role(connection, password)


async def ensure_catalog_role(connection: asyncpg.Connection, password: str) -> list[str]:
    """Create or correct the catalog role on the metadata server; returns what was changed."""
    await _require_superuser(connection, "the metadata DSN's")
    changed = await _ensure_role(connection, CATALOG, password)
    changed += await _ensure_memberships(connection, CATALOG, frozenset())
    changed += await _ensure_settings(connection, CATALOG, {})
    changed += await _ensure_parameter_grants(connection, CATALOG, _CATALOG_PARAMETER_GRANTS)
    return changed


async def _require_superuser(connection: asyncpg.Connection, whose: str) -> None:
    me = await connection.fetchrow(
        "SELECT rolname, rolsuper FROM pg_roles WHERE rolname = current_user"
    )
    if me is None or not me["rolsuper"]:
        raise RoleError(
            "creating shardlog's roles needs the bootstrap superuser, not "
            f"{me['rolname'] if me else 'this user'} ({whose} user)"
        )


async def ensure_roles(connection: asyncpg.Connection, secrets: Mapping[str, str]) -> list[str]:
    """Create or correct the roles on the connection's server; returns what was changed
    (nothing on a second run). ``secrets``: the login roles' passwords, sent only as SCRAM
    verifiers, and only when the server's verifier is of another password."""
    await _require_superuser(connection, "the shard's DSN's")
    missing = [role for role in LOGIN_ROLES if not secrets.get(role)]
    if missing:
        raise RoleError(f"no password for {', '.join(missing)}")
    changed: list[str] = []
    for role in (TABLES, *LOGIN_ROLES):
        changed += await _ensure_role(connection, role, secrets.get(role))
    for role, wanted in _MEMBERSHIPS.items():
        changed += await _ensure_memberships(connection, role, wanted)
    for role in (TABLES, *LOGIN_ROLES):
        changed += await _ensure_settings(connection, role, _ROLE_SETTINGS.get(role, {}))
    for role, parameters in _PARAMETER_GRANTS.items():
        changed += await _ensure_parameter_grants(connection, role, parameters)
    return changed


async def _ensure_parameter_grants(
    connection: asyncpg.Connection, role: str, parameters: tuple[str, ...]
) -> list[str]:
    changed = []
    for parameter in parameters:
        if not await connection.fetchval(
            "SELECT has_parameter_privilege($1, $2, 'SET')", role, parameter
        ):
            await connection.execute(f"GRANT SET ON PARAMETER {parameter} TO {_quote(role)}")
            changed.append(f"{role}: may set {parameter}")
    return changed


async def _ensure_role(
    connection: asyncpg.Connection, role: str, password: str | None
) -> list[str]:
    row = await connection.fetchrow(
        "SELECT rolcanlogin, rolinherit, rolpassword, "
        + ", ".join(_ATTRIBUTES)
        + " FROM pg_authid WHERE rolname = $1",
        role,
    )
    login = password is not None
    if row is None:
        options = "LOGIN" if login else "NOLOGIN"
        if password is not None:
            options += f" PASSWORD '{scram_verifier(password)}'"
        async with unrecorded(connection):
            await connection.execute(f"CREATE ROLE {_quote(role)} {options}")
        return [f"{role}: created"]
    changed = []
    wrong = [keyword for column, keyword in _ATTRIBUTES.items() if row[column]]
    if wrong or row["rolcanlogin"] != login or not row["rolinherit"]:
        attributes = " ".join(f"NO{keyword}" for keyword in _ATTRIBUTES.values())
        await connection.execute(
            f"ALTER ROLE {_quote(role)} {attributes} INHERIT {'LOGIN' if login else 'NOLOGIN'}"
        )
        changed.append(f"{role}: attributes corrected")
    if password is not None and not scram_matches(row["rolpassword"], password):
        async with unrecorded(connection):
            await connection.execute(
                f"ALTER ROLE {_quote(role)} PASSWORD '{scram_verifier(password)}'"
            )
        changed.append(f"{role}: password set")
    elif password is None and row["rolpassword"] is not None:
        await connection.execute(f"ALTER ROLE {_quote(role)} PASSWORD NULL")
        changed.append(f"{role}: password removed")
    return changed


async def _ensure_memberships(
    connection: asyncpg.Connection, role: str, wanted: frozenset[str]
) -> list[str]:
    current = {
        r["rolname"]
        for r in await connection.fetch(
            "SELECT g.rolname FROM pg_auth_members m "
            "JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member "
            "WHERE u.rolname = $1",
            role,
        )
    }
    changed = []
    for group in sorted(wanted - current):
        await connection.execute(f"GRANT {_quote(group)} TO {_quote(role)}")
        changed.append(f"{role}: member of {group}")
    for group in sorted(current - wanted):
        await connection.execute(f"REVOKE {_quote(group)} FROM {_quote(role)}")
        changed.append(f"{role}: no longer member of {group}")
    return changed


async def _ensure_settings(
    connection: asyncpg.Connection, role: str, wanted: dict[str, str]
) -> list[str]:
    rows = await connection.fetch(
        "SELECT unnest(s.setconfig) AS setting FROM pg_db_role_setting s "
        "JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1 AND s.setdatabase = 0",
        role,
    )
    current = dict(row["setting"].split("=", 1) for row in rows)
    if current == wanted:
        return []
    await connection.execute(f"ALTER ROLE {_quote(role)} RESET ALL")
    for name, value in wanted.items():
        await connection.execute(f"ALTER ROLE {_quote(role)} SET {name} = '{value}'")
    return [f"{role}: settings {wanted or 'cleared'}"]
