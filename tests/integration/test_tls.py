"""TLS end to end on a small cluster of its own (metadata + 2 shards) that `shardlog up --tls`
brings up: the router on HTTPS verified by the local CA, every connection to PostgreSQL over
verified TLS (the router's pools, the catalog listener, the fdw coordinator's), plain TCP
connections refused by pg_hba, a wrong CA or host name failing verification with a clear error,
and the slow-client deadlines holding over TLS."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import orjson
import pytest

from router import clock
from router.cli import local_tls
from router.errors import BUG_MARKER
from router.settings import (
    AuthSettings,
    ClusterSettings,
    CollectorSettings,
    CompactionSettings,
    RetentionSettings,
    ServerSettings,
    Settings,
    SyslogSettings,
)
from services.process import free_port
from services.router_process import RouterProcess
from services.tls import CertificateAuthority
from tests.support import (
    bearer,
    free_port_range,
    issue_token,
    run_cli,
    running_router,
    settings_env,
)

# A cluster and routers of its own, with TLS.
pytestmark = pytest.mark.slow

SHARDS = 2
HEADER_TIMEOUT_S = 1.0
BODY_IDLE_S = 1.0
SLACK_S = 0.75


@pytest.fixture(scope="module")
def plain_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("tls-cluster")
    return Settings(
        cluster=ClusterSettings(
            data_dir=root, shards=SHARDS, groups=1, base_port=free_port_range(SHARDS + 1)
        ),
        server=ServerSettings(port=free_port()),
        retention=RetentionSettings(enabled=False, archive_dir=root / "archive"),
        compaction=CompactionSettings(enabled=False),
        auth=AuthSettings(mode="tokens"),
        collector=CollectorSettings(
            netflow_port=free_port(), ipfix_port=free_port(), metrics_port=free_port()
        ),
        syslog=SyslogSettings(
            udp_port=(syslog_port := free_port()), tcp_port=syslog_port, metrics_port=free_port()
        ),
    )


@pytest.fixture(scope="module")
def tls_settings(plain_settings: Settings) -> Iterator[Settings]:
    """The cluster `shardlog up --tls` started; the settings it runs with (local_tls.apply)."""
    started = run_cli(plain_settings, "up", "--tls")
    settings = local_tls.apply(plain_settings)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert "https://" in started.stdout and "--cacert" in started.stdout
        assert "collector started" in started.stdout, started.stdout
        assert "syslog listener started" in started.stdout, started.stdout
        yield settings
    finally:
        stopped = run_cli(plain_settings, "down")
        assert stopped.returncode == 0, stopped.stderr
        assert "collector stopped" in stopped.stdout, stopped.stdout
        assert "syslog listener stopped" in stopped.stdout, stopped.stdout
        for log_file in ("router/router.log", "collector/collector.log", "syslog/syslog.log"):
            log = (plain_settings.cluster.data_dir / log_file).read_text()
            assert BUG_MARKER not in log and "Traceback" not in log, log[-4000:]


@pytest.fixture(scope="module")
def ca_file(tls_settings: Settings) -> Path:
    return local_tls.authority(tls_settings).cert


@pytest.fixture(scope="module")
def router_url(tls_settings: Settings) -> str:
    return f"https://{tls_settings.server.host}:{tls_settings.server.port}"


@pytest.fixture(scope="module")
def token(tls_settings: Settings) -> str:
    return issue_token(tls_settings, "default", ["audit:write", "audit:read"], name="tls")


@pytest.fixture(scope="module")
def api(ca_file: Path, router_url: str, token: str) -> Iterator[httpx.Client]:
    verify = ssl.create_default_context(cafile=str(ca_file))
    with httpx.Client(base_url=router_url, verify=verify, headers=bearer(token)) as client:
        yield client


def psql(
    settings: Settings, port: int, sql: str, **params: str
) -> subprocess.CompletedProcess[str]:
    """psql to one instance, verify-full against the local CA unless ``params`` say otherwise."""
    conninfo = {
        "host": settings.cluster.host,
        "port": str(port),
        "dbname": "shardlog",
        "user": "shardlog",
        "passfile": str(settings.pools.passfile),
        "sslmode": "verify-full",
        "sslrootcert": str(local_tls.authority(settings).cert),
        **params,
    }
    dsn = " ".join(f"{key}={value}" for key, value in conninfo.items())
    return subprocess.run(
        ["psql", "-X", "-At", "-d", dsn, "-c", sql],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def instance_ports(settings: Settings) -> list[int]:
    return [settings.cluster.base_port + i for i in range(SHARDS + 1)]


def window() -> dict[str, str]:
    now = clock.now()
    return {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=5)).isoformat(),
    }


# --- the router over HTTPS -----------------------------------------------------------------


def test_the_router_serves_https_that_the_ca_verifies(api: httpx.Client, router_url: str) -> None:
    ready = api.get("/health/ready")
    assert ready.status_code == 200, ready.text
    assert all(shard["reachable"] for shard in ready.json()["shards"])
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{router_url}/health/live")  # the system's CAs do not know ours
    with pytest.raises(httpx.HTTPError):
        httpx.get(router_url.replace("https://", "http://") + "/health/live")


def test_ingest_and_search_over_tls_by_fanout_and_fdw(api: httpx.Client) -> None:
    owner = f"tls-{uuid.uuid4().hex[:8]}"
    body = b"".join(
        orjson.dumps({"owner": owner, "content": f"row {i}"}) + b"\n" for i in range(50)
    )
    written = api.post("/v1/audit", content=body, headers={"content-type": "application/x-ndjson"})
    assert written.status_code == 200, written.text
    pages = {}
    for backend in ("fanout", "fdw"):
        found = api.get(
            "/v1/audit/search",
            params={"owner": owner, "limit": 100, "backend": backend, **window()},
        )
        assert found.status_code == 200, found.text
        pages[backend] = found.json()["items"]
    assert len(pages["fanout"]) == 50
    assert pages["fdw"] == pages["fanout"]


def test_every_connection_to_postgresql_is_encrypted(
    tls_settings: Settings, api: httpx.Client
) -> None:
    test_ingest_and_search_over_tls_by_fanout_and_fdw(api)  # the router and the fdw connected
    seen: dict[str, bool] = {}
    for port in instance_ports(tls_settings):
        result = psql(
            tls_settings,
            port,
            "SELECT a.application_name || ' as ' || a.usename, s.ssl FROM pg_stat_activity a "
            "JOIN pg_stat_ssl s USING (pid) WHERE a.backend_type = 'client backend' "
            "AND a.pid <> pg_backend_pid()",
        )
        assert result.returncode == 0, result.stderr
        for line in result.stdout.splitlines():
            who, encrypted = line.rsplit("|", 1)
            seen[f"{port}: {who}"] = seen.get(f"{port}: {who}", True) and encrypted == "t"
    assert seen and all(seen.values()), seen
    names = " ".join(seen)
    for expected in ("shardlog-router as shardlog_writer", "shardlog-catalog-listener"):
        assert expected in names, seen
    assert "postgres_fdw as shardlog_reader" in names, seen
    servers = psql(
        tls_settings,
        tls_settings.cluster.base_port,
        "SELECT array_to_string(srvoptions, ',') FROM pg_foreign_server",
    )
    assert servers.stdout.strip(), servers.stderr
    for options in servers.stdout.splitlines():
        assert "sslmode=verify-full" in options and "sslrootcert=" in options


def test_the_coordinators_servers_are_brought_back_to_the_tls_settings(
    tls_settings: Settings, api: httpx.Client, ca_file: Path
) -> None:
    test_ingest_and_search_over_tls_by_fanout_and_fdw(api)  # at least one foreign server
    port = tls_settings.cluster.base_port
    server = psql(tls_settings, port, "SELECT srvname FROM pg_foreign_server LIMIT 1").stdout
    assert server.strip()
    altered = psql(
        tls_settings,
        port,
        f"ALTER SERVER {server.strip()} OPTIONS (DROP sslmode, SET sslrootcert '/nowhere')",
    )
    assert altered.returncode == 0, altered.stderr
    migrated = run_cli(tls_settings, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert f"coordinator login of {server.strip()} set anew" in migrated.stdout
    options = psql(
        tls_settings,
        port,
        f"SELECT array_to_string(srvoptions, ',') FROM pg_foreign_server "
        f"WHERE srvname = '{server.strip()}'",
    ).stdout
    assert "sslmode=verify-full" in options and f"sslrootcert={ca_file}" in options


# --- PostgreSQL refuses what is not verified TLS -------------------------------------------


def test_plain_tcp_connections_are_refused_by_pg_hba(tls_settings: Settings) -> None:
    for port in instance_ports(tls_settings):
        refused = psql(tls_settings, port, "SELECT 1", sslmode="disable")
        assert refused.returncode == 2
        assert "no pg_hba.conf entry" in refused.stderr and "no encryption" in refused.stderr
        assert psql(tls_settings, port, "SELECT 1").stdout.strip() == "1"


def test_a_wrong_host_name_fails_verification(tls_settings: Settings) -> None:
    failed = psql(
        tls_settings,
        tls_settings.cluster.base_port + 1,
        "SELECT 1",
        host="wrong.example",
        hostaddr=tls_settings.cluster.host,
    )
    assert failed.returncode == 2
    assert 'does not match host name "wrong.example"' in failed.stderr


def test_a_wrong_ca_fails_verification_with_a_clear_error(
    tls_settings: Settings, tmp_path: Path
) -> None:
    other = CertificateAuthority(tmp_path / "other")
    other.ensure()
    failed = psql(
        tls_settings, tls_settings.cluster.base_port, "SELECT 1", sslrootcert=str(other.cert)
    )
    assert failed.returncode == 2 and "certificate verify failed" in failed.stderr
    # The router's and the CLI's own connections, through SHARDLOG_POOLS__TLS_CA_FILE.
    listed = run_cli(
        tls_settings, "shards", "list", env={"SHARDLOG_POOLS__TLS_CA_FILE": str(other.cert)}
    )
    assert listed.returncode == 1
    assert "certificate verify failed" in listed.stderr and "Traceback" not in listed.stderr
    assert run_cli(tls_settings, "shards", "list").returncode == 0


# --- the router's certificate settings -----------------------------------------------------


def test_a_key_that_does_not_match_or_a_missing_file_stops_the_start(
    tls_settings: Settings, tmp_path: Path
) -> None:
    other = CertificateAuthority(tmp_path / "other")
    other.ensure()
    foreign_key = other.issue("router", ["127.0.0.1"]).key
    cert = tls_settings.server.tls_cert_file
    for key, message in (
        (foreign_key, "the key does not belong to the certificate"),
        (tmp_path / "missing.key", "SHARDLOG_SERVER__TLS_KEY_FILE: cannot read"),
    ):
        served = run_cli(
            tls_settings,
            "serve",
            "--port",
            str(free_port()),
            env={
                "SHARDLOG_SERVER__TLS_CERT_FILE": str(cert),
                "SHARDLOG_SERVER__TLS_KEY_FILE": str(key),
            },
        )
        assert served.returncode == 1
        assert message in served.stderr and "Traceback" not in served.stderr, served.stderr


# --- slow clients over TLS -----------------------------------------------------------------


@pytest.fixture(scope="module")
def strict(
    tls_settings: Settings, ca_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RouterProcess]:
    port = free_port()
    env = {
        **settings_env(tls_settings),
        "SHARDLOG_SERVER__PORT": str(port),
        "SHARDLOG_SERVER__HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "SHARDLOG_SERVER__BODY_IDLE_TIMEOUT_S": str(BODY_IDLE_S),
        "SHARDLOG_SERVER__WORKERS": "2",  # the TLS context and the loop reach worker processes
    }
    router = RouterProcess(
        tmp_path_factory.mktemp("strict-tls"), tls_settings.server.host, port, env, ca_file
    )
    with running_router(router):
        yield router


def tls_connection(router: RouterProcess) -> ssl.SSLSocket:
    context = router.ssl_context()
    assert context is not None
    raw = socket.create_connection((router.host, router.port), timeout=10)
    return context.wrap_socket(raw, server_hostname=router.host)


def answer_and_close(sock: socket.socket, limit_s: float = 10) -> tuple[bytes, float]:
    """What the server sends until it closes, and how long after the call it closed."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError):
            chunk = b""
        if not chunk:
            return data, time.monotonic() - started
        data += chunk


def test_a_client_that_never_starts_the_handshake_is_closed_at_the_header_deadline(
    strict: RouterProcess,
) -> None:
    raw = socket.create_connection((strict.host, strict.port), timeout=10)
    with raw:
        data, closed_after = answer_and_close(raw)
    assert data == b""
    assert HEADER_TIMEOUT_S - 0.05 <= closed_after <= HEADER_TIMEOUT_S + SLACK_S


def test_headers_too_slow_over_tls_get_408(strict: RouterProcess) -> None:
    with tls_connection(strict) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: slow\r\n")
        answer, closed_after = answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"request_timeout" in answer
    assert closed_after <= HEADER_TIMEOUT_S + SLACK_S + 2.0  # + the lingering close


def test_a_body_too_slow_over_tls_gets_408(strict: RouterProcess, token: str) -> None:
    with tls_connection(strict) as sock:
        sock.sendall(
            b"POST /v1/audit HTTP/1.1\r\nHost: slow\r\nContent-Type: application/x-ndjson\r\n"
            b"Authorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{" % token.encode()
        )
        answer, _ = answer_and_close(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"request body too slow" in answer


def test_a_prompt_client_is_served_by_every_worker(strict: RouterProcess) -> None:
    context = strict.ssl_context()
    assert context is not None
    with httpx.Client(base_url=strict.url, verify=context) as client:
        for _ in range(10):
            assert client.get("/health/live").status_code == 200
