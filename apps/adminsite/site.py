"""The admin site: Django's, with a guarded password sign-in.

With single sign-on on, platform admins sign in through the identity provider like everyone
else, and the admin's password form is not offered: its sign-in page sends people to the
provider. ADMIN_PASSWORD_LOGIN=true turns the password form back on, as a break-glass switch
for when the provider is down. Wherever the form is on, repeated failures for one username at
one client address, or from one address, lock that out for a while (ADMIN_LOGIN_MAX_FAILURES
within ADMIN_LOGIN_LOCKOUT_SECONDS), counted in the rate-limit store that the API uses; the
right password from another address still signs in. An operator with a shell can always sign
an admin in with a one-time link (``manage.py admin_signin_link USERNAME``).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.admin import AdminSite
from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse

from apps.accounts import core
from apps.accounts.selectors import admin_login_lockout
from apps.accounts.services import (
    admin_login_failure_record,
    admin_login_success_record,
    admin_signin_link_use,
)
from apps.common.http import client_ip

log = logging.getLogger(__name__)


def password_login_allowed() -> bool:
    """Password sign-in to the admin: only without single sign-on, or with the break-glass
    switch. Read at request time, every time."""
    return bool(not settings.OIDC_ENABLED or settings.ADMIN_PASSWORD_LOGIN)


class GpupaasAdminSite(AdminSite):
    def get_urls(self) -> list[Any]:
        own = [path("signin-link/<str:token>/", self.signin_link, name="signin_link")]
        return own + super().get_urls()

    def signin_link(self, request: HttpRequest, token: str) -> HttpResponse:
        """An operator's one-time sign-in link (manage.py admin_signin_link): the break-glass
        path that no lockout and no provider outage can close."""
        user = admin_signin_link_use(token=token)
        address = client_ip(request)
        if user is None:
            log.warning("admin sign-in link refused from %s: forged, expired or used", address)
            return self._refused(
                request,
                "This sign-in link is not valid: it was used already, has expired, or was "
                "changed. Ask an operator for a new one.",
                status=400,
            )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        admin_login_success_record(user=user, source_ip=address, signin_link=True)
        log.warning("admin signed in with an operator's sign-in link: %s from %s", user, address)
        return HttpResponseRedirect(reverse("admin:index", current_app=self.name))

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if not password_login_allowed():
            return self._single_sign_on(request)
        if request.method != "POST":
            return super().login(request, extra_context)
        username = request.POST.get("username", "")
        address = client_ip(request)
        lockout = admin_login_lockout(username=username, source_ip=address)
        if lockout.store_down and settings.API_RATE_LIMIT_FAIL_CLOSED_WRITES:
            return self._refused(
                request,
                "Password sign-in is unavailable for now: the store that counts failed "
                "sign-ins cannot be reached. Try again in a minute.",
                status=503,
            )
        if not lockout.allowed:
            log.warning(
                "admin password sign-in for %r from %s refused: locked out", username, address
            )
            minutes = max(1, -(-lockout.retry_after // 60))
            response = self._refused(
                request,
                "Too many failed sign-ins for this account or from your address. "
                f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                status=429,
            )
            response["Retry-After"] = str(lockout.retry_after)
            return response
        response = super().login(request, extra_context)
        user = request.user
        if isinstance(response, HttpResponseRedirect) and user.is_authenticated and user.is_staff:
            admin_login_success_record(user=user, source_ip=address)
        elif response.status_code == 200:
            # The form came back: wrong password, unknown user, or not a staff account.
            admin_login_failure_record(username=username, source_ip=address)
        return response

    def _single_sign_on(self, request: HttpRequest) -> HttpResponse:
        """Single sign-on is on: people go to the identity provider, passwords are refused."""
        if request.user.is_authenticated and not self.has_permission(request):
            # Sending a signed-in non-admin to the provider would only bring them back here.
            return self._refused(
                request,
                f"You are signed in as {request.user.get_username()}, who is not a platform admin.",
                status=403,
            )
        next_path = core.safe_next_path(request.GET.get(REDIRECT_FIELD_NAME)) or reverse(
            "admin:index", current_app=self.name
        )
        target = f"{reverse('oidc_authentication_init')}?{urlencode({'next': next_path})}"
        if request.method == "POST":
            log.warning(
                "admin password sign-in from %s refused: single sign-on is on",
                client_ip(request),
            )
            return self._refused(
                request,
                "Password sign-in is turned off: platform admins sign in with "
                f"{settings.OIDC_PROVIDER_NAME}.",
                status=403,
                sign_in_url=target,
            )
        return HttpResponseRedirect(target)

    def _refused(
        self, request: HttpRequest, reason: str, *, status: int, sign_in_url: str = ""
    ) -> HttpResponse:
        context = {
            **self.each_context(request),
            "title": "Sign-in refused",
            "reason": reason,
            "sign_in_url": sign_in_url,
            "provider": settings.OIDC_PROVIDER_NAME,
        }
        return render(request, "admin/login_refused.html", context, status=status)
