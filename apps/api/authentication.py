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
from apps.accounts.selectors import active_token_by_plaintext, token_revoked
from apps.accounts.services import api_token_touch
from apps.common.http import client_ip
from apps.common.ratelimit import rate_limiter

AUTH_FAILURES = "api-auth-failure"  # the limiter's namespace for failed authentications


class ApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer gpp_…``. Unknown, revoked and expired tokens get 401.

    Failures are counted in two buckets, API_AUTH_FAILURE_LIMIT each: per address (whoever
    fails from it) and per token and address (the token's public ``gpp_<lookup>`` part). Past
    the token's limit, that token is refused from that address with 429 before it is looked
    up: guessing one token's secret costs the guesser time. Past the address's limit, a token
    is still looked up, and a valid one works (behind a proxy, or with TRUSTED_PROXY_COUNT=0,
    one address may be everyone's), while each failure is answered with 429.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User, ApiToken] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        address = f"ip:{client_ip(request) or 'unknown'}"
        token_key = f"token:{_lookup(header)}|{address}"
        rate = str(settings.API_AUTH_FAILURE_LIMIT)
        limiter = rate_limiter()
        guard = limiter.check(rate, token_key, namespace=AUTH_FAILURES)
        if not guard.allowed:
            raise exceptions.Throttled(
                wait=guard.retry_after,
                detail="Too many failed authentications with this token from your address.",
            )
        try:
            return self._authenticate(header)
        except exceptions.AuthenticationFailed:
            limiter.hit(rate, token_key, namespace=AUTH_FAILURES)
            if not limiter.hit(rate, address, namespace=AUTH_FAILURES).allowed:
                wait = limiter.check(rate, address, namespace=AUTH_FAILURES).retry_after
                raise exceptions.Throttled(
                    wait=wait or None, detail="Too many failed authentications from your address."
                ) from None
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
        # A provider that says the user is disabled or gone has their tokens revoked by that
        # re-check: this very request is refused, not only the next one.
        if not groups_recheck(token.user) and token_revoked(token):
            raise exceptions.AuthenticationFailed(
                "The token was revoked: its user is disabled or gone at the identity provider."
            )
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


def _lookup(header: list[bytes]) -> str:
    """The token's public lookup part (``gpp_<lookup>_…``), "" when the header has none."""
    if len(header) != 2:
        return ""
    parts = header[1].split(b"_")
    if len(parts) < 3 or not parts[1].isalnum() or len(parts[1]) > 16:
        return ""
    return parts[1].decode("ascii").lower()


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
