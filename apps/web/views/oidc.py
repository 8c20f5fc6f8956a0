"""Sign-in through the company's identity provider: the two views of the code flow, and the
provider's back-channel logout."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView
from requests import RequestException

from apps.accounts import core, discovery
from apps.accounts.oidc import (
    SESSION_PROVIDER,
    AccountLinkRefused,
    LogoutTokenError,
    configured_providers,
    provider_named,
    provider_of_flow,
    remember_flow,
    verify_logout_token,
)
from apps.accounts.providers import Provider
from apps.accounts.services import oidc_backchannel_logout, user_session_record
from apps.common.http import client_ip

log = logging.getLogger(__name__)

UNREACHABLE = "The identity provider cannot be reached right now; try again in a few minutes."


class SignInView(OIDCAuthenticationRequestView):
    """Start the code flow at the provider chosen (``?provider=<key>``; with one provider, that
    one), keeping ``next`` only when it is a same-site path. With several and none chosen, the
    sign-in page offers them."""

    def __init__(self, **kwargs: Any) -> None:
        # Not the parent's __init__: it reads the authorization endpoint, which may have to be
        # discovered, and a provider outage must give a page that says so, not a 500.
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)
        self.provider: Provider | None = None

    def get_settings(self, attr: str, *args: Any) -> Any:
        if attr == "OIDC_RP_SCOPES" and self.provider is not None:
            return self.provider.scopes
        return OIDCAuthenticationRequestView.get_settings(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        next_path = core.safe_next_path(request.GET.get("next"))
        key = request.GET.get("provider") or None
        self.provider = provider_named(key)
        if self.provider is None:
            if key is None:
                target = reverse("accounts:login")
                return HttpResponseRedirect(
                    f"{target}?{urlencode({'next': next_path})}" if next_path else target
                )
            names = ", ".join(p.key for p in configured_providers())
            return _refused(
                request,
                f"There is no identity provider {key[:40]!r} here (there are {names}).",
                status=404,
            )
        self.OIDC_RP_CLIENT_ID = self.provider.client_id
        try:
            self.OIDC_OP_AUTH_ENDPOINT = discovery.endpoint(
                "OIDC_OP_AUTHORIZATION_ENDPOINT", self.provider
            )
        except discovery.DiscoveryError as exc:
            log.error("OIDC sign-in at %s cannot start: %s", self.provider.key, exc)
            return _refused(request, _unreachable(self.provider), status=503)
        response = super().get(request)
        state = parse_qs(urlsplit(response["Location"]).query).get("state", [""])[0]
        remember_flow(request, state=state, provider=self.provider)
        request.session["oidc_login_next"] = next_path
        return response


def _unreachable(provider: Provider | None) -> str:
    if provider is None or len(configured_providers()) < 2:
        return UNREACHABLE
    return (
        f"{provider.name} cannot be reached right now; try again in a few minutes"
        " or sign in another way."
    )


class CallbackView(OIDCAuthenticationCallbackView):
    """Finish the code flow; a refused sign-in gets a page that says why, not a bare 400."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        provider = provider_of_flow(request)
        try:
            return super().get(request)
        except AccountLinkRefused as exc:
            return _refused(request, str(exc), status=409)
        except SuspiciousOperation as exc:
            log.warning("OIDC sign-in refused: %s", exc)
            return _refused(request, str(exc))
        except RequestException as exc:
            log.warning("OIDC provider unreachable or refused the code: %s", exc)
            return _refused(request, "The identity provider did not accept the sign-in.")
        except discovery.DiscoveryError as exc:
            log.error("OIDC sign-in cannot finish: %s", exc)
            return _refused(request, _unreachable(provider), status=503)
        finally:
            provider_of_flow(request, forget=True)

    def login_failure(self) -> HttpResponse:
        request = self.request
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return _refused(
                request,
                "Your gpupaas account is deactivated. Ask "
                f"{settings.PLATFORM_CONTACT} if you should have access.",
                status=403,
            )
        error = request.GET.get("error")
        description = request.GET.get("error_description")
        if error or description:
            # The provider's own reason: kept in the log, where whoever is asked can find it.
            log.warning(
                "OIDC provider returned an error on the callback: error=%r error_description=%r",
                error,
                description,
            )
        else:
            log.warning("OIDC sign-in not completed (no code, no started flow or no user).")
        reason = description or error or "The sign-in was not completed."
        fix = core.sign_in_failure_fix(error or "", description or "")
        return _refused(request, f"{reason} {fix}".strip())

    def login_success(self) -> HttpResponse:
        super().login_success()
        request = self.request
        if request.session.session_key is None:
            request.session.save()
        provider = provider_named(getattr(self.user, "oidc_provider_key", None))
        if provider is not None:
            request.session[SESSION_PROVIDER] = provider.key
        user_session_record(
            user=self.user,
            session_key=str(request.session.session_key),
            issuer=provider.issuer if provider is not None else settings.OIDC_OP_ISSUER,
            sid=str(request.session.get("oidc_sid") or ""),
        )
        target = core.safe_next_path(request.session.get("oidc_login_next")) or "/"
        return HttpResponseRedirect(target)


def _refused(request: HttpRequest, reason: str, *, status: int = 400) -> HttpResponse:
    return render(
        request,
        "accounts/sign_in_failed.html",
        {"reason": reason, "oidc_enabled": settings.OIDC_ENABLED},
        status=status,
    )


def _logout_error(status: int, error: str, description: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt  # called by the provider, server to server; the signed token is the proof
@never_cache
@require_POST
def backchannel_logout(request: HttpRequest) -> HttpResponse:
    """OpenID Connect Back-Channel Logout 1.0: the provider posts a signed ``logout_token``
    when a user signs out there (or is signed out); the portal sessions it names end."""
    if not settings.OIDC_ENABLED:
        raise Http404("Single sign-on is not configured.")
    token = request.POST.get("logout_token", "")
    if not token:
        return _logout_error(400, "invalid_request", "logout_token is missing.")
    try:
        logout = verify_logout_token(token)
    except LogoutTokenError as exc:
        log.warning("OIDC back-channel logout refused: %s", exc)
        return _logout_error(400, "invalid_request", str(exc))
    except (discovery.DiscoveryError, RequestException) as exc:
        log.error("OIDC back-channel logout cannot verify the token: %s", exc)
        return _logout_error(503, "temporarily_unavailable", "The signing keys cannot be read.")
    ended = oidc_backchannel_logout(logout=logout, source_ip=client_ip(request))
    log.info(
        "OIDC back-channel logout of subject %r sid %r: %d portal session(s) ended.",
        logout.subject,
        logout.sid,
        ended,
    )
    return HttpResponse(status=200)
