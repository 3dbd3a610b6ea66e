"""Which switch an exporter's flows belong to. An operator maps an exporter address (and, when
one address exports for several devices, an observation domain) to a switch key of a tenant;
an exporter with no mapping gets ``exporter-<address>`` in the collector's default tenant, or
its flows are refused (SHARDLOG_COLLECTOR__UNKNOWN_EXPORTERS). Datagrams from outside the
allowed networks are refused before they are decoded. Pure: the mappings are handed in."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from router.senders import SenderNetworks


@dataclass(frozen=True, slots=True)
class Owner:
    switch: str
    tenant: str


@dataclass(frozen=True, slots=True)
class ExporterMapping:
    """An exporter's address (as the collector sees it) and domain (None: any) -> its switch."""

    address: str
    domain: int | None
    switch: str
    tenant: str


def default_switch(address: str) -> str:
    """The switch key of an unmapped exporter: ``exporter-10.0.0.1``, ``exporter-2001-db8--1``
    (colons become dashes: a key is what a URL path and a CSV cell carry without quoting)."""
    return "exporter-" + address.replace(":", "-")


class ExporterDirectory:
    def __init__(
        self,
        mappings: Iterable[ExporterMapping],
        unknown: Literal["name", "refuse"],
        unknown_tenant: str,
        allowed: Iterable[str] = (),
    ) -> None:
        self._by_key: Mapping[tuple[str, int | None], Owner] = {
            (_canonical(m.address), m.domain): Owner(m.switch, m.tenant) for m in mappings
        }
        self._unknown = unknown
        self._unknown_tenant = unknown_tenant
        self._allowed = SenderNetworks(allowed)
        self._mapped = frozenset(address for address, _ in self._by_key)

    def allows(self, address: str) -> bool:
        """Whether datagrams from ``address`` are read at all."""
        return self._allowed.allows(address)

    def mapped(self, address: str) -> bool:
        """Whether an operator mapped ``address`` (any of its domains) to a switch."""
        return _canonical(address) in self._mapped

    def owner(self, address: str, domain: int) -> Owner | None:
        """The switch and tenant of an exporter's domain; None: its flows are refused."""
        canonical = _canonical(address)
        found = self._by_key.get((canonical, domain)) or self._by_key.get((canonical, None))
        if found is not None:
            return found
        if self._unknown == "refuse":
            return None
        return Owner(default_switch(canonical), self._unknown_tenant)


def _canonical(address: str) -> str:
    """One spelling per address (``::ffff:10.0.0.1`` as 10.0.0.1: a dual-stack socket's view
    of an IPv4 exporter)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
