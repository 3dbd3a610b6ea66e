"""When an open stream must end because of its token: the pure decision (``narrowing``,
``ending``) and the leases' bookkeeping on a real event loop (timers at expiry, a reload's
review, a lease taken for a token that already lapsed)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from router import clock
from router.auth.leases import Leases, TokenState, ending, narrowing
from router.auth.scopes import Grant, everything
from router.errors import Unauthorized

READER = Grant.of("acme", ["audit:read", "tail", "owner:eu-", "switch:core-"])


@pytest.mark.parametrize(
    ("now", "reason"),
    [
        (READER, None),
        # Wider: more scopes, a shorter prefix, a prefix added beside, no prefix at all.
        (Grant.of("acme", ["audit:read", "tail", "reports", "owner:eu-", "switch:core-"]), None),
        (Grant.of("acme", ["audit:read", "tail", "owner:eu", "switch:core-"]), None),
        (Grant.of("acme", ["audit:read", "tail", "owner:eu-", "owner:us-", "switch:core-"]), None),
        (Grant.of("acme", ["audit:read", "tail"]), None),
        # Narrower.
        (Grant.of("acme", ["audit:read", "owner:eu-", "switch:core-"]), "it no longer holds tail"),
        (
            Grant.of("acme", ["owner:eu-", "switch:core-", "flows:read"]),
            "it no longer holds audit:read, tail",
        ),
        (
            Grant.of("acme", ["audit:read", "tail", "owner:eu-west-", "switch:core-"]),
            "its keys are narrowed to owner:eu-west-",
        ),
        (
            Grant.of("acme", ["audit:read", "tail", "owner:us-", "switch:core-"]),
            "its keys are narrowed to owner:us-",
        ),
        (
            Grant.of("acme", ["audit:read", "tail", "owner:eu-", "switch:core-a"]),
            "its keys are narrowed to switch:core-a",
        ),
        (Grant.of("other", ["audit:read", "tail", "owner:eu-"]), "it now belongs to tenant other"),
    ],
)
def test_narrowing_names_what_was_taken_away(now: Grant, reason: str | None) -> None:
    assert narrowing(READER, now) == reason


def test_a_token_without_prefixes_narrowed_to_some() -> None:
    every_owner = Grant.of("acme", ["audit:read"])
    assert narrowing(every_owner, Grant.of("acme", ["audit:read", "owner:a"])) == (
        "its keys are narrowed to owner:a"
    )
    # The grant is the token's, whatever the stream reads: a narrowing of the other kind's
    # keys ends an audit stream too (it was opened under the wider grant).
    assert narrowing(every_owner, Grant.of("acme", ["audit:read", "switch:a"])) == (
        "its keys are narrowed to switch:a"
    )


def test_ending_in_order_of_what_happened() -> None:
    now = clock.time()
    alive = TokenState(READER, revoked=False, expires=now + 60)
    assert ending("t1", READER, alive, now) is None
    assert ending("t1", READER, None, now) == ("removed", "token t1 no longer exists")
    revoked = TokenState(READER, revoked=True, expires=now - 1)
    assert ending("t1", READER, revoked, now) == ("revoked", "token t1 was revoked")
    expired = TokenState(READER, revoked=False, expires=now)
    assert ending("t1", READER, expired, now) == ("expired", "token t1 has expired")
    narrowed = TokenState(Grant.of("acme", ["audit:read"]), revoked=False, expires=None)
    assert ending("t1", READER, narrowed, now) == (
        "narrowed",
        "token t1 was narrowed: it no longer holds tail",
    )


def _metric(metrics: CollectorRegistry, name: str, **labels: str) -> float:
    return metrics.get_sample_value(name, labels) or 0.0


async def test_a_lease_ends_at_the_tokens_expiry_without_a_reload() -> None:
    metrics = CollectorRegistry()
    leases = Leases(metrics)
    expires = clock.time() + 0.2
    lease = leases.take("t1", READER, TokenState(READER, False, expires))
    assert _metric(metrics, "shardlog_stream_leases") == 1
    async with asyncio.timeout(2):
        await lease.ended.wait()
    assert clock.time() >= expires
    assert (lease.reason, lease.message) == ("expired", "token t1 has expired")
    lease.close()
    lease.close()
    assert _metric(metrics, "shardlog_streams_ended_total", reason="expired") == 1
    assert _metric(metrics, "shardlog_stream_leases") == 0


async def test_a_reload_ends_only_the_leases_its_tokens_no_longer_allow() -> None:
    metrics = CollectorRegistry()
    leases = Leases(metrics)
    states = {
        "t1": TokenState(READER, False, None),
        "t2": TokenState(READER, False, None),
        "t3": TokenState(READER, False, None),
    }
    taken = {token_id: leases.take(token_id, READER, state) for token_id, state in states.items()}
    states["t1"] = TokenState(READER, True, None)
    states["t2"] = TokenState(Grant.of("acme", ["audit:read", "tail", "owner:eu-x"]), False, None)
    # An expiry moved closer: a timer for the new one.
    states["t3"] = TokenState(READER, False, clock.time() + 0.1)
    leases.review(states.get)
    assert taken["t1"].reason == "revoked" and taken["t2"].reason == "narrowed"
    assert taken["t3"].reason is None
    async with asyncio.timeout(2):
        await taken["t3"].ended.wait()
    assert taken["t3"].reason == "expired"
    leases.review({}.get)
    for lease in taken.values():
        lease.close()
    assert _metric(metrics, "shardlog_streams_ended_total", reason="revoked") == 1
    assert _metric(metrics, "shardlog_streams_ended_total", reason="narrowed") == 1


async def test_an_expiry_moved_later_or_removed_keeps_the_stream() -> None:
    leases = Leases()
    lease = leases.take("t1", READER, TokenState(READER, False, clock.time() + 0.1))
    leases.review(lambda _id: TokenState(READER, False, None))
    # Past the first expiry: its timer must be gone.
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await lease.ended.wait()
    lease.close()


async def test_a_lease_of_a_token_that_lapsed_already_is_ended_and_open_mode_never() -> None:
    leases = Leases()
    gone = leases.take("t1", READER, None)
    assert gone.reason == "removed"
    anonymous = leases.take(None, everything("default"), None)
    leases.review({}.get)
    assert not anonymous.ended.is_set()
    assert leases.count() == 1
    gone.close()
    anonymous.close()
    assert leases.count() == 0


async def test_bound_work_is_cancelled_with_a_401_when_the_lease_ends_first() -> None:
    leases = Leases()
    state = TokenState(READER, False, None)
    lease = leases.take("t1", READER, state)
    cancelled = asyncio.Event()

    async def long_report() -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    report = asyncio.create_task(lease.bound(long_report()))
    await asyncio.sleep(0)  # the report is under way
    leases.review(lambda _id: TokenState(READER, True, None))
    with pytest.raises(Unauthorized) as caught:
        await report
    assert cancelled.is_set()
    assert caught.value.body()["error"] == {
        "code": "unauthorized",
        "message": "token t1 was revoked",
        "field": "authorization",
    }
    fresh = leases.take("t2", READER, state)
    assert await fresh.bound(asyncio.sleep(0, result=7)) == 7
