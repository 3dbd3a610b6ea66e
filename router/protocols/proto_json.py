"""Where protobuf's JSON mapping expects a message, an object (or null, the default); where a
number, no boolean; where an enum, no fraction. json_format reads a message from whatever it
can iterate and, with unknown fields ignored, took a string for an empty message: OTLP's
``"body": "text"`` was stored as an empty body, ``"resourceLogs": ["x"]`` was an empty export;
it takes true for the number 1, and 2.5 for an enum."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# json_format takes true for 1 here (a bool is an int to Python).
NUMBERS = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
        FieldDescriptor.CPPTYPE_DOUBLE,
        FieldDescriptor.CPPTYPE_FLOAT,
        FieldDescriptor.CPPTYPE_ENUM,
    }
)
ENUM = FieldDescriptor.CPPTYPE_ENUM
# These have JSON forms of their own (a Timestamp is a string, a Value anything).
WELL_KNOWN = "google.protobuf."


def shape_problem(value: Any, message: Descriptor, where: str = "body") -> str | None:
    """Why ``value`` cannot be the JSON of ``message``: the first place an object (or a list
    of them) is missing or a boolean stands for a number, or None."""
    if not isinstance(value, dict):
        return f"{where} is not an object"
    for field in message.fields:
        key = field.json_name if field.json_name in value else field.name
        child, kind = value.get(key), _message_of(field)
        path = key if where == "body" else f"{where}.{key}"
        if isinstance(child, bool) and field.cpp_type in NUMBERS:
            return f"{path} is not a number"
        if isinstance(child, float) and not child.is_integer() and field.cpp_type == ENUM:
            return f"{path} is not an integer"
        if child is None or kind is None:
            continue
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
