"""Who a syslog sender is: the directory the listener looks senders up in
(router/syslogd/senders.py) and the one spelling the catalog keeps a sender in
(router/catalog/syslog_senders.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from router.catalog.syslog_senders import canonical_sender
from router.errors import Invalid
from router.settings import SyslogSettings
from router.syslogd.senders import Peer, SenderDirectory, SenderMapping, common_name

MAPPINGS = [
    SenderMapping("10.0.0.0/8", "wide"),
    SenderMapping("10.1.0.0/16", "narrow"),
    SenderMapping("10.1.2.3/32", "host"),
    SenderMapping("2001:db8::/32", "six"),
    SenderMapping("cert:web-7.example", "certified"),
]


@pytest.mark.parametrize(
    ("peer", "tenant"),
    [
        (Peer("10.1.2.3"), "host"),
        (Peer("10.1.2.4"), "narrow"),
        (Peer("10.2.0.1"), "wide"),
        (Peer("::ffff:10.1.2.4"), "narrow"),  # an IPv4 sender on a dual-stack socket
        (Peer("2001:db8::7"), "six"),
        (Peer("11.0.0.1"), None),
        (Peer("2001:db9::1"), None),
        (Peer("not an address"), None),
        # A certificate's mapping wins over its address's; an unmapped one has its address's.
        (Peer("10.1.2.3", "web-7.example"), "certified"),
        (Peer("192.0.2.1", "web-7.example"), "certified"),
        (Peer("10.1.2.3", "web-8.example"), "host"),
        (Peer("192.0.2.1", "web-8.example"), None),
    ],
)
def test_the_most_specific_mapping_names_the_tenant(peer: Peer, tenant: str | None) -> None:
    directory = SenderDirectory(MAPPINGS)
    assert directory.known(peer) == tenant
    assert directory.tenant_of(peer) == tenant
    assert len(directory) == len(MAPPINGS)


def test_unknown_senders_are_refused_unless_there_is_a_quarantine() -> None:
    assert SenderDirectory([]).tenant_of(Peer("192.0.2.1")) is None
    quarantined = SenderDirectory(MAPPINGS, "quarantine")
    assert quarantined.tenant_of(Peer("192.0.2.1")) == "quarantine"
    assert quarantined.known(Peer("192.0.2.1")) is None
    assert quarantined.tenant_of(Peer("10.1.2.3")) == "host"


def test_the_quarantine_is_never_the_platform() -> None:
    with pytest.raises(ValidationError, match="system tenant"):
        SyslogSettings(quarantine_tenant="system")
    with pytest.raises(ValidationError):
        SyslogSettings(quarantine_tenant="Not A Tenant")
    assert SyslogSettings().quarantine_tenant is None
    assert SyslogSettings(quarantine_tenant="quarantine").quarantine_tenant == "quarantine"


def test_a_certificate_is_known_by_its_subject_common_name() -> None:
    decoded = {
        "subject": ((("organizationName", "Example"),), (("commonName", "web-7.example"),)),
        "subjectAltName": (("DNS", "other.example"),),
    }
    assert common_name(decoded) == "web-7.example"
    assert common_name({"subject": ((("organizationName", "Example"),),)}) is None


@pytest.mark.parametrize(
    ("spelt", "canonical"),
    [
        ("192.0.2.0/24", "192.0.2.0/24"),
        ("192.0.2.7", "192.0.2.7/32"),
        ("::ffff:192.0.2.7", "192.0.2.7/32"),
        ("2001:DB8::/32", "2001:db8::/32"),
        ("2001:db8::1", "2001:db8::1/128"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("cert:web-7.example", "cert:web-7.example"),
        ("cert:CN with spaces", "cert:CN with spaces"),
    ],
)
def test_a_sender_has_one_spelling(spelt: str, canonical: str) -> None:
    assert canonical_sender(spelt) == canonical


@pytest.mark.parametrize(
    "value",
    [
        "",
        "192.0.2.1/24",  # host bits: a typo more often than not
        "192.0.2.0/33",
        "::ffff:192.0.2.0/120",
        "fe80::1%eth0",
        "web-7.example",
        "cert:",
        "cert:a\nb",
        "cert:" + "x" * 256,
        "1" * 300,
    ],
)
def test_anything_else_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(Invalid) as refused:
        canonical_sender(value)
    assert refused.value.field == "sender"
