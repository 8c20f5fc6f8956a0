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
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView
from requests import RequestException

from apps.accounts import core
from apps.accounts.models import User
from apps.accounts.services import user_sync_oidc
from gpupaas.http import client_ip

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


class SignInView(OIDCAuthenticationRequestView):
    """Start the code flow, keeping ``next`` only when it is a same-site path."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        response = super().get(request)
        request.session["oidc_login_next"] = core.safe_next_path(request.GET.get("next"))
        return response


class CallbackView(OIDCAuthenticationCallbackView):
    """Finish the code flow; a refused sign-in gets a page that says why, not a bare 400."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            log.warning("OIDC sign-in refused: %s", exc)
            return self._refused(request, str(exc))
        except RequestException as exc:
            log.warning("OIDC provider unreachable or refused the code: %s", exc)
            return self._refused(request, "The identity provider did not accept the sign-in.")

    def login_failure(self) -> HttpResponse:
        error = self.request.GET.get("error_description") or self.request.GET.get("error")
        return self._refused(self.request, error or "The sign-in was not completed.")

    def login_success(self) -> HttpResponse:
        super().login_success()
        target = core.safe_next_path(self.request.session.get("oidc_login_next")) or "/"
        return HttpResponseRedirect(target)

    @staticmethod
    def _refused(request: HttpRequest, reason: str) -> HttpResponse:
        return render(
            request,
            "accounts/sign_in_failed.html",
            {"reason": reason, "oidc_enabled": settings.OIDC_ENABLED},
            status=400,
        )
