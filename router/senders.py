"""Which senders a listener reads (the collector's exporters, the syslog listener's clients):
an allow-list of networks, empty for any. An IPv4 sender seen on a dual-stack socket
(``::ffff:192.0.2.1``) is its IPv4 address. Pure."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


class SenderNetworks:
    def __init__(self, networks: Iterable[str] = ()) -> None:
        self._networks = tuple(ipaddress.ip_network(net, strict=False) for net in networks)

    def allows(self, sender: str) -> bool:
        if not self._networks:
            return True
        try:
            address = ipaddress.ip_address(sender)
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self._networks)
