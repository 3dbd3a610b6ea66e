"""Tokens of a local cluster (`make up`): the tenant ``default``, a bootstrap admin token and a
read/write token of ``default``, each written to a file under ``<data dir>/tokens/`` that only
its user can read. Idempotent: a token whose file still holds a valid token is kept."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from router import clock
from router.auth import scopes, store, tokens
from router.catalog.store import Executor
from router.db import catalog_login
from router.settings import Settings

DEFAULT_TENANT = "default"
# The admin token also reads: the audit of admin actions (owner shardlog.admin) is the system
# tenant's.
ADMIN_SCOPES = (scopes.ADMIN, scopes.AUDIT_READ, scopes.FLOWS_READ)
READ_WRITE_SCOPES = scopes.DATA_SCOPES


@dataclass(frozen=True)
class TokenFile:
    label: str
    path: Path
    tenant: str
    scopes: tuple[str, ...]
    outcome: Literal["created", "kept"]


def token_dir(settings: Settings) -> Path:
    return settings.cluster.data_dir / "tokens"


async def ensure_local_tokens(settings: Settings, created_by: str) -> list[TokenFile]:
    directory = token_dir(settings)
    connection = await catalog_login.connect(settings)
    try:
        await store.ensure_tenant(
            connection, DEFAULT_TENANT, "the local cluster's tenant (make up)"
        )
        return [
            await _ensure(
                connection,
                "admin",
                directory / "admin.token",
                scopes.SYSTEM_TENANT,
                ADMIN_SCOPES,
                created_by,
            ),
            await _ensure(
                connection,
                "default read/write",
                directory / "default.token",
                DEFAULT_TENANT,
                READ_WRITE_SCOPES,
                created_by,
            ),
        ]
    finally:
        await connection.close()


async def _ensure(
    db: Executor,
    label: str,
    path: Path,
    tenant: str,
    wanted: tuple[str, ...],
    created_by: str,
) -> TokenFile:
    if await _still_valid(db, path, tenant):
        return TokenFile(label, path, tenant, wanted, "kept")
    _, text = await store.create_token(db, tenant, f"{label} (make up)", wanted, created_by)
    write_secret(path, text)
    return TokenFile(label, path, tenant, wanted, "created")


def read_token(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return None


async def _still_valid(db: Executor, path: Path, tenant: str) -> bool:
    parsed = tokens.parse(read_token(path) or "")
    if parsed is None:
        return False
    record = await store.get_token(db, parsed[0])
    return (
        record is not None
        and record.tenant == tenant
        and record.state(clock.now()) == "active"
        and tokens.matches(parsed[1], record.digest)
    )


def write_secret(path: Path, text: str) -> None:
    """Write a token to ``path``, readable and writable by its user only (mode 0600 in a
    0700 directory), replacing the file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, f"{text}\n".encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
