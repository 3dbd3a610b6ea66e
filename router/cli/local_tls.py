"""The local cluster with TLS (`shardlog up --tls`, `make up TLS=1`): a CA and certificates under
``<data_dir>/tls`` (services/tls.py), every PostgreSQL instance with ssl on and TLS-only
pg_hba lines, the router on HTTPS, and every connection of the router and the CLI verifying its
server (verify-full) against the CA. A mark file keeps the choice until `make clean`, so that
`make up`, `make down` and every other command find TLS on without being told again."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from router.settings import Settings
from services.process import OsUser
from services.tls import CertificateAuthority

TLS_DIR = "tls"
MARK = "tls-local"
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def recorded(settings: Settings) -> bool:
    return settings.cluster.tls or (settings.cluster.data_dir / MARK).exists()


def authority(settings: Settings) -> CertificateAuthority:
    return CertificateAuthority(settings.cluster.data_dir / TLS_DIR)


def _cert(settings: Settings, name: str) -> tuple[Path, Path]:
    directory = authority(settings).directory
    return directory / f"{name}.crt", directory / f"{name}.key"


def apply(settings: Settings) -> Settings:
    """``settings`` as a TLS local cluster needs them, when it has TLS: the router's
    certificate and key, and verify-full with the local CA; what is set explicitly stays."""
    if not recorded(settings):
        return settings
    server, pools = settings.server, settings.pools
    if server.tls_cert_file is None:
        cert, key = _cert(settings, "router")
        server = server.model_copy(update={"tls_cert_file": cert, "tls_key_file": key})
    update: dict[str, Any] = {}
    if pools.tls_mode is None:
        update["tls_mode"] = "verify-full"
    if pools.tls_ca_file is None:
        update["tls_ca_file"] = authority(settings).cert
    cluster = settings.cluster.model_copy(update={"tls": True})
    return settings.model_copy(
        update={"server": server, "pools": pools.model_copy(update=update), "cluster": cluster}
    )


def postgres_settings(settings: Settings) -> dict[str, Any]:
    """The variables of services/templates/ a TLS local cluster's instances are rendered with
    ({} without TLS)."""
    if not recorded(settings):
        return {}
    cert, key = _cert(settings, "postgres")
    return {
        "ssl": True,
        "ssl_cert_file": str(cert),
        "ssl_key_file": str(key),
        "ssl_ca_file": str(authority(settings).cert),
        "ssl_required": True,
    }


def _names(host: str) -> list[str]:
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - every interface: name the host itself
        return [*LOOPBACK, socket.gethostname()]
    return [host, *LOOPBACK]


def prepare(settings: Settings, server_user: OsUser | None) -> Settings:
    """The CA, PostgreSQL's certificate (its key the server user's) and the router's, made or
    reused, and the mark; returns ``apply``'d settings."""
    ca = authority(settings)
    ca.ensure()
    ca.issue("postgres", _names(settings.cluster.host), owner=server_user)
    ca.issue("router", _names(settings.server.host))
    (settings.cluster.data_dir / MARK).write_text("TLS on: certificates under tls/\n")
    return apply(
        settings.model_copy(update={"cluster": settings.cluster.model_copy(update={"tls": True})})
    )
