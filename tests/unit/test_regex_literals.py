"""The substrings every match of a regular expression holds (router/compaction/literals.py):
examples of each rule; tests/integration/test_regex_literals.py checks them against
PostgreSQL's own matching."""

from __future__ import annotations

import pytest

from router.compaction.literals import required_literals


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        ("error", ["error"]),
        ("foo.*bar", ["foo", "bar"]),
        ("^ABC$", ["ABC"]),
        ("ab[cx]yz", ["ab", "yz"]),
        ("[^]a]bc", ["bc"]),
        ("[[:alpha:]]x]", ["x"]),
        ("a(b|c)d", ["a", "d"]),
        ("foo(bar)+baz", ["foo", "baz"]),
        ("(ab", []),
        ("ab+c", ["a", "bc"]),
        ("ab*c", ["a", "c"]),
        ("ab?c", ["a", "c"]),
        ("ab*?cd", ["a", "cd"]),
        ("a{2}bc", ["bc"]),
        ("xa{2,3}bc", ["x", "bc"]),
        (r"\.conf", [".conf"]),
        (r"\d+ms", ["ms"]),
        (r"a\y-b", ["a", "-b"]),
        (r"\x41BC-d", ["-d"]),
        (r"\dms", []),
    ],
)
def test_the_substrings_a_match_must_hold(pattern: str, literals: list[str]) -> None:
    assert required_literals(pattern) == literals


@pytest.mark.parametrize(
    "pattern",
    [
        "x|y",
        "abc|",
        "***=abc",
        "***:abc",
        "(?i)abc",
        "(?x) a b c",
        "a{x|cd}",
        "ab{,2}",
        "ab{",
    ],
)
def test_what_is_not_understood_names_nothing(pattern: str) -> None:
    assert required_literals(pattern) == []
