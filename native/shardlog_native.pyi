from datetime import datetime
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

_Row = TypeVar("_Row", bound=tuple[object, ...])

def audit_rows(
    block: bytes,
    first: int,
    default_ts: datetime,
    latest_micros: int,
    max_content_bytes: int,
    row_type: type[_Row],
    valid_key: Callable[[str], bool],
) -> list[_Row] | None: ...

def flow_rows(
    block: bytes,
    first: int,
    default_ts: datetime,
    latest_micros: int,
    row_type: type[_Row],
    valid_key: Callable[[str], bool],
) -> list[_Row] | None: ...

def audit_copy(rows: list[Sequence[Any]]) -> bytes: ...
