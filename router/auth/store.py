"""The catalog's tenants and API tokens (schema/metadata/0008_tenants_tokens.sql): the only
module that writes them. Their triggers bump the catalog version, so every router reloads its
tokens (router/auth/registry.py) within milliseconds of a change; last-used times are written
back in batches and do not bump it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg

from router import clock
from router.auth import scopes as scope_rules
from router.auth import tokens
from router.catalog import rules
from router.catalog.store import Executor, connection_of, lock_named
from router.errors import Conflict, Invalid, NotFound, excerpt

MAX_TOKEN_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 1000
TokenState = Literal["active", "expired", "revoked"]


@dataclass(frozen=True)
class Tenant:
    name: str
    description: str
    created_at: datetime
    owners: int = 0
    tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "created_at": self.created_at.isoformat(),
            "owners": self.owners,
            "tokens": self.tokens,
        }


@dataclass(frozen=True)
class TokenLimits:
    """A token's own limits; None: the router's default (SHARDLOG_AUTH__*)."""

    rate_per_s: float | None = None
    ingest_bytes_per_s: int | None = None
    max_searches: int | None = None


@dataclass(frozen=True)
class TokenRecord:
    id: str
    tenant: str
    name: str
    scopes: tuple[str, ...]
    digest: bytes
    limits: TokenLimits
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def state(self, now: datetime) -> TokenState:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def to_json(self, now: datetime | None = None) -> dict[str, Any]:
        """Everything but the digest."""

        def when(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "id": self.id,
            "tenant": self.tenant,
            "name": self.name,
            "scopes": list(self.scopes),
            "state": self.state(now or clock.now()),
            "limits": {
                "rate_per_s": self.limits.rate_per_s,
                "ingest_bytes_per_s": self.limits.ingest_bytes_per_s,
                "max_searches": self.limits.max_searches,
            },
            "created_at": self.created_at.isoformat(),
            "created_by": self.created_by,
            "expires_at": when(self.expires_at),
            "revoked_at": when(self.revoked_at),
            "last_used_at": when(self.last_used_at),
        }


# --- tenants ---------------------------------------------------------------------------------


def _tenant_columns(now: str) -> str:
    """A tenant's columns; ``now``: the parameter holding the clock's now (expiry is the
    router's decision, taken with its clock, not the database's)."""
    return (
        "t.name, t.description, t.created_at, "
        "(SELECT count(*) FROM owners o WHERE o.tenant = t.name) AS owners, "
        "(SELECT count(*) FROM api_tokens k WHERE k.tenant = t.name AND k.revoked_at IS NULL "
        f"AND (k.expires_at IS NULL OR k.expires_at > {now})) AS tokens"
    )


def _tenant(row: Any) -> Tenant:
    return Tenant(row["name"], row["description"], row["created_at"], row["owners"], row["tokens"])


def check_description(value: str, field: str = "description") -> str:
    if len(value) > MAX_DESCRIPTION_CHARS or "\x00" in value:
        raise Invalid(f"{field}: at most {MAX_DESCRIPTION_CHARS} characters, without NUL", field)
    return value


async def list_tenants(db: Executor) -> list[Tenant]:
    rows = await db.fetch(
        f"SELECT {_tenant_columns('$1')} FROM tenants t ORDER BY t.name", clock.now()
    )
    return [_tenant(row) for row in rows]


async def get_tenant(db: Executor, name: str) -> Tenant | None:
    row = await db.fetchrow(
        f"SELECT {_tenant_columns('$2')} FROM tenants t WHERE t.name = $1", name, clock.now()
    )
    return None if row is None else _tenant(row)


async def add_tenant(db: Executor, name: str, description: str = "") -> Tenant:
    rules.check_name(name, "name")
    check_description(description)
    inserted = await db.fetchval(
        "INSERT INTO tenants (name, description) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING "
        "RETURNING name",
        name,
        description,
    )
    if inserted is None:
        raise Conflict(f"tenant {name!r} already exists", "name")
    tenant = await get_tenant(db, name)
    assert tenant is not None
    return tenant


async def ensure_tenant(db: Executor, name: str, description: str = "") -> bool:
    """Create the tenant unless it exists; True when it was created."""
    rules.check_name(name, "name")
    created = await db.fetchval(
        "INSERT INTO tenants (name, description) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING "
        "RETURNING name",
        name,
        description,
    )
    return created is not None


@dataclass(frozen=True)
class TenantRemoval:
    """What removing a tenant took with it (``force``)."""

    tokens: int
    exporters: int
    senders: int

    def holdings(self, usable_tokens: int) -> list[str]:
        taken = []
        if self.tokens:
            taken.append(f"{self.tokens} tokens ({usable_tokens} usable)")
        if self.exporters:
            taken.append(f"{self.exporters} flow exporters mapped to its switches")
        if self.senders:
            taken.append(f"{self.senders} syslog senders mapped to it")
        return taken


async def remove_tenant(db: Executor, name: str, *, force: bool = False) -> TenantRemoval:
    """Remove a tenant. Keys are never orphaned: a tenant that owns any is refused, force or
    not (erase or move them first). Its tokens, exporter and syslog sender mappings go with it
    only when ``force``: otherwise the refusal says what it would take. The system tenant
    stays."""
    rules.check_name(name, "name")
    if name == scope_rules.SYSTEM_TENANT:
        raise Conflict("the system tenant holds the platform's own audit and admin tokens", "name")
    async with connection_of(db) as connection, connection.transaction():
        await lock_named(connection, "tenants", name, f"tenant {name!r} does not exist")
        holds = await connection.fetchrow(
            "SELECT (SELECT count(*) FROM owners WHERE tenant = $1) AS owners, "
            "(SELECT count(*) FROM api_tokens WHERE tenant = $1) AS tokens, "
            "(SELECT count(*) FROM api_tokens WHERE tenant = $1 AND revoked_at IS NULL "
            " AND (expires_at IS NULL OR expires_at > $2)) AS usable, "
            "(SELECT count(*) FROM exporters WHERE tenant = $1) AS exporters, "
            "(SELECT count(*) FROM syslog_senders WHERE tenant = $1) AS senders",
            name,
            clock.now(),
        )
        assert holds is not None  # a SELECT without FROM: one row
        removal = TenantRemoval(holds["tokens"], holds["exporters"], holds["senders"])
        taken = removal.holdings(holds["usable"])
        if holds["owners"]:
            also = f"; it also has {' and '.join(taken)}" if taken else ""
            raise Conflict(
                f"tenant {name!r} still owns {holds['owners']} owner or switch keys, whose rows "
                "it would orphan (erase them: `shardlog owner erase --forget`, or move them to "
                f"another tenant); force does not remove keys{also}",
                "name",
            )
        if taken and not force:
            raise Conflict(
                f"tenant {name!r} still has {' and '.join(taken)}: removing it removes them "
                "(force=true, or `shardlog tenants remove --force`)",
                "name",
            )
        await connection.execute("DELETE FROM exporters WHERE tenant = $1", name)
        await connection.execute("DELETE FROM syslog_senders WHERE tenant = $1", name)
        await connection.execute("DELETE FROM tenants WHERE name = $1", name)
    return removal


# --- tokens ----------------------------------------------------------------------------------

# Column names (not a password, whatever a linter reads into "token").
TOKEN_COLUMNS = ", ".join(
    (
        "id",
        "tenant",
        "name",
        "scopes",
        "secret_sha256",
        "rate_per_s",
        "ingest_bytes_per_s",
        "max_searches",
        "created_at",
        "created_by",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
)


def _token(row: Any) -> TokenRecord:
    return TokenRecord(
        id=row["id"],
        tenant=row["tenant"],
        name=row["name"],
        scopes=tuple(row["scopes"]),
        digest=bytes(row["secret_sha256"]),
        limits=TokenLimits(row["rate_per_s"], row["ingest_bytes_per_s"], row["max_searches"]),
        created_at=row["created_at"],
        created_by=row["created_by"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )


def check_token_name(value: str, field: str = "name") -> str:
    if not value or len(value) > MAX_TOKEN_NAME_CHARS or not value.isprintable():
        raise Invalid(
            f"{field}: 1-{MAX_TOKEN_NAME_CHARS} printable characters, got {excerpt(value)}", field
        )
    return value


def check_expiry(expires_at: datetime | None, now: datetime, field: str = "expires_at") -> None:
    """A new token's expiry: in the future, with an offset."""
    if expires_at is None:
        return
    if expires_at.tzinfo is None:
        raise Invalid(f"{field}: a time with a UTC offset (RFC 3339)", field)
    if expires_at <= now:
        raise Invalid(f"{field}: {expires_at.isoformat()} has passed", field)


async def create_token(
    db: Executor,
    tenant: str,
    name: str,
    scopes: Iterable[object],
    created_by: str,
    *,
    expires_at: datetime | None = None,
    limits: TokenLimits = TokenLimits(),
) -> tuple[TokenRecord, str]:
    """A new token of ``tenant``: its record and its text, which is never stored or shown
    again (only the SHA-256 of its secret is kept)."""
    rules.check_name(tenant, "tenant")
    check_token_name(name)
    checked = scope_rules.parse_scopes(scopes, tenant)
    new = tokens.new_token()
    try:
        row = await db.fetchrow(
            "INSERT INTO api_tokens (id, tenant, name, scopes, secret_sha256, rate_per_s, "
            "ingest_bytes_per_s, max_searches, created_by, expires_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
            f"RETURNING {TOKEN_COLUMNS}",
            new.id,
            tenant,
            name,
            checked,
            new.digest,
            limits.rate_per_s,
            limits.ingest_bytes_per_s,
            limits.max_searches,
            created_by,
            expires_at,
        )
    except asyncpg.ForeignKeyViolationError:
        raise NotFound(f"tenant {tenant!r} does not exist", "tenant") from None
    return _token(row), new.text


async def list_tokens(db: Executor, tenant: str | None = None) -> list[TokenRecord]:
    rows = await db.fetch(
        f"SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE $1::text IS NULL OR tenant = $1 "
        "ORDER BY tenant, created_at, id",
        tenant,
    )
    return [_token(row) for row in rows]


async def get_token(db: Executor, token_id: str) -> TokenRecord | None:
    row = await db.fetchrow(f"SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE id = $1", token_id)
    return None if row is None else _token(row)


async def revoke_token(db: Executor, token_id: str, *, force: bool = False) -> TokenRecord:
    """Revoke a token (again: a no-op that keeps the first revocation time). The last usable
    admin token is kept unless ``force``: without one only the CLI, which logs in to the
    catalog, can make another."""
    if not tokens.ID_PATTERN.fullmatch(token_id):
        raise Invalid(f"{excerpt(token_id)} is not a token id (16 hex digits)", "token_id")
    async with connection_of(db) as connection, connection.transaction():
        # Two revocations of the last two admin tokens at once: one of them sees the other's.
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _ADMIN_TOKENS_LOCK)
        found = await get_token(connection, token_id)
        if found is None:
            raise NotFound(f"token {token_id} does not exist", "token_id")
        if found.revoked_at is not None:
            return found
        if not force and scope_rules.ADMIN in found.scopes:
            now = clock.now()
            others = await connection.fetchval(
                "SELECT count(*) FROM api_tokens WHERE id <> $1 AND $2 = ANY (scopes) "
                "AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $3)",
                token_id,
                scope_rules.ADMIN,
                now,
            )
            if found.state(now) == "active" and not others:
                raise Conflict(
                    f"token {token_id} is the last usable admin token: create another first "
                    "(`shardlog tokens create --tenant system --name NAME --scopes admin`), or "
                    "revoke it with force=true (then only the CLI can make an admin token)",
                    "token_id",
                )
        row = await connection.fetchrow(
            f"UPDATE api_tokens SET revoked_at = now() WHERE id = $1 RETURNING {TOKEN_COLUMNS}",
            token_id,
        )
    return _token(row)


# pg_advisory_xact_lock key of admin-token revocations (any constant unique to this use).
_ADMIN_TOKENS_LOCK = 0x5348_4C41_444D_494E


async def load_tokens(db: Executor) -> dict[str, TokenRecord]:
    """Every token a router may be shown, revoked ones included (so that their answer says
    so). Expired and revoked tokens are cheap to keep: a few hundred bytes each."""
    rows = await db.fetch(f"SELECT {TOKEN_COLUMNS} FROM api_tokens")
    return {row["id"]: _token(row) for row in rows}


async def touch(db: Executor, used: Mapping[str, datetime]) -> None:
    """Record last-used times (one statement for the whole batch; never moves one back)."""
    if not used:
        return
    ids = sorted(used)
    await db.execute(
        "UPDATE api_tokens AS t SET last_used_at = u.at "
        "FROM unnest($1::text[], $2::timestamptz[]) AS u (id, at) "
        "WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.at)",
        ids,
        [used[i] for i in ids],
    )
