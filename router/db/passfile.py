"""Reading a libpq password file (``host:port:database:user:password`` lines, ``*`` matches
anything, ``\\`` escapes ``:`` and itself), for the few places that need a password itself rather
than a connection: the coordinator's user mappings and the roles set up at bring-up."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from router.db.dsn import parse_dsn


class PassfileError(RuntimeError):
    """The password file is missing, unsafe, or has no line for what was asked."""


@dataclass(frozen=True)
class Entry:
    host: str
    port: str
    database: str
    user: str
    password: str

    def matches(self, host: str, port: int, database: str, user: str) -> bool:
        wanted = (host, str(port), database, user)
        mine = (self.host, self.port, self.database, self.user)
        return all(field in ("*", value) for field, value in zip(mine, wanted, strict=True))


def _fields(line: str) -> list[str]:
    """Split on unescaped ':' (the fifth field, the password, takes the rest of the line)."""
    fields: list[str] = []
    current: list[str] = []
    escaped = False
    for char in line:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":" and len(fields) < 4:
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields


def read(path: Path) -> list[Entry]:
    """The entries of a password file; like libpq, refuses one others may read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise PassfileError(f"password file {path} does not exist") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PassfileError(f"password file {path} may be read by others (chmod 0600 it)")
    entries = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = _fields(line)
        if len(fields) == 5:
            entries.append(Entry(*fields))
    return entries


def lookup(path: Path, dsn: str, user: str) -> str:
    """The password ``user`` has where ``dsn`` points (its first host, like libpq's first
    attempt), from the first matching line."""
    parsed = parse_dsn(dsn)
    host, port = parsed.hosts[0]
    database = parsed.dbname or user
    for entry in read(path):
        if entry.matches(host, port, database, user):
            return entry.password
    raise PassfileError(f"password file {path} has no line for {user} at {host}:{port}/{database}")
