from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from apps.telemetry.overview import may_see_overview


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "oidc_enabled": settings.OIDC_ENABLED,
        "dev_login_enabled": settings.DEV_LOGIN_ENABLED,
        # Asked only when a page draws the navigation (a template calls it).
        "sees_overview": lambda: (request.user.is_authenticated and may_see_overview(request.user)),
    }
