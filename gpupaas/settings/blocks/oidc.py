"""Sign-in: the company's OpenID provider (on when a client id and an issuer are given), the
admin's password sign-in and its lockout, and the development sign-in (off here)."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from apps.accounts.providers import ProvidersError, parse_providers
from gpupaas.settings.env import env_bool, env_int, env_list, env_optional_str, env_str

# On when a client id and an issuer are given. Endpoints left unset are read from the issuer's
# discovery document (<issuer>/.well-known/openid-configuration) when first needed, never at
# start-up, so a provider outage cannot stop the portal from booting.
OIDC_RP_CLIENT_ID = env_optional_str("OIDC_RP_CLIENT_ID") or ""
OIDC_OP_ISSUER = env_optional_str("OIDC_OP_ISSUER") or ""
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID and OIDC_OP_ISSUER)
OIDC_RP_CLIENT_SECRET = env_optional_str("OIDC_RP_CLIENT_SECRET") or ""
OIDC_OP_AUTHORIZATION_ENDPOINT = env_optional_str("OIDC_OP_AUTHORIZATION_ENDPOINT") or ""
OIDC_OP_TOKEN_ENDPOINT = env_optional_str("OIDC_OP_TOKEN_ENDPOINT") or ""
OIDC_OP_USER_ENDPOINT = env_optional_str("OIDC_OP_USER_ENDPOINT") or ""
OIDC_OP_JWKS_ENDPOINT = env_optional_str("OIDC_OP_JWKS_ENDPOINT") or ""
OIDC_OP_LOGOUT_ENDPOINT = env_optional_str("OIDC_OP_LOGOUT_ENDPOINT") or ""
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your company account")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# How the provider writes groups: "path" (full paths, "/ml/vision"), "name" (short names) or
# "auto" (compared exactly as written). Never matched by suffix; see apps/accounts/core.py.
OIDC_GROUPS_FORMAT = env_str("OIDC_GROUPS_FORMAT", "auto")
if OIDC_GROUPS_FORMAT not in ("auto", "path", "name"):
    raise ImproperlyConfigured(
        f"OIDC_GROUPS_FORMAT={OIDC_GROUPS_FORMAT!r} must be auto, path or name."
    )
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", [])
# The other platform roles (apps/accounts/roles.py), from their groups the same way: operators
# (clusters, nodes, maintenance, drains), auditors (read everything, change nothing), billing
# (budgets, prices, chargeback). A person in several holds each.
OIDC_OPERATOR_GROUPS = env_list("OIDC_OPERATOR_GROUPS", [])
OIDC_AUDITOR_GROUPS = env_list("OIDC_AUDITOR_GROUPS", [])
OIDC_BILLING_GROUPS = env_list("OIDC_BILLING_GROUPS", [])
# Memberships and admin status from the provider are confirmed again (refresh token, then
# userinfo) when older than this, at the next request of a session or use of an API token;
# when the provider refuses, they lapse and the user's portal sessions end.
OIDC_GROUPS_MAX_AGE_SECONDS = env_int("OIDC_GROUPS_MAX_AGE_SECONDS", 3600, minimum=60)
# A session (and an API token's use) is checked against the provider with the refresh token at
# least this often, whatever the group interval: a provider that ends sessions without telling
# its clients (Keycloak's realm-wide "Sign out all active sessions" sends no logout token) is
# noticed within this time. Each check is one refresh (and userinfo) per active user.
OIDC_SESSION_CHECK_SECONDS = env_int("OIDC_SESSION_CHECK_SECONDS", 300, minimum=10)
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
OIDC_TOKEN_USE_BASIC_AUTH = env_bool("OIDC_TOKEN_USE_BASIC_AUTH", True)
OIDC_CLOCK_LEEWAY_SECONDS = env_int("OIDC_CLOCK_LEEWAY_SECONDS", 60, minimum=0)
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
if OIDC_ENABLED and not OIDC_RP_CLIENT_SECRET:
    raise ImproperlyConfigured("OIDC is enabled but OIDC_RP_CLIENT_SECRET is unset.")
# A first sign-in whose verified e-mail is that of an account signing in through another
# provider links to it only when that provider allows it (apps/accounts/providers.py); for the
# single provider of the settings above, this.
OIDC_LINK_BY_VERIFIED_EMAIL = env_bool("OIDC_LINK_BY_VERIFIED_EMAIL", False)
# Several identity providers at once: a JSON list, each with its client, groups format, team
# mapping and admin groups (apps/accounts/providers.py), shown as choices on the sign-in page.
# Instead of the single provider of OIDC_RP_CLIENT_ID and OIDC_OP_ISSUER, never beside it.
_providers_raw = env_optional_str("OIDC_PROVIDERS")
try:
    OIDC_PROVIDERS = parse_providers(_providers_raw, env=os.environ) if _providers_raw else ()
except ProvidersError as exc:
    raise ImproperlyConfigured(str(exc)) from exc
if OIDC_PROVIDERS and OIDC_ENABLED:
    raise ImproperlyConfigured(
        "Set either OIDC_PROVIDERS (several providers) or OIDC_RP_CLIENT_ID and OIDC_OP_ISSUER "
        "(one provider), not both."
    )
OIDC_ENABLED = OIDC_ENABLED or bool(OIDC_PROVIDERS)

AUTHENTICATION_BACKENDS = [
    *(["apps.accounts.oidc.GpupaasOIDCBackend"] if OIDC_ENABLED else []),
    "django.contrib.auth.backends.ModelBackend",
]

# Password sign-in to the Django admin. With single sign-on on it is refused and the admin's
# sign-in page sends people to the identity provider, unless ADMIN_PASSWORD_LOGIN=true: a
# break-glass switch for when the provider is down, to be removed once it is back. Where
# password sign-in is allowed, ADMIN_LOGIN_MAX_FAILURES failures for one username or from one
# client address within ADMIN_LOGIN_LOCKOUT_SECONDS lock that username or address out until
# the oldest of them is that old; counted in the rate-limit store.
ADMIN_PASSWORD_LOGIN = env_bool("ADMIN_PASSWORD_LOGIN", False)
ADMIN_LOGIN_MAX_FAILURES = env_int("ADMIN_LOGIN_MAX_FAILURES", 5, minimum=1)
ADMIN_LOGIN_LOCKOUT_SECONDS = env_int("ADMIN_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

# Local sign-in as seeded demo users: development only, never with DEBUG off (see dev.py).
DEV_LOGIN_ENABLED = False
DEV_LOGIN_USERS: list[str] = []
