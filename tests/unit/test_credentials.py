"""Passwords of the local cluster, SCRAM verifiers and password files (no server needed; the
integration tests log in with them)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from router.db import passfile, roles
from services.credentials import (
    CATALOG_ROLE,
    ROUTER_ROLES,
    SecretStore,
    scram_matches,
    scram_verifier,
)


def test_the_launcher_generates_the_roles_the_router_uses() -> None:
    assert ROUTER_ROLES == roles.LOGIN_ROLES
    assert CATALOG_ROLE == roles.CATALOG


def test_passwords_are_made_once_and_kept_private(tmp_path: Path) -> None:
    store = SecretStore(tmp_path / "secrets")
    first = store.password("shardlog_reader")
    assert len(first) >= 40
    assert store.password("shardlog_reader") == first
    assert SecretStore(tmp_path / "secrets").password("shardlog_reader") == first
    assert store.password("shardlog_writer") != first
    path = store.ensure(["shardlog", "shardlog_reader"])
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    for file in store.directory.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert passfile.lookup(path, "postgresql://x@h:1/db", "shardlog_reader") == first
    with pytest.raises(passfile.PassfileError, match="no line for shardlog_retention"):
        passfile.lookup(path, "postgresql://x@h:1/db", "shardlog_retention")


def test_a_password_the_password_file_cannot_hold_is_refused(tmp_path: Path) -> None:
    store = SecretStore(tmp_path)
    (tmp_path / "shardlog.password").write_text("has:colon-and-is-long-enough\n")
    with pytest.raises(ValueError, match="at least 16 characters"):
        store.password("shardlog")


# A verifier PostgreSQL 15 stored for ALTER ROLE ... PASSWORD 'pencil-and-paper'.
POSTGRES_VERIFIER = (
    "SCRAM-SHA-256$4096:2l23Y3uYNx8eQ5Vyfad6mQ==$Iy1saWUCNwA5zJE/i/RmJdtgeb7+gnYcRKBlVQiz2Uw="
    ":+ToNR+IokwTBMw+5qbkob5fHnXlTiW4lxohBnMAvP5o="
)


def test_verifiers_are_postgresqls() -> None:
    assert scram_matches(POSTGRES_VERIFIER, "pencil-and-paper")
    assert not scram_matches(POSTGRES_VERIFIER, "pencil-and-pen")
    made = scram_verifier("pencil-and-paper")
    assert made.startswith("SCRAM-SHA-256$4096:") and made != scram_verifier("pencil-and-paper")
    assert scram_matches(made, "pencil-and-paper")
    assert not scram_matches(None, "x")
    assert not scram_matches("md5" + "0" * 32, "x")


def test_password_file_lines_follow_libpq(tmp_path: Path) -> None:
    path = tmp_path / "pgpass"
    path.write_text(
        "# comment\n"
        "\n"
        "db1.example:5432:shardlog:shardlog_reader:first\n"
        "*:*:*:shardlog_reader:wild\\:card\\\\\n"
        "*:*:*:other:any:thing\n"
    )
    path.chmod(0o600)
    assert passfile.lookup(path, "postgresql://db1.example/shardlog", "shardlog_reader") == "first"
    assert passfile.lookup(path, "host=db1.example,db2 port=5433,5433", "shardlog_reader") == (
        "wild:card\\"
    )
    assert passfile.lookup(path, "postgresql://u@h:5/db", "other") == "any:thing"
    path.chmod(0o644)
    with pytest.raises(passfile.PassfileError, match="may be read by others"):
        passfile.lookup(path, "postgresql://db1.example/shardlog", "shardlog_reader")
