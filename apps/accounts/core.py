"""Pure decisions for accounts: team naming, group → membership mapping, safe redirects,
API token material. No ORM, no HTTP: plain data in, plain data out."""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

NAMESPACE_PREFIX = "team-"
# A Kubernetes namespace is an RFC 1123 label: at most 63 characters.
SLUG_MAX_LENGTH = 63 - len(NAMESPACE_PREFIX)
SLUG_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def slug_from_name(name: str) -> str:
    """Derive a DNS-label slug from a team name ("Vision & Robotics" → "vision-robotics").

    Characters that cannot appear in a namespace are dropped or folded, which is exactly why
    two names can map to one slug; uniqueness is enforced on the slug and namespace, never
    assumed from the name.
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    return slug[:SLUG_MAX_LENGTH].rstrip("-")


def slug_problem(slug: str) -> str | None:
    """Why a slug cannot name a namespace, or None when it can."""
    if not slug:
        return "The slug is empty: use lower-case letters, digits and dashes."
    if len(slug) > SLUG_MAX_LENGTH:
        return f"The slug is {len(slug)} characters long; at most {SLUG_MAX_LENGTH} are allowed."
    if not SLUG_RE.match(slug):
        return (
            "The slug may contain only lower-case letters, digits and dashes, "
            "and must start and end with a letter or digit."
        )
    return None


def namespace_for_slug(slug: str) -> str:
    return f"{NAMESPACE_PREFIX}{slug}"


# --- identity-provider groups → memberships -------------------------------------------------

ROLE_MEMBER = "member"
ROLE_LEAD = "lead"


@dataclass(frozen=True)
class TeamGroups:
    """A team's identity-provider groups, as the mapping needs them."""

    team_id: int
    member_group: str
    lead_group: str = ""


@dataclass(frozen=True)
class MembershipPlan:
    """What a sign-in changes: roles to set per team, teams to leave, admin status."""

    roles: dict[int, str]
    remove_team_ids: frozenset[int]
    is_admin: bool


def plan_memberships(
    *,
    groups: Iterable[str],
    teams: Iterable[TeamGroups],
    current_idp_team_ids: Iterable[int],
    admin_groups: Iterable[str],
) -> MembershipPlan:
    """Map the groups claim of one sign-in to memberships.

    A team's lead group makes its holder a lead; its member group makes a member. Teams
    whose groups the user no longer holds are left, so leaving a group removes access at
    the next sign-in. Only memberships that came from the identity provider are removed.
    """
    held = {g for g in groups if g}
    roles: dict[int, str] = {}
    for team in teams:
        if team.lead_group and team.lead_group in held:
            roles[team.team_id] = ROLE_LEAD
        elif team.member_group and team.member_group in held:
            roles[team.team_id] = ROLE_MEMBER
    remove = frozenset(set(current_idp_team_ids) - set(roles))
    is_admin = bool(held & {g for g in admin_groups if g})
    return MembershipPlan(roles=roles, remove_team_ids=remove, is_admin=is_admin)


def groups_from_claims(claims: Mapping[str, object], claim: str) -> list[str]:
    """The groups claim as a list of strings, whatever shape the provider sends.

    Providers send a list (Keycloak, Okta, Dex), a single string, or a comma-separated
    string; anything else counts as no groups rather than as an error that locks people out.
    """
    value = claims.get(claim)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [str(item) for item in value if isinstance(item, str | int) and str(item)]
    return []


# --- redirects -------------------------------------------------------------------------------

_CONTROL_RE = re.compile(r"[\x00-\x20\x7f\\]")


def safe_next_path(value: str | None) -> str | None:
    """Return ``value`` if it is a same-site absolute path, else None.

    Only paths are accepted: anything with a scheme or host (``https://evil``,
    ``https://host//x``), protocol-relative forms (``//x``, ``/\\x``, ``/%5Cx`` once decoded
    by a browser) and control characters are refused, because browsers normalise those to
    off-site locations.
    """
    if not value or not value.startswith("/"):
        return None
    if value.startswith("//") or _CONTROL_RE.search(value):
        return None
    lowered = value.lower()
    if lowered.startswith(("/%2f", "/%5c")) or "%00" in lowered:
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return None
    return value


# --- API tokens -------------------------------------------------------------------------------

TOKEN_PREFIX = "gpp"  # noqa: S105 - a public prefix, not a secret
SCOPE_READ = "read"
SCOPE_WRITE = "write"
ALL_SCOPES = (SCOPE_READ, SCOPE_WRITE)


@dataclass(frozen=True)
class TokenMaterial:
    plaintext: str
    lookup: str
    digest: str


def token_generate() -> TokenMaterial:
    """A new token: ``gpp_<lookup>_<secret>``. Only the digest is ever stored."""
    lookup = secrets.token_hex(4)
    plaintext = f"{TOKEN_PREFIX}_{lookup}_{secrets.token_urlsafe(32)}"
    return TokenMaterial(plaintext=plaintext, lookup=lookup, digest=token_digest(plaintext))


def token_digest(plaintext: str) -> str:
    # The secret has 256 bits of entropy, so a fast unsalted hash is enough to make a leaked
    # table useless while keeping each authenticated request to one indexed lookup.
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def token_allows(scopes: Iterable[str], *, write: bool) -> bool:
    """Whether a token with ``scopes`` may make a read (safe) or write request.

    ``write`` includes reading: a client that may change things may also see them.
    """
    held = set(scopes)
    if write:
        return SCOPE_WRITE in held
    return bool(held & {SCOPE_READ, SCOPE_WRITE})


def token_scopes_within(scopes: Iterable[str], parent_scopes: Iterable[str]) -> bool:
    """Whether a token with ``scopes`` would allow nothing that ``parent_scopes`` does not.

    Compared by what the scopes allow, as :func:`token_allows` decides it: a write token may
    create a read token (write includes reading), a read token may not create a write one.
    """
    held = list(parent_scopes)
    allowed = {s for s in ALL_SCOPES if token_allows(held, write=s == SCOPE_WRITE)}
    return set(scopes) <= allowed


class TokenRuleError(ValueError):
    """A token that may not be created as asked; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def token_lifetime_end(
    *, created_at: datetime, expires_at: datetime | None, max_lifetime_days: int
) -> datetime | None:
    """When a token stops working: its own expiry, or its creation plus the longest lifetime
    allowed now, whichever is sooner. None: never (no expiry and no maximum)."""
    ends = [expires_at] if expires_at is not None else []
    if max_lifetime_days > 0:
        ends.append(created_at + timedelta(days=max_lifetime_days))
    return min(ends) if ends else None


def token_expiry(
    *,
    requested: datetime | None,
    now: datetime,
    max_lifetime_days: int,
    parent_ends_at: datetime | None = None,
) -> datetime | None:
    """The expiry a new token gets, or :class:`TokenRuleError` if it may not have it.

    The token may live at most ``max_lifetime_days`` (0: no maximum) and, when another token
    creates it, no longer than that token (``parent_ends_at``, its
    :func:`token_lifetime_end`). Asked for without an expiry, it gets the longest allowed, so
    "never expires" exists only with no maximum and no mortal parent; asked for beyond it, it
    is refused rather than quietly shortened, so the client knows what it got.
    """
    if requested is not None and requested <= now:
        raise TokenRuleError("expires_at", "The expiry must be in the future.")
    by_setting = now + timedelta(days=max_lifetime_days) if max_lifetime_days > 0 else None
    limits = [end for end in (by_setting, parent_ends_at) if end is not None]
    if requested is None:
        return min(limits) if limits else None
    if by_setting is not None and requested > by_setting:
        raise TokenRuleError(
            "expires_at",
            f"Tokens may live at most {max_lifetime_days} days: "
            f"choose an expiry on or before {_when(by_setting)}.",
        )
    if parent_ends_at is not None and requested > parent_ends_at:
        raise TokenRuleError(
            "expires_at",
            "A token created with another token cannot outlive it: choose an expiry on or "
            f"before {_when(parent_ends_at)}, when the token you are using expires.",
        )
    return requested


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M %Z").strip()


# --- ID token claims --------------------------------------------------------------------------


class ClaimsError(ValueError):
    """An ID token whose claims must not be trusted."""


def check_id_token_claims(
    payload: Mapping[str, object],
    *,
    issuer: str,
    client_id: str,
    now: float,
    leeway: int = 60,
) -> None:
    """Validate iss, aud, azp, exp and iat of a signature-checked ID token (OIDC Core 3.1.3.7)."""
    if payload.get("iss") != issuer:
        raise ClaimsError(f"The token was issued by {payload.get('iss')!r}, not by {issuer!r}.")
    aud = payload.get("aud")
    audiences = [aud] if isinstance(aud, str) else list(aud) if isinstance(aud, list) else []
    if client_id not in audiences:
        raise ClaimsError("The token was issued for another application (audience mismatch).")
    if len(audiences) > 1 and payload.get("azp") != client_id:
        raise ClaimsError("The token names several audiences but is not authorised for us.")
    exp = payload.get("exp")
    if not isinstance(exp, int | float) or exp + leeway < now:
        raise ClaimsError("The token has expired.")
    iat = payload.get("iat")
    if isinstance(iat, int | float) and iat - leeway > now:
        raise ClaimsError("The token was issued in the future; check the clocks.")
    if not payload.get("sub"):
        raise ClaimsError("The token has no subject.")
