"""Sign-in through the company's identity provider: the two views of the code flow."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView
from requests import RequestException

from apps.accounts import core

log = logging.getLogger(__name__)


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
