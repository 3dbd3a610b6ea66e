"""Which switch a flow exporter's flows belong to (schema/metadata/0011_exporters.sql): the only
module that writes the mappings; the admin API and the CLI change them, the collector reads them
(router/collector/exporters.py). A change bumps the catalog version and NOTIFYs, so the
collector can reload at once.

An exporter is one IP host address, spelt one way (``2001:db8::1``; ``::ffff:192.0.2.1`` is
192.0.2.1, as the collector sees an IPv4 exporter on a dual-stack socket), and optionally an
observation domain (None: every domain of the address without a mapping of its own). Its switch
key follows the rule of switch keys in ingest, and must not belong to another tenant: the
collector writes the flows as the mapping's tenant, which could not write them."""

from __future__ import annotations

import ipaddress
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from router.auth.scopes import RESERVED_PREFIX, SYSTEM_TENANT
from router.catalog import rules, store
from router.catalog.snapshot import CatalogSnapshot
from router.catalog.store import Executor, connection_of
from router.collector.exporters import ExporterMapping
from router.errors import Conflict, Invalid, NotFound, excerpt

MAX_DOMAIN = 2**32 - 1
# The longest spelling of an IPv6 address (IPv4-mapped, uncompressed) is 45 characters.
MAX_ADDRESS_CHARS = 64
_COLUMNS = "host(address) AS address, domain, switch, tenant"


def host_address(value: str, field: str = "address") -> str:
    """The one spelling of an exporter's address; 422 naming ``field`` for anything but one
    host address (a network, a zone index, a name)."""
    if len(value) > MAX_ADDRESS_CHARS:
        raise Invalid(f"{field} {excerpt(value)} is not an IP address", field)
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        raise Invalid(
            f"{field} {excerpt(value)} is not an IP host address (like 192.0.2.1 or "
            "2001:db8::1, without a prefix length)",
            field,
        ) from None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            raise Invalid(f"{field} {excerpt(value)}: an exporter has no zone index", field)
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
    return str(ip)


def check_domain(value: int | None, field: str = "domain") -> int | None:
    if value is not None and (isinstance(value, bool) or not 0 <= value <= MAX_DOMAIN):
        raise Invalid(f"{field} is an observation domain: 0 to {MAX_DOMAIN}, or null", field)
    return value


def check_switch(switch: str, tenant: str, field: str = "switch") -> str:
    """A switch key as ingest takes it, and one the tenant's writes may use."""
    rules.check_owner_key(switch, field)
    if switch.startswith(RESERVED_PREFIX) and tenant != SYSTEM_TENANT:
        raise Invalid(
            f"{field} {excerpt(switch)} is reserved for the platform ({RESERVED_PREFIX}*)", field
        )
    return switch


def describe(address: str, domain: int | None) -> str:
    """How messages and the audit of admin actions name an exporter's mapping."""
    return address if domain is None else f"{address} domain {domain}"


def exporter_json(mapping: ExporterMapping) -> dict[str, Any]:
    return {
        "address": mapping.address,
        "domain": mapping.domain,
        "switch": mapping.switch,
        "tenant": mapping.tenant,
    }


def _mapping(row: Any) -> ExporterMapping:
    return ExporterMapping(row["address"], row["domain"], row["switch"], row["tenant"])


async def list_exporters(db: Executor, tenant: str | None = None) -> list[ExporterMapping]:
    """Every mapping (of ``tenant`` only, unless None), by address and domain (None first)."""
    rows = await db.fetch(
        f"SELECT {_COLUMNS} FROM exporters WHERE $1::text IS NULL OR tenant = $1 "
        "ORDER BY exporters.address, domain NULLS FIRST",
        tenant,
    )
    return [_mapping(row) for row in rows]


async def set_exporter(
    db: Executor, address: str, domain: int | None, switch: str, tenant: str
) -> ExporterMapping:
    """Map the exporter (inserted, or replacing its mapping) and claim its switch for the
    tenant. 404 for an unknown tenant; 409 when the switch key belongs to another tenant, as an
    owner or in another mapping."""
    address = host_address(address)
    check_domain(domain)
    rules.check_name(tenant, "tenant")
    check_switch(switch, tenant)
    async with connection_of(db) as connection:
        # Which groups a new switch may go to (as a router's cached snapshot says it).
        snapshot = await store.load_snapshot(connection)
        return await _set_exporter(connection, snapshot, address, domain, switch, tenant)


async def _set_exporter(
    connection: asyncpg.Connection | PoolConnectionProxy,
    snapshot: CatalogSnapshot,
    address: str,
    domain: int | None,
    switch: str,
    tenant: str,
) -> ExporterMapping:
    async with connection.transaction():
        # Mappings of one switch are made one at a time: two tenants cannot both take it.
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtext('shardlog.exporters'), hashtext($1))", switch
        )
        if await connection.fetchval("SELECT 1 FROM tenants WHERE name = $1", tenant) is None:
            raise NotFound(f"tenant {tenant!r} does not exist", "tenant")
        # The switch is claimed for the tenant now, not at the collector's first write: no
        # other tenant's write can take the key in between (the collector's flows would then
        # be refused).
        claimed = await store.resolve_owners(connection, snapshot, "flow", [switch], tenant)
        owner = claimed[switch].tenant
        if owner != tenant:
            raise Conflict(
                f"switch {excerpt(switch)} belongs to tenant {owner!r}: its flows could not be "
                "written as another tenant's",
                "switch",
            )
        other = await connection.fetchrow(
            "SELECT host(address) AS address, tenant FROM exporters WHERE switch = $1 "
            "AND tenant <> $2 AND NOT (address = $3::text::inet "
            "AND domain IS NOT DISTINCT FROM $4) LIMIT 1",
            switch,
            tenant,
            address,
            domain,
        )
        if other is not None:
            raise Conflict(
                f"switch {excerpt(switch)} is the switch of exporter {other['address']} of "
                f"tenant {other['tenant']!r}",
                "switch",
            )
        try:
            row = await connection.fetchrow(
                "INSERT INTO exporters (address, domain, switch, tenant) "
                "VALUES ($1::text::inet, $2, $3, $4) "
                "ON CONFLICT (address, domain) DO UPDATE SET switch = EXCLUDED.switch, "
                f"tenant = EXCLUDED.tenant, updated_at = now() RETURNING {_COLUMNS}",
                address,
                domain,
                switch,
                tenant,
            )
        except asyncpg.ForeignKeyViolationError:
            # The tenant was removed meanwhile.
            raise NotFound(f"tenant {tenant!r} does not exist", "tenant") from None
    return _mapping(row)


async def remove_exporter(db: Executor, address: str, domain: int | None) -> bool:
    """Remove the mapping of the exporter's domain (None: its every-domain mapping, not those
    of single domains). False when there was none."""
    address = host_address(address)
    check_domain(domain)
    removed = await db.fetchval(
        "DELETE FROM exporters WHERE address = $1::text::inet "
        "AND domain IS NOT DISTINCT FROM $2 RETURNING 1",
        address,
        domain,
    )
    return removed is not None
