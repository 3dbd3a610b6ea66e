"""Who a syslog sender is: the tenant its messages are written as. An operator maps a network
(a host is a /32 or /128) or a TLS client certificate's subject common name to a tenant
(router/catalog/syslog_senders.py); the certificate's mapping wins, else the longest network
holding the sender's address. A sender with neither is unknown: refused, or written as the
quarantine tenant when one is set (SHARDLOG_SYSLOG__QUARANTINE_TENANT). Pure: the mappings
are handed in."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

CERTIFICATE_PREFIX = "cert:"
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class SenderMapping:
    """A network (``192.0.2.0/24``) or a certificate (``cert:<common name>``) -> its tenant."""

    sender: str
    tenant: str


class Peer(NamedTuple):
    """A sender as the listener sees it: its address, and the common name of the client
    certificate it showed (None: no certificate, or not on the TLS port)."""

    address: str
    certificate: str | None = None

    def describe(self) -> str:
        if self.certificate is None:
            return self.address
        return f"{self.address} ({CERTIFICATE_PREFIX}{self.certificate})"


def peer_of(writer: asyncio.StreamWriter) -> Peer:
    """The peer of a stream; its certificate's name only once the TLS handshake verified it
    against the client CA (an unverified certificate is never asked for, never read)."""
    address = str((writer.get_extra_info("peername") or ("?", 0))[0])
    certificate = writer.get_extra_info("peercert")
    return Peer(address, common_name(certificate) if certificate else None)


def common_name(certificate: Mapping[str, object]) -> str | None:
    """The subject's commonName of a certificate as ``SSLSocket.getpeercert()`` decodes it."""
    subject = certificate.get("subject", ())
    assert isinstance(subject, tuple)
    for rdn in subject:
        for name, value in rdn:
            if name == "commonName":
                return str(value)
    return None


class SenderDirectory:
    def __init__(
        self, mappings: Iterable[SenderMapping], quarantine_tenant: str | None = None
    ) -> None:
        self._certificates: dict[str, str] = {}
        # prefix length -> network -> tenant, longest prefixes first.
        networks: dict[int, dict[IPNetwork, str]] = {}
        for mapping in mappings:
            if mapping.sender.startswith(CERTIFICATE_PREFIX):
                name = mapping.sender.removeprefix(CERTIFICATE_PREFIX)
                self._certificates[name] = mapping.tenant
            else:
                network = ipaddress.ip_network(mapping.sender)
                networks.setdefault(network.prefixlen, {})[network] = mapping.tenant
        self._networks = sorted(networks.items(), reverse=True)
        self._quarantine = quarantine_tenant
        self._size = len(self._certificates) + sum(len(by) for by in networks.values())

    def __len__(self) -> int:
        return self._size

    def known(self, peer: Peer) -> str | None:
        """The tenant of the peer's own mapping; None: no mapping holds it."""
        if peer.certificate is not None and peer.certificate in self._certificates:
            return self._certificates[peer.certificate]
        try:
            address = ipaddress.ip_address(peer.address)
        except ValueError:
            return None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        for length, by_network in self._networks:
            if length > address.max_prefixlen:
                continue
            network = ipaddress.ip_network((address, length), strict=False)
            tenant = by_network.get(network)
            if tenant is not None:
                return tenant
        return None

    def tenant_of(self, peer: Peer) -> str | None:
        """The tenant the peer's messages are written as; None: they are refused."""
        known = self.known(peer)
        return self._quarantine if known is None else known
