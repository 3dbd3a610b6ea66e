"""The one error tree. Every failure a client can see is a ShardlogError with a status, a
stable code, a message, and the request field it concerns; the API renders it as one body:
``{"error": {"code": ..., "message": ..., "field": ...}}``."""

from __future__ import annotations

from typing import Any, ClassVar

# Logged with every unexpected exception; tests fail if a server log contains it.
BUG_MARKER = "SHARDLOG-BUG"
# An error quotes at most this much of a client's value, and says no more than MAX_MESSAGE_CHARS
# in all: a body never echoes megabytes back.
MAX_QUOTED_CHARS = 100
MAX_MESSAGE_CHARS = 1000


def excerpt(value: object, limit: int = MAX_QUOTED_CHARS) -> str:
    """A client's value as it may appear in an error: quoted, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} characters)"


class ShardlogError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"

    def __init__(
        self, message: str, field: str | None = None, *, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.field)


class BadRequest(ShardlogError):
    status = 400
    code = "bad_request"


class Invalid(ShardlogError):
    status = 422
    code = "invalid"


class Unauthorized(ShardlogError):
    status = 401
    code = "unauthorized"

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "WWW-Authenticate": 'Bearer realm="shardlog"'}


class Forbidden(ShardlogError):
    """Authenticated, but the token lacks a scope or the key belongs to another tenant (or lies
    outside the token's owner/switch prefixes)."""

    status = 403
    code = "forbidden"


class NotFound(ShardlogError):
    status = 404
    code = "not_found"


class Conflict(ShardlogError):
    status = 409
    code = "conflict"


class TooLarge(ShardlogError):
    status = 413
    code = "too_large"


class Overloaded(ShardlogError):
    status = 429
    code = "overloaded"


class Unavailable(ShardlogError):
    status = 503
    code = "unavailable"


class GatewayTimeout(ShardlogError):
    status = 504
    code = "timeout"


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    if field is not None and len(field) > MAX_QUOTED_CHARS:
        field = field[: MAX_QUOTED_CHARS - 1] + "…"
    return {"error": {"code": code, "message": message, "field": field}}
