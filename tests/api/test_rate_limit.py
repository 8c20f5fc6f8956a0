"""The rate limiter itself: the settings' rate form, the local and the Redis store, the last
slot taken once under concurrency, lockouts in a moving window, and a store that is down
reported to the caller."""

from __future__ import annotations

import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from limits import RateLimitItemPerHour, RateLimitItemPerMinute, RateLimitItemPerSecond

from apps.common.ratelimit import RateLimiter, failures_per_window, parse_rate

pytestmark = pytest.mark.usefixtures("clear_of_minute_boundary")


@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("600/min", RateLimitItemPerMinute(600)),
        ("20/sec", RateLimitItemPerSecond(20)),
        ("5/s", RateLimitItemPerSecond(5)),
        ("1000/hour", RateLimitItemPerHour(1000)),
    ],
)
def test_rates_in_the_settings_form_parse(text: str, item: Any) -> None:
    assert parse_rate(text) == item


@pytest.mark.parametrize("text", ["600", "0/min", "10/fortnight", "ten/min", "10 / min"])
def test_other_rate_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a rate"):
        parse_rate(text)


def test_local_store_allows_the_rate_then_says_how_long_to_wait() -> None:
    limiter = RateLimiter("memory://")
    key = uuid.uuid4().hex
    decisions = [limiter.hit("3/min", key) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert 1 <= decisions[-1].retry_after <= 60
    assert limiter.hit("3/min", "another key").allowed


def _hits(redis_url: str, key: str, n: int) -> int:
    limiter = RateLimiter(redis_url)
    return sum(limiter.hit("50/min", key).allowed for _ in range(n))


@pytest.mark.redis
def test_redis_store_is_shared_and_gives_the_last_slots_once(redis_url: str) -> None:
    """Four processes (four web workers) hammer one token: exactly the rate gets through."""
    key = uuid.uuid4().hex
    with ProcessPoolExecutor(max_workers=4) as pool:
        allowed = sum(pool.map(_hits, [redis_url] * 4, [key] * 4, [40] * 4))
    assert allowed == 50
    refused = RateLimiter(redis_url).hit("50/min", key)
    assert not refused.allowed
    assert 1 <= refused.retry_after <= 60


def test_an_unreachable_store_is_reported_not_decided(caplog: pytest.LogCaptureFixture) -> None:
    """The limiter says the store is down; each caller decides (the API refuses writes)."""
    limiter = RateLimiter("redis://127.0.0.1:1/0")  # nothing listens on port 1
    decisions = [limiter.hit("1/min", "k") for _ in range(3)]
    assert all(d.store_down and d.allowed for d in decisions)
    assert limiter.check("1/min", "k").store_down
    assert "rate-limit store unavailable" in caplog.text


def test_check_does_not_count() -> None:
    limiter = RateLimiter("memory://")
    key = uuid.uuid4().hex
    assert all(limiter.check("2/min", key).allowed for _ in range(5))
    limiter.hit("2/min", key)
    assert limiter.check("2/min", key).allowed
    limiter.hit("2/min", key)
    refused = limiter.check("2/min", key)
    assert not refused.allowed
    assert 1 <= refused.retry_after <= 60


def test_lockouts_count_exactly_in_a_moving_window() -> None:
    """N failures within W seconds lock; the lock lasts until the oldest is W seconds old."""
    limiter = RateLimiter("memory://")
    key = uuid.uuid4().hex
    rule = failures_per_window(3, 900)
    assert [limiter.hit(rule, key, namespace="t", exact=True).allowed for _ in range(3)] == [
        True,
        True,
        True,
    ]
    locked = limiter.check(rule, key, namespace="t", exact=True)
    assert not locked.allowed
    assert 890 <= locked.retry_after <= 900
    assert limiter.check(rule, key, namespace="other", exact=True).allowed


@pytest.mark.redis
def test_lockouts_count_in_redis_too(redis_url: str) -> None:
    limiter = RateLimiter(redis_url)
    key = uuid.uuid4().hex
    rule = failures_per_window(2, 60)
    limiter.hit(rule, key, namespace="t", exact=True)
    assert limiter.check(rule, key, namespace="t", exact=True).allowed
    limiter.hit(rule, key, namespace="t", exact=True)
    assert not RateLimiter(redis_url).check(rule, key, namespace="t", exact=True).allowed
