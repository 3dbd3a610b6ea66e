"""`shardlog tenants` and `shardlog tokens`: tenants and API tokens from the command line. The
CLI talks to the catalog itself: whoever can reach the metadata database is an admin."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from router import clock
from router.auth import self_audit, store
from router.auth.bootstrap import write_secret
from router.auth.scopes import SCOPES
from router.cli.catalog_session import with_catalog
from router.cli.output import output, print_table
from router.errors import Invalid
from router.settings import Settings
from router.timestamps import TimestampError, parse_rfc3339


def actor() -> str:
    """How the CLI names its user in created_by and the audit of admin actions."""
    try:
        return f"cli ({getpass.getuser()})"
    except (KeyError, OSError):
        return "cli"


async def record(settings: Settings, action: str, target: str, **details: Any) -> None:
    """The audit row of an admin action the CLI took (router/auth/self_audit.py); one that
    cannot be written is a warning on standard error, the action stands."""
    async with self_audit.standalone(settings) as audit:
        written = await audit.record(actor(), action, target, **details)
    if not written:
        print(
            f"shardlog: warning: the audit row of {action} {target} was not written",
            file=sys.stderr,
        )


# --- tenants ---------------------------------------------------------------------------------


@with_catalog
async def cmd_tenants_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    rows = [t.to_json() for t in await store.list_tenants(db)]
    output(args, rows, lambda: print_table(rows, ["name", "owners", "tokens", "description"]))


@with_catalog
async def cmd_tenants_add(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    tenant = await store.add_tenant(db, args.name, args.description)
    print(f"added tenant {tenant.name}")
    await record(s, "tenant.add", tenant.name)


@with_catalog
async def cmd_tenants_remove(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    removed = await store.remove_tenant(db, args.name, force=args.force)
    print(
        f"removed tenant {args.name} ({removed.tokens} tokens, {removed.exporters} exporter and "
        f"{removed.senders} syslog sender mappings with it)"
    )
    await record(
        s,
        "tenant.remove",
        args.name,
        tokens=removed.tokens,
        exporters=removed.exporters,
        syslog_senders=removed.senders,
    )


# --- tokens ----------------------------------------------------------------------------------


def _scopes(values: list[str]) -> list[str]:
    return [s.strip() for value in values for s in value.split(",") if s.strip()]


def _expiry(args: argparse.Namespace, now: datetime) -> datetime | None:
    if args.expires_at is not None:
        try:
            return parse_rfc3339(args.expires_at)
        except TimestampError as exc:
            raise Invalid(f"--expires-at {exc}", "expires_at") from None
    if args.expires_days is not None:
        return now + timedelta(days=args.expires_days)
    return None


@with_catalog
async def cmd_tokens_create(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    now = clock.now()
    expires_at = _expiry(args, now)
    store.check_expiry(expires_at, now)
    made, text = await store.create_token(
        db,
        args.tenant,
        args.name,
        _scopes(args.scopes),
        actor(),
        expires_at=expires_at,
        limits=store.TokenLimits(args.rate, args.bytes_per_s, args.max_searches),
    )
    expiry = None if made.expires_at is None else made.expires_at.isoformat()
    described = f"token {made.id} of tenant {made.tenant} ({', '.join(made.scopes)})"
    if expiry:
        described += f", expires {expiry}"
    if args.output:
        write_secret(Path(args.output), text)
        print(f"{described}: written to {args.output} (mode 0600)")
    else:
        # The token alone on standard output (TOKEN=$(shardlog tokens create ...)); the rest
        # on standard error.
        print(f"{described}; shown once, store it now:", file=sys.stderr)
        print(text, flush=True)
    await record(
        s,
        "token.create",
        made.id,
        tenant=made.tenant,
        name=made.name,
        scopes=list(made.scopes),
        expires_at=expiry,
    )


@with_catalog
async def cmd_tokens_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    now = clock.now()
    rows: list[dict[str, Any]] = [t.to_json(now) for t in await store.list_tokens(db, args.tenant)]

    def table() -> None:
        shown = [{**r, "scopes": ",".join(r["scopes"])} for r in rows]
        print_table(
            shown,
            ["id", "tenant", "name", "state", "scopes", "expires_at", "last_used_at"],
        )

    output(args, rows, table)


@with_catalog
async def cmd_tokens_revoke(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    revoked = await store.revoke_token(db, args.id, force=args.force)
    assert revoked.revoked_at is not None
    print(f"token {revoked.id} ({revoked.name}) revoked at {revoked.revoked_at.isoformat()}")
    await record(s, "token.revoke", revoked.id, tenant=revoked.tenant, name=revoked.name)


# --- parsers ---------------------------------------------------------------------------------


def add_parsers(commands: Any) -> None:
    tenants = commands.add_parser("tenants", help="tenants").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    listing = tenants.add_parser("list", help="tenants with their key and token counts")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_tenants_list)
    add = tenants.add_parser("add", help="add a tenant")
    add.add_argument("name")
    add.add_argument("--description", default="")
    add.set_defaults(run=cmd_tenants_add)
    remove = tenants.add_parser(
        "remove", help="remove a tenant that owns no keys (its tokens and exporters: --force)"
    )
    remove.add_argument("name")
    remove.add_argument(
        "--force",
        action="store_true",
        help="also remove its tokens, exporter and syslog sender mappings",
    )
    remove.set_defaults(run=cmd_tenants_remove)

    tokens = commands.add_parser("tokens", help="API tokens").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    create = tokens.add_parser(
        "create", help="create a token; it is printed once (or written to --output)"
    )
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", required=True, help="what the token is for")
    create.add_argument(
        "--scopes",
        action="append",
        required=True,
        help=f"comma-separated, repeatable: {', '.join(SCOPES)}, owner:PREFIX, switch:PREFIX",
    )
    expiry = create.add_mutually_exclusive_group()
    expiry.add_argument("--expires-days", type=float, help="expire after this many days")
    expiry.add_argument("--expires-at", help="expire at this RFC 3339 time")
    create.add_argument("--rate", type=float, help="requests per second (0: none)")
    create.add_argument("--bytes-per-s", type=int, help="write body bytes per second (0: none)")
    create.add_argument("--max-searches", type=int, help="searches and exports at once")
    create.add_argument("--output", help="write the token to this file (mode 0600) instead")
    create.set_defaults(run=cmd_tokens_create)
    tokens_list = tokens.add_parser("list", help="tokens (never their secrets)")
    tokens_list.add_argument("--tenant")
    tokens_list.add_argument("--json", action="store_true")
    tokens_list.set_defaults(run=cmd_tokens_list)
    revoke = tokens.add_parser("revoke", help="revoke a token: every router refuses it at once")
    revoke.add_argument("id", help="the token's id (16 hex digits; `tokens list` shows it)")
    revoke.add_argument(
        "--force", action="store_true", help="revoke even the last usable admin token"
    )
    revoke.set_defaults(run=cmd_tokens_revoke)
