"""Where protobuf's JSON mapping expects a message, an object (or null, the default).
json_format reads a message from whatever it can iterate and, with unknown fields ignored,
took a string for an empty message: OTLP's ``"body": "text"`` was stored as an empty body, and
``"resourceLogs": ["x"]`` was an empty export."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# These have JSON forms of their own (a Timestamp is a string, a Value anything).
WELL_KNOWN = "google.protobuf."


def shape_problem(value: Any, message: Descriptor, where: str = "body") -> str | None:
    """Why ``value`` cannot be the JSON of ``message``: the first place an object (or a list
    of them) is missing, or None."""
    if not isinstance(value, dict):
        return f"{where} is not an object"
    for field in message.fields:
        key = field.json_name if field.json_name in value else field.name
        child, kind = value.get(key), _message_of(field)
        if child is None or kind is None:
            continue
        path = key if where == "body" else f"{where}.{key}"
        if not field.is_repeated:
            problem = shape_problem(child, kind, path)
        elif not isinstance(child, list):
            problem = f"{path} is not a list"
        else:
            problem = next(
                (
                    found
                    for index, item in enumerate(child)
                    if (found := shape_problem(item, kind, f"{path}[{index}]"))
                ),
                None,
            )
        if problem is not None:
            return problem
    return None


def _message_of(field: FieldDescriptor) -> Descriptor | None:
    """The message a field holds, unless it is a map or a well-known type."""
    kind = field.message_type
    if kind is None or kind.GetOptions().map_entry or kind.full_name.startswith(WELL_KNOWN):
        return None
    return kind
