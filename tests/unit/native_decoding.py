"""What the native decoders' tests share: the request's clock and limits."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from router.ingest.records import Limits

T = TypeVar("T")
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
