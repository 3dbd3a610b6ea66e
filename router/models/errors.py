"""The one error body every failure is rendered as (router.errors.error_body)."""

from __future__ import annotations

from pydantic import Field

from router.models.common import Out


class ErrorDetail(Out):
    code: str = Field(
        description="Stable: bad_request, unauthorized, forbidden, not_found, method_not_allowed, "
        "conflict, too_large, unsupported_media_type, invalid, overloaded, internal, "
        "unavailable, unready, timeout, http_error"
    )
    message: str = Field(description="For people; may change between versions")
    field: str | None = Field(
        description="The request field concerned, e.g. records[12].ts, dsn, cursor; "
        "null when none is"
    )


class Error(Out):
    error: ErrorDetail
