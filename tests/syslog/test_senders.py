"""Syslog senders have an identity (#35): a sender writes only as the tenant its mapping names,
never another tenant's owners; an unknown sender writes nothing (not the platform's own
`shardlog.admin` audit, not a claim on a new owner), and is counted; on the TLS port with
client CAs, a client certificate is the identity (mutual TLS) and a client without one is not
read; a quarantine tenant takes what unknown senders send when it is set.

Loopback addresses stand for hosts: the session listener maps 127.0.0.1 (tests/syslog/
conftest.py); 127.0.0.2 is mapped here; 127.0.0.3 is nobody's."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import time
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from router import clock
from router.auth.scopes import AUDIT_READ, AUDIT_WRITE
from router.settings import Settings
from services.router_process import RouterProcess
from tests.support import await_token, bearer, issue_token, run_cli
from tests.syslog.platform import RunningSyslog, found, none_found, unique
from tests.syslog.rsyslog import Rsyslog

REFUSED = "shardlog_syslog_refused_messages_total"
QUARANTINED = "shardlog_syslog_quarantined_messages_total"
MAPPED, UNKNOWN = "127.0.0.2", "127.0.0.3"


def wait_for(listener: RunningSyslog, name: str, at_least: float, **labels: str) -> None:
    deadline = time.monotonic() + 10
    while listener.metric(name, **labels) < at_least:
        assert time.monotonic() < deadline, f"{name} {labels} stayed below {at_least}"
        time.sleep(0.05)


def send_udp(source: str, port: int, *messages: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind((source, 0))
        for message in messages:
            udp.sendto(message, ("127.0.0.1", port))


def rfc5424(owner: str, text: str) -> bytes:
    stamp = clock.now().isoformat(timespec="microseconds").replace("+00:00", "Z")
    return f"<14>1 {stamp} host {owner} - - - {text}".encode()


def a_tenant(api: httpx.Client) -> str:
    name = unique("sl-t")
    created = api.post("/v1/admin/tenants", json={"name": name})
    assert created.status_code == 201, created.text
    return name


def owner_tenant(api: httpx.Client, owner: str) -> str | None:
    answer = api.get("/v1/admin/owners", params={"kind": "audit", "key": owner})
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    return str(answer.json()["tenant"])


def client(router_url: str, settings: Settings, tenant: str) -> httpx.Client:
    token = await_token(router_url, issue_token(settings, tenant, [AUDIT_READ, AUDIT_WRITE]))
    return httpx.Client(base_url=router_url, timeout=30, headers=bearer(token))


def admin_rows(api: httpx.Client, marker: str) -> list[str]:
    now = clock.now()
    params = {
        "owner": "shardlog.admin",
        "from": (now - timedelta(days=1)).isoformat(),
        "to": (now + timedelta(hours=1)).isoformat(),
        "q": marker,
    }
    page = api.get("/v1/audit/search", params=params)
    assert page.status_code == 200, page.text
    return [item["content"] for item in page.json()["items"]]


def test_an_unknown_sender_writes_nothing_and_is_counted(
    listener: RunningSyslog, api: httpx.Client
) -> None:
    """The reproducer of #35: a datagram naming shardlog.admin, and one claiming a new app
    name; then the same over TCP, whose connection is closed unread."""
    marker, squatted = unique("forged"), unique("squat")
    before = listener.metric(REFUSED, reason="unknown sender")
    forged = rfc5424("shardlog.admin", f"token.revoke 0000 by token 0000 {marker}")
    send_udp(UNKNOWN, listener.port, forged, rfc5424(squatted, "mine now"))
    with (
        socket.create_connection(("127.0.0.1", listener.port), 10, (UNKNOWN, 0)) as tcp,
        contextlib.suppress(ConnectionResetError),
    ):
        tcp.sendall(forged + b"\n")
        assert tcp.recv(10) == b""  # closed by the listener
    wait_for(listener, REFUSED, before + 3, reason="unknown sender")
    # The same from the mapped host is written: what the unknown one sent was not.
    known = unique("known")
    send_udp("127.0.0.1", listener.port, rfc5424(known, "from a mapped host"))
    found(api, known, 1)
    assert admin_rows(api, marker) == []
    assert owner_tenant(api, squatted) is None


def test_a_mapped_sender_writes_as_its_tenant_and_never_into_another(
    listener: RunningSyslog, api: httpx.Client, router_process: RouterProcess, settings: Settings
) -> None:
    tenant_a, tenant_b = a_tenant(api), a_tenant(api)
    owner_a, owner_b = unique("sl-a"), unique("sl-b")
    with (
        client(router_process.url, settings, tenant_a) as reader_a,
        client(router_process.url, settings, tenant_b) as writer_b,
    ):
        written = writer_b.post("/v1/audit", json=[{"owner": owner_b, "content": "b's own"}])
        assert written.status_code == 200, written.text
        mapped = api.put(f"/v1/admin/syslog-senders/{MAPPED}", json={"tenant": tenant_a})
        assert mapped.status_code == 200, mapped.text
        assert mapped.json() == {"sender": f"{MAPPED}/32", "tenant": tenant_a}
        try:
            probe_until_stored(listener, MAPPED, reader_a, owner_a)
            rejected = listener.metric(
                "shardlog_protocol_messages_total", protocol="syslog", outcome="rejected"
            )
            with socket.create_connection(("127.0.0.1", listener.port), 10, (MAPPED, 0)) as tcp:
                messages = [
                    rfc5424(owner_b, "into b"),
                    rfc5424("shardlog.admin", "forged by a tenant"),
                    rfc5424(owner_a, "after"),
                ]
                tcp.sendall(b"".join(message + b"\n" for message in messages))
            wait_for(
                listener,
                "shardlog_protocol_messages_total",
                rejected + 2,
                protocol="syslog",
                outcome="rejected",
            )
            contents = [item["content"] for item in found(reader_a, owner_a, 2)]
            assert contents[-1] == "after" and set(contents[:-1]) == {"probe"}
            assert owner_tenant(api, owner_a) == tenant_a
            assert owner_tenant(api, owner_b) == tenant_b
            assert [item["content"] for item in found(writer_b, owner_b, 1)] == ["b's own"]
            assert admin_rows(api, "forged by a tenant") == []
        finally:
            assert api.delete(f"/v1/admin/syslog-senders/{MAPPED}").status_code == 204


def probe_until_stored(
    listener: RunningSyslog, source: str, reader: httpx.Client, owner: str
) -> None:
    """The listener reloads its mappings on the catalog's NOTIFY: a probe from ``source`` a
    tenth of a second until one is stored."""
    deadline = time.monotonic() + 15
    while none_found(reader, owner):
        assert time.monotonic() < deadline, "the mapping never reached the listener"
        send_udp(source, listener.port, rfc5424(owner, "probe"))
        time.sleep(0.1)


def test_a_removed_mapping_ends_an_open_connections_writes(
    listener: RunningSyslog, api: httpx.Client, router_process: RouterProcess, settings: Settings
) -> None:
    source, tenant, owner = "127.0.0.4", a_tenant(api), unique("sl-gone")
    assert api.put(f"/v1/admin/syslog-senders/{source}", json={"tenant": tenant}).is_success
    with client(router_process.url, settings, tenant) as reader:
        probe_until_stored(listener, source, reader, owner)
        # Opened once the mapping is there: admitted.
        with socket.create_connection(("127.0.0.1", listener.port), 10, (source, 0)) as tcp:
            refused = listener.metric(REFUSED, reason="unknown sender")
            assert api.delete(f"/v1/admin/syslog-senders/{source}").status_code == 204
            deadline = time.monotonic() + 15
            while listener.metric(REFUSED, reason="unknown sender") == refused:
                assert time.monotonic() < deadline, "the removal never reached the listener"
                tcp.sendall(rfc5424(owner, "after the removal") + b"\n")
                time.sleep(0.1)
            refused = listener.metric(REFUSED, reason="unknown sender")
            tcp.sendall(rfc5424(owner, "late") + b"\n")
            wait_for(listener, REFUSED, refused + 1, reason="unknown sender")
        contents = {item["content"] for item in found(reader, owner, 1)}
    # Some messages sent while the removal was on its way may be stored, never one after it.
    assert "probe" in contents and "late" not in contents


# --- mutual TLS and the quarantine -------------------------------------------------------------


@pytest.fixture(scope="module")
def mutual(
    api: httpx.Client,
    settings: Settings,
    syslog_ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningSyslog, str, str]]:
    """A listener of its own whose TLS port requires client certificates and whose unknown
    senders go to a quarantine tenant; cert:web-7 is tenant C's."""
    tenant_c, quarantine = a_tenant(api), a_tenant(api)
    mapped = api.put("/v1/admin/syslog-senders/cert:web-7", json={"tenant": tenant_c})
    assert mapped.status_code == 200, mapped.text
    home = tmp_path_factory.mktemp("syslog-mutual")
    process = RunningSyslog(
        home,
        settings,
        syslog_ports,
        {
            "SHARDLOG_SYSLOG__TLS_CLIENT_CA_FILE": str(home / "tls" / "ca.crt"),
            "SHARDLOG_SYSLOG__QUARANTINE_TENANT": quarantine,
        },
    )
    process.start()
    try:
        yield process, tenant_c, quarantine
    finally:
        process.stop()
        process.check_log()
        assert api.delete("/v1/admin/syslog-senders/cert:web-7").status_code == 204


def tls_send(listener: RunningSyslog, certificate: str | None, message: bytes) -> bytes:
    """The message over TLS from the unknown host, with a client certificate of that common
    name (None: none); what the listener sent back before it closed (b""). Without a
    certificate the handshake fails on either side, or the listener closes at once."""
    context = ssl.create_default_context(cafile=listener.authority.cert)
    if certificate is not None:
        issued = listener.authority.issue(certificate, [f"{certificate}.example"])
        context.load_cert_chain(issued.cert, issued.key)
    address = ("127.0.0.1", listener.tls_port)
    with (
        socket.create_connection(address, 10, (UNKNOWN, 0)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(message + b"\n")
        if certificate is not None:
            tls.unwrap()  # a clean close: everything sent was read
            return b""
        return tls.recv(10)


def test_a_client_certificate_is_the_identity_on_the_tls_port(
    mutual: tuple[RunningSyslog, str, str],
    api: httpx.Client,
    router_process: RouterProcess,
    settings: Settings,
) -> None:
    listener, tenant_c, quarantine = mutual
    owner_c, owner_q = unique("sl-c"), unique("sl-q")
    tls_send(listener, "web-7", rfc5424(owner_c, "certified"))
    with client(router_process.url, settings, tenant_c) as reader_c:
        assert [item["content"] for item in found(reader_c, owner_c, 1)] == ["certified"]
    assert owner_tenant(api, owner_c) == tenant_c
    # A certificate of the CA without a mapping, from a host without one: quarantined.
    before = listener.metric(QUARANTINED)
    tls_send(listener, "web-8", rfc5424(owner_q, "certified but unmapped"))
    with client(router_process.url, settings, quarantine) as reader_q:
        contents = [item["content"] for item in found(reader_q, owner_q, 1)]
    assert contents == ["certified but unmapped"]
    assert owner_tenant(api, owner_q) == quarantine
    assert listener.metric(QUARANTINED) >= before + 1


def test_a_tls_client_without_a_certificate_is_not_read(
    mutual: tuple[RunningSyslog, str, str],
    api: httpx.Client,
    router_process: RouterProcess,
    settings: Settings,
) -> None:
    listener, _, quarantine = mutual
    owner = unique("sl-anon")
    # TLS 1.3: the client may learn of the refusal only when it reads.
    with contextlib.suppress(ssl.SSLError, ConnectionResetError, BrokenPipeError):
        assert tls_send(listener, None, rfc5424(owner, "no certificate")) == b""
    # A quarantined datagram sent after it is stored; the TLS message never is (read, it
    # would have been quarantined too: its host is nobody's).
    later = unique("sl-udp")
    send_udp(UNKNOWN, listener.port, rfc5424(later, "quarantined"))
    with client(router_process.url, settings, quarantine) as reader_q:
        found(reader_q, later, 1)
    assert owner_tenant(api, owner) is None


def test_the_cli_maps_and_unmaps_a_sender(settings: Settings, api: httpx.Client) -> None:
    tenant = a_tenant(api)
    mapped = run_cli(settings, "syslog-senders", "set", "2001:db8:7::/48", "--tenant", tenant)
    assert mapped.returncode == 0, mapped.stderr
    listed = run_cli(settings, "syslog-senders", "list", "--tenant", tenant, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"sender": "2001:db8:7::/48", "tenant": tenant}]
    bad = run_cli(settings, "syslog-senders", "set", "192.0.2.1/24", "--tenant", tenant)
    assert bad.returncode != 0 and "sender" in bad.stderr
    removed = run_cli(settings, "syslog-senders", "remove", "2001:db8:7::/48")
    assert removed.returncode == 0, removed.stderr
    assert api.get("/v1/admin/syslog-senders", params={"tenant": tenant}).json() == []
    audit = admin_rows(api, "2001:db8:7::/48")
    assert any(row.startswith("syslog_sender.set 2001:db8:7::/48 by cli") for row in audit), audit
    assert any(row.startswith("syslog_sender.remove 2001:db8:7::/48") for row in audit), audit


def test_the_admin_api_names_the_field_it_refuses(api: httpx.Client) -> None:
    for sender, status, field in [
        ("192.0.2.1/24", 422, "sender"),
        ("not-a-network", 422, "sender"),
        ("cert:", 422, "sender"),
    ]:
        answer = api.put(f"/v1/admin/syslog-senders/{sender}", json={})
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["field"] == field
    unknown = api.put("/v1/admin/syslog-senders/192.0.2.0/24", json={"tenant": unique("nobody")})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "tenant"
    gone = api.delete("/v1/admin/syslog-senders/192.0.2.99")
    assert gone.status_code == 404 and gone.json()["error"]["field"] == "sender"
    # A tenant with a sender is not removed until the sender is.
    tenant = a_tenant(api)
    assert api.put("/v1/admin/syslog-senders/198.51.100.0/24", json={"tenant": tenant}).is_success
    held = api.delete(f"/v1/admin/tenants/{tenant}")
    assert held.status_code == 409 and "syslog senders" in held.json()["error"]["message"]
    assert api.delete("/v1/admin/syslog-senders/198.51.100.0/24").status_code == 204
    assert api.delete(f"/v1/admin/tenants/{tenant}").status_code == 204


def test_rsyslog_with_a_client_certificate(
    mutual: tuple[RunningSyslog, str, str],
    api: httpx.Client,
    router_process: RouterProcess,
    settings: Settings,
    syslog_ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The documented rsyslog TLS action with the client's certificate (global
    defaultNetstreamDriverCertFile/KeyFile) from the mapped host: its certificate's mapping
    wins over its address's (127.0.0.1 is the system tenant's)."""
    listener, tenant_c, _ = mutual
    owner = unique("sl-rsyslog")
    certificate = listener.authority.issue("web-7", ["web-7.example"])
    home = tmp_path_factory.mktemp("rsyslog-mutual")
    forwarder = Rsyslog(home, {"tls": next(syslog_ports)}, listener, certificate)
    forwarder.start()
    try:
        forwarder.send("tls", [rfc5424(owner, f"forwarded {n}") for n in range(3)])
        with client(router_process.url, settings, tenant_c) as reader_c:
            contents = [item["content"] for item in found(reader_c, owner, 3)]
    finally:
        output = forwarder.stop()
    assert sorted(contents) == [f"forwarded {n}" for n in range(3)]
    assert owner_tenant(api, owner) == tenant_c
    assert "error" not in output.lower(), output


def test_a_quarantine_tenant_that_does_not_exist_stops_the_start(
    settings: Settings, syslog_ports: Iterator[int]
) -> None:
    missing = unique("sl-missing")
    ports = {
        f"SHARDLOG_SYSLOG__{name}": str(next(syslog_ports))
        for name in ("UDP_PORT", "TCP_PORT", "METRICS_PORT")
    }
    env = {**ports, "SHARDLOG_SYSLOG__QUARANTINE_TENANT": missing}
    started = run_cli(settings, "syslog", env=env)
    assert started.returncode == 1
    assert f"SHARDLOG_SYSLOG__QUARANTINE_TENANT: tenant '{missing}' does not exist" in (
        started.stderr
    )
