"""Archives of day tables: PostgreSQL COPY text, gzip-compressed, beside a JSON manifest
(owner, day, shard, columns, row count, SHA-256 of the compressed file).

Layout: ``<archive_dir>/<kind>/<owner_id>/<yyyy-mm-dd>/<shard>.copy.gz`` and
``<shard>.manifest.json``. Names use the owner's id, never its key. A manifest is written last,
after the data file is complete and synced: an archive without one is incomplete.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import date
from pathlib import Path
from typing import IO, Any, TypeVar

from router import clock
from router.db import ddl
from router.db.connection import Connection
from router.db.names import DayTable, quote_ident

FORMAT = "postgresql-copy-text+gzip"
_READ_CHUNK = 1 << 20


class ArchiveError(Exception):
    pass


@dataclass(frozen=True)
class Manifest:
    kind: str
    owner_id: int
    owner: str | None
    day: str
    shard: str
    table: str
    columns: list[str]
    rows: int
    sha256: str
    bytes: int
    format: str
    created_at: str

    @property
    def day_date(self) -> date:
        return date.fromisoformat(self.day)


def day_dir(archive_dir: Path, table: DayTable) -> Path:
    return archive_dir / table.kind / str(table.owner_id) / table.day.isoformat()


def data_path(archive_dir: Path, table: DayTable, shard: str) -> Path:
    return day_dir(archive_dir, table) / f"{shard}.copy.gz"


def manifest_path(archive_dir: Path, table: DayTable, shard: str) -> Path:
    return day_dir(archive_dir, table) / f"{shard}.manifest.json"


class _HashingFile:
    """Counts and hashes the compressed bytes on their way to disk."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


Sink = Callable[[bytes], Coroutine[Any, Any, None]]


async def _export(
    target: Path, level: int, copy: Callable[[Sink], Awaitable[None]], expected: int, what: str
) -> _HashingFile:
    """``copy``'s COPY text gzip'd to ``target`` (written as a partial file, synced, then
    renamed), after checking that it holds ``expected`` lines; the bytes' count and hash."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    lines = 0
    with partial.open("wb") as raw:
        hashed = _HashingFile(raw)
        with gzip.GzipFile(fileobj=hashed, mode="wb", compresslevel=level, mtime=0) as gz:

            async def sink(chunk: bytes) -> None:
                nonlocal lines
                lines += chunk.count(b"\n")
                gz.write(chunk)

            await copy(sink)
        raw.flush()
        os.fsync(raw.fileno())
    if lines != expected:
        partial.unlink(missing_ok=True)
        raise ArchiveError(f"archive of {what} holds {lines} rows, the table {expected}")
    os.replace(partial, target)
    return hashed


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def columns_of(connection: Connection, table: DayTable) -> list[str]:
    """The columns an archive keeps: all but the inserting transaction, which means nothing
    outside the shard's own transaction history (a restored row is a new one there)."""
    rows = await connection.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum",
        table.name,
    )
    return [r["attname"] for r in rows if r["attname"] != ddl.CREATED_XID]


async def readable(connection: Connection, table: DayTable) -> str:
    """Where a day table's rows are read whole on its shard: its view once it is compacted
    (docs/architecture.md, "Compacted days"), else the table."""
    compacted = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table.all_view)
    return table.all_view if compacted else table.quoted


async def write(
    connection: Connection,
    table: DayTable,
    shard: str,
    owner: str | None,
    archive_dir: Path,
    level: int,
) -> Manifest:
    """Export the table (the caller holds a lock that keeps writers out) and verify that the
    file holds exactly the rows the table has. A compacted owner-day is read through its view
    (its segments and its late heap rows): the same lines a heap gives."""
    source = await readable(connection, table)
    expected = await connection.fetchval(f"SELECT count(*) FROM {source}")
    columns = await columns_of(connection, table)
    target = data_path(archive_dir, table, shard)

    async def copy(sink: Sink) -> None:
        if source == table.quoted:
            await connection.copy_from_table(
                table.name, columns=columns, output=sink, format="text"
            )
        else:
            listed = ", ".join(quote_ident(c) for c in columns)
            await connection.copy_from_query(
                f"SELECT {listed} FROM {source}", output=sink, format="text"
            )

    hashed = await _export(target, level, copy, expected, f"{table.name} on {shard}")
    manifest = Manifest(
        kind=table.kind,
        owner_id=table.owner_id,
        owner=owner,
        day=table.day.isoformat(),
        shard=shard,
        table=table.name,
        columns=columns,
        rows=expected,
        sha256=hashed.hash.hexdigest(),
        bytes=hashed.size,
        format=FORMAT,
        created_at=clock.now().isoformat(),
    )
    _write_json(manifest_path(archive_dir, table, shard), asdict(manifest))
    _sync_dir(target.parent)
    return manifest


def _write_json(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_suffix(".partial")
    with partial.open("w") as out:
        json.dump(data, out, indent=2)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


M = TypeVar("M", "Manifest", "SharedManifest")


def _read_manifests(folder: Path, kind: type[M]) -> list[M]:
    """The complete archives of one folder (a day's), one per shard."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.manifest.json")):
        try:
            found.append(kind(**json.loads(path.read_text())))
        except (ValueError, TypeError) as exc:
            raise ArchiveError(f"{path}: not a readable manifest ({exc})") from None
    return found


def _days_in(folder: Path) -> list[date]:
    """The days a folder holds archives of (its subfolders named by day)."""
    if not folder.is_dir():
        return []
    days = []
    for entry in folder.iterdir():
        try:
            days.append(date.fromisoformat(entry.name))
        except ValueError:
            continue
    return sorted(days)


def manifests(archive_dir: Path, table: DayTable) -> list[Manifest]:
    """Every complete archive of one owner's day, one per shard it was on."""
    return _read_manifests(day_dir(archive_dir, table), Manifest)


def verify(archive_dir: Path, manifest: Manifest, table: DayTable) -> Path:
    """The data file of a manifest, after checking its size and checksum."""
    if manifest.format != FORMAT:
        raise ArchiveError(f"{manifest.table}: unknown archive format {manifest.format!r}")
    path = data_path(archive_dir, table, manifest.shard)
    _check(path, manifest.bytes, manifest.sha256)
    return path


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with gzip.open(path, "rb") as data:
        while chunk := data.read(_READ_CHUNK):
            yield chunk


async def load(
    connection: Connection, table: DayTable, manifest: Manifest, path: Path, already: int = 0
) -> int:
    """COPY an archive into the table (holding ``already`` rows), in the caller's
    transaction; returns the rows loaded."""
    for column in manifest.columns:
        quote_ident(column)  # the manifest is a file: its column names must be ours
    await connection.copy_to_table(
        table.name, source=_chunks(path), columns=manifest.columns, format="text"
    )
    rows: int = await connection.fetchval(f"SELECT count(*) FROM {table.quoted}") - already
    if rows != manifest.rows:
        raise ArchiveError(
            f"{path}: loaded {rows} rows, the manifest says {manifest.rows}; nothing restored"
        )
    if "id" in manifest.columns:
        # Later inserts must not reuse a restored id.
        await connection.execute(
            f"SELECT setval(pg_get_serial_sequence($1, 'id'), max(id)) FROM {table.quoted} "
            "HAVING max(id) IS NOT NULL",
            table.name,
        )
    return rows


def remove_day(archive_dir: Path, table: DayTable) -> int:
    """Delete every archive file of one owner's day; returns how many files went."""
    folder = day_dir(archive_dir, table)
    if not folder.is_dir():
        return 0
    removed = 0
    for path in folder.iterdir():
        path.unlink()
        removed += 1
    folder.rmdir()
    return removed


def archived_days(archive_dir: Path, kind: str, owner_id: int) -> list[date]:
    return _days_in(archive_dir / kind / str(owner_id))


# --- shared days (docs/architecture.md, "Retention, erase, archive": issue 38) -------------
#
# A shared day's table holds many owners: its archive is one file per shard-day,
# ``<archive_dir>/<kind>/shared/<yyyy-mm-dd>/<shard>.copy.gz``, with ``owner_id`` as its first
# column, and a manifest that also counts each owner's rows: a restore of one owner's day reads
# the file and keeps its lines; an erase writes the file again without them.

SHARED_DIR = "shared"


@dataclass(frozen=True)
class SharedManifest:
    kind: str
    day: str
    shard: str
    table: str
    columns: list[str]  # owner_id first
    rows: int
    owners: dict[str, int]  # owner id -> rows
    sha256: str
    bytes: int
    format: str
    created_at: str


def shared_day_dir(archive_dir: Path, kind: str, day: date) -> Path:
    return archive_dir / kind / SHARED_DIR / day.isoformat()


def _shared_paths(archive_dir: Path, kind: str, day: date, shard: str) -> tuple[Path, Path]:
    folder = shared_day_dir(archive_dir, kind, day)
    return folder / f"{shard}.copy.gz", folder / f"{shard}.manifest.json"


async def write_shared(
    connection: Connection,
    kind: str,
    day: date,
    table: str,
    shard: str,
    archive_dir: Path,
    level: int,
) -> SharedManifest:
    """Export a shared table (the caller holds a lock that keeps writers out) with each row's
    owner, and verify that the file holds exactly the rows the table has, owner by owner. A
    compacted shard-day is read through its view: its late rows and its segments' rows."""
    quoted = quote_ident(table)
    view = quote_ident(f"{table}_all")
    compacted = bool(await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", view))
    source = view if compacted else quoted
    counted = await connection.fetch(f"SELECT owner_id, count(*) AS n FROM {source} GROUP BY 1")
    owners = {str(r["owner_id"]): int(r["n"]) for r in counted}
    expected = sum(owners.values())
    rows = await connection.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum",
        quoted,
    )
    others = [r["attname"] for r in rows if r["attname"] not in (ddl.CREATED_XID, "owner_id")]
    columns = ["owner_id", *others]
    target, manifest_file = _shared_paths(archive_dir, kind, day, shard)

    async def copy(sink: Sink) -> None:
        if compacted:
            listed = ", ".join(quote_ident(c) for c in columns)
            query = f"SELECT {listed} FROM {source}"
            await connection.copy_from_query(query, output=sink, format="text")
        else:
            await connection.copy_from_table(table, columns=columns, output=sink, format="text")

    hashed = await _export(target, level, copy, expected, f"{table} on {shard}")
    manifest = SharedManifest(
        kind=kind,
        day=day.isoformat(),
        shard=shard,
        table=table,
        columns=columns,
        rows=expected,
        owners=owners,
        sha256=hashed.hash.hexdigest(),
        bytes=hashed.size,
        format=FORMAT,
        created_at=clock.now().isoformat(),
    )
    _write_json(manifest_file, asdict(manifest))
    _sync_dir(target.parent)
    return manifest


def shared_manifests(archive_dir: Path, kind: str, day: date) -> list[SharedManifest]:
    """Every complete archive of a shared day, one per shard."""
    return _read_manifests(shared_day_dir(archive_dir, kind, day), SharedManifest)


def shared_days_archived(archive_dir: Path, kind: str) -> list[date]:
    return _days_in(archive_dir / kind / SHARED_DIR)


def verify_shared(archive_dir: Path, manifest: SharedManifest) -> Path:
    """The data file of a shared day's manifest, after checking its size and checksum."""
    if manifest.format != FORMAT:
        raise ArchiveError(f"{manifest.table}: unknown archive format {manifest.format!r}")
    path, _ = _shared_paths(
        archive_dir, manifest.kind, date.fromisoformat(manifest.day), manifest.shard
    )
    _check(path, manifest.bytes, manifest.sha256)
    return path


def _check(path: Path, size: int, sha256: str) -> None:
    digest = hashlib.sha256()
    found = 0
    try:
        with path.open("rb") as data:
            while chunk := data.read(_READ_CHUNK):
                digest.update(chunk)
                found += len(chunk)
    except FileNotFoundError:
        raise ArchiveError(f"{path} is missing; its manifest is there") from None
    if found != size or digest.hexdigest() != sha256:
        raise ArchiveError(f"{path} does not match its manifest's checksum: damaged archive")


def _lines(path: Path) -> Iterator[bytes]:
    with gzip.open(path, "rb") as data:
        yield from data


async def _owner_lines(path: Path, owner_id: int) -> AsyncIterator[bytes]:
    """The owner's lines of a shared day's file, without their owner column, in chunks."""
    wanted = str(owner_id).encode()
    chunk = bytearray()
    for line in _lines(path):
        owner, _, rest = line.partition(b"\t")
        if owner == wanted:
            chunk += rest
            if len(chunk) >= _READ_CHUNK:
                yield bytes(chunk)
                chunk.clear()
    if chunk:
        yield bytes(chunk)


async def load_owner(
    connection: Connection,
    table: DayTable,
    manifest: SharedManifest,
    path: Path,
    already: int = 0,
) -> int:
    """COPY the owner's rows of a shared day's archive into its own day table (holding
    ``already`` rows), in the caller's transaction; returns the rows loaded."""
    columns = manifest.columns[1:]
    if manifest.columns[:1] != ["owner_id"]:
        raise ArchiveError(f"{path}: a shared day's archive begins with owner_id")
    for column in columns:
        quote_ident(column)  # the manifest is a file: its column names must be ours
    await connection.copy_to_table(
        table.name, source=_owner_lines(path, table.owner_id), columns=columns, format="text"
    )
    rows: int = await connection.fetchval(f"SELECT count(*) FROM {table.quoted}") - already
    expected = manifest.owners.get(str(table.owner_id), 0)
    if rows != expected:
        raise ArchiveError(
            f"{path}: loaded {rows} rows of owner id {table.owner_id}, the manifest says "
            f"{expected}; nothing restored"
        )
    if "id" in columns:
        await connection.execute(
            f"SELECT setval(pg_get_serial_sequence($1, 'id'), max(id)) FROM {table.quoted} "
            "HAVING max(id) IS NOT NULL",
            table.name,
        )
    return rows


def remove_owner_from_shared(
    archive_dir: Path, manifest: SharedManifest, owner_id: int, level: int
) -> int:
    """Write a shared day's archive again without the owner's lines (an erase); its rows
    removed. The file and then its manifest are replaced, each complete and synced first."""
    path = verify_shared(archive_dir, manifest)
    wanted = str(owner_id).encode()
    partial = path.with_suffix(".partial")
    removed = 0
    with partial.open("wb") as raw:
        hashed = _HashingFile(raw)
        with gzip.GzipFile(fileobj=hashed, mode="wb", compresslevel=level, mtime=0) as gz:
            for line in _lines(path):
                if line.partition(b"\t")[0] == wanted:
                    removed += 1
                else:
                    gz.write(line)
        raw.flush()
        os.fsync(raw.fileno())
    expected = manifest.owners.get(str(owner_id), 0)
    if removed != expected:
        partial.unlink(missing_ok=True)
        raise ArchiveError(
            f"{path}: {removed} lines of owner id {owner_id}, the manifest says {expected}"
        )
    os.replace(partial, path)
    owners = {k: v for k, v in manifest.owners.items() if k != str(owner_id)}
    rewritten = replace(
        manifest,
        rows=manifest.rows - removed,
        owners=owners,
        sha256=hashed.hash.hexdigest(),
        bytes=hashed.size,
    )
    _, manifest_file = _shared_paths(
        archive_dir, manifest.kind, date.fromisoformat(manifest.day), manifest.shard
    )
    _write_json(manifest_file, asdict(rewritten))
    _sync_dir(path.parent)
    return removed
