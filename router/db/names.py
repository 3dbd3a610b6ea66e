"""The only place table names are built, parsed and quoted.

Day tables are named from the owner's catalog id, never from the owner key: ``audit_o42_20261123``
for an audit owner, ``flow_s7_20261123`` for a switch. Ids are unique per owner, so two owners
can never share a table, every name is ASCII well under PostgreSQL's 63-byte limit, and nothing a
client sends reaches an identifier.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

Kind = Literal["audit", "flow"]

_PREFIX: dict[Kind, str] = {"audit": "audit_o", "flow": "flow_s"}
_DAY_TABLE = re.compile(r"^(audit_o|flow_s)([1-9][0-9]{0,18})_([0-9]{8})$")
_SAFE_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
MAX_IDENTIFIER_BYTES = 63


def quote_ident(name: str) -> str:
    """Quote an identifier that this module built (or a fixed one); anything else is a bug."""
    if not _SAFE_IDENTIFIER.match(name):
        raise ValueError(f"refusing to quote unexpected identifier {name!r}")
    return f'"{name}"'


@dataclass(frozen=True)
class Reach:
    """Which owners of a shard's mirror (``shard_owners``) a search of a prefix or of no owner
    covers: of ``tenant`` (None: any), with a key starting with one of ``prefixes`` (none: any)
    and with ``prefix`` (None: any), not one of ``excluded`` (owners the search reads by name),
    and no platform key (``reserved``, a prefix) unless it is None."""

    tenant: str | None
    prefixes: tuple[str, ...]
    prefix: str | None
    reserved: str | None
    excluded: tuple[int, ...] = ()


@dataclass(frozen=True, order=True)
class DayTable:
    kind: Kind
    owner_id: int
    day: date
    # The catalog's layout of the table (day_tables.layout): its rows are packed into the
    # day's segment table, bar late writes (router/compaction/layout.py). Not part of the
    # table's identity: a compacted table is the same table.
    compacted: bool = field(default=False, compare=False)
    # Where the owner-day's rows are on its shard (docs/architecture.md, "Reading both
    # layouts"): its own table (``own``) and its rows in the shard's shared table of the day
    # (``shared``), read together. Not part of the owner-day's identity either.
    own: bool = field(default=True, compare=False)
    shared: bool = field(default=False, compare=False)
    # A shard-day branch (owner id 0): the shared rows of every owner ``reach`` covers on the
    # shard, named by the rows themselves (docs/architecture.md, "Reading both layouts",
    # "Pages"): a search of a prefix or of no owner does not enumerate its small owners.
    reach: Reach | None = field(default=None, compare=False)
    # The shard-day's shared rows are compacted (shared_tables.layout): read as the shared
    # table's late rows and the shard-day's shared segments (docs/architecture.md,
    # "Compacting shared days").
    shared_compacted: bool = field(default=False, compare=False)

    @property
    def shard_day(self) -> bool:
        return self.reach is not None

    @property
    def name(self) -> str:
        return f"{_PREFIX[self.kind]}{self.owner_id}_{self.day:%Y%m%d}"

    @property
    def quoted(self) -> str:
        return quote_ident(self.name)

    def index_name(self, suffix: str) -> str:
        return quote_ident(f"{self.name}_{suffix}")

    @property
    def all_view(self) -> str:
        """The view of a compacted owner-day on its shard: its late heap rows and its unpacked
        segments (docs/architecture.md, "Compacted days")."""
        return quote_ident(f"{self.name}_all")

    @property
    def shared_name(self) -> str:
        """The shared table of this owner-day's shard, kind and day."""
        return shared_table(self.kind, self.day)

    @property
    def shared_quoted(self) -> str:
        return quote_ident(self.shared_name)

    @property
    def segments(self) -> str:
        """The segment table of this table's shard, kind and day."""
        return segment_table(self.kind, self.day)

    @property
    def shared_segments(self) -> str:
        """The shared segment table of this table's shard, kind and day."""
        return shared_segment_table(self.kind, self.day)


def day_table_format(kind: Kind, day: date) -> str:
    """A day table's name with ``%s`` for its owner id: SQL's format() makes the name of any
    owner's table of ``kind`` and ``day``."""
    return f"{_PREFIX[kind]}%s_{day:%Y%m%d}"


def shard_day(kind: Kind, day: date, reach: Reach) -> DayTable:
    """The shared rows of a shard's ``kind`` and ``day`` of every owner ``reach`` covers."""
    return DayTable(kind, 0, day, own=False, shared=True, reach=reach)


def day_table(kind: Kind, owner_id: int, day: date | datetime) -> DayTable:
    if owner_id < 1:
        raise ValueError(f"owner id must be positive, not {owner_id}")
    if isinstance(day, datetime):
        day = day.date()
    return DayTable(kind, owner_id, day)


def segment_table(kind: Kind, day: date) -> str:
    """The quoted name of a shard's segment table of one kind and day: the packed rows of
    every owner's compacted day there (``audit_segments_20261123``). Not a day table's name:
    inventories never take it for one."""
    return quote_ident(f"{kind}_segments_{day:%Y%m%d}")


def shared_segment_table(kind: Kind, day: date) -> str:
    """The quoted name of a shard's shared segment table of one kind and day: the compacted
    rows of its shared table, many owners' to a segment (``audit_shared_segments_20261123``).
    No day table's, segment table's or shared table's name."""
    return quote_ident(f"{kind}_shared_segments_{day:%Y%m%d}")


def shared_all_view(kind: Kind, day: date) -> str:
    """The quoted name of a compacted shard-day's view: its shared table's late rows and its
    unpacked shared segments, with the shared table's columns."""
    return quote_ident(f"{kind}_shared_{day:%Y%m%d}_all")


_SEGMENT_TABLE = re.compile(r"^(audit|flow)_segments_([0-9]{8})$")


def parse_segment_table(name: str) -> tuple[Kind, date] | None:
    """The (kind, day) a segment table's name stands for, or None for any other relation."""
    match = _SEGMENT_TABLE.fullmatch(name)
    day = _day_of(match.group(2)) if match else None
    if match is None or day is None:
        return None
    kind: Kind = "audit" if match.group(1) == "audit" else "flow"
    return kind, day


def _day_of(digits: str) -> date | None:
    """The day a name's YYYYMMDD stands for, or None when it is no day."""
    try:
        return datetime.strptime(digits, "%Y%m%d").date()
    except ValueError:
        return None


# Shared tables (docs/architecture.md, "Shared tables for small owners"): per shard, kind and
# day, the rows of every small owner of that shard-day (``audit_shared_20261123``), and the
# shard-day's list of its owner-days (``owner_days_20261123``). Neither name is a day table's
# (``audit_o``/``flow_s`` are followed by digits there), nor a segment table's.
_SHARED_TABLE = re.compile(r"^(?:(audit|flow)_shared|(owner_days))_([0-9]{8})$")
SharedRelation = Literal["audit", "flow", "owner_days"]
KINDS: dict[str, Kind] = {"audit": "audit", "flow": "flow"}


def shared_table(kind: Kind, day: date) -> str:
    """The name of a shard's shared table of one kind and day."""
    return f"{kind}_shared_{day:%Y%m%d}"


def owner_days_table(day: date) -> str:
    """The name of a shard's list of the owner-days written into its shared tables of a day."""
    return f"owner_days_{day:%Y%m%d}"


def parse_shared_table(name: str) -> tuple[SharedRelation, date] | None:
    """What a shared relation's name stands for: ("audit" | "flow", day) for a shared table,
    ("owner_days", day) for an owner_days table; None for any other relation."""
    match = _SHARED_TABLE.fullmatch(name)
    day = _day_of(match.group(3)) if match else None
    if match is None or day is None:
        return None
    relation: SharedRelation = "owner_days" if match.group(2) else KINDS[match.group(1)]
    return relation, day


def shared_table_regex() -> str:
    """A regular expression (PostgreSQL's ``~`` as well as Python's) matching the name of any
    shared or owner_days table; the date is not checked."""
    return _SHARED_TABLE.pattern


def parse_day_table(name: str) -> DayTable | None:
    """The DayTable a relation name stands for, or None for any other relation."""
    match = _DAY_TABLE.fullmatch(name)
    day = _day_of(match.group(3)) if match else None
    if match is None or day is None:
        return None
    kind: Kind = "audit" if match.group(1) == "audit_o" else "flow"
    return DayTable(kind, int(match.group(2)), day)


def day_table_pattern(kind: Kind) -> str:
    """A LIKE pattern matching every day table of a kind (for catalog queries)."""
    return _PREFIX[kind].replace("_", "\\_") + "%"


def day_table_regex() -> str:
    """A regular expression (PostgreSQL's ``~`` as well as Python's) matching the name of any
    day table; the date is not checked."""
    return _DAY_TABLE.pattern


# A day table's name inside a statement's text: not part of a longer identifier (an index's).
_DAY_TABLE_IN_TEXT = re.compile(rf"(?<![A-Za-z0-9_]){_DAY_TABLE.pattern[1:-1]}(?![A-Za-z0-9_])")


def fold_day_tables(text: str) -> str:
    """A statement's text with every day table's name replaced by its kind's placeholder
    (``audit_oN_YYYYMMDD``, ``flow_sN_YYYYMMDD``): statements that differ only in the owner and
    day they touch read as one (statement statistics, server logs)."""
    return _DAY_TABLE_IN_TEXT.sub(lambda match: f"{match.group(1)}N_YYYYMMDD", text)


_CATALOG_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


def quote_catalog_name(name: str) -> str:
    """Quote a shard name (validated catalog names: lowercase, digits, '_' and '-')."""
    if not _CATALOG_NAME.match(name):
        raise ValueError(f"refusing to quote unexpected name {name!r}")
    return f'"{name}"'


def quote_literal(value: str) -> str:
    """A string constant for DDL that takes no parameters (foreign server OPTIONS)."""
    if "\x00" in value:
        raise ValueError("NUL in a literal")
    return "'" + value.replace("'", "''") + "'"


def parent_table(kind: Kind, owner_id: int) -> str:
    """The coordinator's parent of one owner's foreign day tables, schema-qualified."""
    return f"fdw.{quote_ident(f'{_PREFIX[kind]}{owner_id}')}"


def foreign_table(table: DayTable, shard: str) -> str:
    """The coordinator's foreign table for one shard's day table: the day table's name and a
    digest of the shard's, which keeps it unique and under 63 bytes."""
    return _foreign(table.name, shard)


def shared_parent(kind: Kind) -> str:
    """The coordinator's parent of the foreign shared tables of one kind, schema-qualified (no
    owner's parent is named so: theirs end in the owner id)."""
    return f"fdw.{quote_ident(f'{kind}_shared')}"


def shared_foreign_table(kind: Kind, day: date, shard: str) -> str:
    """The coordinator's foreign table for one shard's shared table of a kind and day."""
    return _foreign(shared_table(kind, day), shard)


def _foreign(name: str, shard: str) -> str:
    digest = hashlib.blake2b(shard.encode(), digest_size=4).hexdigest()
    return f"fdw.{quote_ident(f'{name}_{digest}')}"
