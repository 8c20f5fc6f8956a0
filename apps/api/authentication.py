"""DRF authentication and permission for personal API tokens."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions, permissions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from apps.accounts import core
from apps.accounts.models import ApiToken, User
from apps.accounts.oidc import groups_recheck
from apps.accounts.selectors import active_token_by_plaintext
from apps.accounts.services import api_token_touch
from apps.common.http import client_ip
from apps.common.ratelimit import rate_limiter

AUTH_FAILURES = "api-auth-failure"  # the limiter's namespace for failed authentications


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer gpp_…``. Unknown, revoked and expired tokens get 401.

    Each failure counts against the caller's address; past API_AUTH_FAILURE_LIMIT, every
    Bearer request from that address gets 429 before any token is looked up, so guessing
    tokens costs the guesser time rather than the database work.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        address = f"ip:{client_ip(request) or 'unknown'}"
        rate = str(settings.API_AUTH_FAILURE_LIMIT)
        guard = rate_limiter().check(rate, address, namespace=AUTH_FAILURES)
        if not guard.allowed:
            raise exceptions.Throttled(
                wait=guard.retry_after,
                detail="Too many failed authentications from your address.",
            )
        try:
            return self._authenticate(header)
        except exceptions.AuthenticationFailed:
            rate_limiter().hit(rate, address, namespace=AUTH_FAILURES)
            raise

    @staticmethod
    def _authenticate(header: list[bytes]) -> tuple[User, ApiToken]:
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: Bearer <token>.")
        try:
            plaintext = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(
                "The token contains invalid characters."
            ) from None
        token = active_token_by_plaintext(plaintext)
        if token is None:
            raise exceptions.AuthenticationFailed("The token is unknown, revoked or expired.")
        api_token_touch(token=token, now=timezone.now())
        # Memberships from the identity provider are confirmed again once they are old enough;
        # if the provider no longer confirms them they lapse (the token keeps its manual teams).
        groups_recheck(token.user)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class TokenScopePermission(permissions.BasePermission):
    """A read-scoped token may only read; writing needs the write scope. Sessions are unscoped."""

    message = "This token's scopes do not allow this request."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        write = request.method not in permissions.SAFE_METHODS
        if not core.token_allows(token.scopes, write=write):
            self.message = (
                "This token has the read scope only; create a token with the write scope."
                if write
                else "This token has no read scope."
            )
            return False
        return True
