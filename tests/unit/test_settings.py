from pathlib import Path

import pytest
from pydantic import ValidationError

from router.db.catalog_login import catalog_dsn
from router.settings import PoolSettings, Settings, with_passfile, with_tls


def test_defaults_match_the_local_cluster() -> None:
    settings = Settings()
    assert settings.cluster.shards == 12
    assert settings.cluster.groups == 2
    assert settings.server.port == 8080
    passfile = (Path("var") / "secrets" / "pgpass").absolute()
    assert settings.pools.passfile == passfile
    assert settings.metadata_dsn() == (
        f"postgresql://shardlog@127.0.0.1:25432/shardlog?passfile={passfile}"
    )


def test_environment_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_POOLS__MAX_SIZE", "20")
    monkeypatch.setenv("SHARDLOG_CLUSTER__BASE_PORT", "40000")
    monkeypatch.setenv("SHARDLOG_CLUSTER__DATA_DIR", "/srv/shardlog")
    settings = Settings()
    assert settings.pools.max_size == 20
    assert settings.cluster.data_dir == Path("/srv/shardlog")
    assert settings.pools.passfile == Path("/srv/shardlog/secrets/pgpass")
    assert settings.metadata_dsn().endswith(":40000/shardlog?passfile=/srv/shardlog/secrets/pgpass")


def test_explicit_metadata_dsn_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_METADATA__DSN", "postgresql://u@meta:5432/catalog")
    monkeypatch.setenv("SHARDLOG_POOLS__PASSFILE", "/etc/shardlog/pgpass")
    assert Settings().metadata_dsn() == (
        "postgresql://u@meta:5432/catalog?passfile=/etc/shardlog/pgpass"
    )


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require&passfile=/p"),
        ("host=h dbname=db", "host=h dbname=db passfile='/p'"),
        # A DSN that says where its password is keeps saying it.
        ("postgresql://u:secret@h/db", "postgresql://u:secret@h/db"),
        ("postgresql://u@h/db?passfile=/q", "postgresql://u@h/db?passfile=/q"),
        ("host=h password=secret", "host=h password=secret"),
    ],
)
def test_the_password_file_joins_dsns_without_one(dsn: str, expected: str) -> None:
    assert with_passfile(dsn, Path("/p")) == expected


def test_unknown_keys_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_POOLS__MAX_SIZES", "20")
    with pytest.raises(ValidationError, match="max_sizes"):
        Settings()


def test_bad_values_are_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_SERVER__PORT", "70000")
    with pytest.raises(ValidationError, match="port"):
        Settings()


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        # The local default: the superuser's DSN with the catalog role instead.
        (None, "postgresql://shardlog_catalog@127.0.0.1:25432/shardlog?passfile=/p"),
        # The DSN's password is its user's (the superuser's): it is left out, the password
        # file gives the catalog role's.
        (
            "postgresql://u:secret@meta:5432/catalog",
            "postgresql://shardlog_catalog@meta:5432/catalog?passfile=/p",
        ),
        (
            "host=a,b port=1,2 dbname=c user=u password=s sslmode=require",
            "postgresql://shardlog_catalog@a:1,b:2/c?sslmode=require&passfile=/p",
        ),
        (
            "postgresql://meta/c?user=u&passfile=/q",
            "postgresql://shardlog_catalog@meta/c?passfile=/q",
        ),
    ],
)
def test_the_catalog_login_is_the_catalog_role_at_the_dsns_hosts(
    monkeypatch: pytest.MonkeyPatch, dsn: str | None, expected: str
) -> None:
    if dsn is not None:
        monkeypatch.setenv("SHARDLOG_METADATA__DSN", dsn)
    monkeypatch.setenv("SHARDLOG_POOLS__PASSFILE", "/p")
    assert catalog_dsn(Settings()) == expected


def test_the_catalog_login_can_be_the_dsns_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_METADATA__DSN", "postgresql://u@meta:5432/catalog")
    monkeypatch.setenv("SHARDLOG_METADATA__LOGIN", "dsn")
    monkeypatch.setenv("SHARDLOG_POOLS__PASSFILE", "/p")
    settings = Settings()
    assert catalog_dsn(settings) == settings.metadata_dsn()
    monkeypatch.setenv("SHARDLOG_METADATA__LOGIN", "superuser")
    with pytest.raises(ValidationError, match="login"):
        Settings()


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u@h/db", "postgresql://u@h/db?sslmode=verify-full&sslrootcert=/tls/ca.crt"),
        (
            "postgresql://u@h/db?passfile=/p",
            "postgresql://u@h/db?passfile=/p&sslmode=verify-full&sslrootcert=/tls/ca.crt",
        ),
        ("host=h dbname=db", "host=h dbname=db sslmode='verify-full' sslrootcert='/tls/ca.crt'"),
        # A DSN that names its own sslmode keeps it.
        ("postgresql://u@h/db?sslmode=disable", "postgresql://u@h/db?sslmode=disable"),
        ("host=h sslmode=require", "host=h sslmode=require"),
    ],
)
def test_the_pools_tls_joins_dsns_without_an_sslmode(dsn: str, expected: str) -> None:
    pools = PoolSettings(tls_mode="verify-full", tls_ca_file=Path("/tls/ca.crt"))
    assert with_tls(dsn, pools) == expected
    assert with_tls(dsn, PoolSettings()) == dsn  # unset: libpq's default


def test_the_metadata_dsn_gets_the_pools_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_POOLS__TLS_MODE", "verify-ca")
    monkeypatch.setenv("SHARDLOG_POOLS__TLS_CA_FILE", "/etc/shardlog/ca.crt")
    monkeypatch.setenv("SHARDLOG_POOLS__PASSFILE", "/p")
    assert (
        Settings()
        .metadata_dsn()
        .endswith("/shardlog?passfile=/p&sslmode=verify-ca&sslrootcert=/etc/shardlog/ca.crt")
    )
    monkeypatch.setenv("SHARDLOG_POOLS__TLS_MODE", "prefer")
    with pytest.raises(ValidationError, match="tls_mode"):
        Settings()


def test_the_router_certificate_comes_with_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDLOG_SERVER__TLS_CERT_FILE", "/tls/router.crt")
    with pytest.raises(ValidationError, match="tls_cert_file and tls_key_file"):
        Settings()
    monkeypatch.setenv("SHARDLOG_SERVER__TLS_KEY_FILE", "/tls/router.key")
    assert Settings().server.tls_key_file == Path("/tls/router.key")
