"""Idempotent workload creation for API clients (the Idempotency-Key header).

A client that did not hear the answer to a POST (timeout, dropped connection) sends it again
with the same key; it gets the workload the first request created instead of a second one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.workloads.models import IdempotencyKey, Workload

MAX_KEY_LENGTH = 255


class IdempotencyKeyReused(ValueError):
    """The key was first used with a different request; replaying it would be a lie."""


def key_problem(key: str) -> str | None:
    """Why a header value cannot serve as a key, or None when it can."""
    if not key or len(key) > MAX_KEY_LENGTH:
        return f"An Idempotency-Key is 1 to {MAX_KEY_LENGTH} characters long."
    if not all(33 <= ord(c) < 127 for c in key):
        return "An Idempotency-Key may contain only visible ASCII characters."
    return None


def request_fingerprint(purpose: str, payload: Any) -> str:
    """A stable digest of what was asked, so a key reused for another request is caught."""
    canonical = json.dumps([purpose, payload], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _live(entry: IdempotencyKey, now: datetime) -> bool:
    return entry.created_at > now - timedelta(seconds=settings.API_IDEMPOTENCY_TTL_SECONDS)


def _replay(entry: IdempotencyKey, fingerprint: str) -> Workload:
    if entry.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            "This Idempotency-Key was already used for a different request; use a new key."
        )
    return entry.workload


def workload_create_once(
    *,
    actor: User,
    key: str,
    fingerprint: str,
    create: Callable[[], Workload],
    now: datetime | None = None,
) -> tuple[Workload, bool]:
    """Run ``create`` (a workload service call) at most once per (actor, key).

    Returns the workload and whether it is a replay of an earlier request. The key row is
    written in the same transaction as the workload, so either both exist or neither does.
    """
    moment = now or timezone.now()
    existing = IdempotencyKey.objects.select_related("workload").filter(user=actor, key=key).first()
    if existing is not None and _live(existing, moment):
        return _replay(existing, fingerprint), True
    try:
        with transaction.atomic():
            if existing is not None:
                # Expired: the key may be used afresh.
                IdempotencyKey.objects.filter(pk=existing.pk).delete()
            workload = create()
            IdempotencyKey.objects.create(
                user=actor, key=key, fingerprint=fingerprint, workload=workload, created_at=moment
            )
    except IntegrityError:
        # Race: a concurrent request with the same key committed first (the unique constraint
        # made our insert wait for it, then fail). Everything of ours was rolled back above;
        # answer with the winner's workload.
        winner = (
            IdempotencyKey.objects.select_related("workload").filter(user=actor, key=key).first()
        )
        if winner is None:
            raise
        return _replay(winner, fingerprint), True
    return workload, False
