"""What the answer models share: they refuse keys they do not name, so a key the code adds
without the model is a failing test rather than an undocumented field."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from router.catalog.rules import owner_key_problem

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
