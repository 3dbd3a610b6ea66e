"""The substrings router/compaction/literals.py names for a regular expression, against
PostgreSQL's own matching on a real shard: every content that ``~`` matches holds each of them,
every content that ``~*`` matches holds each up to ASCII case, and the segments' trigram filter
of such a content never rules one out. Patterns are drawn from a grammar of the ARE features
(groups, alternation, brackets, quantifiers, bounds, escapes, anchors) and as raw text; a
pattern PostgreSQL refuses is skipped."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.compaction.literals import required_literals
from services.cluster import LocalCluster
from tests.integration.test_segment_codec import codec_connection, examples

ALPHABET = "abcAB-. {}|1"
LITERAL = st.sampled_from(list("abcAB- 1"))
ATOMS = st.one_of(
    LITERAL,
    st.sampled_from([".", "[ab]", "[^a]", "[]a]", "\\d", "\\.", "\\-", "\\x61", "\\y", "^", "$"]),
)
QUANTIFIERS = st.sampled_from(["", "", "", "*", "+", "?", "{2}", "{0,1}", "{1,}", "*?", "+?"])


def regexes() -> st.SearchStrategy[str]:
    def branch(atom: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        pieces = st.lists(st.tuples(atom, QUANTIFIERS), min_size=1, max_size=6)
        return pieces.map(lambda parts: "".join(a + q for a, q in parts))

    def alternation(atom: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.lists(branch(atom), min_size=1, max_size=2).map("|".join)

    groups = st.recursive(
        ATOMS, lambda inner: alternation(inner).map(lambda text: f"({text})"), max_leaves=6
    )
    return alternation(groups)


def fold(text: str) -> bytes:
    return text.encode().lower()  # bytes.lower folds ASCII alone, as the C locale does


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> AsyncIterator[asyncpg.Connection]:
    async with codec_connection(cluster) as connection:
        yield connection


MATCHED = """
    SELECT c, c ~ $1 AS sensitive, c ~* $1 AS insensitive,
           (SELECT coalesce(bool_and(shardlog_may_contain(shardlog_grams(ARRAY[c]), l)), true)
            FROM unnest($3::text[]) l) AS filtered
    FROM unnest($2::text[]) c
"""


async def assert_held(shard: asyncpg.Connection, pattern: str, contents: list[str]) -> None:
    literals = required_literals(pattern)
    # Contents likely to match: the pattern's own characters with its operators left out.
    contents = [*contents, re.sub(r"[\\\[\](){}|*+?^$.]", "", pattern)]
    try:
        rows = await shard.fetch(MATCHED, pattern, contents, literals)
    except asyncpg.InvalidRegularExpressionError:
        return
    for row in rows:
        content = row["c"]
        if row["sensitive"]:
            assert all(literal in content for literal in literals), (pattern, content)
        if row["insensitive"]:
            assert all(fold(literal) in fold(content) for literal in literals), (pattern, content)
            assert row["filtered"], (pattern, content, literals)


@examples(300)
@given(pattern=regexes(), contents=st.lists(st.text(ALPHABET, max_size=14), max_size=6))
async def test_every_match_of_a_grammar_pattern_holds_its_literals(
    shard: asyncpg.Connection, pattern: str, contents: list[str]
) -> None:
    await assert_held(shard, pattern, contents)


@examples(200)
@given(
    pattern=st.text("ab-{}|()[]*+?^$.\\x1,:", min_size=1, max_size=12),
    contents=st.lists(st.text(ALPHABET + "x[]()", max_size=14), max_size=6),
)
async def test_every_match_of_a_raw_pattern_holds_its_literals(
    shard: asyncpg.Connection, pattern: str, contents: list[str]
) -> None:
    await assert_held(shard, pattern, contents)
