import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db.inet import decode, encode_address, version_of


@pytest.mark.parametrize(
    ("text", "canonical", "version"),
    [
        ("10.1.2.3", "10.1.2.3", 4),
        ("2001:DB8:0:0:0:0:0:1", "2001:db8::1", 6),
        ("2001:db8::1", "2001:db8::1", 6),
        ("2001:0db8:0000::0001", "2001:db8::1", 6),
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4", 6),
        ("::", "::", 6),
    ],
)
def test_any_textual_form_is_stored_canonically(text, canonical, version) -> None:
    encoded = encode_address(text)
    assert version_of(encoded) == version
    assert decode(encoded) == canonical


@pytest.mark.parametrize(
    "text",
    [
        "",
        "10.0.0",
        "10.0.0.256",
        "2001:db8::1::2",
        "fe80::1%eth0",
        "10.0.0.0/8",
        "host.example",
        " 10.0.0.1",
    ],
)
def test_invalid_addresses_are_refused(text) -> None:
    with pytest.raises(ValueError):
        encode_address(text)


@given(st.ip_addresses())
def test_agrees_with_ipaddress(address) -> None:
    encoded = encode_address(str(address))
    assert decode(encoded) == str(address) or ipaddress.ip_address(decode(encoded)) == address
    assert version_of(encoded) == address.version


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("10.1.0.0/16", "10.1.0.0/16"),
        ("10.1.2.3/16", "10.1.0.0/16"),
        ("2001:DB8::/32", "2001:db8::/32"),
        ("10.0.0.1/32", "10.0.0.1"),
    ],
)
def test_prefixes_encode_for_query_parameters(text, canonical) -> None:
    from router.db.inet import encode

    assert decode(encode(text)) == canonical
