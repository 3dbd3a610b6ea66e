"""The local cluster's PostgreSQL passwords: generated once at bring-up, kept in files under
``<data dir>/secrets/`` (directory 0700, files 0600), and a libpq password file (``pgpass``) with
one line per role that the router, the CLI and psql read. Passwords never go into the catalog,
a DSN or a command line.

Also SCRAM-SHA-256 verifiers (RFC 5802/7677, PostgreSQL's format), so that a password can be set
with ``ALTER ROLE ... PASSWORD '<verifier>'`` without sending it in clear, and checked against the
verifier a server holds without changing it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path

# The shard login roles of router/db/roles.py (services do not import the router; a unit test keeps
# the two equal) and Patroni's replication user. The bootstrap superuser is services.postgres'.
ROUTER_ROLES = ("shardlog_writer", "shardlog_reader", "shardlog_retention")
# The router's login on the metadata server (router/db/roles.py CATALOG).
CATALOG_ROLE = "shardlog_catalog"
REPLICATION_USER = "replicator"
PASSFILE = "pgpass"
SCRAM_ITERATIONS = 4096
# libpq's password file separates fields with ':' and escapes with '\': passwords use neither.
_PASSWORD = re.compile(r"[A-Za-z0-9_-]{16,}")
_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class SecretStore:
    """Passwords by role under one directory: ``<role>.password`` and ``pgpass``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.absolute()

    @property
    def passfile(self) -> Path:
        return self.directory / PASSFILE

    def _file(self, role: str) -> Path:
        if not _ROLE.fullmatch(role):
            raise ValueError(f"{role!r} is not a role name shardlog generates a password for")
        return self.directory / f"{role}.password"

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)

    def password(self, role: str) -> str:
        """The role's password, generated (and stored) on first use; of two processes making
        it at once, the first to store it wins."""
        path = self._file(role)
        try:
            return _checked(path.read_text().strip(), path)
        except FileNotFoundError:
            pass
        self._ensure_directory()
        partial = _write_beside(path, secrets.token_urlsafe(32) + "\n")
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
        finally:
            partial.unlink()
        return _checked(path.read_text().strip(), path)

    def roles(self) -> list[str]:
        """The roles that have a password here."""
        return sorted(p.name.removesuffix(".password") for p in self.directory.glob("*.password"))

    def ensure(self, roles: Iterable[str]) -> Path:
        """Every role's password exists, and the password file lists them and every other role
        with a password here; returns its path. A password file edited by hand is rewritten
        from the password files."""
        for role in roles:
            self.password(role)
        lines = [passfile_line(role, self.password(role)) for role in self.roles()]
        text = "# written by shardlog from the *.password files beside it\n" + "".join(lines)
        if not self.passfile.exists() or self.passfile.read_text() != text:
            os.replace(_write_beside(self.passfile, text), self.passfile)
        return self.passfile


def passfile_line(role: str, password: str, host: str = "*", port: str = "*") -> str:
    """One line of a libpq password file: any database; host and port as given."""
    return f"{host}:{port}:*:{role}:{password}\n"


def _checked(password: str, path: Path) -> str:
    if not _PASSWORD.fullmatch(password):
        raise ValueError(
            f"{path}: a password of at least 16 characters from A-Z a-z 0-9 _ - expected "
            "(':' and '\\' would break the password file)"
        )
    return password


def _write_beside(path: Path, text: str) -> Path:
    """A new file beside ``path`` that only its owner can read, holding ``text``; the caller
    moves or links it into place (atomically)."""
    partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    return partial


# --- SCRAM-SHA-256 verifiers -----------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def scram_verifier(
    password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    """``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, as PostgreSQL stores it.
    (PostgreSQL SASLprep-normalises passwords first; ours are ASCII, where that changes
    nothing.)"""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


_VERIFIER = re.compile(
    r"SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)"
)


def scram_matches(verifier: str | None, password: str) -> bool:
    """Whether a stored verifier is of this password (False for none, MD5 or anything else)."""
    match = _VERIFIER.fullmatch(verifier or "")
    if match is None:
        return False
    iterations, salt = int(match.group(1)), base64.b64decode(match.group(2))
    return hmac.compare_digest(scram_verifier(password, salt, iterations), verifier or "")
