from pathlib import Path

import pytest
from pydantic import ValidationError

from router.settings import Settings


def test_defaults_match_the_local_cluster() -> None:
    settings = Settings()
    assert settings.cluster.shards == 12
    assert settings.cluster.groups == 2
    assert settings.server.port == 8080
    assert settings.metadata_dsn() == "postgresql://shardlog@127.0.0.1:25432/shardlog"


def test_environment_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_POOLS__MAX_SIZE", "20")
    monkeypatch.setenv("SHARDLOG_CLUSTER__BASE_PORT", "40000")
    monkeypatch.setenv("SHARDLOG_CLUSTER__DATA_DIR", "/srv/shardlog")
    settings = Settings()
    assert settings.pools.max_size == 20
    assert settings.cluster.data_dir == Path("/srv/shardlog")
    assert settings.metadata_dsn().endswith(":40000/shardlog")


def test_explicit_metadata_dsn_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_METADATA__DSN", "postgresql://u@meta:5432/catalog")
    assert Settings().metadata_dsn() == "postgresql://u@meta:5432/catalog"


def test_unknown_keys_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_POOLS__MAX_SIZES", "20")
    with pytest.raises(ValidationError, match="max_sizes"):
        Settings()


def test_bad_values_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_SERVER__PORT", "70000")
    with pytest.raises(ValidationError, match="port"):
        Settings()
