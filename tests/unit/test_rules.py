"""What catalog names and owner keys may look like (router.catalog.rules)."""

from __future__ import annotations

import pytest

from router.catalog import rules
from router.errors import Invalid


@pytest.mark.parametrize("name", ["a", "group1", "shard-01_b", "a" + "b" * 62])
def test_valid_names(name) -> None:
    assert rules.check_name(name, "name") == name


@pytest.mark.parametrize(
    "name", ["", "1a", "Abc", "a b", "a" * 64, "abc\n", "abc\r\n", "a\x00b", "\nabc"]
)
def test_invalid_names_name_their_field(name) -> None:
    # "abc\n" passed re.match ("$" matches before a final newline) and then failed the
    # metadata database's CHECK: a 500 from the admin API.
    with pytest.raises(Invalid) as raised:
        rules.check_name(name, "group")
    assert raised.value.field == "group"
