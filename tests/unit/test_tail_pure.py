"""The live tail's pure parts: the buffer's order and the exactness of the positions it hands
out (a simulation of shards committing, a hub reading and a client receiving, checked after
every row), cursors, and the SSE parser."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from router.cli.events import EventParser
from router.cli.tail import line_of
from router.errors import BadRequest
from router.search.snapshot import ShardSnapshot
from router.tail.events import Batch, Event, EventKey
from router.tail.ordering import Buffer, Marks, Overflow
from router.tail.pacing import Pacer
from router.tail.position import TailCursorCodec, TailPosition
from router.tail.subscription import Subscription, TailSpec

EPOCH = datetime(2026, 11, 25, tzinfo=UTC)
SECRET = b"0123456789abcdef0123456789abcdef"


def snap(next_xid: int) -> ShardSnapshot:
    """Every transaction below ``next_xid`` has ended."""
    return ShardSnapshot(next_xid, next_xid)


@dataclass(frozen=True)
class Row:
    shard: str
    xid: int
    key: EventKey


def claimed(marks: Marks, start: dict[str, ShardSnapshot], row: Row) -> bool:
    """Whether a resume from ``marks`` would count ``row`` as sent."""
    base = marks.base.get(row.shard, start[row.shard])
    if base.sees(row.xid):
        return True
    return any(s.sees(row.xid) and row.key <= k for s, k in marks.claims.get(row.shard, ()))


class _Spec:
    """What a Subscription asks of its spec here: its filter (none)."""

    def condition(self) -> None:
        return None


def simulate(
    seed: int, capacity: int = 10_000, most: int | None = None, via_inbox: bool = False
) -> int:
    """Random commits, reads and releases (of at most ``most`` rows each, as a stream's turn
    takes); after every row sent, the position it carries must name exactly the rows sent so
    far. Returns how many rows were sent. ``via_inbox``: reads go to a Subscription's inbox
    and a release moves rows in only when none is due, as a stream's turn does
    (router/tail/service.py), so rows leave while later reads wait in the inbox."""
    rng = random.Random(seed)
    shards = ["s1", "s2", "s3"]
    next_xid = {s: 100 for s in shards}
    seen = {s: 100 for s in shards}
    committed: dict[str, list[Row]] = {s: [] for s in shards}
    start = {s: snap(100) for s in shards}
    buffer = Buffer(watermark_s=1.0, capacity=capacity)
    subscription = Subscription(cast(TailSpec, _Spec()), buffer, Pacer().turn())
    sent: set[Row] = set()
    every: list[Row] = []
    now = EPOCH.timestamp()
    row_id = 0
    for _ in range(400):
        now += rng.uniform(0, 0.3)
        action = rng.random()
        shard = rng.choice(shards)
        if action < 0.45:
            xid = next_xid[shard]
            next_xid[shard] += 1
            for _ in range(rng.randint(1, 4)):
                row_id += 1
                ts = datetime.fromtimestamp(now + rng.uniform(-3.0, 0.5), UTC)
                row = Row(shard, xid, (ts, shard, 1, row_id, xid))
                committed[shard].append(row)
                every.append(row)
        elif action < 0.8:
            fresh = [r for r in committed[shard] if seen[shard] <= r.xid < next_xid[shard]]
            batch = Batch(shard, snap(seen[shard]), now, snap(next_xid[shard]))
            events = [Event(r.key, {"row": r}, False) for r in fresh]
            seen_then = {s: snap(n) for s, n in seen.items()}
            if via_inbox:
                if not subscription.deliver(batch, [events], seen_then):
                    assert subscription.overflow is not None
                    check(subscription.overflow, start, every, sent)
                    return len(sent)
            else:
                try:
                    buffer.add(batch, events, seen_then)
                except Overflow as overflow:
                    check(overflow.marks, start, every, sent)
                    return len(sent)
            seen[shard] = next_xid[shard]
        else:
            hub: dict[str, ShardSnapshot] = {s: snap(n) for s, n in seen.items()}
            if via_inbox:
                due = buffer.next_due()
                if due is None or due > now:
                    subscription.take_in(most)
                hub = dict(subscription.seen_before_inbox(hub))
            for event, marks in buffer.release(now, hub, most):
                row = event.row["row"]
                assert row not in sent
                sent.add(row)
                before = max((r.key for r in sent if r != row), default=None)
                assert event.late == (before is not None and event.key < before)
                check(marks, start, every, sent)
    return len(sent)


def check(marks: Marks, start: dict[str, ShardSnapshot], every: list[Row], sent: set[Row]) -> None:
    covered = {r for r in every if claimed(marks, start, r)}
    assert covered == sent


@pytest.mark.parametrize("seed", range(40))
def test_every_position_names_exactly_the_rows_sent(seed: int) -> None:
    assert simulate(seed) > 0


@pytest.mark.parametrize("seed", range(20))
def test_releases_cut_short_name_exactly_the_rows_sent(seed: int) -> None:
    assert simulate(seed, most=2) > 0


@pytest.mark.parametrize("seed", range(30))
def test_rows_sent_while_later_reads_wait_in_the_inbox_name_exactly_the_rows_sent(
    seed: int,
) -> None:
    assert simulate(seed, most=2, via_inbox=True) > 0


@pytest.mark.parametrize("seed", range(10))
def test_an_overflow_through_the_inbox_names_exactly_the_rows_sent(seed: int) -> None:
    simulate(seed, capacity=8, most=2, via_inbox=True)


@pytest.mark.parametrize("seed", range(10))
def test_an_overflow_position_names_exactly_the_rows_sent(seed: int) -> None:
    simulate(seed, capacity=8)


def test_rows_leave_in_key_order_a_watermark_after_their_ts() -> None:
    buffer = Buffer(watermark_s=1.0, capacity=100)
    now = EPOCH.timestamp()
    keys = [(EPOCH + timedelta(seconds=s), "s1", 1, n, 5) for n, s in enumerate((0.5, 0.1, 0.3))]
    buffer.add(Batch("s1", snap(5), now + 0.6), [Event(k, {}, False) for k in keys], {})
    assert buffer.release(now + 1.05, {}) == []
    first = buffer.release(now + 1.2, {})
    assert [e.key[3] for e, _ in first] == [1]
    rest = buffer.release(now + 1.6, {})
    assert [e.key[3] for e, _ in rest] == [2, 0]
    assert buffer.next_due() is None


def test_a_release_cut_short_leaves_the_rest_due() -> None:
    """Rows due because a row ahead of the clock (sorting after them) came due stay due when
    a release stops early."""
    buffer = Buffer(watermark_s=1.0, capacity=100)
    now = EPOCH.timestamp()
    ahead = (EPOCH + timedelta(hours=1), "s1", 1, 9, 5)
    buffer.add(Batch("s1", snap(5), now), [Event(ahead, {}, False)], {})
    behind = [(EPOCH + timedelta(seconds=0.8), "s1", 1, n, 6) for n in range(3)]
    buffer.add(Batch("s1", snap(6), now + 0.9), [Event(k, {}, False) for k in behind], {})
    assert [e.key[3] for e, _ in buffer.release(now + 1.01, {}, 2)] == [0, 1]
    assert buffer.next_due() == now + 1.01
    assert [e.key[3] for e, _ in buffer.release(now + 1.02, {}, 2)] == [2, 9]
    assert buffer.next_due() is None


def test_a_row_ahead_of_the_clock_waits_from_when_it_was_read() -> None:
    buffer = Buffer(watermark_s=1.0, capacity=100)
    now = EPOCH.timestamp()
    ahead = (EPOCH + timedelta(hours=1), "s1", 1, 1, 5)
    buffer.add(Batch("s1", snap(5), now), [Event(ahead, {}, False)], {})
    assert [e.key for e, _ in buffer.release(now + 1.01, {})] == [ahead]


def test_cursors_round_trip_and_refuse_what_they_must() -> None:
    codec = TailCursorCodec(SECRET, keep_s=60)
    key = (EPOCH, "s1", 3, 9, 1234)
    position = TailPosition(
        {"s1": ShardSnapshot(10, 14, (11,))}, {"s1": ((snap(20), key),)}, key, 1000.0
    )
    text = codec.encode(codec.shard_part(position), key, "digest", 1000.0)
    back = codec.decode(text, "digest", "after", 1010.0)
    assert back.base == position.base and back.claims == position.claims and back.last == key
    assert back.sent("s1", 15, key) and not back.sent("s1", 25, key)
    with pytest.raises(BadRequest, match="other filters"):
        codec.decode(text, "other", "after", 1010.0)
    with pytest.raises(BadRequest, match="LOG_KEEP_S"):
        codec.decode(text, "digest", "after", 2000.0)
    with pytest.raises(BadRequest, match="not a cursor"):
        codec.decode(
            text[:-3] + ("A" if text[-3] != "A" else "B") + text[-2:], "digest", "x", 1010.0
        )


def test_the_event_parser_reads_what_the_stream_writes() -> None:
    parser = EventParser()
    lines = ["retry: 2000", "", ": keep-alive", "", "event: subscribed", "id: c0", "data: {}", ""]
    lines += ["id: c1", 'data: {"a":', "data: 1}", "", "event: overflow", "data: {}", ""]
    events = [e for e in (parser.feed(line) for line in lines) if e is not None]
    assert [(e.event, e.data, e.id) for e in events] == [
        ("subscribed", "{}", "c0"),
        ("message", '{"a":\n1}', "c1"),
        ("overflow", "{}", "c1"),
    ]
    assert parser.last_id == "c1"


def test_snapshot_visibility_matches_postgresql() -> None:
    snapshot = ShardSnapshot(10, 20, (12, 15))
    assert [x for x in range(8, 22) if snapshot.sees(x)] == [8, 9, 10, 11, 13, 14, 16, 17, 18, 19]


def test_the_cli_shows_a_flows_exporter_fields_when_said() -> None:
    item = {
        "first_seen": "2026-03-14T00:00:00+00:00",
        "switch": "edge-1",
        "src_ip": "10.0.0.1",
        "src_port": 1,
        "dst_ip": "10.0.0.2",
        "dst_port": 2,
        "proto": 6,
        "bytes": 3000,
        "packets": 3,
        "tcp_flags": None,
        "sampling_rate": None,
        "sampled": False,
        "sampling_mixed": False,
    }
    plain = "2026-03-14T00:00:00+00:00 edge-1 10.0.0.1:1 -> 10.0.0.2:2 proto=6 bytes=3000 packets=3"
    assert line_of("flows", item) == plain
    said = {**item, "tcp_flags": 0x12, "sampling_rate": 100, "sampled": True}
    assert line_of("flows", {**said, "sampling_mixed": True, "merged": True}) == (
        f"{plain} tcp_flags=0x12 sampling=1/100 [merged] [sampling_mixed]"
    )
