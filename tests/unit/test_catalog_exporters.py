"""What the catalog takes as an exporter's address, domain and switch (catalog/exporters.py)."""

from __future__ import annotations

import pytest

from router.catalog.exporters import MAX_DOMAIN, check_domain, check_switch, host_address
from router.errors import Invalid


@pytest.mark.parametrize(
    ("spelt", "canonical"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("::FFFF:C000:0201", "192.0.2.1"),
        ("2001:DB8::0001", "2001:db8::1"),
        ("2001:db8:0:0:0:0:0:1", "2001:db8::1"),
        ("::1", "::1"),
        ("::", "::"),
    ],
)
def test_an_address_has_one_spelling(spelt: str, canonical: str) -> None:
    assert host_address(spelt) == canonical


@pytest.mark.parametrize(
    "value",
    [
        "",
        " 192.0.2.1",
        "192.0.2.1\n",
        "192.0.2.0/24",
        "2001:db8::/64",
        "fe80::1%eth0",
        "010.0.0.1",
        "192.0.2.256",
        "router.example",
        "1" * 200,
        "192.0.2.1\x00",
    ],
)
def test_anything_but_one_host_address_is_invalid(value: str) -> None:
    with pytest.raises(Invalid) as caught:
        host_address(value)
    assert caught.value.field == "address"
    assert len(caught.value.message) < 300


@pytest.mark.parametrize("value", [None, 0, 1, MAX_DOMAIN])
def test_domains_in_range(value: int | None) -> None:
    assert check_domain(value) == value


@pytest.mark.parametrize("value", [-1, MAX_DOMAIN + 1, 2**63, True])
def test_domains_out_of_range(value: int) -> None:
    with pytest.raises(Invalid) as caught:
        check_domain(value)
    assert caught.value.field == "domain"


def test_switch_keys_follow_the_ingest_rule_and_the_platform_keeps_its_own() -> None:
    assert check_switch("edge-1", "acme") == "edge-1"
    assert check_switch("shardlog.edge", "system") == "shardlog.edge"
    for switch, tenant in (
        ("", "acme"),
        ("a\x07b", "acme"),
        ("x" * 257, "acme"),
        ("shardlog.edge", "acme"),
    ):
        with pytest.raises(Invalid) as caught:
            check_switch(switch, tenant)
        assert caught.value.field == "switch"
