"""router/protocols/shipped.py: messages checked one by one against the audit rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from router.auth.scopes import AUDIT_WRITE, Grant
from router.ingest.records import Limits
from router.protocols.shipped import Message, body_key, check

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)


def limits() -> Limits:
    return Limits(
        max_content_bytes=64,
        max_attrs_bytes=64,
        max_owner_chars=16,
        future_skew=timedelta(seconds=60),
    )


def test_good_messages_become_rows_and_bad_ones_are_refused_by_position_and_field() -> None:
    messages = [
        Message("alice", NOW, "login", {"severity": "info"}),
        Message(None, NOW, "no owner", None),
        Message("bob", NOW + timedelta(days=2), "from the future", None),
        Message("carol", NOW, "nul\x00inside", None),
        Message("dave", NOW, "x" * 65, None),
        Message("erin", NOW, "fine", None),
    ]
    checked = check(messages, "items", limits(), NOW)
    assert [(row.position, row.owner, row.content) for row in checked.rows] == [
        (0, "alice", "login"),
        (5, "erin", "fine"),
    ]
    assert checked.rows[0].attrs == '{"severity":"info"}'
    assert [(position, error.field) for position, error in checked.refused] == [
        (1, "items[1].owner"),
        (2, "items[2].ts"),
        (3, "items[3].content"),
        (4, "items[4].content"),
    ]


def test_a_body_key_is_the_same_for_the_same_body_and_tenant_only() -> None:
    grant = Grant("acme", frozenset({AUDIT_WRITE}))
    other = Grant("globex", frozenset({AUDIT_WRITE}))
    assert body_key("loki", grant, "ab") == body_key("loki", grant, "ab")
    assert (
        len(
            {
                body_key("loki", grant, "ab"),
                body_key("loki", grant, "cd"),
                body_key("otlp", grant, "ab"),
                body_key("loki", other, "ab"),
            }
        )
        == 4
    )
