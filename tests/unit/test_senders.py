"""router/senders.py: the allow-list of sender networks the collector and the syslog listener
share."""

from __future__ import annotations

import pytest

from router.senders import SenderNetworks


@pytest.mark.parametrize(
    ("sender", "allowed"),
    [
        ("10.1.2.3", True),
        ("::ffff:10.1.2.3", True),  # an IPv4 sender on a dual-stack socket
        ("2001:db8::7", True),
        ("10.2.0.1", False),
        ("::ffff:10.2.0.1", False),
        ("2001:db9::1", False),
        ("not an address", False),
    ],
)
def test_only_the_listed_networks_are_read(sender: str, allowed: bool) -> None:
    assert SenderNetworks(["10.1.0.0/16", "2001:db8::/32"]).allows(sender) is allowed


def test_no_list_reads_everyone() -> None:
    assert SenderNetworks().allows("192.0.2.1") and SenderNetworks([]).allows("anything")
