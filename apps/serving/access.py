"""Who may call an inference endpoint: its keys (created, shown once, revoked) and the check
the ingress asks of every call (a signed-in member of the team, or a live key of this very
endpoint; a call to an endpoint scaled to zero wakes it). Only a key's digest is stored
(:mod:`apps.serving.keys`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from limits import RateLimitItem

from apps.accounts.models import User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_role
from apps.audit.services import audit_record
from apps.common.ratelimit import Decision, failures_per_window, rate_limiter
from apps.serving import keys
from apps.serving.models import EndpointKey
from apps.serving.selectors import endpoint_key_matches
from apps.serving.services import endpoint_wake
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_may_manage

# How stale a key's "last used" may get before a call writes it again: one write a minute,
# not one per call.
LAST_USED_RESOLUTION_SECONDS = 60


@dataclass(frozen=True)
class CreatedKey:
    key: EndpointKey
    plaintext: str  # shown once


def endpoint_key_create(
    *, actor: User, workload: Workload, name: str, source_ip: str | None = None
) -> CreatedKey:
    """A new key for the endpoint (its owner, a lead of its team, an admin); the key is in
    the answer once and never again."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may create keys.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError({"name": "Only inference endpoints take keys."})
    if workload.is_terminal:
        raise ValidationError({"name": f"The endpoint has {workload.state}; it takes no calls."})
    problem = keys.endpoint_key_name_problem(name)
    if problem:
        raise ValidationError({"name": problem})
    material = keys.endpoint_key_generate()
    with transaction.atomic():
        key = EndpointKey.objects.create(
            team=workload.team,
            endpoint_id=workload.pk,
            name=name.strip(),
            lookup=material.lookup,
            digest=material.digest,
            created_by=actor,
        )
        audit_record(
            actor=actor,
            action="endpoint_key.create",
            obj=key,
            source_ip=source_ip,
            details={"endpoint": workload.pk, "name": key.name},
        )
    return CreatedKey(key, material.plaintext)


def endpoint_key_revoke(
    *, actor: User, workload: Workload, key_id: int, source_ip: str | None = None
) -> bool:
    """Revoke one of the endpoint's keys at once (calls with it are refused from now on).
    False: it was revoked already."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may revoke keys.")
    key = EndpointKey.objects.filter(pk=key_id, endpoint_id=workload.pk).first()
    if key is None:
        raise EndpointKey.DoesNotExist("No such key for this endpoint.")
    with transaction.atomic():
        revoked = EndpointKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            endpoint_key_forget(key)
            audit_record(
                actor=actor,
                action="endpoint_key.revoke",
                obj=key,
                source_ip=source_ip,
                details={"endpoint": key.endpoint_id, "name": key.name},
            )
    key.refresh_from_db()
    return bool(revoked)


def _key_used(key: EndpointKey) -> None:
    """Note that a call used the key (at most once a minute per key)."""
    now = timezone.now()
    last = key.last_used_at
    if last is None or (now - last).total_seconds() >= LAST_USED_RESOLUTION_SECONDS:
        EndpointKey.objects.filter(pk=key.pk).update(last_used_at=now)


@dataclass(frozen=True)
class CallVerdict:
    # 200 let through, 401 no valid key or session, 403 not for this person/endpoint, 429 too
    # many wrong keys (``retry_after`` seconds).
    status: int
    message: str
    waking: bool = False
    retry_after: int = 0


# One answer for a wrong key, a revoked key and an endpoint that does not exist, so that keys
# cannot be used to learn which endpoints exist.
WRONG_KEY = CallVerdict(401, "That key does not open this endpoint (wrong or revoked).")
NO_KEY = CallVerdict(401, "Call with one of the endpoint's keys: Authorization: Bearer …")
NOT_A_MEMBER = CallVerdict(403, "Only members of the endpoint's team may call it.")
_GUESS_BY_ADDRESS = "endpoint-key-address"
_GUESS_BY_ENDPOINT = "endpoint-key-endpoint"

# Recent "yes" answers, per key digest or person, in the process's own memory (the
# "gateway-auth" cache, a LocMemCache: a hit costs no round trip, which is the point; each web
# process keeps its own, and an entry lives GATEWAY_AUTH_CACHE_SECONDS, so whatever is revoked
# elsewhere stops within that time everywhere).
AUTH_CACHE = "gateway-auth"


def _remembered(key: str) -> CallVerdict | None:
    return caches[AUTH_CACHE].get(key)


def _remember(key: str, verdict: CallVerdict) -> None:
    if verdict.status == 200 and not verdict.waking and settings.GATEWAY_AUTH_CACHE_SECONDS > 0:
        caches[AUTH_CACHE].set(key, verdict, settings.GATEWAY_AUTH_CACHE_SECONDS)


def _by_key(endpoint_id: int, digest: str) -> str:
    return f"endpoint:{endpoint_id}:key:{digest}"


def _by_user(endpoint_id: int, user_id: int) -> str:
    return f"endpoint:{endpoint_id}:user:{user_id}"


def _guess_rule() -> RateLimitItem:
    return failures_per_window(
        settings.ENDPOINT_KEY_GUESSES, settings.ENDPOINT_KEY_GUESS_WINDOW_SECONDS
    )


def _throttled(decision: Decision) -> CallVerdict:
    return CallVerdict(
        429, "Too many wrong keys; try again later.", retry_after=decision.retry_after
    )


def _live_endpoint(endpoint_id: int) -> Workload | None:
    return (
        Workload.objects.filter(pk=endpoint_id, kind=core.KIND_INFERENCE, deleted_at__isnull=True)
        .select_related("team")
        .first()
    )


def _address_refused(address: str) -> Decision:
    """Whether an address is past its count of wrong keys (refused whatever it presents)."""
    return rate_limiter().check(_guess_rule(), address, namespace=_GUESS_BY_ADDRESS, exact=True)


def _key_verdict(endpoint_id: int, presented: str, source_ip: str | None) -> CallVerdict:
    """A call with a key: a live key of this endpoint passes; a wrong one counts as a guess
    against the caller's address and the endpoint (429 past ENDPOINT_KEY_GUESSES in the window;
    an address past it is refused before its key is even looked at)."""
    limiter = rate_limiter()
    rule = _guess_rule()
    address = source_ip or "unknown"
    refused = _address_refused(address)
    if not refused.allowed:
        return _throttled(refused)
    digest = keys.endpoint_key_digest(presented)
    cached = _remembered(_by_key(endpoint_id, digest))
    if cached is not None:
        return cached
    workload = _live_endpoint(endpoint_id)
    key = (
        None
        if workload is None
        else endpoint_key_matches(endpoint_id=workload.pk, plaintext=presented)
    )
    if workload is None or key is None:
        by_address = limiter.hit(rule, address, namespace=_GUESS_BY_ADDRESS, exact=True)
        by_endpoint = limiter.hit(rule, str(endpoint_id), namespace=_GUESS_BY_ENDPOINT, exact=True)
        for decision in (by_address, by_endpoint):
            if not decision.allowed:
                return _throttled(decision)
        return WRONG_KEY
    _key_used(key)
    verdict = _state_verdict(workload)
    _remember(_by_key(endpoint_id, digest), verdict)
    return verdict


def _state_verdict(workload: Workload) -> CallVerdict:
    if workload.is_terminal:
        return CallVerdict(403, f"The endpoint has {workload.state}; it takes no calls.")
    if workload.state == core.SUSPENDED:
        endpoint_wake(actor=None, workload=workload)
        return CallVerdict(200, "Scaled to zero: waking up; retry in a minute.", waking=True)
    return CallVerdict(200, "ok")


def endpoint_call_remembered(
    *, endpoint_id: int, authorization: str, api_key: str, source_ip: str | None
) -> CallVerdict | None:
    """The answer ``endpoint_call_authorise`` would give a call with a key, when it is a "yes"
    this process remembers (GATEWAY_AUTH_CACHE_SECONDS), without the database; ``None`` when
    the call must be decided in full: no key, a key not remembered, or an address that is
    refused for guessing (which is answered 429 whatever it presents)."""
    presented = keys.presented_key(authorization, api_key)
    if not presented or settings.GATEWAY_AUTH_CACHE_SECONDS <= 0:
        return None
    cached = _remembered(_by_key(endpoint_id, keys.endpoint_key_digest(presented)))
    if cached is None:
        return None
    return cached if _address_refused(source_ip or "unknown").allowed else None


def endpoint_key_forget(key: EndpointKey) -> None:
    """Drop this process's remembered "yes" for a key (the others forget it within
    GATEWAY_AUTH_CACHE_SECONDS)."""
    caches[AUTH_CACHE].delete(_by_key(key.endpoint_id, key.digest))


def endpoint_call_authorise(
    *,
    user: User | None,
    endpoint_id: int,
    authorization: str = "",
    api_key: str = "",
    source_ip: str | None = None,
) -> CallVerdict:
    """Whether a call to an endpoint may pass the proxy: a live key of this very endpoint, or a
    signed-in member of its team (or a platform admin). A call that may pass an endpoint scaled
    to zero wakes it (the proxy answers 503 until a replica is ready).

    An endpoint that does not exist is answered exactly as one that does: 401 with the same
    body for any key (counted as a wrong one), 401 without a key or session, 403 for a
    signed-in person. A "yes" is remembered GATEWAY_AUTH_CACHE_SECONDS per key or person.
    """
    presented = keys.presented_key(authorization, api_key)
    if presented:
        return _key_verdict(endpoint_id, presented, source_ip)
    if user is None or not user.is_authenticated:
        return NO_KEY
    cached = _remembered(_by_user(endpoint_id, user.pk))
    if cached is not None:
        return cached
    workload = _live_endpoint(endpoint_id)
    if workload is None:
        return NOT_A_MEMBER
    if not (platform_may(user, Act.ACT_FOR_TEAMS) or team_role(user, workload.team_id) is not None):
        return NOT_A_MEMBER
    verdict = _state_verdict(workload)
    _remember(_by_user(endpoint_id, user.pk), verdict)
    return verdict
