"""HTTPS for the router: the server's TLS context (TLS 1.2 or newer), checked before uvicorn
starts so that a missing file or a key that does not match the certificate is one clear line,
and an event loop whose TLS handshakes have the header deadline.

asyncio and uvloop give a TLS handshake 60 s by default, and the protocol
(router/http/protocol.py) sees a connection only once its handshake is done: a client that
connects and never finishes the handshake would hold the connection that long, outside every
deadline the protocol keeps. Here the handshake gets ``header_timeout_s``."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop

log = logging.getLogger("router.http")


class TlsConfigError(ValueError):
    """A certificate or key setting the router cannot serve with."""


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The context the router serves HTTPS with; raises TlsConfigError naming the setting."""
    for setting, path in (("tls_cert_file", cert_file), ("tls_key_file", key_file)):
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise TlsConfigError(
                f"SHARDLOG_SERVER__{setting.upper()}: cannot read {path}: {exc.strerror}"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        reason = (
            "the key does not belong to the certificate"
            if "KEY_VALUES_MISMATCH" in str(exc)
            else f"not a PEM certificate and its key ({exc.reason or exc})"
        )
        raise TlsConfigError(
            f"SHARDLOG_SERVER__TLS_CERT_FILE {cert_file} and SHARDLOG_SERVER__TLS_KEY_FILE "
            f"{key_file}: {reason}"
        ) from None
    return context


def _uvicorn_factory(
    cert_file: Path, key_file: Path, _config: object, _default: Callable[[], ssl.SSLContext]
) -> ssl.SSLContext:
    return server_context(cert_file, key_file)


def context_factory(
    cert_file: Path, key_file: Path
) -> Callable[[Any, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """What uvicorn's ``ssl_context_factory`` takes; a partial, so it pickles into workers."""
    return functools.partial(_uvicorn_factory, cert_file, key_file)


class HandshakeDeadlineLoop(uvloop.Loop):
    """uvloop, with TLS servers' handshakes limited to ``handshake_timeout_s``."""

    handshake_timeout_s = 10.0

    async def create_server(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> asyncio.AbstractServer:
        if kwargs.get("ssl") is not None and kwargs.get("ssl_handshake_timeout") is None:
            kwargs["ssl_handshake_timeout"] = self.handshake_timeout_s
        server: asyncio.AbstractServer = await super().create_server(*args, **kwargs)
        return server


def handshake_deadline_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's ``loop=`` (an import string: it is built again in every worker process, from
    the same SHARDLOG_* environment the worker's app reads)."""
    from router.settings import Settings

    loop = HandshakeDeadlineLoop()
    loop.handshake_timeout_s = Settings().server.header_timeout_s
    return loop


LOOP = f"{__name__}:{handshake_deadline_loop.__name__}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_plain(host: str, tls: bool) -> None:
    if not tls and not is_loopback(host):
        log.warning(
            "INSECURE: the router listens on %s without TLS: API tokens and audit rows cross "
            "the network in clear text; set SHARDLOG_SERVER__TLS_CERT_FILE and "
            "SHARDLOG_SERVER__TLS_KEY_FILE (docs/security.md)",
            host,
        )
