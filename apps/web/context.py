from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "oidc_enabled": settings.OIDC_ENABLED,
        "dev_login_enabled": settings.DEV_LOGIN_ENABLED,
        "currency": settings.PLATFORM_CURRENCY,
    }
