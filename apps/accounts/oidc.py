"""Sign-in through the company's OpenID provider (authorization code flow).

mozilla-django-oidc runs the flow and checks the ID token's signature and nonce; this module
adds what it leaves to us: the issuer, audience and expiry checks, matching on issuer +
subject (never on e-mail alone) and the groups → teams mapping at every sign-in.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.accounts import core
from apps.accounts.models import User
from apps.accounts.services import user_sync_oidc
from apps.common.http import client_ip

log = logging.getLogger(__name__)


class GpupaasOIDCBackend(OIDCAuthenticationBackend):
    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        try:
            core.check_id_token_claims(
                payload,
                issuer=settings.OIDC_OP_ISSUER,
                client_id=settings.OIDC_RP_CLIENT_ID,
                now=time.time(),
                leeway=settings.OIDC_CLOCK_LEEWAY_SECONDS,
            )
        except core.ClaimsError as exc:
            raise SuspiciousOperation(str(exc)) from exc
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):
            # OIDC Core 5.3.2: the UserInfo response must be about the ID token's subject.
            raise SuspiciousOperation("The provider's user info names another subject.")
        claims = {**payload, **userinfo}
        return user_sync_oidc(
            issuer=str(payload["iss"]),
            subject=str(payload["sub"]),
            claims=claims,
            groups_claim=settings.OIDC_GROUPS_CLAIM,
            admin_groups=settings.OIDC_ADMIN_GROUPS,
            source_ip=client_ip(self.request) if getattr(self, "request", None) else None,
        )
