"""The one error tree. Every failure a client can see is a ShardlogError with a status, a
stable code, a message, and the request field it concerns; the API renders it as one body:
``{"error": {"code": ..., "message": ..., "field": ...}}``."""

from __future__ import annotations

from typing import Any, ClassVar

# Logged with every unexpected exception; tests fail if a server log contains it.
BUG_MARKER = "SHARDLOG-BUG"


class ShardlogError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

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


class NotFound(ShardlogError):
    status = 404
    code = "not_found"


class Conflict(ShardlogError):
    status = 409
    code = "conflict"


class Unavailable(ShardlogError):
    status = 503
    code = "unavailable"


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}
