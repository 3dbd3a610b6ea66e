"""What routes tell OpenAPI beyond their parameters: the error statuses each operation answers
with, every one with the one error body (router.errors), and the bodies FastAPI cannot derive
from a signature (record streams, NDJSON and text answers).

Models named here that no route signature mentions reach ``components/schemas`` through
``router.api.openapi``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from router.models.errors import Error

Responses = dict[int | str, dict[str, Any]]

REF = "#/components/schemas/"

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The request cannot be understood (a body that is not JSON, say); `field` names the "
    "part when it can",
    401: "No valid API token (Authorization: Bearer <token>): missing, malformed, unknown, "
    "revoked or expired",
    403: "The token lacks the scope this operation needs, or a key belongs to another tenant "
    "or lies outside the token's owner/switch prefixes; the message names which",
    404: "Not found; `field` names what",
    409: "Conflicts with the catalog or with a request in progress",
    413: "Too large",
    415: "Unsupported content type",
    422: "A parameter or field is invalid; `field` names it",
    429: "Over the token's request rate, write byte rate or concurrent searches, or the "
    "router holds too many request bytes; retry after Retry-After seconds",
    # Not naming the log marker itself: fuzzers send the schema's strings back, and a request
    # line holding the marker would look like a bug in the router log.
    500: "A bug: the message carries a reference that the router log repeats with the traceback",
    503: "A shard or the metadata database is unavailable; retry after Retry-After seconds",
    504: "A shard did not answer in time",
}


# Every operation that needs a token: no valid token, a missing scope or foreign key, and the
# token's limits.
GUARDED = (401, 403, 429)


def errors(*statuses: int) -> Responses:
    """The error responses of an operation that answers with ``statuses``; 500 is added, as
    any operation can meet a bug."""
    return described({status: ERROR_DESCRIPTIONS[status] for status in statuses})


def described(descriptions: dict[int, str]) -> Responses:
    """Error responses with descriptions of their own, and 500."""
    wanted = {**descriptions, 500: ERROR_DESCRIPTIONS[500]}
    return {
        status: {"model": Error, "description": text} for status, text in sorted(wanted.items())
    }


def ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF + model.__name__}


def ndjson_answer(line: type[BaseModel], description: str) -> Responses:
    """A 200 that streams NDJSON: one ``line`` per line, or an error body as the last line."""
    return {
        200: {
            "description": description,
            "content": {
                "application/x-ndjson": {
                    "schema": {
                        "anyOf": [ref(line), ref(Error)],
                        "description": f"One {line.__name__} per line; a failure after the "
                        "stream began ends it with an error body as its last line",
                    }
                }
            },
        }
    }


def text_answer(media_type: str, description: str) -> Responses:
    content = {media_type: {"schema": {"type": "string"}}}
    return {200: {"description": description, "content": content}}


def record_body(
    record: type[BaseModel], ndjson_types: tuple[str, ...], csv: str | None = None
) -> dict[str, Any]:
    """``openapi_extra`` of a write route that reads its body as a stream: a JSON array of
    ``record``, NDJSON of it (one per line), and optionally CSV described by ``csv``."""
    content: dict[str, Any] = {
        "application/json": {
            "schema": {
                "type": "array",
                "items": ref(record),
                "description": f"A JSON array of {record.__name__}",
            }
        }
    }
    for media_type in ndjson_types:
        content[media_type] = {
            "schema": {
                **ref(record),
                "description": f"NDJSON: one {record.__name__} per line, read as it arrives; "
                "blank lines are skipped",
            }
        }
    if csv is not None:
        content["text/csv"] = {"schema": {"type": "string", "description": csv}}
    return {
        "requestBody": {
            "required": True,
            "description": "Records; any invalid one rejects the whole request and nothing is "
            "written. A missing Content-Type is read as application/json",
            "content": content,
        }
    }
