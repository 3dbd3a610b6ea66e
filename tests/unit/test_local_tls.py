"""router/local_tls.py: a local cluster with TLS hands the router and the CLI their TLS
settings (HTTPS with the local certificate, verify-full with the local CA), unless set."""

from __future__ import annotations

from pathlib import Path

from router.cli import local_tls
from router.settings import ClusterSettings, PoolSettings, ServerSettings, Settings


def test_nothing_changes_without_tls(tmp_path: Path) -> None:
    settings = Settings(cluster=ClusterSettings(data_dir=tmp_path))
    assert local_tls.apply(settings) == settings
    assert local_tls.postgres_settings(settings) == {}


def test_the_mark_turns_the_local_defaults_on(tmp_path: Path) -> None:
    settings = Settings(cluster=ClusterSettings(data_dir=tmp_path))
    (tmp_path / local_tls.MARK).write_text("on\n")
    applied = local_tls.apply(settings)
    assert applied.cluster.tls
    assert applied.server.tls_cert_file == tmp_path / "tls" / "router.crt"
    assert applied.server.tls_key_file == tmp_path / "tls" / "router.key"
    assert applied.pools.tls_mode == "verify-full"
    assert applied.pools.tls_ca_file == (tmp_path / "tls" / "ca.crt").absolute()
    assert "sslmode=verify-full" in applied.metadata_dsn()
    variables = local_tls.postgres_settings(settings)
    assert variables["ssl"] and variables["ssl_required"]
    assert variables["ssl_key_file"] == str((tmp_path / "tls" / "postgres.key").absolute())


def test_explicit_settings_win(tmp_path: Path) -> None:
    settings = Settings(
        cluster=ClusterSettings(data_dir=tmp_path, tls=True),
        server=ServerSettings(tls_cert_file=Path("/mine.crt"), tls_key_file=Path("/mine.key")),
        pools=PoolSettings(tls_mode="verify-ca", tls_ca_file=Path("/my-ca.crt")),
    )
    applied = local_tls.apply(settings)
    assert applied.server.tls_cert_file == Path("/mine.crt")
    assert (applied.pools.tls_mode, applied.pools.tls_ca_file) == ("verify-ca", Path("/my-ca.crt"))
