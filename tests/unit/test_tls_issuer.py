"""services/tls.py with the real openssl: a CA and server certificates that Python's own TLS
verifies for their names, reused while good, issued anew when a name, the CA or the key no
longer fits."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest

from services.process import ServiceError
from services.tls import CertificateAuthority, certificate_names, subject_alt_names


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority(tmp_path / "tls")
    assert authority.ensure() == "created"
    return authority


def handshake(ca_file: Path, cert: Path, key: Path, server_name: str) -> None:
    """A TLS handshake over a socket pair, the client verifying ``server_name`` against the CA."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(ca_file))
    left, right = socket.socketpair()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            with server_context.wrap_socket(right, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as exc:
            failure.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_context.wrap_socket(left, server_hostname=server_name) as tls:
            tls.sendall(b"x")
    finally:
        left.close()
        thread.join(5)
        right.close()


def test_the_ca_key_is_private_and_the_ca_is_kept(ca: CertificateAuthority) -> None:
    assert stat.S_IMODE(ca.key.stat().st_mode) == 0o600
    before = ca.cert.read_bytes()
    assert ca.ensure() == "reused"
    assert ca.cert.read_bytes() == before


def test_half_a_ca_is_refused_not_replaced(ca: CertificateAuthority) -> None:
    ca.key.unlink()
    with pytest.raises(ServiceError, match="half of a CA"):
        ca.ensure()


def test_a_server_certificate_verifies_for_each_name_and_address(
    ca: CertificateAuthority,
) -> None:
    issued = ca.issue("postgres", ["db.example", "127.0.0.1", "::1"])
    assert issued.outcome == "created"
    assert stat.S_IMODE(issued.key.stat().st_mode) == 0o600
    assert certificate_names(issued.cert) == {"DNS:db.example", "IP:127.0.0.1", "IP:::1"}
    for name in ("db.example", "127.0.0.1"):
        handshake(ca.cert, issued.cert, issued.key, name)
    with pytest.raises(ssl.SSLCertVerificationError, match=r"mismatch|match"):
        handshake(ca.cert, issued.cert, issued.key, "other.example")


def test_reused_while_good_reissued_when_a_name_is_missing(ca: CertificateAuthority) -> None:
    first = ca.issue("router", ["localhost", "127.0.0.1"])
    cert = first.cert.read_bytes()
    again = ca.issue("router", ["127.0.0.1"])
    assert again.outcome == "reused" and again.cert.read_bytes() == cert
    wider = ca.issue("router", ["localhost", "127.0.0.1", "10.1.2.3"])
    assert wider.outcome == "created" and wider.cert.read_bytes() != cert
    assert "IP:10.1.2.3" in certificate_names(wider.cert)


def test_reissued_when_the_key_or_the_ca_changed(tmp_path: Path, ca: CertificateAuthority) -> None:
    issued = ca.issue("router", ["localhost"])
    other = CertificateAuthority(tmp_path / "other")
    other.ensure()
    other.issue("router", ["localhost"])
    issued.key.write_bytes((other.directory / "router.key").read_bytes())
    assert ca.issue("router", ["localhost"]).outcome == "created"
    (other.directory / "router.crt").replace(issued.cert)
    (other.directory / "router.key").replace(issued.key)
    again = ca.issue("router", ["localhost"])
    assert again.outcome == "created"
    handshake(ca.cert, again.cert, again.key, "localhost")


@pytest.mark.parametrize("bad", ["", "a b", "x,DNS:evil", "host:1"])
def test_names_that_would_smuggle_extensions_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="neither a host name nor an IP address"):
        subject_alt_names([bad])


def test_bad_certificate_names_are_refused(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="not a certificate name"):
        ca.issue("../escape", ["localhost"])
    with pytest.raises(ValueError, match="at least one"):
        ca.issue("empty", [])
