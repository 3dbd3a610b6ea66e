"""router/http/tls.py: the router's TLS context (TLS 1.2 at least; unusable files are one clear
error naming the setting) and the warning for plain HTTP off loopback."""

from __future__ import annotations

import logging
import pickle
import ssl
from pathlib import Path

import pytest

from router.http import tls
from services.tls import CertificateAuthority


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority(tmp_path / "tls")
    authority.ensure()
    return authority


def test_the_context_serves_tls_1_2_and_newer_only(ca: CertificateAuthority) -> None:
    issued = ca.issue("router", ["127.0.0.1"])
    context = tls.server_context(issued.cert, issued.key)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.protocol == ssl.PROTOCOL_TLS_SERVER


def test_the_uvicorn_factory_pickles_into_workers(ca: CertificateAuthority) -> None:
    issued = ca.issue("router", ["127.0.0.1"])
    factory = pickle.loads(pickle.dumps(tls.context_factory(issued.cert, issued.key)))
    assert isinstance(factory(None, ssl.create_default_context), ssl.SSLContext)


def test_unusable_files_are_one_clear_error(ca: CertificateAuthority, tmp_path: Path) -> None:
    issued = ca.issue("router", ["127.0.0.1"])
    other = ca.issue("other", ["127.0.0.1"])
    with pytest.raises(tls.TlsConfigError, match=r"TLS_KEY_FILE: cannot read .*missing"):
        tls.server_context(issued.cert, tmp_path / "missing.key")
    with pytest.raises(tls.TlsConfigError, match="the key does not belong to the certificate"):
        tls.server_context(issued.cert, other.key)
    garbage = tmp_path / "garbage.crt"
    garbage.write_text("not a certificate\n")
    with pytest.raises(tls.TlsConfigError, match="not a PEM certificate and its key"):
        tls.server_context(garbage, issued.key)


@pytest.mark.parametrize(
    ("host", "tls_on", "warned"),
    [
        ("127.0.0.1", False, False),
        ("::1", False, False),
        ("localhost", False, False),
        ("0.0.0.0", False, True),
        ("10.1.2.3", False, True),
        ("router.example", False, True),
        ("10.1.2.3", True, False),
    ],
)
def test_plain_http_off_loopback_is_a_loud_warning(
    host: str, tls_on: bool, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="router.http"):
        tls.warn_if_plain(host, tls_on)
    assert any("INSECURE" in r.message for r in caplog.records) == warned
