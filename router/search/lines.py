"""Export lines rendered by the shards. Each row of an export statement carries its line as
UTF-8 bytes, the same bytes the router made of it before: the item a search page shows
(router/search/items.py: keys in the export's order, RFC 3339 timestamps as
``datetime.isoformat``, attrs as stored, ``ref`` as router/search/refs.py makes it), or the
row ``csv.writer`` writes with router/csv_cells.py's formula quoting. One piece is left to the
router: an audit row's content in NDJSON, which orjson escapes for a whole round in one call
(json_bodies) at a fraction of what PostgreSQL's to_json costs. The router then merges rows by
their key and joins bytes, with no Python step per row. What is the same for every row of a
day table (its owner's key, the shard, the start of each ref) is rendered once in Python and
travels as a parameter. Pure: no I/O."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from router.csv_cells import FORMULA_START, csv_cell
from router.db.ddl import FLOW_EXPORT_READ_COLUMNS, FLOW_STAGE_COLUMNS
from router.db.names import DayTable, Kind
from router.search import refs
from router.search.sql import OWNER_KEY

ExportFormat = Literal["ndjson", "csv"]
# Add a parameter, answer its placeholder (sql.Params.add).
Add = Callable[[Any], str]
AUDIT_CSV_HEADER = ("ts", "id", "owner", "shard", "content", "attrs")
# An item's fields in the order the export writes them (the DDL's columns, first_seen first,
# what exporters add after last_seen).
FLOW_FIELDS = ("first_seen", "id", *FLOW_STAGE_COLUMNS[:-2], "last_seen", *FLOW_EXPORT_READ_COLUMNS)
# Columns that may be NULL: an empty CSV cell, JSON's null. Booleans are true and false in both.
_NULLABLE = ("proto", "tcp_flags", "sampling_rate")
FLOW_CSV_HEADER = ("first_seen", "switch", "shard", *FLOW_FIELDS[1:])


def csv_line(cells: tuple[Any, ...] | list[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()


def csv_header(kind: Kind) -> str:
    return csv_line(AUDIT_CSV_HEADER if kind == "audit" else FLOW_CSV_HEADER)


def _csv_text(cell: object) -> str:
    """One cell as csv.writer writes it among others."""
    return csv_line([cell, ""])[:-2]


def iso(column: str) -> str:
    """A timestamptz as ``datetime.isoformat`` writes it in UTC: microseconds only when not 0."""
    text = f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US+00:00')"
    return f"replace({text}, '.000000+', '+')"


def _micros(column: str) -> str:
    """Microseconds since 1970: what the router merges by (an int is cheaper to read than a
    timestamp)."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def _needs_quotes(text: str) -> str:
    """Whether csv.writer puts a cell in quotes: when it holds a quote, a comma or a newline
    (the characters of its delimiter, quote and line terminator)."""
    return f"strpos({text}, '\"') > 0 OR strpos({text}, ',') > 0 OR strpos({text}, E'\\n') > 0"


def _quoted(text: str) -> str:
    """A text cell as csv.writer writes it: in quotes (doubled inside) when it needs them."""
    inside = f"replace({text}, '\"', '\"\"')"
    return f"CASE WHEN {_needs_quotes(text)} THEN '\"' || {inside} || '\"' ELSE {text} END"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _text(parts: list[str]) -> str:
    """The parts (none NULL) one after the other, as UTF-8 bytes."""
    return f"convert_to({' || '.join(parts)}, 'UTF8')"


# A row's line in three pieces: the bytes before its free text, the free text (NDJSON's audit
# content, which orjson escapes for JSON at a fraction of the cost of PostgreSQL's to_json:
# json_bodies), the bytes after it (with the newline). CSV lines come whole.
Pieces = tuple[list[str], str, list[str]]
_NEWLINE = "E'\\n'"
_NO_TEXT = "''::text"


@dataclass(frozen=True)
class Owner:
    """Whose rows a branch reads: one owner's (``id`` and ``key`` the same for every row, sent
    as parameters), or, both None, a shard-day's (each row names its owner: the columns
    owner_id and OWNER_KEY)."""

    id: int | None
    key: str | None

    def csv_cell(self, add: Add) -> str:
        """The owner's CSV cell as csv.writer writes ``csv_cell(key)`` among others."""
        if self.key is not None:
            return f"{add(_csv_text(csv_cell(self.key)))}::text"
        starts = add(list(FORMULA_START))
        formula = f"CASE WHEN left({OWNER_KEY}, 1) = ANY({starts}::text[]) THEN '''' ELSE '' END"
        return _quoted(f"({formula} || {OWNER_KEY})")

    def json_key(self, before: str, after: str, add: Add) -> list[str]:
        """``before``, the key as JSON (keys are printable: orjson and PostgreSQL's to_json
        escape only quotes and backslashes in them), ``after``."""
        if self.key is not None:
            return [f"{add(before + orjson.dumps(self.key).decode() + after)}::text"]
        return [f"{add(before)}::text", f"to_json({OWNER_KEY})::text", f"{add(after)}::text"]


def _audit(format: ExportFormat, shard: str, owner: Owner, add: Add) -> Pieces:
    if format == "csv":
        named = add(_csv_text(shard))
        starts = add(list(FORMULA_START))
        formula = f"CASE WHEN left(content, 1) = ANY({starts}::text[]) THEN '''' ELSE '' END"
        # The quote of formula-like content first, then quotes around the cell as csv.writer
        # puts them (a leading ' changes nothing of that).
        inside = "replace(content, '\"', '\"\"')"
        content = (
            f"CASE WHEN {_needs_quotes('content')} THEN '\"' || {formula} || {inside} || '\"' "
            f"ELSE {formula} || content END"
        )
        attrs = f"CASE WHEN attrs IS NULL THEN '' ELSE {_quoted('attrs::text')} END"
        cells = [iso("ts"), "id::text", owner.csv_cell(add), f"{named}::text", content, attrs]
        return [" || ',' || ".join(cells)], _NO_TEXT, [_NEWLINE]
    head = ["""'{"ts":"'""", iso("ts"), """'","id":'""", "id", """',"content":"'"""]
    after = ["""'","attrs":'""", "coalesce(attrs::text, 'null')"]
    return head, "content", [*after, *_tail(shard, owner, "owner", "audit", add), _NEWLINE]


def _flow(format: ExportFormat, shard: str, owner: Owner, add: Add) -> Pieces:
    values = {
        "first_seen": iso("first_seen"),
        "last_seen": iso("last_seen"),
        "src_ip": "host(src_ip)",
        "dst_ip": "host(dst_ip)",
    }
    missing = "''" if format == "csv" else "'null'"
    values |= {name: f"coalesce({name}::text, {missing})" for name in _NULLABLE}
    if format == "csv":
        named = add(_csv_text(shard))
        cells = [values["first_seen"], owner.csv_cell(add), f"{named}::text"]
        cells += [values.get(name, f"{name}::text") for name in FLOW_FIELDS[1:]]
        return [" || ',' || ".join(cells)], _NO_TEXT, [_NEWLINE]
    parts: list[str] = []
    for name in FLOW_FIELDS:
        opening = "{" if not parts else ","
        if name in ("first_seen", "last_seen", "src_ip", "dst_ip"):
            parts += [_literal(f'{opening}"{name}":"'), values[name], "'\"'"]
        else:
            parts += [_literal(f'{opening}"{name}":'), values.get(name, f"{name}::text")]
    return parts + _tail(shard, owner, "switch", "flow", add), _NO_TEXT, [_NEWLINE]


def _tail(shard: str, owner: Owner, name: str, kind: Kind, add: Add) -> list[str]:
    """The last keys of an item: shard, its owner or switch, ref."""
    shard_json = orjson.dumps(shard).decode()
    return [
        *owner.json_key(f',"shard":{shard_json},"{name}":', ',"ref":"', add),
        refs.ref_sql(kind, owner.id, shard, add),
        """'"}'""",
    ]


def columns(
    kind: Kind, format: ExportFormat, shard: str, owners: dict[int, str]
) -> Callable[[DayTable, Add], str]:
    """The columns of an export statement's branch over one day table: the merge's key (ts
    in microseconds), the line's pieces, and the row's position (ts, id; the owner id comes
    after)."""
    pieces = _audit if kind == "audit" else _flow
    column = "ts" if kind == "audit" else "first_seen"
    ts = "ts" if kind == "audit" else "first_seen AS ts"

    def of(table: DayTable, add: Add) -> str:
        owner = (
            Owner(None, None) if table.shard_day else Owner(table.owner_id, owners[table.owner_id])
        )
        head, body, tail = pieces(format, shard, owner, add)
        return (
            f"{_micros(column)} AS key, {_text(head)} AS head, {body} AS body, "
            f"{_text(tail)} AS tail, {ts}, id"
        )

    return of


# What a statement of an export answers, in this order; pages add ts, id and owner_id.
OUTPUT = "key, head, body, tail"


def json_bodies(texts: list[str]) -> list[bytes]:
    """Each text as orjson writes it inside a JSON string (without the quotes): the whole list
    serialised in one call and cut at its separators. '","' occurs nowhere else in it: a quote
    inside a string is always escaped, so it follows a backslash, never a comma."""
    if not texts:
        return []
    bodies = orjson.dumps(texts).split(b'","')
    bodies[0] = bodies[0][2:]  # '["'
    bodies[-1] = bodies[-1][:-2]  # '"]'
    return bodies


def no_bodies(texts: list[str]) -> list[bytes]:
    """CSV lines come whole from the shards: Python's csv module quotes a cell at several times
    the cost of PostgreSQL's strpos and replace."""
    return [b""] * len(texts)


BODIES = {"ndjson": json_bodies, "csv": no_bodies}
