"""What the answer models share: they refuse keys they do not name, so a key the code adds
without the model is a failing test rather than an undocumented field."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from router.catalog.rules import NAME_PATTERN, owner_key_problem

# Rendered by the services with isoformat(): RFC 3339 with an offset. Kept a string so that the
# answer is byte for byte what the service rendered.
Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _owner_key(value: str) -> str:
    problem = owner_key_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# An owner or switch key in a request body: the one rule for keys (router.catalog.rules).
OwnerKey = Annotated[
    str,
    Field(min_length=1, max_length=256, description="1-256 printable characters"),
    AfterValidator(_owner_key),
]


ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_day(value: object) -> date:
    # pydantic alone takes 0 or "0" for 1970-01-01 (a Unix time): a day is its ISO text only.
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not ISO_DAY.fullmatch(value):
        raise ValueError("a day is written YYYY-MM-DD")
    return date.fromisoformat(value)


def _json_integer(value: object) -> object:
    # A strict model takes no 1.0 for an integer, where JSON (and its schema) sees one.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer in a strict request body: a JSON integer, 1.0 included; never "1" or true.
JsonInt = Annotated[int, BeforeValidator(_json_integer)]

# A day in a request (body or query): YYYY-MM-DD, as the schema's format "date" says.
Day = Annotated[date, BeforeValidator(_iso_day)]

# An IP address in a request, as the schema says it: either family, any valid textual form.
IpAddress = Annotated[
    str,
    WithJsonSchema({"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}),
]

# A group, shard or tenant name in a request body: the schema states the catalog's rule, which
# the store checks (router.catalog.rules.check_name, with its own message).
CatalogName = Annotated[
    str,
    Field(
        description="1-63 characters: lowercase letters, digits, '_' or '-', starting with a "
        "letter",
        json_schema_extra={"pattern": NAME_PATTERN.pattern},
    ),
]
