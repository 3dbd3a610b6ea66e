"""The token format and its hash. Pure.

A token is ``shl_<public id>_<secret>``: ``shl_`` says what it is (secret scanners can look for
it), the public id (16 hex digits) names the catalog row, and the secret is 32 random bytes
(256 bits) in hex. The catalog keeps only the SHA-256 of the secret: a secret that random needs
no slow password hash (nothing to guess), and a fast one keeps authentication at a microsecond
per request. Digests are compared in constant time."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "shl_"
ID_HEX_DIGITS = 16
SECRET_BYTES = 32
ID_PATTERN = re.compile(r"^[0-9a-f]{16}$")
_TOKEN = re.compile(r"^shl_([0-9a-f]{16})_([0-9a-f]{64})$")


@dataclass(frozen=True)
class NewToken:
    """A token as created: its text is shown once and never stored."""

    id: str
    secret: str

    @property
    def text(self) -> str:
        return f"{PREFIX}{self.id}_{self.secret}"

    @property
    def digest(self) -> bytes:
        return digest(self.secret)


def new_token() -> NewToken:
    return NewToken(secrets.token_hex(ID_HEX_DIGITS // 2), secrets.token_hex(SECRET_BYTES))


def parse(text: str) -> tuple[str, str] | None:
    """(public id, secret) of a well-formed token, else None."""
    match = _TOKEN.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii")).digest()


def matches(secret: str, stored: bytes) -> bool:
    return hmac.compare_digest(digest(secret), stored)


def credentials(header: str | None) -> str | None:
    """The token an Authorization header carries, in any of the schemes log shippers send:
    ``Bearer <token>``; ``Basic`` with the token as the password (rsyslog, Promtail, Beats and
    Fluent Bit have user and password settings; the user name is ignored); ``ApiKey`` (the
    Elasticsearch clients) with the token itself or base64 of ``<anything>:<token>``. Schemes
    in any case."""
    if not header:
        return None
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if not given:
        return None
    match scheme.lower():
        case "bearer":
            return given
        case "basic":
            return _password(given)
        case "apikey":
            return given if given.startswith(PREFIX) else _password(given)
    return None


def _password(encoded: str) -> str | None:
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _user, colon, password = text.partition(":")
    return password if colon and password else None
