"""Sign-in through the company's OpenID provider (authorization code flow), and what keeps a
signed-in user in step with the provider afterwards.

mozilla-django-oidc runs the flow and checks the ID token's signature and nonce; this module
adds what it leaves to us: endpoints from discovery, the issuer, audience, azp, nbf and expiry
checks, matching on issuer + subject (never on e-mail alone), the groups → teams mapping at
every sign-in, the re-check of those groups while a session or an API token is in use, and the
verification of back-channel logout tokens.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.utils.encoding import force_bytes, smart_str
from josepy.errors import Error as JoseError
from josepy.jws import JWS, Header
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.accounts import core, discovery
from apps.accounts.models import OidcIdentity, User
from apps.accounts.providers import Provider, provider_for_issuer, provider_for_key, single_provider
from apps.accounts.roles import Role
from apps.accounts.selectors import forget_role_copy
from apps.accounts.services import (
    LinkPolicy,
    LinkRefused,
    user_groups_confirm,
    user_groups_lapse,
    user_sessions_end,
    user_sync_oidc,
)
from apps.common.http import client_ip

log = logging.getLogger(__name__)

# After the provider could not be reached for a re-check, wait this long before asking again.
RECHECK_RETRY_SECONDS = 60
# The session's record of which provider each started sign-in (by its state) goes to, and which
# provider the session signed in with (its re-checks and sign-out use that one).
SESSION_STATES = "oidc_provider_states"
SESSION_PROVIDER = "oidc_provider"
MAX_PENDING_STATES = 20


def configured_providers() -> tuple[Provider, ...]:
    """The identity providers: OIDC_PROVIDERS, or the one of the OIDC_* settings."""
    several: tuple[Provider, ...] = tuple(getattr(settings, "OIDC_PROVIDERS", ()))
    if several:
        return several
    single = single_provider(settings)
    return (single,) if single is not None else ()


def provider_named(key: str | None) -> Provider | None:
    """The provider of ``key``; with no key, the only one."""
    return provider_for_key(configured_providers(), key)


def provider_of_issuer(issuer: str) -> Provider | None:
    return provider_for_issuer(configured_providers(), issuer)


def issuer_names() -> dict[str, str]:
    """Issuer → the name people know the provider by."""
    return {p.issuer: p.name for p in configured_providers()}


def remember_flow(request: Any, *, state: str, provider: Provider) -> None:
    """Note which provider a started sign-in (its ``state``) goes to."""
    pending = dict(request.session.get(SESSION_STATES) or {})
    pending[state] = provider.key
    request.session[SESSION_STATES] = dict(list(pending.items())[-MAX_PENDING_STATES:])


def provider_of_flow(request: Any, *, forget: bool = False) -> Provider | None:
    """The provider the sign-in coming back to the callback (by its ``state``) was started
    with; None when this session started no such sign-in."""
    state = str(request.GET.get("state") or "")
    pending = dict(request.session.get(SESSION_STATES) or {})
    key = pending.pop(state, None) if forget else pending.get(state)
    if forget:
        request.session[SESSION_STATES] = pending
    return provider_named(key) if key else None


def provider_of_session(request: Any) -> Provider | None:
    """The provider the session signed in with (the only one when it did not say)."""
    key = request.session.get(SESSION_PROVIDER)
    return provider_named(str(key)) if key else provider_named(None)


class AccountLinkRefused(Exception):
    """A first sign-in whose verified e-mail belongs to an account of another provider, which
    this provider may not link to; the message is for the person (apps.accounts.providers)."""


class GpupaasOIDCBackend(OIDCAuthenticationBackend):
    """The code flow's backend. Endpoints are resolved when used (explicit settings first, then
    discovery), so building the backend — which Django does for every session request — never
    talks to the provider."""

    def __init__(self, *args: Any, provider: Provider | None = None, **kwargs: Any) -> None:
        # Not OIDCAuthenticationBackend.__init__: it reads every endpoint eagerly.
        self.UserModel = get_user_model()
        self.OIDC_RP_IDP_SIGN_KEY = getattr(settings, "OIDC_RP_IDP_SIGN_KEY", None)
        self.token_response: dict[str, Any] = {}
        # Which provider this sign-in is at: the callback's flow says (see authenticate).
        self._provider = provider

    @property
    def provider(self) -> Provider:
        chosen = self._provider or provider_named(None)
        if chosen is None:
            raise SuspiciousOperation("No identity provider is configured for this sign-in.")
        return chosen

    # The names mozilla-django-oidc reads, from this sign-in's provider.
    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return self.provider.client_id

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return self.provider.client_secret

    @property
    def OIDC_RP_SIGN_ALGO(self) -> str:
        return self.provider.sign_algo

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return discovery.endpoint("OIDC_OP_TOKEN_ENDPOINT", self.provider)

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return discovery.endpoint("OIDC_OP_USER_ENDPOINT", self.provider)

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return discovery.endpoint("OIDC_OP_JWKS_ENDPOINT", self.provider)

    def authenticate(self, request: Any, **kwargs: Any) -> User | None:
        """The code flow's end, at the provider the flow was started with (its state says
        which); a callback for a flow this session never started signs nobody in."""
        if request is not None and request.GET.get("state"):
            flow = provider_of_flow(request)
            if flow is None:
                return None
            self._provider = flow
        user: User | None = super().authenticate(request, **kwargs)
        return user

    def check_algorithm(self, token: str | bytes) -> None:
        """Refuse, before any parsing library sees it, a token whose header does not name the
        algorithm the provider signs with (``alg: none``, an HMAC with the public key …)."""
        try:
            encoded = force_bytes(token).split(b".")[0]
            header = json.loads(base64.urlsafe_b64decode(encoded + b"=" * (-len(encoded) % 4)))
        except (ValueError, TypeError, binascii.Error) as exc:
            raise SuspiciousOperation("The token is not a signed JWT.") from exc
        alg = header.get("alg") if isinstance(header, dict) else None
        if alg != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"The token is not signed with {self.OIDC_RP_SIGN_ALGO} (its header says "
                f"alg={str(alg)[:20]!r}); unsigned tokens are refused."
            )

    def retrieve_matching_jwk(self, token: bytes) -> dict[str, Any]:
        """The provider key that signed ``token``, from the cached JWKS (see discovery)."""
        self.check_algorithm(token)
        try:
            header = Header.json_loads(JWS.from_compact(force_bytes(token)).signature.protected)
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise SuspiciousOperation("The token is not a signed JWT.") from exc
        kid = smart_str(header.kid) if header.kid else None
        alg = smart_str(header.alg.name) if header.alg else None
        for key in discovery.signing_keys(kid=kid, provider=self.provider):
            if kid is not None and key.get("kid") != kid:
                continue
            if "alg" in key and key["alg"] != alg:
                continue
            return key
        raise SuspiciousOperation("No key of the provider matches the token's signature.")

    def signed_payload(self, token: str | bytes) -> dict[str, Any]:
        """The payload of a JWT signed by the provider (signature and algorithm checked, claims
        not yet). Raises SuspiciousOperation for anything else."""
        raw = force_bytes(token)
        self.check_algorithm(raw)
        try:
            key = self.OIDC_RP_IDP_SIGN_KEY or self.retrieve_matching_jwk(raw)
            payload = json.loads(self.get_payload_data(raw, key).decode("utf-8"))
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise SuspiciousOperation("The token is not a valid signed JWT.") from exc
        if not isinstance(payload, dict):
            raise SuspiciousOperation("The token's payload is not a JSON object.")
        return payload

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        response: dict[str, Any] = super().get_token(payload)
        self.token_response = response  # its refresh token serves the group re-checks
        return response

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        self.check_algorithm(token)
        try:
            payload: dict[str, Any] = super().verify_token(token, **kwargs)
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise SuspiciousOperation("The ID token is not a valid signed JWT.") from exc
        try:
            core.check_id_token_claims(
                payload,
                issuer=self.provider.issuer,
                client_id=self.provider.client_id,
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
        request = getattr(self, "request", None)
        if request is not None:
            # The provider's session id, so that its back-channel logout can end this session
            # (recorded against the session key once the callback has signed the user in).
            request.session["oidc_sid"] = str(payload.get("sid") or "")
            # The ID token, as the hint that lets the provider end its session at sign-out
            # and send the user back here (RP-Initiated Logout 1.0).
            request.session["oidc_id_token"] = str(id_token)
        provider = self.provider
        try:
            user = user_sync_oidc(
                issuer=str(payload["iss"]),
                subject=str(payload["sub"]),
                claims=claims,
                groups_claim=provider.groups_claim,
                groups_format=provider.groups_format,
                admin_groups=provider.admin_groups,
                role_groups=provider.role_groups_lists(),
                teams=provider.teams,
                link=LinkPolicy(
                    provider=provider,
                    issuer_names=issuer_names(),
                    contact=settings.PLATFORM_CONTACT,
                ),
                refresh_token=str(self.token_response.get("refresh_token") or ""),
                refresh_by=_refresh_by(self.token_response),
                source_ip=client_ip(request) if request is not None else None,
            )
        except LinkRefused as exc:
            raise AccountLinkRefused(str(exc)) from exc
        user.oidc_provider_key = provider.key  # type: ignore[attr-defined]
        return user

    def get_user(self, user_id: Any) -> User | None:
        """The user of a session, or None (the session no longer signs anyone in) when an
        admin deactivated them or the provider no longer confirms their groups."""
        user: User | None = super().get_user(user_id)
        if user is None:
            return None
        if not user.is_active:
            # Ends the sessions for good, so that a later re-activation does not revive them.
            user_sessions_end(user=user, reason="deactivated")
            return None
        if not groups_recheck(user):
            return None
        return user


def role_groups_setting() -> dict[str, list[str]]:
    """The provider's groups of each platform role beyond admin (OIDC_OPERATOR_GROUPS,
    OIDC_AUDITOR_GROUPS, OIDC_BILLING_GROUPS), read at each sign-in and re-check."""
    return {
        Role.OPERATOR.value: list(settings.OIDC_OPERATOR_GROUPS),
        Role.AUDITOR.value: list(settings.OIDC_AUDITOR_GROUPS),
        Role.BILLING.value: list(settings.OIDC_BILLING_GROUPS),
    }


def logout_endpoint(provider: Provider | None = None) -> str:
    """Where to end the provider's session after signing out here; "" when unknown."""
    try:
        return discovery.endpoint("OIDC_OP_LOGOUT_ENDPOINT", provider)
    except discovery.DiscoveryError as exc:
        log.warning("No end-session endpoint to offer after sign-out: %s", exc)
        return ""


def logout_url(*, id_token: str, return_to: str, provider: Provider | None = None) -> str:
    """The provider's end-session URL with the ID token of the sign-in as ``id_token_hint``
    and ``return_to`` (one of the client's post-logout redirect URIs at the provider) to come
    back to; "" when the provider has no end-session endpoint. ``provider``: the one the
    session signed in with (the only one when None)."""
    provider = provider or provider_named(None)
    if provider is None:
        return ""
    return core.end_session_url(
        logout_endpoint(provider),
        id_token_hint=id_token,
        post_logout_redirect_uri=return_to,
        client_id=provider.client_id,
    )


def _refresh_by(tokens: dict[str, Any], *, now: float | None = None) -> datetime | None:
    due = core.refresh_due_at(tokens, now=time.time() if now is None else now)
    return None if due is None else datetime.fromtimestamp(due, tz=UTC)


# --- group re-check ---------------------------------------------------------------------------


class ProviderRefused(Exception):
    """The provider answered, and the answer is no (revoked grant, disabled user, …)."""

    def __init__(self, message: str, *, error: str = "", description: str = "") -> None:
        super().__init__(message)
        self.error = error
        self.description = description

    @property
    def user_gone(self) -> bool:
        """The provider said the user is disabled or deleted there."""
        return core.refusal_means_user_gone(self.error, self.description)


def _error_fields(response: requests.Response) -> tuple[str, str]:
    try:
        body = response.json()
    except ValueError:
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    return str(body.get("error") or ""), str(body.get("error_description") or "")


class ProviderUnavailable(Exception):
    """The provider could not be asked (network error, timeout, server error)."""


def _client_auth(
    data: dict[str, str], provider: Provider
) -> tuple[dict[str, str], tuple[str, str] | None]:
    if settings.OIDC_TOKEN_USE_BASIC_AUTH:
        return data, (provider.client_id, provider.client_secret)
    client = {"client_id": provider.client_id}
    return data | client | {"client_secret": provider.client_secret}, None


def _provider_error(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    if not isinstance(body, dict):
        return f"HTTP {response.status_code}"
    detail = " ".join(str(body.get(k, "")) for k in ("error", "error_description")).strip()
    return f"HTTP {response.status_code} {detail}".strip()


def provider_current_claims(
    *, refresh_token: str, subject: str, provider: Provider | None = None
) -> tuple[dict[str, Any], str, datetime | None]:
    """The user's claims as ``provider`` (the only one when None) states them now, the
    refresh token to keep and when to use it again: a refresh-token grant, then userinfo with
    the new access token (plus the new ID token's claims, verified, when the provider sends
    one)."""
    provider = provider or provider_named(None)
    if provider is None:
        raise ProviderUnavailable("no identity provider is configured")
    try:
        token_endpoint = discovery.endpoint("OIDC_OP_TOKEN_ENDPOINT", provider)
        userinfo_endpoint = discovery.endpoint("OIDC_OP_USER_ENDPOINT", provider)
    except discovery.DiscoveryError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    data, auth = _client_auth(
        {"grant_type": "refresh_token", "refresh_token": refresh_token}, provider
    )
    try:
        response = requests.post(
            token_endpoint, data=data, auth=auth, timeout=settings.OIDC_TIMEOUT
        )
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"token endpoint: {exc}") from exc
    if response.status_code >= 500:
        raise ProviderUnavailable(f"token endpoint: {_provider_error(response)}")
    if response.status_code != 200:
        error, description = _error_fields(response)
        raise ProviderRefused(
            f"refresh refused: {_provider_error(response)}", error=error, description=description
        )
    tokens = response.json()
    access_token = tokens.get("access_token") if isinstance(tokens, dict) else None
    if not access_token:
        raise ProviderRefused("the token endpoint returned no access token")
    try:
        info = requests.get(
            userinfo_endpoint,
            headers={"Authorization": f"Bearer {access_token}"},
            timeout=settings.OIDC_TIMEOUT,
        )
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"userinfo: {exc}") from exc
    if info.status_code >= 500:
        raise ProviderUnavailable(f"userinfo: {_provider_error(info)}")
    if info.status_code != 200:
        raise ProviderRefused(f"userinfo refused: {_provider_error(info)}")
    userinfo = info.json()
    if not isinstance(userinfo, dict) or userinfo.get("sub") != subject:
        raise ProviderRefused("userinfo names another subject")
    claims: dict[str, Any] = {}
    if tokens.get("id_token"):
        # OIDC Core 12.2: checked like the first one, except the nonce (the provider repeats
        # the sign-in's nonce or leaves it out; there is no new one to compare with).
        try:
            claims = GpupaasOIDCBackend(provider=provider).signed_payload(tokens["id_token"])
            core.check_id_token_claims(
                claims,
                issuer=provider.issuer,
                client_id=provider.client_id,
                now=time.time(),
                leeway=settings.OIDC_CLOCK_LEEWAY_SECONDS,
            )
        except (SuspiciousOperation, core.ClaimsError) as exc:
            raise ProviderRefused(f"the refreshed ID token is not acceptable: {exc}") from exc
        except (requests.RequestException, discovery.DiscoveryError) as exc:
            raise ProviderUnavailable(f"signing keys: {exc}") from exc
        if claims.get("sub") != subject:
            raise ProviderRefused("the refreshed ID token names another subject")
    kept = str(tokens.get("refresh_token") or refresh_token)
    return {**claims, **userinfo}, kept, _refresh_by({**tokens, "refresh_token": kept})


def _retry_key(user_id: int) -> str:
    return f"oidc-groups-recheck-retry:{user_id}"


def groups_recheck(user: User, *, now: float | None = None) -> bool:
    """Confirm the user's memberships and admin status from the provider when they are older
    than OIDC_GROUPS_MAX_AGE_SECONDS or OIDC_SESSION_CHECK_SECONDS (whichever is shorter: the
    check also tells whether the provider still has the user's session, which it may end
    without telling anyone), or sooner when the refresh token is half-way through the
    life the provider gave it (so that a provider whose sessions end when idle for less than
    the interval, as Keycloak's do, keeps the session of a user who is active). A refusal
    that says the user is disabled or gone there revokes their API tokens too. Returns False
    when they lapsed (the provider refused, or could not be reached for twice the interval, or
    no refresh token was given at sign-in): the provider's memberships and admin rights are
    gone and the user's portal sessions ended.
    ``user`` is updated in place either way."""
    if not settings.OIDC_ENABLED:
        return True
    moment = time.time() if now is None else now
    max_age = settings.OIDC_GROUPS_MAX_AGE_SECONDS

    def stamp(u: User) -> float | None:
        return u.idp_checked_at.timestamp() if u.idp_checked_at else None

    # The session itself is checked more often than the groups need (OIDC_SESSION_CHECK_SECONDS):
    # a provider may end it without a logout token, and only a refresh tells.
    every = min(max_age, settings.OIDC_SESSION_CHECK_SECONDS)

    def due(u: User) -> bool:
        refresh_by = u.idp_refresh_by.timestamp() if u.idp_refresh_by else None
        return core.groups_recheck_due(
            checked_at=stamp(u), now=moment, max_age=every
        ) or core.refresh_due(due_at=refresh_by, now=moment)

    if not due(user):
        return True
    lapse_due = core.groups_lapse_due(checked_at=stamp(user), now=moment, max_age=max_age)
    if cache.get(_retry_key(user.pk)) and not lapse_due:
        return True  # the provider was unreachable a moment ago; keep what was confirmed
    with transaction.atomic():
        # The identity row is the lock: two requests of one user must not both spend the refresh
        # token (a provider that rotates refresh tokens revokes the grant when one is reused).
        identity = (
            OidcIdentity.objects.select_for_update()
            .filter(user=user)
            .order_by("-last_login_at")
            .first()
        )
        stored = (
            User.objects.filter(pk=user.pk).values_list("idp_checked_at", "idp_refresh_by").first()
        )
        user.idp_checked_at, user.idp_refresh_by = stored or (None, None)
        user.__dict__.pop("_team_ids", None)  # memberships may have changed meanwhile
        if user.idp_checked_at is None:
            return False  # another request found them lapsed
        if not due(user):
            user.refresh_from_db(fields=["is_staff", "is_superuser"])
            forget_role_copy(user)
            return True  # another request confirmed them meanwhile
        user_gone = False
        provider = provider_of_issuer(identity.issuer) if identity is not None else None
        if identity is None or not identity.refresh_token:
            reason = "no refresh token from the provider to ask it again"
        elif provider is None:
            reason = f"the identity provider {identity.issuer} is no longer configured"
        else:
            try:
                claims, refresh_token, refresh_by = provider_current_claims(
                    refresh_token=identity.refresh_token,
                    subject=identity.subject,
                    provider=provider,
                )
            except ProviderRefused as exc:
                reason = f"the provider refused: {exc}"
                user_gone = exc.user_gone
            except ProviderUnavailable as exc:
                cache.set(_retry_key(user.pk), 1, RECHECK_RETRY_SECONDS)
                if not lapse_due:
                    log.warning(
                        "Groups of %s not re-checked, the provider is unreachable (next try in "
                        "%ss): %s",
                        user.get_username(),
                        RECHECK_RETRY_SECONDS,
                        exc,
                    )
                    return True
                reason = f"the provider has been unreachable for twice the interval: {exc}"
            else:
                user_groups_confirm(
                    user=user,
                    identity=identity,
                    claims=claims,
                    groups_claim=provider.groups_claim,
                    groups_format=provider.groups_format,
                    admin_groups=provider.admin_groups,
                    role_groups=provider.role_groups_lists(),
                    teams=provider.teams,
                    refresh_token=refresh_token,
                    refresh_by=refresh_by,
                )
                return True
        user_groups_lapse(user=user, reason=reason, user_gone=user_gone)
        return False


# --- back-channel logout ----------------------------------------------------------------------


class LogoutTokenError(Exception):
    """A logout token that must not be acted on; the message says why."""


def _claimed_issuer(token: str) -> str:
    """The ``iss`` a JWT claims, unverified: only to choose whose keys verify it."""
    try:
        encoded = force_bytes(token).split(b".")[1]
        payload = json.loads(base64.urlsafe_b64decode(encoded + b"=" * (-len(encoded) % 4)))
    except (ValueError, TypeError, IndexError, binascii.Error):
        return ""
    return str(payload.get("iss") or "") if isinstance(payload, dict) else ""


def verify_logout_token(token: str) -> core.LogoutRequest:
    """Check a back-channel logout token: the provider it names must be one configured here;
    then that provider's signature (its JWKS), the claims (OIDC Back-Channel Logout 1.0, 2.6)
    and that it was not seen before (``jti``)."""
    providers = configured_providers()
    provider = provider_for_issuer(providers, _claimed_issuer(token))
    if provider is None and len(providers) == 1:
        provider = providers[0]  # its claims check names the wrong issuer
    if provider is None:
        raise LogoutTokenError("The token's issuer is not an identity provider of this portal.")
    try:
        payload = GpupaasOIDCBackend(provider=provider).signed_payload(token)
    except SuspiciousOperation as exc:
        raise LogoutTokenError(str(exc)) from exc
    try:
        logout = core.check_logout_token_claims(
            payload,
            issuer=provider.issuer,
            client_id=provider.client_id,
            now=time.time(),
            leeway=settings.OIDC_CLOCK_LEEWAY_SECONDS,
        )
    except core.ClaimsError as exc:
        raise LogoutTokenError(str(exc)) from exc
    # A replayed token: refused (per process; a replay could only end sessions already ended).
    if not cache.add(f"oidc-logout-jti:{logout.issuer}:{logout.jti}", 1, timeout=3600):
        raise LogoutTokenError("This logout token was already used.")
    return logout
