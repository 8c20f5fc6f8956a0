"""Liveness of the portal's moving parts: database, Redis, Celery worker and beat."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from celery import shared_task
from django.conf import settings
from django.db import connection

from apps.common import taskqueue

log = logging.getLogger(__name__)

HEARTBEAT_KEY = "gpupaas:heartbeat:worker"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _failed(name: str, exc: Exception) -> Check:
    """A failed check. The detail is the kind of error only: drivers put the server's host and
    port in their messages, and the detail is shown to admins and local callers; the whole
    message goes to the log."""
    log.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
    return Check(name, False, f"{type(exc).__name__} (see the portal's log)")


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return _failed("database", exc)
    return Check("database", True, connection.vendor)


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


def check_redis() -> Check:
    try:
        _redis().ping()
    except Exception as exc:
        return _failed("redis", exc)
    return Check("redis", True, "ping ok")


def worker_heartbeat_age() -> float | None:
    """Seconds since a worker last ran the beat-scheduled heartbeat, or None if never/unknown."""
    try:
        raw = _redis().get(HEARTBEAT_KEY)
    except Exception:
        return None
    if raw is None:
        return None
    return max(0.0, time.time() - float(raw))  # type: ignore[arg-type]


@shared_task(name=taskqueue.HEARTBEAT.name, ignore_result=True)
def heartbeat() -> None:
    """Beat schedules it, a worker runs it: a fresh key proves both are alive."""
    _redis().set(HEARTBEAT_KEY, str(time.time()), ex=settings.HEARTBEAT_INTERVAL_SECONDS * 10)
