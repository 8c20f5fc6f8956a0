"""Counting requests and failures in one store, with the ``limits`` library: the API's rate
limits (per user, per client address), failed API authentications per address, and the
admin's sign-in lockout.

Each check is one atomic step in the store: a Lua script in Redis, under a lock in the
process's memory. So with ``API_RATE_LIMIT_STORE=redis`` (production's default) the limits
hold across every web process and host, and concurrent requests cannot both take the last
slot. Rates use the sliding-window counter, whose memory and work per check stay constant
whatever the rate (a sliding log of request times would grow with it). Lockouts, which count
a handful of failures, use the moving window: each failure is kept until it is one window
old, so "N failures in the last W seconds" is exact. With ``local`` each process counts on
its own (development and tests).

If the store cannot be reached, the limiter does not decide: it answers with
``store_down=True`` and logs a warning, and each caller applies its policy (the API refuses
writes and lets reads through, see ``API_RATE_LIMIT_FAIL_CLOSED_WRITES``).
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from functools import cache

import limits
from django.conf import settings
from limits import RateLimitItem, storage, strategies
from limits.errors import ConfigurationError, StorageError
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

_UNITS: dict[str, type[RateLimitItem]] = {
    **dict.fromkeys(("s", "sec"), limits.RateLimitItemPerSecond),
    **dict.fromkeys(("m", "min"), limits.RateLimitItemPerMinute),
    **dict.fromkeys(("h", "hour"), limits.RateLimitItemPerHour),
    **dict.fromkeys(("d", "day"), limits.RateLimitItemPerDay),
}
RATE_RE = re.compile(r"([1-9][0-9]*)/([a-z]+)")
_STORE_ERRORS = (RedisError, StorageError, ConfigurationError, OSError)


@cache
def parse_rate(text: str) -> RateLimitItem:
    """``"600/min"`` → an item of 600 per minute, in the form the settings accept (s, sec,
    m, min, h, hour, d, day)."""
    match = RATE_RE.fullmatch(text)
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"{text!r} is not a rate such as 600/min or 20/sec")
    return _UNITS[match.group(2)](int(match.group(1)))


def failures_per_window(count: int, seconds: int) -> RateLimitItem:
    """``count`` events per ``seconds``: the shape of a lockout rule."""
    return limits.RateLimitItemPerSecond(count, seconds)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int  # whole seconds to wait when refused (at least 1); 0 when allowed
    # The store could not be reached, so nothing was counted and ``allowed`` is True: the
    # caller decides whether to let the request through.
    store_down: bool = False


STORE_DOWN = Decision(allowed=True, retry_after=0, store_down=True)


class RateLimiter:
    def __init__(self, uri: str) -> None:
        options = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}
        self.storage = storage.storage_from_string(
            uri, **(options if uri.startswith("redis") else {})
        )
        self.strategy = strategies.SlidingWindowCounterRateLimiter(self.storage)
        self.moving = strategies.MovingWindowRateLimiter(self.storage)

    def _strategy(self, exact: bool) -> strategies.RateLimiter:
        return self.moving if exact else self.strategy

    def hit(
        self,
        rate: str | RateLimitItem,
        key: str,
        *,
        namespace: str = "api",
        exact: bool = False,
    ) -> Decision:
        """Count one event for ``key``; refused when it is over ``rate``. ``exact`` counts in a
        moving window (for lockouts), otherwise in the sliding-window counter."""
        item = parse_rate(rate) if isinstance(rate, str) else rate
        strategy = self._strategy(exact)
        try:
            if strategy.hit(item, namespace, key):
                return Decision(allowed=True, retry_after=0)
            reset_at = strategy.get_window_stats(item, namespace, key).reset_time
        except _STORE_ERRORS as exc:
            log.warning("rate-limit store unavailable (%s %s): %s", namespace, key, exc)
            return STORE_DOWN
        return Decision(allowed=False, retry_after=_seconds_until(reset_at))

    def check(
        self,
        rate: str | RateLimitItem,
        key: str,
        *,
        namespace: str = "api",
        exact: bool = False,
    ) -> Decision:
        """Whether one more event would be allowed, without counting it."""
        item = parse_rate(rate) if isinstance(rate, str) else rate
        strategy = self._strategy(exact)
        try:
            if strategy.test(item, namespace, key):
                return Decision(allowed=True, retry_after=0)
            reset_at = strategy.get_window_stats(item, namespace, key).reset_time
        except _STORE_ERRORS as exc:
            log.warning("rate-limit store unavailable (%s %s): %s", namespace, key, exc)
            return STORE_DOWN
        return Decision(allowed=False, retry_after=_seconds_until(reset_at))

    def reset(self) -> None:
        self.storage.reset()


def _seconds_until(moment: float) -> int:
    return max(1, math.ceil(moment - time.time()))


@cache
def _limiter(uri: str) -> RateLimiter:
    return RateLimiter(uri)


def rate_limiter() -> RateLimiter:
    """This process's limiter for the configured store (one per store, reused)."""
    uri = settings.REDIS_URL if settings.API_RATE_LIMIT_STORE == "redis" else "memory://"
    return _limiter(uri)
