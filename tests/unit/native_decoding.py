"""What the native decoders' tests share: the request's clock and limits, and how many
examples their random property tests draw per run (SHARDLOG_NATIVE_EXAMPLES, default 1,000:
the examples are new on every run, so runs add up; raise it for a deeper search)."""

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from hypothesis import strategies as st

from router.ingest.records import Limits

T = TypeVar("T")
EXAMPLES = int(os.environ.get("SHARDLOG_NATIVE_EXAMPLES", "1000"))
NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
DEFAULT_TS = NOW - timedelta(hours=1)


def limits() -> Limits:
    return Limits(
        max_content_bytes=64,
        max_attrs_bytes=64,
        max_owner_chars=12,
        future_skew=timedelta(seconds=300),
        default_ts=DEFAULT_TS,
    )


def taken_as_per_line(
    fast: list[T] | None,
    expected: list[T] | None,
    block_lines: list[bytes],
    same: Callable[[list[T], list[T]], None],
) -> None:
    """A native decoder either handed the block back (None) or made the per-line path's rows
    of it (``same`` asserts that); it never takes a block the per-line path refuses."""
    if fast is not None:
        assert expected is not None, block_lines
        same(fast, expected)


def hostile_blocks(valid_lines: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[bytes]]:
    """Blocks of noise and of valid lines with one byte replaced by up to three others."""

    def damaged(line: bytes) -> st.SearchStrategy[bytes]:
        cuts = st.tuples(st.integers(0, len(line)), st.binary(max_size=3))
        return cuts.map(lambda cut: line[: cut[0]] + cut[1] + line[cut[0] + 1 :])

    return st.lists(
        st.one_of(st.binary(max_size=80), valid_lines.flatmap(damaged)), min_size=1, max_size=3
    )
