from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from apps.accounts.selectors import memberships_of
from apps.notifications.selectors import unread_count
from apps.telemetry.overview import may_see_overview


def has_team(user: Any) -> bool:
    """Whether the team pages lead anywhere for ``user``: a team member, or an admin."""
    if user is None or not user.is_authenticated:
        return False
    return bool(user.is_staff or memberships_of(user).exists())


def portal(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    return {
        # Called by the template only where the navigation is drawn: one query then.
        "has_team": lambda: has_team(user),
        "oidc_enabled": settings.OIDC_ENABLED,
        "dev_login_enabled": settings.DEV_LOGIN_ENABLED,
        # Counted only when a page shows it (the menu of a signed-in user).
        "notice_unread": SimpleLazyObject(
            lambda: unread_count(request.user) if request.user.is_authenticated else 0
        ),
        "currency": settings.PLATFORM_CURRENCY,
        # Asked only when a page draws the navigation (a template calls it).
        "sees_overview": lambda: (request.user.is_authenticated and may_see_overview(request.user)),
    }
