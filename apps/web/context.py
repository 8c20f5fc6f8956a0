from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from apps.notifications.selectors import unread_count


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "oidc_enabled": settings.OIDC_ENABLED,
        "dev_login_enabled": settings.DEV_LOGIN_ENABLED,
        # Counted only when a page shows it (the menu of a signed-in user).
        "notice_unread": SimpleLazyObject(
            lambda: unread_count(request.user) if request.user.is_authenticated else 0
        ),
    }
