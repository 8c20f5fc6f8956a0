"""The provider's endpoints and signing keys: from settings when given, otherwise from its
discovery document (OpenID Connect Discovery 1.0), fetched when first needed and cached.

Nothing here runs at start-up: a provider that is down delays sign-in, never the portal's boot.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests
from django.conf import settings

if TYPE_CHECKING:
    from apps.accounts.providers import Provider

DISCOVERY_PATH = "/.well-known/openid-configuration"
# The document changes rarely; an hour keeps a key rotation or a moved endpoint from going
# unnoticed for long while costing one request an hour.
DISCOVERY_TTL_SECONDS = 3600.0
# Signing keys: kept for five minutes, fetched again at once (at most every ten seconds) for a
# token signed with a key id not seen yet, so a rotation is picked up and a flood of forged
# tokens cannot turn into a flood of requests to the provider.
JWKS_TTL_SECONDS = 300.0
JWKS_MIN_REFETCH_SECONDS = 10.0

# Setting → discovery metadata name.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",
}
REQUIRED = ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")


class DiscoveryError(Exception):
    """The provider's configuration could not be read; the message says what and where."""


@dataclass
class _Cached:
    fetched_at: float
    value: Any


_lock = threading.Lock()
_documents: dict[str, _Cached] = {}
_jwks: dict[str, _Cached] = {}


def _get_json(url: str, what: str) -> Any:
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        return response.json()
    except (requests.RequestException, ValueError) as exc:
        raise DiscoveryError(
            f"The identity provider's {what} at {url} cannot be read: {exc}"
        ) from exc


def provider_metadata(issuer: str | None = None) -> dict[str, Any]:
    """The discovery document of ``issuer`` (OIDC_OP_ISSUER by default), cached an hour."""
    issuer = issuer or settings.OIDC_OP_ISSUER
    if not issuer:
        raise DiscoveryError("OIDC_OP_ISSUER is not set.")
    now = time.monotonic()
    with _lock:
        cached = _documents.get(issuer)
        if cached is not None and now - cached.fetched_at < DISCOVERY_TTL_SECONDS:
            return dict(cached.value)
    url = issuer.rstrip("/") + DISCOVERY_PATH
    document = _get_json(url, "discovery document")
    if not isinstance(document, dict):
        raise DiscoveryError(f"The discovery document at {url} is not a JSON object.")
    # Discovery 4.3: the document must be the issuer's own, or anyone serving it could
    # redirect sign-ins and keys elsewhere.
    if document.get("issuer") != issuer:
        raise DiscoveryError(
            f"The discovery document at {url} names the issuer {document.get('issuer')!r}, "
            f"not {issuer!r}; check OIDC_OP_ISSUER (it must match exactly)."
        )
    missing = [name for name in REQUIRED if not document.get(name)]
    if missing:
        raise DiscoveryError(f"The discovery document at {url} lacks {', '.join(missing)}.")
    with _lock:
        _documents[issuer] = _Cached(fetched_at=now, value=document)
    return dict(document)


def endpoint(setting: str, provider: Provider | None = None) -> str:
    """An endpoint of ``provider`` (the OIDC_* settings' one when None): the one configured
    for it when set, else the discovered one ("" for an optional endpoint the provider does
    not publish, such as end session)."""
    if provider is None:
        explicit = str(getattr(settings, setting, "") or "")
        issuer = None
    else:
        explicit = str(provider.endpoints.get(setting) or "")
        issuer = provider.issuer
    if explicit:
        return explicit
    value = provider_metadata(issuer).get(ENDPOINTS[setting])
    if not value and ENDPOINTS[setting] in REQUIRED:
        raise DiscoveryError(f"{setting} is unset and the provider publishes no value for it.")
    return str(value or "")


def signing_keys(*, kid: str | None, provider: Provider | None = None) -> list[dict[str, Any]]:
    """The provider's public keys (JWKS), refreshed early when ``kid`` is not among them."""
    uri = endpoint("OIDC_OP_JWKS_ENDPOINT", provider)
    now = time.monotonic()
    with _lock:
        cached = _jwks.get(uri)
    if cached is not None:
        age = now - cached.fetched_at
        known = kid is None or any(key.get("kid") == kid for key in cached.value)
        if age < JWKS_TTL_SECONDS and (known or age < JWKS_MIN_REFETCH_SECONDS):
            return list(cached.value)
    document = _get_json(uri, "signing keys (JWKS)")
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise DiscoveryError(f"The signing keys at {uri} are not a JWK set.")
    keys = [key for key in keys if isinstance(key, dict)]
    with _lock:
        _jwks[uri] = _Cached(fetched_at=now, value=keys)
    return list(keys)


def forget() -> None:
    """Drop what was cached (tests, and a changed configuration)."""
    with _lock:
        _documents.clear()
        _jwks.clear()
