"""Which databases may become a shard: the rules of catalog/shard_guard on plain values."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date

import pytest

from router.catalog.shard_guard import KnownShard, check_candidate
from router.db.migrate import Migration, created_relations, load_migrations
from router.db.names import day_table, day_table_regex
from router.db.probe import Candidate, DatabaseIdentity
from router.errors import Conflict, Invalid, ShardlogError
from router.settings import REPO_ROOT

SERVER_A = 7_000_000_000_000_000_001
SERVER_B = 7_000_000_000_000_000_002
CATALOG = DatabaseIdentity(SERVER_A, 16384, "shardlog")
SHARD01 = DatabaseIdentity(SERVER_B, 16384, "shardlog")
FRESH = Candidate(
    identity=DatabaseIdentity(SERVER_B, 20000, "extra"),
    is_template=False,
    in_recovery=False,
    stamped_as=None,
    holds_catalog=False,
    foreign_count=0,
    foreign_objects=(),
)
KNOWN = [KnownShard("shard01", SHARD01)]


def verdict(
    candidate: Candidate,
    shards: list[KnownShard] = KNOWN,
    *,
    name: str = "new",
    force: bool = False,
) -> ShardlogError | None:
    try:
        check_candidate(candidate, name, CATALOG, shards, force=force)
    except ShardlogError as exc:
        assert exc.field == "dsn"
        return exc
    return None


def test_a_fresh_database_is_accepted_even_on_a_shard_or_catalog_server() -> None:
    assert verdict(FRESH) is None
    on_catalog_server = replace(FRESH, identity=DatabaseIdentity(SERVER_A, 20000, "extra"))
    assert verdict(on_catalog_server) is None


@pytest.mark.parametrize("force", [False, True])
def test_the_catalogs_database_is_refused(force: bool) -> None:
    error = verdict(replace(FRESH, identity=CATALOG), force=force)
    assert isinstance(error, Conflict)
    assert "catalog" in error.message


def test_the_same_oid_on_another_server_is_another_database() -> None:
    assert verdict(replace(FRESH, identity=DatabaseIdentity(SERVER_B + 1, 16384, "x"))) is None


@pytest.mark.parametrize("force", [False, True])
def test_a_database_holding_a_catalog_is_refused(force: bool) -> None:
    error = verdict(replace(FRESH, holds_catalog=True, foreign_count=3), force=force)
    assert isinstance(error, Conflict)
    assert "shardlog catalog" in error.message


@pytest.mark.parametrize("force", [False, True])
def test_another_shards_database_is_refused_whatever_its_name(force: bool) -> None:
    renamed = DatabaseIdentity(SERVER_B, 16384, "renamed")
    error = verdict(replace(FRESH, identity=renamed), force=force)
    assert isinstance(error, Conflict)
    assert "'shard01'" in error.message


def test_a_shard_is_not_compared_with_itself() -> None:
    assert verdict(replace(FRESH, identity=SHARD01), name="shard01") is None


@pytest.mark.parametrize("force", [False, True])
def test_a_database_stamped_as_another_shard_is_refused(force: bool) -> None:
    error = verdict(replace(FRESH, stamped_as="gone"), force=force)
    assert isinstance(error, Conflict)
    assert "'gone'" in error.message
    assert verdict(replace(FRESH, stamped_as="gone"), name="gone") is None


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"is_template": True}, "template"),
        ({"identity": DatabaseIdentity(SERVER_B, 1, "template1")}, "template"),
        ({"in_recovery": True}, "standby"),
    ],
)
def test_templates_and_standbys_are_refused(change: dict, words: str, force: bool) -> None:
    error = verdict(replace(FRESH, **change), force=force)
    assert isinstance(error, Invalid)
    assert words in error.message


@pytest.mark.parametrize(
    ("candidate", "shards", "words"),
    [
        (
            replace(FRESH, identity=DatabaseIdentity(SERVER_B, 5, "postgres")),
            KNOWN,
            "maintenance database",
        ),
        (
            replace(FRESH, foreign_count=12, foreign_objects=("table public.orders",)),
            KNOWN,
            "12 objects that shardlog did not create (table public.orders and 11 more)",
        ),
        (FRESH, [*KNOWN, KnownShard("old", None, "OSError: refused")], "old: OSError: refused"),
    ],
)
def test_force_lets_through_what_it_may(
    candidate: Candidate, shards: list[KnownShard], words: str
) -> None:
    error = verdict(candidate, shards)
    assert isinstance(error, Conflict)
    assert words in error.message
    assert "force" in error.message
    assert verdict(candidate, shards, force=True) is None


def test_the_catalog_rule_comes_first() -> None:
    error = verdict(replace(FRESH, identity=CATALOG, foreign_count=40, stamped_as="x"))
    assert error is not None and "catalog's own database" in error.message


def test_created_relations_of_the_shipped_shard_migrations() -> None:
    relations = created_relations(load_migrations(REPO_ROOT / "schema", "shard"))
    assert {"shard_identity", "ingest_ledger", "shardlog_drop_day_table"} <= relations
    assert not any(re.match(day_table_regex(), name) for name in relations)


def test_created_relations_reads_the_forms_migrations_use() -> None:
    sql = """
    -- CREATE TABLE commented_out (x int);
    CREATE TABLE a (x int);
    create unlogged table if not exists B (x int);
    CREATE SEQUENCE s1;
    CREATE OR REPLACE VIEW v AS SELECT 1;
    CREATE MATERIALIZED VIEW mv AS SELECT 1;
    CREATE TABLE fdw.children (x int);
    CREATE INDEX a_idx ON a (x);
    CREATE FUNCTION f(x regclass) RETURNS void LANGUAGE sql AS 'SELECT';
    """
    relations = created_relations([Migration("shard", 1, "m", sql)])
    assert relations == {"a", "b", "s1", "v", "mv", "children", "f"}


def test_the_day_table_regex_matches_day_tables_only() -> None:
    pattern = re.compile(day_table_regex())
    assert pattern.match(day_table("audit", 42, date(2026, 11, 23)).name)
    assert pattern.match(day_table("flow", 7, date(2026, 1, 1)).name)
    for other in (
        "audit_o42",
        "audit_o0_20261123",
        "orders",
        "flow_s7_2026112",
        "xaudit_o1_20260101",
    ):
        assert not pattern.match(other)
