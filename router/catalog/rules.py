"""What catalog values may look like. Shared by the API models, the CLI and the store."""

from __future__ import annotations

import re

from router.catalog.snapshot import OWNER_KINDS, PLACEMENTS, SHARD_STATES
from router.db.dsn import DsnError, parse_dsn
from router.errors import Invalid, excerpt

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
MAX_OWNER_KEY_CHARS = 256


def check_name(value: str, field: str) -> str:
    # fullmatch: with match, "$" also matches before a final newline ("abc\n" passed here and
    # broke the metadata database's CHECK: a 500).
    if not NAME_PATTERN.fullmatch(value):
        raise Invalid(
            f"{excerpt(value)} is not a valid name: 1-63 characters, lowercase letters, digits, "
            "'_' or '-', starting with a letter",
            field,
        )
    return value


def check_choice(value: str, choices: tuple[str, ...], field: str) -> str:
    if value not in choices:
        raise Invalid(f"{excerpt(value)} is not one of {', '.join(choices)}", field)
    return value


def check_placement(value: str, field: str = "placement") -> str:
    return check_choice(value, PLACEMENTS, field)


def check_state(value: str, field: str = "state") -> str:
    return check_choice(value, SHARD_STATES, field)


def check_kind(value: str, field: str = "kind") -> str:
    return check_choice(value, OWNER_KINDS, field)


def owner_key_problem(value: object, max_chars: int = MAX_OWNER_KEY_CHARS) -> str | None:
    """Why a value cannot be an owner or switch key, or None. The one rule for keys, wherever
    they arrive: ingest records, search parameters, the admin API."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if len(value) > max_chars:
        return f"has {len(value)} characters; the limit is {max_chars}"
    if not value.isprintable():
        return "contains control or unprintable characters"
    return None


def check_owner_key(value: str, field: str = "key") -> str:
    problem = owner_key_problem(value)
    if problem is not None:
        raise Invalid(f"{field} {problem}", field)
    return value


def check_dsn(value: str, field: str = "dsn") -> str:
    try:
        parse_dsn(value)
    except DsnError as exc:
        raise Invalid(f"malformed connection string: {exc}", field) from exc
    return value
