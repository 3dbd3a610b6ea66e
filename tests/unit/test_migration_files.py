import re
from pathlib import Path

import pytest

from router.db.migrate import MigrationError, load_migrations
from router.db.names import day_table_regex, parent_table, shared_table_regex
from router.settings import REPO_ROOT


@pytest.mark.parametrize("target", ["metadata", "shard"])
def test_shipped_migrations_load_in_order(target: str) -> None:
    migrations = load_migrations(REPO_ROOT / "schema", target)  # type: ignore[arg-type]
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert all(len(m.checksum) == 64 for m in migrations)


def test_gaps_are_refused(tmp_path: Path) -> None:
    (tmp_path / "shard").mkdir()
    (tmp_path / "shard" / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "shard" / "0003_c.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="without gaps"):
        load_migrations(tmp_path, "shard")


def test_badly_named_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "shard").mkdir()
    (tmp_path / "shard" / "1_a.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        load_migrations(tmp_path, "shard")


def test_the_roles_migration_knows_day_tables_by_their_name() -> None:
    """0003_roles.sql gives the day tables of older routers to shardlog_tables by name."""
    (roles,) = [m for m in load_migrations(REPO_ROOT / "schema", "shard") if m.name == "roles"]
    assert f"c.relname ~ '{day_table_regex()}'" in roles.sql


def test_the_created_xid_migration_knows_day_tables_by_their_name() -> None:
    (migration,) = [
        m for m in load_migrations(REPO_ROOT / "schema", "shard") if m.name == "created_xid"
    ]
    assert f"c.relname ~ '{day_table_regex()}'" in migration.sql


def test_the_coordinator_flow_columns_migration_knows_flow_parents_by_their_name() -> None:
    """Metadata 0012 finds the fdw path's flow parent tables by name: every name
    names.parent_table gives a flow parent, and none of an audit parent's."""
    (migration,) = [
        m
        for m in load_migrations(REPO_ROOT / "schema", "metadata")
        if m.name == "flow_export_columns"
    ]
    pattern = re.search(r"c\.relname ~ '([^']+)'", migration.sql)
    assert pattern is not None
    for owner_id in (1, 42, 2**63 - 1):
        assert re.match(pattern[1], parent_table("flow", owner_id)[4:].strip('"'))
        assert not re.match(pattern[1], parent_table("audit", owner_id)[4:].strip('"'))


def test_the_shared_drop_migration_knows_shared_tables_by_their_name() -> None:
    (migration,) = [
        m for m in load_migrations(REPO_ROOT / "schema", "shard") if m.name == "shared_drop"
    ]
    assert f"c.relname ~ '{shared_table_regex()}'" in migration.sql
