"""The Django admin's password sign-in: failures counted per username at an address and per
address (never the username everywhere), and the operator's one-time sign-in link (break glass)."""

from __future__ import annotations

import logging
import secrets

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.accounts.models import User
from apps.accounts.selectors import (
    ADMIN_LOGIN,
    admin_login_keys,
    admin_login_lockout,
    admin_login_rule,
)
from apps.audit.services import audit_record
from apps.common.ratelimit import rate_limiter

log = logging.getLogger(__name__)


def admin_login_failure_record(*, username: str, source_ip: str | None) -> bool:
    """Count a failed password sign-in against the username and the client address, and
    audit it; return True when it locks either out (audited as well)."""
    rule = admin_login_rule()
    limiter = rate_limiter()
    keys = admin_login_keys(username=username, source_ip=source_ip)
    for key in keys:
        limiter.hit(rule, key, namespace=ADMIN_LOGIN, exact=True)
    lockout = admin_login_lockout(username=username, source_ip=source_ip)
    locked = not lockout.allowed
    user = User.objects.filter(username=username).first()
    details = {"username": username[:150]}
    with transaction.atomic():
        audit_record(
            actor=None,
            action="auth.admin_login_failed",
            obj=user,
            source_ip=source_ip,
            details=details,
        )
        if locked:
            audit_record(
                actor=None,
                action="auth.admin_lockout",
                obj=user,
                source_ip=source_ip,
                details={
                    **details,
                    "failures": settings.ADMIN_LOGIN_MAX_FAILURES,
                    "seconds": lockout.retry_after,
                },
            )
    log.warning(
        "admin password sign-in failed for %r from %s%s",
        username[:150],
        source_ip,
        f"; locked out for {lockout.retry_after}s" if locked else "",
    )
    return locked


def admin_login_success_record(
    *, user: User, source_ip: str | None, signin_link: bool = False
) -> None:
    """Audit a password sign-in to the admin, saying whether it used the break-glass switch
    (ADMIN_PASSWORD_LOGIN with single sign-on on) or an operator's one-time sign-in link."""
    break_glass = bool(settings.OIDC_ENABLED) or signin_link
    details: dict[str, bool] = {"break_glass": break_glass}
    if signin_link:
        details["signin_link"] = True
    audit_record(
        actor=user,
        action="auth.admin_password_login",
        obj=user,
        source_ip=source_ip,
        details=details,
    )
    if break_glass:
        log.warning(
            "break-glass admin password sign-in by %s from %s (ADMIN_PASSWORD_LOGIN is on)",
            user.get_username(),
            source_ip,
        )


# --- the operator's one-time sign-in link (break glass) ---------------------------------------

ADMIN_SIGNIN_LINK_SALT = "gpupaas.accounts.admin-signin-link"
ADMIN_SIGNIN_LINK_SECONDS = 600


def admin_signin_link_create(*, username: str) -> str:
    """A token that signs the staff account ``username`` in to the admin once, within
    ADMIN_SIGNIN_LINK_SECONDS, whatever the lockout or single sign-on: made by an operator with
    a shell on the portal (``manage.py admin_signin_link``), so no failed sign-in can lock it."""
    user = User.objects.filter(username=username, is_active=True, is_staff=True).first()
    if user is None:
        raise ValidationError(f"{username!r} is not an active staff account.")
    token = signing.TimestampSigner(salt=ADMIN_SIGNIN_LINK_SALT).sign(
        f"{user.pk}:{secrets.token_urlsafe(16)}"
    )
    audit_record(actor=None, action="auth.admin_signin_link", obj=user, details={})
    return token


def admin_signin_link_use(*, token: str) -> User | None:
    """The staff account a sign-in link names, once; None when it is forged, expired, used
    already, or its account is no longer an active staff account."""
    signer = signing.TimestampSigner(salt=ADMIN_SIGNIN_LINK_SALT)
    try:
        value = signer.unsign(token, max_age=ADMIN_SIGNIN_LINK_SECONDS)
    except signing.BadSignature:
        return None
    user_id, _, nonce = value.partition(":")
    # Used once: the first request to present it takes it (an atomic add in the cache).
    if not nonce or not cache.add(f"admin-signin-link:{nonce}", 1, ADMIN_SIGNIN_LINK_SECONDS + 60):
        return None
    return User.objects.filter(pk=int(user_id), is_active=True, is_staff=True).first()
