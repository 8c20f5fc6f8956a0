"""Portal sessions: recorded per provider session, ended by the user, an admin or the provider's
back-channel logout."""

from __future__ import annotations

import logging
from datetime import timedelta
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import OidcIdentity, User, UserSession
from apps.audit.services import audit_record

log = logging.getLogger(__name__)


def _session_store() -> SessionBase:
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore()
    return store


def _end_sessions(sessions: QuerySet[UserSession]) -> int:
    """Delete the Django sessions behind ``sessions`` and their index rows."""
    rows = list(sessions.values_list("pk", "session_key"))
    store = _session_store()
    for _, key in rows:
        store.delete(key)
    UserSession.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
    return len(rows)


def user_session_record(*, user: User, session_key: str, issuer: str, sid: str) -> UserSession:
    """Index a session opened by a sign-in through the provider. Rows of the user's sessions
    that have ended on their own are dropped on the way."""
    identity = OidcIdentity.objects.filter(user=user, issuer=issuer).first()
    with transaction.atomic():
        row, _ = UserSession.objects.update_or_create(
            session_key=session_key,
            defaults={"user": user, "identity": identity, "sid": sid[:255]},
        )
        horizon = timezone.now() - timedelta(seconds=settings.SESSION_COOKIE_AGE)
        store = _session_store()
        gone = [
            pk
            for pk, key in UserSession.objects.filter(
                user=user, created_at__lt=horizon
            ).values_list("pk", "session_key")
            if not store.exists(key)
        ]
        UserSession.objects.filter(pk__in=gone).delete()
    return row


def user_sessions_end(*, user: User, reason: str, source_ip: str | None = None) -> int:
    """End every portal session of ``user`` that a sign-in through the provider opened."""
    with transaction.atomic():
        ended = _end_sessions(UserSession.objects.filter(user=user))
        if ended:
            audit_record(
                actor=None,
                action="auth.sessions_end",
                obj=user,
                source_ip=source_ip,
                details={"reason": reason, "sessions": ended},
            )
    return ended


def oidc_backchannel_logout(*, logout: core.LogoutRequest, source_ip: str | None = None) -> int:
    """End the portal sessions a verified logout token names: the sessions of that provider
    session (``sid``), or every session of the subject when it names none. Sessions whose sid
    the provider never told us count as the subject's when the token names the subject."""
    sessions = UserSession.objects.filter(identity__issuer=logout.issuer)
    if logout.subject:
        sessions = sessions.filter(identity__subject=logout.subject)
        if logout.sid:
            sessions = sessions.filter(Q(sid=logout.sid) | Q(sid=""))
    else:
        sessions = sessions.filter(sid=logout.sid)
    with transaction.atomic():
        users = list(User.objects.filter(portal_sessions__in=sessions).distinct())
        ended = _end_sessions(sessions)
        for user in users:
            audit_record(
                actor=None,
                action="auth.backchannel_logout",
                obj=user,
                source_ip=source_ip,
                details={"issuer": logout.issuer, "sid": logout.sid, "sessions": ended},
            )
    return ended
