"""The API's rate limit: ``API_RATE_LIMIT`` per token (per user for portal sessions, per
address otherwise), counted with the ``limits`` library's sliding-window counter.

Each check is one atomic step in the store: a Lua script in Redis, under a lock in the
process's memory. So with ``API_RATE_LIMIT_STORE=redis`` (production's default) the limit
holds across every web process and host, and concurrent requests cannot both take the last
slot; memory and work per check stay constant whatever the rate (a sliding log of request
times would grow with it). With ``local`` each process counts on its own (development and
tests).

If the store cannot be reached the request is let through and a warning is logged: an API
that refuses everything because its rate-limit store is down is worse than one briefly
unlimited.
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


@cache
def parse_rate(text: str) -> RateLimitItem:
    """``"600/min"`` → an item of 600 per minute, in the form the settings accept (s, sec,
    m, min, h, hour, d, day)."""
    match = re.fullmatch(r"([1-9][0-9]*)/([a-z]+)", text)
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"{text!r} is not a rate such as 600/min or 20/sec")
    return _UNITS[match.group(2)](int(match.group(1)))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int  # whole seconds to wait when refused (at least 1); 0 when allowed


class RateLimiter:
    def __init__(self, uri: str) -> None:
        options = {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}
        self.storage = storage.storage_from_string(
            uri, **(options if uri.startswith("redis") else {})
        )
        self.strategy = strategies.SlidingWindowCounterRateLimiter(self.storage)

    def hit(self, rate: str, key: str) -> Decision:
        item = parse_rate(rate)
        try:
            if self.strategy.hit(item, "api", key):
                return Decision(allowed=True, retry_after=0)
            reset_at = self.strategy.get_window_stats(item, "api", key).reset_time
        except (RedisError, StorageError, ConfigurationError, OSError) as exc:
            log.warning("rate-limit store unavailable, request let through: %s", exc)
            return Decision(allowed=True, retry_after=0)
        return Decision(allowed=False, retry_after=max(1, math.ceil(reset_at - time.time())))

    def reset(self) -> None:
        self.storage.reset()


@cache
def _limiter(uri: str) -> RateLimiter:
    return RateLimiter(uri)


def rate_limiter() -> RateLimiter:
    """This process's limiter for the configured store (one per store, reused)."""
    uri = settings.REDIS_URL if settings.API_RATE_LIMIT_STORE == "redis" else "memory://"
    return _limiter(uri)
