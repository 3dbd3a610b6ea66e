"""What catalog values may look like. Shared by the API models, the CLI and the store."""

from __future__ import annotations

import re

from router.catalog.snapshot import OWNER_KINDS, PLACEMENTS, SHARD_STATES
from router.db.dsn import DsnError, parse_dsn
from router.errors import Invalid

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
MAX_OWNER_KEY_CHARS = 256


def check_name(value: str, field: str) -> str:
    # fullmatch: with match, "$" also matches before a final newline ("abc\n" passed here and
    # broke the metadata database's CHECK: a 500).
    if not NAME_PATTERN.fullmatch(value):
        raise Invalid(
            f"{value!r} is not a valid name: 1-63 characters, lowercase letters, digits, "
            "'_' or '-', starting with a letter",
            field,
        )
    return value


def check_choice(value: str, choices: tuple[str, ...], field: str) -> str:
    if value not in choices:
        raise Invalid(f"{value!r} is not one of {', '.join(choices)}", field)
    return value


def check_placement(value: str, field: str = "placement") -> str:
    return check_choice(value, PLACEMENTS, field)


def check_state(value: str, field: str = "state") -> str:
    return check_choice(value, SHARD_STATES, field)


def check_kind(value: str, field: str = "kind") -> str:
    return check_choice(value, OWNER_KINDS, field)


def check_owner_key(value: str, field: str = "key") -> str:
    if not value:
        raise Invalid("owner key is empty", field)
    if len(value) > MAX_OWNER_KEY_CHARS:
        raise Invalid(
            f"owner key has {len(value)} characters; the limit is {MAX_OWNER_KEY_CHARS}", field
        )
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise Invalid("owner key contains control characters", field)
    return value


def check_dsn(value: str, field: str = "dsn") -> str:
    try:
        parse_dsn(value)
    except DsnError as exc:
        raise Invalid(f"malformed connection string: {exc}", field) from exc
    return value
