"""Pure decisions for accounts: team naming, group → membership mapping, safe redirects,
API token material. No ORM, no HTTP: plain data in, plain data out."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode, urlsplit

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
    # fullmatch: with match, "$" also matches before a trailing line break ("ml\n").
    if not SLUG_RE.fullmatch(slug):
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


# How the provider writes groups in the claim. "path": full paths ("/ml/vision", Keycloak's
# default); "name": short names ("vision"); "auto": whatever it sends, compared exactly.
GROUPS_FORMAT_AUTO = "auto"
GROUPS_FORMAT_PATH = "path"
GROUPS_FORMAT_NAME = "name"
GROUPS_FORMATS = (GROUPS_FORMAT_AUTO, GROUPS_FORMAT_PATH, GROUPS_FORMAT_NAME)


def _normalise_path(value: str) -> str:
    return "/" + value.strip("/") if value.strip("/") else ""


def group_key(value: str, *, groups_format: str, configured: bool) -> str | None:
    """The form in which a group is compared, or None when it cannot take part.

    Matching is always equality of these keys, never a suffix or a segment: with short names,
    "/contractors/platform-admins" and "/platform-admins" both arrive as "platform-admins",
    which is exactly why a short name is only ever compared with a short name.

    - ``path``: the claim carries full paths. A configured group without a leading slash is a
      top-level group ("gpupaas-admins" is "/gpupaas-admins"); a claim value that is not a
      path is ignored, since its place in the tree is unknown.
    - ``name``: the claim carries short names. A configured path can never match (the
      provider does not say where a name sits) and a claim value that is a path is ignored.
    - ``auto``: both sides compared as written; paths lose a trailing slash, and a
      top-level path in the claim also matches its name (:func:`plan_memberships`).
    """
    text = value.strip()
    if not text:
        return None
    is_path = text.startswith("/")
    if groups_format == GROUPS_FORMAT_PATH:
        if is_path or configured:
            return _normalise_path(text) or None
        return None
    if groups_format == GROUPS_FORMAT_NAME:
        return None if is_path else text
    return (_normalise_path(text) or None) if is_path else text


@dataclass(frozen=True)
class MembershipPlan:
    """What a sign-in changes: roles to set per team, teams to leave, admin status.

    ``ignored_groups`` are claim values the configured format cannot place;
    ``unmatchable_groups`` are configured groups that no claim value can match in this format.
    Both are reported so a mismatch between the provider and the settings is never silent.
    """

    roles: dict[int, str]
    remove_team_ids: frozenset[int]
    is_admin: bool
    # The other platform roles the groups grant (``apps.accounts.roles.Role`` values).
    platform_roles: frozenset[str] = frozenset()
    ignored_groups: tuple[str, ...] = ()
    unmatchable_groups: tuple[str, ...] = ()


def plan_memberships(
    *,
    groups: Iterable[str],
    teams: Iterable[TeamGroups],
    current_idp_team_ids: Iterable[int],
    admin_groups: Iterable[str],
    role_groups: Mapping[str, Iterable[str]] | None = None,
    groups_format: str = GROUPS_FORMAT_AUTO,
) -> MembershipPlan:
    """Map the groups claim of one sign-in to memberships.

    A team's lead group makes its holder a lead; its member group makes a member. Teams
    whose groups the user no longer holds are left, so leaving a group removes access at
    the next sign-in. Only memberships that came from the identity provider are removed.
    Team, admin and platform-role groups (``role_groups``: role → its groups, e.g. the
    operators' OIDC_OPERATOR_GROUPS) are matched the same way (:func:`group_key`).
    """
    if groups_format not in GROUPS_FORMATS:
        raise ValueError(f"Unknown groups format {groups_format!r}.")
    held: set[str] = set()
    ignored: list[str] = []
    for group in groups:
        key = group_key(group, groups_format=groups_format, configured=False)
        if key is None:
            if group.strip():
                ignored.append(group)
        else:
            held.add(key)
            if groups_format == GROUPS_FORMAT_AUTO and key.count("/") == 1 and key != "/":
                # A top-level path (Keycloak's default, "/team-vision") is also that name; a
                # nested one ("/contractors/team-vision") never matches by its last segment.
                held.add(key[1:])
    unmatchable: list[str] = []

    def configured(group: str) -> str | None:
        key = group_key(group, groups_format=groups_format, configured=True)
        if key is None and group.strip():
            unmatchable.append(group)
        return key

    roles: dict[int, str] = {}
    for team in teams:
        lead_key = configured(team.lead_group) if team.lead_group else None
        member_key = configured(team.member_group) if team.member_group else None
        if lead_key and lead_key in held:
            roles[team.team_id] = ROLE_LEAD
        elif member_key and member_key in held:
            roles[team.team_id] = ROLE_MEMBER
    admin_keys = {key for key in map(configured, admin_groups) if key}
    platform_roles = frozenset(
        role
        for role, role_group_names in (role_groups or {}).items()
        if held & {key for key in map(configured, role_group_names) if key}
    )
    remove = frozenset(set(current_idp_team_ids) - set(roles))
    return MembershipPlan(
        roles=roles,
        remove_team_ids=remove,
        is_admin=bool(held & admin_keys),
        platform_roles=platform_roles,
        ignored_groups=tuple(ignored),
        unmatchable_groups=tuple(dict.fromkeys(unmatchable)),
    )


@dataclass(frozen=True)
class GroupsClaim:
    """The groups claim of one sign-in and the shape it came in, for the sign-in log."""

    groups: tuple[str, ...]
    shape: str  # "absent", "list", "string" or "unusable"

    def describe(self) -> str:
        if self.shape == "absent":
            return "absent (no memberships come from groups)"
        if self.shape == "unusable":
            return "of an unusable type (treated as no groups)"
        paths = sum(1 for g in self.groups if g.startswith("/"))
        if not self.groups:
            kind = "no groups"
        elif paths == len(self.groups):
            kind = "full paths"
        elif paths == 0:
            kind = "short names"
        else:
            kind = "paths and short names mixed"
        return f"a {self.shape} of {len(self.groups)}: {kind}"


def read_groups_claim(claims: Mapping[str, object], claim: str) -> GroupsClaim:
    """The groups claim as a tuple of strings, whatever shape the provider sends.

    Providers send a list (Keycloak, Okta, Dex) or, for one group, a single string. A string
    is one group, never split: group names may contain commas (LDAP DNs do). Anything else
    counts as no groups rather than as an error that locks people out.
    """
    if claim not in claims or claims.get(claim) is None:
        return GroupsClaim(groups=(), shape="absent")
    value = claims[claim]
    if isinstance(value, str):
        return GroupsClaim(groups=(value.strip(),) if value.strip() else (), shape="string")
    if isinstance(value, list | tuple):
        items = tuple(str(item).strip() for item in value if isinstance(item, str | int))
        return GroupsClaim(groups=tuple(item for item in items if item), shape="list")
    return GroupsClaim(groups=(), shape="unusable")


def groups_from_claims(claims: Mapping[str, object], claim: str) -> list[str]:
    """The groups claim as a list of strings (see :func:`read_groups_claim`)."""
    return list(read_groups_claim(claims, claim).groups)


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


def _audiences(payload: Mapping[str, object]) -> list[str]:
    aud = payload.get("aud")
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list):
        return [a for a in aud if isinstance(a, str)]
    return []


def _check_issuer_and_audience(
    payload: Mapping[str, object], *, issuer: str, client_id: str
) -> None:
    if payload.get("iss") != issuer:
        raise ClaimsError(f"The token was issued by {payload.get('iss')!r}, not by {issuer!r}.")
    if client_id not in _audiences(payload):
        raise ClaimsError("The token was issued for another application (audience mismatch).")


def check_id_token_claims(
    payload: Mapping[str, object],
    *,
    issuer: str,
    client_id: str,
    now: float,
    leeway: int = 60,
) -> None:
    """Validate iss, aud, azp, exp, nbf and iat of a signature-checked ID token
    (OIDC Core 3.1.3.7)."""
    _check_issuer_and_audience(payload, issuer=issuer, client_id=client_id)
    # azp: required when there are several audiences, and when present it must be us.
    azp = payload.get("azp")
    if len(_audiences(payload)) > 1 and azp is None:
        raise ClaimsError("The token names several audiences but is not authorised for us.")
    if azp is not None and azp != client_id:
        raise ClaimsError(f"The token was authorised for {azp!r}, not for this application (azp).")
    exp = payload.get("exp")
    if not isinstance(exp, int | float) or exp + leeway < now:
        raise ClaimsError("The token has expired.")
    nbf = payload.get("nbf")
    if nbf is not None and (not isinstance(nbf, int | float) or nbf - leeway > now):
        raise ClaimsError("The token is not valid yet (nbf); check the clocks.")
    iat = payload.get("iat")
    if isinstance(iat, int | float) and iat - leeway > now:
        raise ClaimsError("The token was issued in the future; check the clocks.")
    if not payload.get("sub"):
        raise ClaimsError("The token has no subject.")


# --- back-channel logout -----------------------------------------------------------------------

BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"


@dataclass(frozen=True)
class LogoutRequest:
    """Whose portal sessions a verified logout token ends: one provider session (``sid``), or
    every session of the subject when the token names no session."""

    issuer: str
    subject: str
    sid: str
    jti: str


def check_logout_token_claims(
    payload: Mapping[str, object],
    *,
    issuer: str,
    client_id: str,
    now: float,
    leeway: int = 60,
) -> LogoutRequest:
    """Validate a signature-checked logout token (OIDC Back-Channel Logout 1.0, 2.6)."""
    _check_issuer_and_audience(payload, issuer=issuer, client_id=client_id)
    iat = payload.get("iat")
    if not isinstance(iat, int | float):
        raise ClaimsError("The logout token has no issue time (iat).")
    if iat - leeway > now:
        raise ClaimsError("The logout token was issued in the future; check the clocks.")
    exp = payload.get("exp")
    if exp is not None and (not isinstance(exp, int | float) or exp + leeway < now):
        raise ClaimsError("The logout token has expired.")
    events = payload.get("events")
    if not isinstance(events, Mapping) or not isinstance(
        events.get(BACKCHANNEL_LOGOUT_EVENT), Mapping
    ):
        raise ClaimsError("The token is not a logout token (no back-channel logout event).")
    if "nonce" in payload:
        # An ID token must never be accepted as a logout token.
        raise ClaimsError("A logout token must not contain a nonce.")
    sub, sid = payload.get("sub"), payload.get("sid")
    if not (isinstance(sub, str) and sub) and not (isinstance(sid, str) and sid):
        raise ClaimsError("The logout token names neither a subject nor a session.")
    jti = payload.get("jti")
    if not isinstance(jti, str) or not jti:
        raise ClaimsError("The logout token has no identifier (jti).")
    return LogoutRequest(
        issuer=issuer,
        subject=sub if isinstance(sub, str) else "",
        sid=sid if isinstance(sid, str) else "",
        jti=jti,
    )


# --- group re-check ----------------------------------------------------------------------------


def groups_recheck_due(*, checked_at: float | None, now: float, max_age: int) -> bool:
    """Whether memberships that the provider confirmed at ``checked_at`` must be confirmed
    again. ``None``: nothing from the provider to confirm."""
    return checked_at is not None and now - checked_at >= max_age


def groups_lapse_due(*, checked_at: float | None, now: float, max_age: int) -> bool:
    """Whether a confirmation that could not be obtained (provider unreachable) has been
    missing long enough for the provider's memberships to lapse: twice the interval."""
    return checked_at is not None and now - checked_at >= 2 * max_age


# The share of a refresh token's life after which the next request refreshes it. Keycloak's
# "SSO Session Idle" (30 minutes by default) ends a session, and its refresh token, when no
# refresh comes within that time, however long the portal's group re-check interval is.
REFRESH_AT_SHARE = 0.5


def _jwt_exp(token: str) -> float | None:
    """The ``exp`` of a token that is a JWT (Keycloak's refresh tokens are), read without
    checking the signature: only to know when to use it, never to trust anything in it."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError, binascii.Error):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def refresh_due_at(tokens: Mapping[str, object], *, now: float) -> float | None:
    """When the refresh token of a token response must be used again to stay alive: half-way
    through the life the provider gives it (``refresh_expires_in``, as Keycloak sends, else
    the token's own ``exp`` when it is a JWT). None when the provider says nothing or the
    token does not expire (``refresh_expires_in: 0``, an offline token without a limit)."""
    token = tokens.get("refresh_token")
    if not isinstance(token, str) or not token:
        return None
    lifetime: float | None = None
    given = tokens.get("refresh_expires_in")
    if isinstance(given, int | float) and not isinstance(given, bool):
        lifetime = float(given)
    else:
        exp = _jwt_exp(token)
        lifetime = None if exp is None else exp - now
    if lifetime is None or lifetime <= 0:
        return None
    return now + lifetime * REFRESH_AT_SHARE


def refresh_due(*, due_at: float | None, now: float) -> bool:
    """Whether the stored refresh token must be used now, before the provider forgets it."""
    return due_at is not None and now >= due_at


# How providers say, when refusing a refresh, that the user is disabled or gone (not merely
# that the token or session expired): Keycloak, oidc-provider, Entra ID (AADSTS50057 disabled,
# AADSTS50034 / AADSTS700016 no such user), Okta.
_USER_GONE_PHRASES = (
    "user disabled",
    "user not found",
    "unknown user",
    "account not found",
    "account is disabled",
    "user is disabled",
    "aadsts50057",
    "aadsts50034",
    "user_deactivated",
)


def refusal_means_user_gone(error: str, description: str) -> bool:
    """Whether a refused refresh says the user is disabled or deleted at the provider (the
    user's API tokens must stop then), rather than that the grant or session ended."""
    if error != "invalid_grant":
        return False
    text = description.lower()
    return any(phrase in text for phrase in _USER_GONE_PHRASES)


def end_session_url(
    endpoint: str, *, id_token_hint: str, post_logout_redirect_uri: str, client_id: str
) -> str:
    """The provider's end-session URL (OpenID Connect RP-Initiated Logout 1.0) that brings the
    user back to ``post_logout_redirect_uri`` (registered with the provider) afterwards."""
    if not endpoint:
        return ""
    params = {"client_id": client_id, "post_logout_redirect_uri": post_logout_redirect_uri}
    if id_token_hint:
        params["id_token_hint"] = id_token_hint
    separator = "&" if urlsplit(endpoint).query else "?"
    return f"{endpoint}{separator}{urlencode(params)}"


# --- what a sign-in failure page says to do -------------------------------------------------------


def sign_in_failure_fix(error: str, description: str) -> str:
    """The fix to name next to the provider's own words for a failed sign-in; "" when there
    is none to add. Keycloak refuses a scope the realm has no client scope for ("Invalid
    scopes: openid email profile groups"); the portal asks for ``groups`` by default."""
    text = f"{error} {description}".lower()
    if "invalid_scope" in text or "invalid scope" in text:
        return (
            "The identity provider does not offer a scope the portal asks for. At the "
            "provider, create a client scope named groups with a Group Membership mapper "
            "(claim name groups) and add it to the portal's client; or set OIDC_RP_SCOPES to "
            "the scopes it offers (e.g. openid email profile) and send the groups in a "
            "default scope."
        )
    return ""
