"""Merge, cursors, keyset conditions, plans and query parsing: the pure parts of search."""

import base64
import dataclasses
import hashlib
import hmac
import json
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.auth.scopes import Grant
from router.db.names import day_table
from router.errors import BadRequest, Unavailable
from router.routing.search_plan import ShardTarget, plan_search
from router.search.coverage import visibility
from router.search.cursor import (
    POSITION_HEADROOM,
    Cursor,
    CursorCodec,
    Position,
    query_digest,
)
from router.search.merge import merge, sort_key
from router.search.query import (
    AuditQuery,
    FlowQuery,
    IpFilter,
    Keys,
    PortFilter,
    Window,
    window,
)
from router.search.snapshot import Pin, ShardSnapshot
from router.search.sql import Params, keyset

BASE = datetime(2026, 11, 23, tzinfo=UTC)
# Several owners per shard: their tables number rows independently, so ids repeat.
rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from(["s1", "s2", "s3"]),
        st.integers(1, 3),
        st.integers(1, 20),
    ),
    max_size=60,
    unique_by=lambda r: (r[1], r[2], r[3]),
)


def as_rows(raw):
    return [
        {"ts": BASE + timedelta(seconds=t), "shard": s, "owner_id": o, "id": i}
        for t, s, o, i in raw
    ]


@given(rows_strategy, st.booleans(), st.integers(1, 70))
def test_merge_equals_a_full_sort(raw, descending, limit) -> None:
    rows = as_rows(raw)
    streams = [
        sorted((r for r in rows if r["shard"] == shard), key=sort_key, reverse=descending)
        for shard in ("s1", "s2", "s3")
    ]
    expected = sorted(rows, key=sort_key, reverse=descending)[:limit]
    assert merge(streams, descending, limit) == expected


def test_merge_reads_no_further_than_it_must() -> None:
    def endless(shard):
        n = 0
        while True:
            n += 1
            yield {"ts": BASE + timedelta(seconds=n), "shard": shard, "owner_id": 1, "id": n}

    assert len(merge([endless("a"), endless("b")], False, 5)) == 5


CODEC = CursorCodec(b"k" * 32)
POSITION = Position(BASE, "shard01", 7, 42)


def test_cursor_round_trip_and_binding() -> None:
    text = CODEC.encode(Cursor(POSITION, "prev"), "digest-a")
    assert CODEC.decode(text, "digest-a") == Cursor(POSITION, "prev")
    with pytest.raises(BadRequest, match="another query") as caught:
        CODEC.decode(text, "digest-b")
    assert caught.value.field == "cursor"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t[:-2] + ("A" if t[-2] != "A" else "B") + t[-1],
        lambda t: t[5:],
        lambda t: "garbage!!",
        lambda t: "",
    ],
)
def test_tampered_cursors_are_refused(tamper) -> None:
    text = CODEC.encode(Cursor(POSITION, "next"), "d")
    with pytest.raises(BadRequest) as caught:
        CODEC.decode(tamper(text), "d")
    assert caught.value.field == "cursor"


def test_cursor_from_another_secret_is_refused() -> None:
    text = CursorCodec(b"x" * 32).encode(Cursor(POSITION, "next"), "d")
    with pytest.raises(BadRequest):
        CODEC.decode(text, "d")


@pytest.mark.parametrize(
    "fields",
    [
        {"v": 1},  # neither the owner nor the issue time
        {"v": 2, "o": 7},  # the owner, no issue time (wip/multi's version 2)
        {"v": 2, "c": 1795392000},  # the issue time, no owner (main's version 2)
    ],
)
def test_a_cursor_of_an_earlier_version_has_expired(fields) -> None:
    """Cursors issued before positions carried the owner and cursors their issue time."""
    base = {"q": "d", "d": "next", "t": "2026-11-23T00:00:00+00:00", "s": "shard01", "i": 42}
    body = json.dumps({**base, **fields}).encode()
    text = base64.urlsafe_b64encode(CODEC._sign(body) + body).decode().rstrip("=")
    with pytest.raises(BadRequest, match=r"expired.*older version") as caught:
        CODEC.decode(text, "d")
    assert caught.value.field == "cursor"


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_a_cursor_expires_after_its_time_to_live() -> None:
    clock = Clock(BASE)
    codec = CursorCodec(b"k" * 32, ttl_s=600, clock=clock)
    text = codec.encode(Cursor(POSITION, "next"), "d")
    clock.now = BASE + timedelta(seconds=600)
    assert codec.decode(text, "d") == Cursor(POSITION, "next")
    clock.now = BASE + timedelta(seconds=602)
    with pytest.raises(BadRequest, match=r"expired.*SHARDLOG_SEARCH__CURSOR_TTL_S") as caught:
        codec.decode(text, "d")
    assert caught.value.field == "cursor"
    # Expiry is checked after the signature: a tampered old cursor is still "not ours".
    with pytest.raises(BadRequest, match="not a cursor this service issued"):
        codec.decode(text[:-2] + ("AA" if not text.endswith("AA") else "BB"), "d")


def test_a_cursor_of_the_version_without_an_issue_time_is_expired() -> None:
    body = json.dumps({"v": 1, "q": "d", "d": "next", "t": BASE.isoformat(), "s": "s", "i": 1})
    signature = hmac.new(b"k" * 32, body.encode(), hashlib.sha256).digest()[:16]
    text = base64.urlsafe_b64encode(signature + body.encode()).decode().rstrip("=")
    with pytest.raises(BadRequest, match="expired") as caught:
        CODEC.decode(text, "d")
    assert caught.value.field == "cursor"


def test_a_consistent_search_carries_its_snapshots() -> None:
    pin = Pin({"shard01": ShardSnapshot(900, 910, (901, 905))}, frozenset({"shard02"}))
    text = CODEC.encode(Cursor(POSITION, "prev", pin), "d")
    assert CODEC.decode(text, "d") == Cursor(POSITION, "prev", pin)


def test_snapshots_too_large_for_a_cursor_are_a_503_naming_consistent() -> None:
    def pin_of(running: int) -> Pin:
        snapshot = ShardSnapshot(10**9, 10**9 + 9999, tuple(range(10**9, 10**9 + running)))
        return Pin({"shard01": snapshot})

    def fits(running: int, headroom: int, position: Position = POSITION) -> bool:
        try:
            CODEC.encode(Cursor(position, "next", pin_of(running)), "d", headroom)
        except Unavailable as exc:
            assert exc.field == "consistent"
            return False
        return True

    low, high = 1, 9999  # fits with room for any later position; does not fit at all
    assert fits(low, POSITION_HEADROOM) and not fits(high, 0)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle, POSITION_HEADROOM) else (low, middle)
    # One transaction more is refused on the first page, though its cursor would still be taken.
    assert not fits(low + 1, POSITION_HEADROOM) and fits(low + 1, 0)
    # A later page of the largest first page that passed, at the longest possible position.
    far = Position(POSITION.ts.replace(microsecond=123456), "s" * 63, 2**63 - 1, 2**63 - 1)
    assert fits(low, 0, far)


def test_query_digest_ignores_order_of_keys() -> None:
    assert query_digest({"a": 1, "b": [2]}) == query_digest({"b": [2], "a": 1})
    assert query_digest({"a": 1}) != query_digest({"a": 2})


def test_plan_keeps_days_in_range_and_usable_shards() -> None:
    d1, d2, d3 = date(2026, 11, 21), date(2026, 11, 22), date(2026, 11, 23)
    located = [
        ("s1", day_table("audit", 7, d1)),
        ("s1", day_table("audit", 7, d2)),
        ("s2", day_table("audit", 7, d2)),
        ("s3", day_table("audit", 7, d3)),
        ("s4", day_table("audit", 7, d2)),
    ]
    plan = plan_search(located, [d2, d3], {"s1": "active", "s2": "draining", "s3": "down"})
    assert [(t.shard, [x.day for x in t.tables]) for t in plan.targets] == [
        ("s1", [d2]),
        ("s2", [d2]),
    ]
    assert plan.unavailable == ("s3", "s4")


def test_a_plan_splits_into_named_tables_and_the_rest() -> None:
    d1, d2 = date(2026, 1, 1), date(2026, 1, 2)
    a1, a2, b1 = day_table("audit", 1, d1), day_table("audit", 1, d2), day_table("audit", 2, d1)
    located = [("s1", a1), ("s1", a2), ("s2", a1), ("s2", b1), ("s3", a1)]
    plan = plan_search(located, [d1, d2], {"s1": "active", "s2": "active", "s3": "down"})
    named = {("s1", a2.name), ("s2", a1.name)}
    only, rest = plan.only(named), plan.without(named)
    assert [(t.shard, t.tables) for t in only.targets] == [("s1", (a2,)), ("s2", (a1,))]
    assert [(t.shard, t.tables) for t in rest.targets] == [("s1", (a1,)), ("s2", (b1,))]
    assert only.unavailable == rest.unavailable == ("s3",)
    assert plan.only(set()).empty and plan.without(set()) == plan


def test_window_days_are_utc_and_end_exclusive() -> None:
    w = Window(datetime(2026, 11, 22, 23, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC))
    assert w.days() == [date(2026, 11, 22), date(2026, 11, 23)]


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("2026-11-23T00:00:00Z", "2026-11-22T00:00:00Z", "to"),
        ("2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z", "to"),
        ("2026-01-01T00:00:00Z", "2026-11-23T00:00:00Z", "to"),
        ("yesterday", "2026-11-23T00:00:00Z", "from"),
        ("2026-11-22T00:00:00", "2026-11-23T00:00:00Z", "from"),
    ],
)
def test_bad_windows(start, end, field) -> None:
    with pytest.raises(BadRequest) as caught:
        window(start, end, 31)
    assert caught.value.field == field


def test_ip_and_port_filters() -> None:
    assert IpFilter.parse("2001:DB8:0:0::1", "src_ip") == IpFilter("2001:db8::1/128", True)
    assert IpFilter.parse("10.1.2.3/16", "src_ip") == IpFilter("10.1.0.0/16", False)
    assert IpFilter.parse("10.1.2.3/32", "src_ip").exact
    assert PortFilter.parse("1000-2000", "src_port") == PortFilter(1000, 2000)
    assert PortFilter.parse("443", "dst_port") == PortFilter(443, 443)
    for bad, parse in (
        ("10.0.0.300", IpFilter.parse),
        ("2000-1000", PortFilter.parse),
        ("http", PortFilter.parse),
        ("70000", PortFilter.parse),
    ):
        with pytest.raises(BadRequest):
            parse(bad, "f")


def _predicate(condition: str, values: list, table_ts):
    """The keyset condition as a Python test of one row of the table, by its (ts, id)."""
    if condition == "true":
        return lambda ts, ident: True
    pair = re.fullmatch(r"\(ts, id\) ([<>]) \(\$1, \$2\)", condition)
    if pair:
        op = pair.group(1)
        return lambda ts, ident: (
            (ts, ident) > tuple(values) if op == ">" else (ts, ident) < tuple(values)
        )
    single = re.fullmatch(r"ts ([<>]=?) \$1", condition)
    assert single, condition
    compare = {
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
    }[single.group(1)]
    return lambda ts, ident: compare(ts, values[0])


@given(rows_strategy, st.integers(0, 59), st.booleans())
def test_keyset_keeps_exactly_the_rows_after_the_cursor(raw, pick, descending) -> None:
    """Folded per table (one shard, one owner), the condition keeps the rows that follow the
    cursor in (ts, shard, owner id, id) order, whichever table the cursor's row came from."""
    rows = as_rows(raw)
    if not rows:
        return
    cursor_row = rows[pick % len(rows)]
    after = Position(
        cursor_row["ts"], cursor_row["shard"], cursor_row["owner_id"], cursor_row["id"]
    )
    for row in rows:
        params = Params()
        condition = keyset(after, row["shard"], row["owner_id"], "ts", descending, params)
        kept = _predicate(condition, params.values, row["ts"])(row["ts"], row["id"])
        follows = sort_key(row) < after.key() if descending else sort_key(row) > after.key()
        assert kept == follows, (row, after, condition)


def test_a_target_is_cut_into_batches_in_order() -> None:
    tables = tuple(day_table("flow", owner, date(2026, 11, 23)) for owner in range(1, 11))
    batches = ShardTarget("s1", tables).batches(4)
    assert [len(b.tables) for b in batches] == [4, 4, 2]
    assert {b.shard for b in batches} == {"s1"}
    assert tuple(t for b in batches for t in b.tables) == tables
    assert ShardTarget("s1", tables).batches() == (ShardTarget("s1", tables),)


def test_keys_are_a_set_and_expand_without_a_list() -> None:
    assert Keys.of(["b", "a", "b"]) == Keys(("a", "b"))
    assert not Keys.of(["a"]).expands
    assert Keys.of().expands and Keys.of(["a"], "x").expands


def test_the_reach_of_the_token_binds_only_expanding_searches() -> None:
    acme = Grant.of("acme", ["flows:read", "switch:edge-"])
    other = Grant.of("other", ["flows:read"])
    assert visibility("flow", Keys.of(["a"]), acme) == visibility("flow", Keys.of(["a"]), other)
    for keys in (Keys.of(), Keys.of(prefix="e")):
        assert visibility("flow", keys, acme) != visibility("flow", keys, other)
        assert visibility("flow", keys, acme)["reached_by"]["prefixes"] == ["edge-"]


@given(
    owners=st.lists(st.sampled_from(["a", "b", "c/d"]), max_size=3),
    prefix=st.none() | st.just("a"),
    patterns=st.lists(st.text(max_size=5), max_size=2),
    port=st.none() | st.just("80-90"),
    address=st.none() | st.just("10.0.0.0/8"),
)
def test_a_query_binding_is_what_asdict_made(owners, prefix, patterns, port, address) -> None:
    """Cursors issued before the binding stopped using dataclasses.asdict stay valid."""
    span = Window(BASE, BASE + timedelta(hours=1))
    audit = AuditQuery(Keys.of(owners, prefix), span, tuple(patterns), "regex", "desc")
    flow = FlowQuery(
        Keys.of(owners, prefix),
        span,
        None if address is None else IpFilter.parse(address, "src_ip"),
        None,
        None,
        None if port is None else PortFilter.parse(port, "dst_port"),
        4,
        6,
        True,
        "asc",
    )
    for query, kind in ((audit, "audit"), (flow, "flow")):
        assert query.binding() == {"kind": kind, **dataclasses.asdict(query)}
        assert query_digest(query.binding()) == query_digest(
            {"kind": kind, **dataclasses.asdict(query)}
        )
