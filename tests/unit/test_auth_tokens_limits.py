"""router.auth.tokens (format, hash) and router.auth.limits (buckets with a fake clock)."""

from __future__ import annotations

import base64
import hashlib

import pytest

from router.auth import tokens
from router.auth.limits import Bucket, Limiters, LimitValues, TokenLimiter, retry_after
from router.errors import Overloaded


def test_a_new_token_parses_back_and_only_its_secret_is_hashed() -> None:
    new = tokens.new_token()
    assert new.text.startswith("shl_") and len(new.text) == 4 + 16 + 1 + 64
    assert tokens.parse(new.text) == (new.id, new.secret)
    assert new.digest == hashlib.sha256(new.secret.encode()).digest()
    assert new.secret not in new.digest.hex()
    assert tokens.matches(new.secret, new.digest)
    assert not tokens.matches(new.secret[:-1] + ("0" if new.secret[-1] != "0" else "1"), new.digest)


def test_tokens_differ() -> None:
    made = {tokens.new_token().text for _ in range(200)}
    assert len(made) == 200
    assert len({t[4:20] for t in made}) == 200


@pytest.mark.parametrize(
    "text",
    [
        "",
        "shl_",
        "shl_0123456789abcdef_" + "a" * 63,
        "shl_0123456789abcdef_" + "a" * 65,
        "shl_0123456789ABCDEF_" + "a" * 64,
        "shl_0123456789abcde_" + "a" * 65,
        "SHL_0123456789abcdef_" + "a" * 64,
        "shl-0123456789abcdef-" + "a" * 64,
        "shl_0123456789abcdef_" + "a" * 63 + "g",
        "shl_0123456789abcdef_" + "a" * 64 + "\n",
        " shl_0123456789abcdef_" + "a" * 64,
    ],
)
def test_malformed_tokens_do_not_parse(text: str) -> None:
    assert tokens.parse(text) is None


@pytest.mark.parametrize(
    ("header", "credentials"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("Basic " + base64.b64encode(b"shardlog:shl_x").decode(), "shl_x"),
        ("basic " + base64.b64encode(b":shl_x").decode(), "shl_x"),
        ("Basic " + base64.b64encode(b"user-only").decode(), None),
        ("Basic " + base64.b64encode(b"user:").decode(), None),
        ("Basic " + base64.b64encode(b"\xff:\xfe").decode(), None),
        ("Basic not*base64", None),
        ("ApiKey shl_x", "shl_x"),
        ("ApiKey " + base64.b64encode(b"id:shl_x").decode(), "shl_x"),
        ("Digest abc", None),
        ("Bearerabc", None),
        ("abc", None),
        ("", None),
        (None, None),
    ],
)
def test_credentials_of_an_authorization_header(
    header: str | None, credentials: str | None
) -> None:
    assert tokens.credentials(header) == credentials


# --- limits ----------------------------------------------------------------------------------


def test_a_bucket_refuses_past_its_rate_and_refills() -> None:
    bucket = Bucket(rate=10, capacity=20, now=0.0)
    assert all(bucket.take(1, 0.0) == 0 for _ in range(20))
    assert bucket.take(1, 0.0) == pytest.approx(0.1)
    assert bucket.take(1, 0.05) == pytest.approx(0.05)
    assert bucket.take(1, 0.1) == 0
    assert bucket.take(5, 1.0) == 0  # 9 back after 0.9 s: 4 left
    assert bucket.take(5, 1.0) == pytest.approx(0.1)
    assert bucket.take(1, 100.0) == 0 and bucket.level == 19  # never above capacity


def test_a_charge_leaves_a_debt_that_is_waited_out() -> None:
    bucket = Bucket(rate=100, capacity=100, now=0.0)
    assert bucket.debt(0.0) == 0
    bucket.charge(350, 0.0)
    assert bucket.debt(0.0) == pytest.approx(2.5)
    assert bucket.debt(2.0) == pytest.approx(0.5)
    assert bucket.debt(2.5) == 0


@pytest.mark.parametrize(("seconds", "header"), [(0.001, 1), (1.0, 1), (1.01, 2), (7.5, 8)])
def test_retry_after_is_whole_seconds_at_least_one(seconds: float, header: int) -> None:
    assert retry_after(seconds) == header


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_limiter_answers_429_with_retry_after() -> None:
    clock = Clock()
    limiter = TokenLimiter(LimitValues(2, 1.0, 1000, 2), clock)
    limiter.admit()
    limiter.admit()
    with pytest.raises(Overloaded) as caught:
        limiter.admit()
    assert caught.value.status == 429 and caught.value.headers() == {"Retry-After": "1"}
    clock.now = 0.5
    limiter.admit()

    limiter.admit_write()
    limiter.charge_bytes(4500)  # 1000 in the bucket: 3.5 s of debt
    with pytest.raises(Overloaded, match="1000 bytes per second") as caught:
        limiter.admit_write()
    assert caught.value.headers() == {"Retry-After": "4"}
    clock.now = 4.0
    limiter.admit_write()

    limiter.enter_search()
    limiter.enter_search()
    with pytest.raises(Overloaded, match="searches"):
        limiter.enter_search()
    limiter.leave_search()
    limiter.enter_search()


def test_zero_means_no_limit() -> None:
    limiter = TokenLimiter(LimitValues(0, 1.0, 0, 1), Clock())
    for _ in range(10_000):
        limiter.admit()
    limiter.charge_bytes(10**12)
    limiter.admit_write()


def test_limiters_follow_a_tokens_limits_and_keep_running_searches() -> None:
    limiters = Limiters(LimitValues(5, 1.0, 100, 3), Clock())
    defaults = limiters.values(None, None, None)
    assert defaults == LimitValues(5, 1.0, 100, 3)
    assert limiters.values(0, 7, 1) == LimitValues(0, 1.0, 7, 1)
    first = limiters.get("t1", defaults)
    first.enter_search()
    assert limiters.get("t1", defaults) is first
    changed = limiters.get("t1", limiters.values(None, None, 1))
    assert changed is first and changed.searches == 1
    with pytest.raises(Overloaded):
        changed.enter_search()
    changed.leave_search()
    changed.enter_search()
    limiters.forget_others({"t2"})
    assert limiters.get("t1", defaults) is not first
