"""Which tenant a syslog sender's messages are written as
(schema/metadata/0015_syslog_senders.sql): the only module that writes the mappings; the admin
API and the CLI change them, the listener reads them (router/syslogd/senders.py). A change bumps
the catalog version and NOTIFYs, so the listener reloads at once.

A sender is spelt one way: a network with its prefix length and no host bits (``192.0.2.0/24``;
a bare address is its /32 or /128; an IPv4-mapped IPv6 address is its IPv4 address), or
``cert:<common name>``, the subject common name of a client certificate the listener verified on
its TLS port."""

from __future__ import annotations

import ipaddress

import asyncpg

from router.catalog import rules
from router.catalog.store import Executor
from router.errors import Invalid, NotFound, excerpt
from router.syslogd.senders import CERTIFICATE_PREFIX, SenderMapping

MAX_SENDER_CHARS = 260
MAX_COMMON_NAME_CHARS = 255
_COLUMNS = "COALESCE(text(network), 'cert:' || certificate) AS sender, tenant"


def canonical_sender(value: str, field: str = "sender") -> str:
    """The one spelling of a sender; 422 naming ``field`` for anything else."""
    if len(value) > MAX_SENDER_CHARS:
        raise Invalid(f"{field} {excerpt(value)} is longer than {MAX_SENDER_CHARS}", field)
    if value.startswith(CERTIFICATE_PREFIX):
        name = value.removeprefix(CERTIFICATE_PREFIX)
        if not name or len(name) > MAX_COMMON_NAME_CHARS or not name.isprintable():
            raise Invalid(
                f"{field} {excerpt(value)}: a certificate's common name is 1 to "
                f"{MAX_COMMON_NAME_CHARS} printable characters",
                field,
            )
        return value
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise Invalid(
            f"{field} {excerpt(value)} is neither a network (192.0.2.0/24, 2001:db8::/48, "
            f"192.0.2.7) nor cert:<common name>: {exc}",
            field,
        ) from None
    if isinstance(network, ipaddress.IPv6Network):
        if network.network_address.scope_id is not None:
            raise Invalid(f"{field} {excerpt(value)}: a sender has no zone index", field)
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            if network.prefixlen != network.max_prefixlen:
                raise Invalid(
                    f"{field} {excerpt(value)}: spell an IPv4 network as IPv4, not IPv4-mapped",
                    field,
                )
            network = ipaddress.ip_network(mapped)
    return str(network)


def sender_json(mapping: SenderMapping) -> dict[str, str]:
    return {"sender": mapping.sender, "tenant": mapping.tenant}


async def list_senders(db: Executor, tenant: str | None = None) -> list[SenderMapping]:
    """Every mapping (of ``tenant`` only, unless None): networks by address, then certificates
    by name."""
    rows = await db.fetch(
        f"SELECT {_COLUMNS} FROM syslog_senders WHERE $1::text IS NULL OR tenant = $1 "
        "ORDER BY network IS NULL, network, certificate",
        tenant,
    )
    return [SenderMapping(row["sender"], row["tenant"]) for row in rows]


async def set_sender(db: Executor, sender: str, tenant: str) -> SenderMapping:
    """Map the sender to the tenant (inserted, or replacing its mapping). 404 for an unknown
    tenant."""
    sender = canonical_sender(sender)
    rules.check_name(tenant, "tenant")
    network, certificate = _columns(sender)
    conflict = "certificate" if network is None else "network"
    try:
        row = await db.fetchrow(
            "INSERT INTO syslog_senders (network, certificate, tenant) "
            "VALUES ($1::text::cidr, $2, $3) "
            f"ON CONFLICT ({conflict}) DO UPDATE SET tenant = EXCLUDED.tenant, "
            f"updated_at = now() RETURNING {_COLUMNS}",
            network,
            certificate,
            tenant,
        )
    except asyncpg.ForeignKeyViolationError:
        raise NotFound(f"tenant {tenant!r} does not exist", "tenant") from None
    assert row is not None  # an upsert returns its row
    return SenderMapping(row["sender"], row["tenant"])


async def remove_sender(db: Executor, sender: str) -> bool:
    """Remove the sender's mapping; False when there was none."""
    network, certificate = _columns(canonical_sender(sender))
    removed = await db.fetchval(
        "DELETE FROM syslog_senders WHERE network = $1::text::cidr OR certificate = $2 RETURNING 1",
        network,
        certificate,
    )
    return removed is not None


def _columns(sender: str) -> tuple[str | None, str | None]:
    if sender.startswith(CERTIFICATE_PREFIX):
        return None, sender.removeprefix(CERTIFICATE_PREFIX)
    return sender, None
