"""API tokens: created hashed and scoped, revoked (with their descendants), touched when used."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, User
from apps.accounts.roles import Act
from apps.accounts.selectors import (
    live_tokens_of,
    platform_may,
    token_descendants,
)
from apps.audit.services import audit_record

log = logging.getLogger(__name__)


def api_token_create(
    *,
    actor: User,
    name: str,
    scopes: Sequence[str],
    expires_at: datetime | None,
    parent: ApiToken | None = None,
    source_ip: str | None = None,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plaintext, which is never stored nor shown again.

    The one home of the token rules, whichever door is used: a name; known scopes; at most
    API_TOKEN_MAX_LIFETIME_DAYS of life (asked without an expiry, the longest allowed); at
    most API_TOKEN_MAX_PER_USER live tokens per person. ``parent`` is the token the request
    was authenticated with, if any: the new token is recorded as its child, may allow nothing
    it does not, ends no later than it, and is revoked with it.
    """
    now = timezone.now()
    errors: dict[str, str] = {}
    if not name or not name.strip():
        errors["name"] = "Give the token a name, e.g. the machine or pipeline that uses it."
    unknown = [s for s in scopes if s not in core.ALL_SCOPES]
    if unknown or not scopes:
        errors["scopes"] = f"Choose at least one scope of: {', '.join(core.ALL_SCOPES)}."
    elif parent is not None and not core.token_scopes_within(scopes, parent.scopes):
        errors["scopes"] = (
            "A token created with another token cannot allow more than it: "
            f"the token you are using has the scopes {', '.join(parent.scopes)}."
        )
    if parent is not None and (parent.user_id != actor.pk or not parent.is_active(now)):
        raise PermissionDenied("Tokens can be created only with a live token of your own.")
    try:
        final_expiry = core.token_expiry(
            requested=expires_at,
            now=now,
            max_lifetime_days=settings.API_TOKEN_MAX_LIFETIME_DAYS,
            parent_ends_at=parent.ends_at if parent is not None else None,
        )
    except core.TokenRuleError as exc:
        errors[exc.field] = exc.message
    if errors:
        raise ValidationError(errors)
    material = core.token_generate()
    with transaction.atomic():
        # Lock the person's row: two creations at once would otherwise both count the same
        # live tokens and together pass the cap.
        User.objects.select_for_update().filter(pk=actor.pk).first()
        # And the parent's: a revocation committed meanwhile must not leave a child behind.
        if (
            parent is not None
            and ApiToken.objects.select_for_update()
            .filter(pk=parent.pk, revoked_at__isnull=True)
            .first()
            is None
        ):
            raise PermissionDenied("The token you are using has been revoked.")
        live = live_tokens_of(actor, now=now).count()
        cap = settings.API_TOKEN_MAX_PER_USER
        if live >= cap:
            raise ValidationError(
                {
                    "non_field_errors": (
                        f"You have {live} live tokens, the most one person may hold ({cap}). "
                        "Revoke one you no longer use, then create this one."
                    )
                }
            )
        token = ApiToken.objects.create(
            user=actor,
            name=name.strip(),
            lookup=material.lookup,
            digest=material.digest,
            scopes=sorted(set(scopes)),
            expires_at=final_expiry,
            parent=parent,
            created_at=now,
        )
        audit_record(
            actor=actor,
            action="token.create",
            obj=token,
            source_ip=source_ip,
            details={
                "scopes": token.scopes,
                "expires_at": final_expiry.isoformat() if final_expiry else None,
                "parent": parent.pk if parent is not None else None,
            },
        )
    return token, material.plaintext


def api_token_revoke(*, actor: User, token: ApiToken, source_ip: str | None = None) -> ApiToken:
    """Revoke a token and every token created with it (and with those, all the way down)."""
    if token.user_id != actor.pk and not platform_may(actor, Act.GOVERN_TEAMS):
        raise PermissionDenied("This token belongs to someone else.")
    now = timezone.now()
    with transaction.atomic():
        # Conditional update: a second revoke (double click, retry) changes nothing.
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        if changed:
            audit_record(actor=actor, action="token.revoke", obj=token, source_ip=source_ip)
        # Descendants are revoked even when the token itself already was, so that a child
        # created by a race with the revocation does not survive it.
        for child in token_descendants(token).filter(revoked_at__isnull=True):
            if ApiToken.objects.filter(pk=child.pk, revoked_at__isnull=True).update(revoked_at=now):
                audit_record(
                    actor=actor,
                    action="token.revoke",
                    obj=child,
                    source_ip=source_ip,
                    details={"reason": "revoked with the token that created it", "root": token.pk},
                )
    token.refresh_from_db()
    return token


def api_token_touch(*, token: ApiToken, now: datetime, min_interval_seconds: int = 60) -> None:
    """Record use without writing on every request: at most once a minute per token."""
    if token.last_used_at and (now - token.last_used_at).total_seconds() < min_interval_seconds:
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
