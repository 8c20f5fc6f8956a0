"""The limiter moved to :mod:`apps.common.ratelimit`, where the admin's sign-in lockout can
share it; this name stays for code that still imports it from here."""

from __future__ import annotations

from apps.common.ratelimit import Decision, RateLimiter, parse_rate, rate_limiter

__all__ = ["Decision", "RateLimiter", "parse_rate", "rate_limiter"]
