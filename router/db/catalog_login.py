"""Who the router and the CLI's catalog commands are on the metadata database: the catalog role
(router/db/roles.py CATALOG, granted by schema/metadata/0009_catalog_role.sql) at the hosts of
the metadata DSN, not the DSN's user, which is the bootstrap superuser that owns the catalog and
runs the migrations (router/bootstrap.py). ``SHARDLOG_METADATA__LOGIN=dsn`` logs in as the
DSN's user instead. A router whose login is a superuser refuses to start unless
``SHARDLOG_METADATA__ALLOW_SUPERUSER`` says otherwise."""

from __future__ import annotations

import logging
import sys

import asyncpg

from router.db import pools, roles
from router.db.dsn import parse_dsn, with_user
from router.settings import MetadataSettings, Settings, with_passfile

log = logging.getLogger(__name__)


class CatalogLoginError(RuntimeError):
    """The catalog login cannot connect, or is a superuser the settings do not allow."""


def catalog_dsn(settings: Settings) -> str:
    """The DSN the router's metadata pool, its catalog listener and the CLI's catalog
    commands connect with."""
    owner_dsn = settings.metadata_dsn()
    if settings.metadata.login == "dsn":
        return owner_dsn
    return with_passfile(with_user(owner_dsn, roles.CATALOG), settings.pools.passfile)


def _login_failed(settings: Settings, exc: Exception) -> CatalogLoginError:
    user = parse_dsn(catalog_dsn(settings)).user or "the DSN's user"
    return CatalogLoginError(
        f"cannot log in to the metadata database as {user}: {exc}. `shardlog migrate` (or "
        "`shardlog up`) creates the catalog role and `shardlog up` its password "
        "(docs/operations.md, PostgreSQL passwords)"
    )


async def connect(settings: Settings) -> asyncpg.Connection:
    """One catalog connection (the CLI's catalog commands, bring-up's catalog writes)."""
    try:
        return await pools.connect_metadata(catalog_dsn(settings), settings.metadata)
    except asyncpg.InvalidAuthorizationSpecificationError as exc:
        raise _login_failed(settings, exc) from exc


async def open_pool(settings: Settings) -> asyncpg.Pool:
    """A pool of catalog connections (the router's, the CLI's)."""
    try:
        return await pools.create_metadata_pool(catalog_dsn(settings), settings.metadata)
    except asyncpg.InvalidAuthorizationSpecificationError as exc:
        raise _login_failed(settings, exc) from exc


async def check_not_superuser(pool: asyncpg.Pool, settings: MetadataSettings) -> None:
    """A router logged in as a superuser could do anything to the metadata server (ALTER
    SYSTEM, COPY ... TO PROGRAM, read pg_authid): refuse, unless allowed, then warn."""
    row = await pool.fetchrow(
        "SELECT current_user AS name, rolsuper FROM pg_roles WHERE rolname = current_user"
    )
    if row is None or not row["rolsuper"]:
        return
    if not settings.allow_superuser:
        raise CatalogLoginError(
            f"the router's catalog login {row['name']} is a PostgreSQL superuser: log in as "
            f"{roles.CATALOG} (SHARDLOG_METADATA__LOGIN=catalog, `shardlog migrate` creates "
            "it), or set SHARDLOG_METADATA__ALLOW_SUPERUSER=true to run as a superuser anyway"
        )
    warning = (
        f"THE ROUTER'S CATALOG LOGIN {row['name']} IS A POSTGRESQL SUPERUSER "
        "(SHARDLOG_METADATA__ALLOW_SUPERUSER=true): whoever takes over this process owns the "
        "metadata server"
    )
    log.warning("%s", warning)
    print(f"shardlog: WARNING: {warning}", file=sys.stderr, flush=True)
