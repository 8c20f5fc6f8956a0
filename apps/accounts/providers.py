"""The identity providers people sign in with: one from the OIDC_* settings, or several from
OIDC_PROVIDERS, each with its own client, groups format, team mapping and admin groups.

Pure: parsing and choosing work on plain data (the settings module passes what it read from
the environment); nothing here talks to a provider or the database.

``OIDC_PROVIDERS`` is a JSON list; each entry::

    {"key": "corp",                       # in URLs and sessions: a-z, 0-9 and -
     "name": "Corp SSO",                  # the sign-in page's "Sign in with Corp SSO"
     "issuer": "https://sso.example.com/realms/corp",
     "client_id": "gpupaas",
     "client_secret_env": "CORP_OIDC_SECRET",   # or "client_secret": "…"
     "scopes": "openid email profile groups",   # optional, as OIDC_RP_SCOPES
     "groups_claim": "groups",            # optional, as OIDC_GROUPS_CLAIM
     "groups_format": "path",             # optional, auto | path | name
     "admin_groups": ["/gpupaas-admins"], # optional, as OIDC_ADMIN_GROUPS
     "operator_groups": [], "auditor_groups": [], "billing_groups": [],
     "teams": {"vision": {"member": "<group>", "lead": "<group>"}},
                                          # optional: this provider's groups per team slug;
                                          # without it, the teams' own IdP group fields
     "link_by_verified_email": false,     # optional: see below
     "sign_algo": "RS256",                # optional
     "endpoints": {"token": "…"}}         # optional: authorization, token, userinfo, jwks,
                                          # end_session; otherwise from discovery

A person is an identity (issuer + subject) at one provider. A first sign-in at one provider
whose verified e-mail is that of someone who already signs in through another is refused
(:func:`link_decision`), so one person is never silently two accounts nor silently one: only
a provider an admin marked ``link_by_verified_email`` links such a sign-in to the existing
account, and only when the provider says the e-mail is verified.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GROUPS_FORMATS = ("auto", "path", "name")
KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
ENDPOINT_NAMES = {
    "authorization": "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "token": "OIDC_OP_TOKEN_ENDPOINT",
    "userinfo": "OIDC_OP_USER_ENDPOINT",
    "jwks": "OIDC_OP_JWKS_ENDPOINT",
    "end_session": "OIDC_OP_LOGOUT_ENDPOINT",
}
ROLE_KEYS = {
    "operator": "operator_groups",
    "auditor": "auditor_groups",
    "billing": "billing_groups",
}
DEFAULT_KEY = "default"
ALLOWED = {
    "key",
    "name",
    "issuer",
    "client_id",
    "client_secret",
    "client_secret_env",
    "scopes",
    "groups_claim",
    "groups_format",
    "admin_groups",
    "operator_groups",
    "auditor_groups",
    "billing_groups",
    "teams",
    "link_by_verified_email",
    "sign_algo",
    "endpoints",
}


class ProvidersError(ValueError):
    """OIDC_PROVIDERS cannot be used; the message names the entry and the field."""


@dataclass(frozen=True)
class TeamMapping:
    """One team's groups at one provider."""

    member: str = ""
    lead: str = ""


@dataclass(frozen=True)
class Provider:
    key: str
    name: str
    issuer: str
    client_id: str
    client_secret: str
    scopes: str = "openid email profile groups"
    groups_claim: str = "groups"
    groups_format: str = "auto"
    admin_groups: tuple[str, ...] = ()
    # Role value (operator, auditor, billing) → the provider's groups for it.
    role_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Team slug → its groups here; None: the teams' own idp_group / idp_lead_group fields.
    teams: Mapping[str, TeamMapping] | None = None
    link_by_verified_email: bool = False
    sign_algo: str = "RS256"
    # Setting name (OIDC_OP_TOKEN_ENDPOINT …) → URL, where not discovered.
    endpoints: Mapping[str, str] = field(default_factory=dict)

    def role_groups_lists(self) -> dict[str, list[str]]:
        return {role: list(groups) for role, groups in self.role_groups.items()}


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(item.strip() for item in value if item.strip())
    raise ProvidersError(f"{where} must be a list of group names.")


def _text(entry: Mapping[str, Any], name: str, where: str, *, default: str | None = None) -> str:
    value = entry.get(name, default)
    if value is None:
        raise ProvidersError(f"{where} has no {name}.")
    if not isinstance(value, str) or not value.strip():
        raise ProvidersError(f"{where}: {name} must be a non-empty string.")
    return value.strip()


def _teams(value: Any, where: str) -> dict[str, TeamMapping] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProvidersError(f'{where}: teams must map team slugs to {{"member": …, "lead": …}}.')
    mapping: dict[str, TeamMapping] = {}
    for slug, groups in value.items():
        if isinstance(groups, str):
            groups = {"member": groups}
        if not isinstance(groups, dict) or not set(groups) <= {"member", "lead"}:
            raise ProvidersError(
                f'{where}: teams.{slug} must be {{"member": "<group>", "lead": "<group>"}}.'
            )
        member, lead = groups.get("member") or "", groups.get("lead") or ""
        if not isinstance(member, str) or not isinstance(lead, str) or not (member or lead):
            raise ProvidersError(f"{where}: teams.{slug} names no group.")
        mapping[str(slug)] = TeamMapping(member=member.strip(), lead=lead.strip())
    return mapping


def parse_providers(raw: str | Sequence[Any], *, env: Mapping[str, str]) -> tuple[Provider, ...]:
    """The providers of an OIDC_PROVIDERS value (JSON text or the parsed list); ``env`` gives
    the secrets named by ``client_secret_env``. Raises :class:`ProvidersError` for anything
    that cannot be used, naming the entry and the field."""
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ProvidersError(f"OIDC_PROVIDERS is not valid JSON: {exc}") from exc
    else:
        data = list(raw)
    if not isinstance(data, list) or not data:
        raise ProvidersError("OIDC_PROVIDERS must be a non-empty JSON list of providers.")
    providers: list[Provider] = []
    for index, entry in enumerate(data):
        where = f"OIDC_PROVIDERS[{index}]"
        if not isinstance(entry, dict):
            raise ProvidersError(f"{where} must be an object.")
        unknown = sorted(set(entry) - ALLOWED)
        if unknown:
            raise ProvidersError(f"{where}: unknown field(s) {', '.join(unknown)}.")
        key = _text(entry, "key", where)
        where = f"OIDC_PROVIDERS[{index}] ({key})"
        if not KEY_PATTERN.match(key):
            raise ProvidersError(f"{where}: key must be 1-32 of a-z, 0-9 and -.")
        issuer = _text(entry, "issuer", where)
        if not issuer.startswith(("https://", "http://")):
            raise ProvidersError(f"{where}: issuer must be an http(s) URL.")
        if "client_secret_env" in entry:
            name = _text(entry, "client_secret_env", where)
            secret = env.get(name, "")
            if not secret:
                raise ProvidersError(f"{where}: the environment variable {name} is unset.")
        else:
            secret = _text(entry, "client_secret", where)
        groups_format = _text(entry, "groups_format", where, default="auto")
        if groups_format not in GROUPS_FORMATS:
            raise ProvidersError(f"{where}: groups_format must be auto, path or name.")
        endpoints_raw = entry.get("endpoints") or {}
        if not isinstance(endpoints_raw, dict) or not set(endpoints_raw) <= set(ENDPOINT_NAMES):
            raise ProvidersError(
                f"{where}: endpoints may name only {', '.join(sorted(ENDPOINT_NAMES))}."
            )
        link = entry.get("link_by_verified_email", False)
        if not isinstance(link, bool):
            raise ProvidersError(f"{where}: link_by_verified_email must be true or false.")
        providers.append(
            Provider(
                key=key,
                name=_text(entry, "name", where, default=key),
                issuer=issuer,
                client_id=_text(entry, "client_id", where),
                client_secret=secret,
                scopes=_text(entry, "scopes", where, default="openid email profile groups"),
                groups_claim=_text(entry, "groups_claim", where, default="groups"),
                groups_format=groups_format,
                admin_groups=_strings(entry.get("admin_groups"), f"{where}: admin_groups"),
                role_groups={
                    role: _strings(entry.get(name), f"{where}: {name}")
                    for role, name in ROLE_KEYS.items()
                },
                teams=_teams(entry.get("teams"), where),
                link_by_verified_email=link,
                sign_algo=_text(entry, "sign_algo", where, default="RS256"),
                endpoints={ENDPOINT_NAMES[k]: str(v) for k, v in endpoints_raw.items() if v},
            )
        )
    for attribute in ("key", "issuer"):
        seen: set[str] = set()
        for provider in providers:
            value = getattr(provider, attribute)
            if value in seen:
                raise ProvidersError(f"OIDC_PROVIDERS: two providers have the {attribute} {value}.")
            seen.add(value)
    return tuple(providers)


def single_provider(settings: Any) -> Provider | None:
    """The one provider of the OIDC_* settings (today's configuration), or None when they do
    not name one."""
    if not (settings.OIDC_RP_CLIENT_ID and settings.OIDC_OP_ISSUER):
        return None
    return Provider(
        key=DEFAULT_KEY,
        name=settings.OIDC_PROVIDER_NAME,
        issuer=settings.OIDC_OP_ISSUER,
        client_id=settings.OIDC_RP_CLIENT_ID,
        client_secret=settings.OIDC_RP_CLIENT_SECRET,
        scopes=settings.OIDC_RP_SCOPES,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        groups_format=settings.OIDC_GROUPS_FORMAT,
        admin_groups=tuple(settings.OIDC_ADMIN_GROUPS),
        role_groups={
            "operator": tuple(settings.OIDC_OPERATOR_GROUPS),
            "auditor": tuple(settings.OIDC_AUDITOR_GROUPS),
            "billing": tuple(settings.OIDC_BILLING_GROUPS),
        },
        teams=None,
        link_by_verified_email=bool(getattr(settings, "OIDC_LINK_BY_VERIFIED_EMAIL", False)),
        sign_algo=settings.OIDC_RP_SIGN_ALGO,
        endpoints={
            name: str(getattr(settings, name, "") or "")
            for name in ENDPOINT_NAMES.values()
            if getattr(settings, name, "")
        },
    )


# --- account linking --------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkDecision:
    """What a first sign-in at a provider does: ``new`` account, ``link`` to ``user_id``, or
    ``refuse`` with ``reason`` (a sentence for the person, naming the fix)."""

    action: str
    user_id: int | None = None
    reason: str = ""


@dataclass(frozen=True)
class Holder:
    """An account that already signs in through another provider with the same e-mail."""

    user_id: int
    provider_names: tuple[str, ...]


def email_verified(claims: Mapping[str, object]) -> bool:
    """The provider says the e-mail is verified (OIDC Core 5.1: ``email_verified`` true; some
    providers send the string "true")."""
    value = claims.get("email_verified")
    return value is True or (isinstance(value, str) and value.lower() == "true")


def link_decision(
    *,
    provider: Provider,
    claims: Mapping[str, object],
    holders: Sequence[Holder],
    contact: str,
) -> LinkDecision:
    """A first sign-in (no account has this issuer + subject yet) whose e-mail is held by
    ``holders`` (accounts with an identity at another provider and that e-mail).

    - nobody holds it, or the e-mail is not verified: a new account (an unverified address
      proves nothing, so it never links and never blocks);
    - one account holds it and this provider links by verified e-mail: linked to it;
    - otherwise refused, saying who to ask and what they can change."""
    email = str(claims.get("email") or "").strip()
    if not holders or not email or not email_verified(claims):
        return LinkDecision("new")
    others = sorted({name for holder in holders for name in holder.provider_names})
    through = " and ".join(others) or "another identity provider"
    if provider.link_by_verified_email and len(holders) == 1:
        return LinkDecision("link", user_id=holders[0].user_id)
    if len(holders) > 1:
        return LinkDecision(
            "refuse",
            reason=(
                f"More than one gpupaas account signs in with {email} (through {through}), so "
                f"this sign-in through {provider.name} cannot be linked to one of them. Ask "
                f"{contact} to merge them."
            ),
        )
    return LinkDecision(
        "refuse",
        reason=(
            f"A gpupaas account already signs in with {email} through {through}. Sign in "
            f"there, or ask {contact} to allow linking accounts from {provider.name} by "
            f'verified e-mail ("link_by_verified_email" for provider "{provider.key}" in '
            "OIDC_PROVIDERS)."
        ),
    )


def provider_for_issuer(providers: Sequence[Provider], issuer: str) -> Provider | None:
    for provider in providers:
        if provider.issuer == issuer:
            return provider
    return None


def provider_for_key(providers: Sequence[Provider], key: str | None) -> Provider | None:
    """The provider of ``key``; with no key, the only one (several need a choice)."""
    if not key:
        return providers[0] if len(providers) == 1 else None
    for provider in providers:
        if provider.key == key:
            return provider
    return None
