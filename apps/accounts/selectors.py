"""Reads of accounts: a person's platform roles (the one role check, ``platform_may``), their
teams and team roles, the teams they may see, API tokens (with the one-statement lookup every
API request makes) and the admin's password sign-in lockout."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Field, Model, Q, QuerySet
from django.utils import timezone
from limits import RateLimitItem

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, Team, User
from apps.accounts.roles import ROLE_GROUPS, Act, Role, may, roles_from
from apps.common.ratelimit import Decision, failures_per_window, rate_limiter

_M = TypeVar("_M", bound=Model)


def platform_roles(user: User) -> frozenset[Role]:
    """The platform roles the user holds (:mod:`apps.accounts.roles`): platform admin for a
    superuser, the others from membership of the roles' permission groups. Read once per user
    object (one request's user), never cached across requests; :func:`forget_role_copy` drops
    the copy when a service changes them."""
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", True):
        return frozenset()
    known: frozenset[Role] | None = getattr(user, "_platform_roles", None)
    if known is None:
        names = user.groups.values_list("name", flat=True) if user.pk is not None else []
        known = roles_from(superuser=bool(user.is_superuser), group_names=names)
        user._platform_roles = known  # type: ignore[attr-defined]
    return known


def platform_may(user: User, act: Act) -> bool:
    """Whether the user's platform roles let them do ``act`` (the one role check)."""
    return may(platform_roles(user), act)


def is_platform_admin(user: User) -> bool:
    return Role.ADMIN in platform_roles(user)


def users_who_may(act: Act) -> QuerySet[User]:
    """The active users whose platform roles let them ``act`` (told of what it concerns)."""
    holders = [role for role in Role if may([role], act)]
    groups = [ROLE_GROUPS[r] for r in holders if r in ROLE_GROUPS]
    return (
        User.objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name__in=groups))
        .distinct()
        .order_by("username")
    )


def forget_role_copy(user: User) -> None:
    """Drop the copy of the user's platform roles this user object holds."""
    user.__dict__.pop("_platform_roles", None)


def teams_of(user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def teams_visible_to(user: User, *, act: Act = Act.SEE_TEAMS) -> QuerySet[Team]:
    """The teams a user may see: their own; every team for those whose platform role may
    ``act`` across teams (reading every team's workloads and settings: admins and auditors;
    with ``Act.SEE_SPEND``, a team's usage, budget and chargeback: billing too)."""
    return Team.objects.order_by("name") if platform_may(user, act) else teams_of(user)


def team_for_user(user: User, slug: str, *, act: Act = Act.SEE_TEAMS) -> Team:
    """A team the user belongs to (any team for a platform role that may ``act``);
    ``Team.DoesNotExist`` (→ 404) else."""
    return teams_visible_to(user, act=act).get(slug=slug)


def team_ids_of(user: User) -> list[int]:
    """Ids of the teams the user belongs to (not all teams for admins), ascending.

    Read from the user object when the token lookup already brought them with it (one
    request's user; never cached across requests), from the database otherwise.
    """
    known: list[int] | None = getattr(user, "_team_ids", None)
    if known is not None:
        return known
    return list(
        Membership.objects.filter(user=user).order_by("team_id").values_list("team_id", flat=True)
    )


def sees_cluster(user: User) -> bool:
    """Whether the user may see cluster-wide views (the heat map of every GPU, free capacity):
    platform roles that see capacity and members of at least one team; not someone who
    belongs to no team."""
    return platform_may(user, Act.SEE_CAPACITY) or Membership.objects.filter(user=user).exists()


def memberships_of(user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def team_role(user: User, team_id: int) -> str | None:
    """The user's role in the team (``member`` or ``lead``), or None if not a member."""
    return (
        Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()
    )


def is_team_lead(user: User, team_id: int) -> bool:
    """Whether the user may act as the team's lead: a lead of the team, or a platform admin
    (admins may do everything a lead may). The one lead check; every door asks it."""
    if platform_may(user, Act.ACT_FOR_TEAMS):
        return True
    return Membership.objects.filter(user=user, team_id=team_id, role=Membership.Role.LEAD).exists()


def teams_led_by(user: User) -> QuerySet[Team]:
    """The teams in which the user holds the lead role, by name. Platform admins lead only
    the teams they are leads of here; a caller that lets admins act on every team says so."""
    return Team.objects.filter(
        memberships__user=user, memberships__role=Membership.Role.LEAD
    ).order_by("name")


def team_ids_led_by(user: User) -> frozenset[int]:
    """Ids of :func:`teams_led_by`, read once per user object: one request's user asks the
    database once however many parts of the page ask (the list's cancel boxes, the menu's
    overview link). Never cached across requests; a service that changes the user's
    memberships within the request calls :func:`forget_team_copies`."""
    known: frozenset[int] | None = getattr(user, "_led_team_ids", None)
    if known is None:
        known = frozenset(teams_led_by(user).order_by().values_list("id", flat=True))
        user._led_team_ids = known  # type: ignore[attr-defined]
    return known


def forget_team_copies(user: User) -> None:
    """Drop the copies of the user's team ids and led team ids that this user object holds
    (:func:`team_ids_of`, :func:`team_ids_led_by`): their memberships have just changed."""
    user.__dict__.pop("_team_ids", None)
    user.__dict__.pop("_led_team_ids", None)


def team_leads(team_id: int) -> QuerySet[User]:
    """The team's leads (members with the lead role; not platform admins)."""
    return User.objects.filter(
        memberships__team_id=team_id, memberships__role=Membership.Role.LEAD
    ).order_by("username")


def tokens_of(user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def token_for_user(user: User, token_id: int) -> ApiToken:
    """The caller's own token; ``ApiToken.DoesNotExist`` (→ 404) for anyone else's."""
    return tokens_of(user).get(pk=token_id)


def live_tokens_of(user: User, *, now: datetime | None = None) -> QuerySet[ApiToken]:
    """The user's tokens that still work: not revoked, not expired, not older than
    API_TOKEN_MAX_LIFETIME_DAYS."""
    moment = now or timezone.now()
    live = (
        tokens_of(user)
        .filter(revoked_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=moment))
    )
    if settings.API_TOKEN_MAX_LIFETIME_DAYS > 0:
        live = live.filter(
            created_at__gt=moment - timedelta(days=settings.API_TOKEN_MAX_LIFETIME_DAYS)
        )
    return live


def token_descendants(token: ApiToken) -> QuerySet[ApiToken]:
    """The tokens created with this one, those created with them, and so on."""
    found: list[int] = []
    frontier = [token.pk]
    while frontier:
        frontier = list(
            ApiToken.objects.filter(parent_id__in=frontier)
            .exclude(pk__in=[token.pk, *found])
            .values_list("pk", flat=True)
        )
        found.extend(frontier)
    return ApiToken.objects.filter(pk__in=found).order_by("created_at")


def _ancestry_sql(*, with_age_limit: bool) -> str:
    """Whether any ancestor of a token (from its parent up) is revoked, expired or too old."""
    meta = ApiToken._meta
    cols = [
        meta.pk.column,
        meta.get_field("parent").column,
        meta.get_field("revoked_at").column,
        meta.get_field("expires_at").column,
        meta.get_field("created_at").column,
    ]
    pk, parent, revoked, expires, created = cols
    names = ", ".join(cols)
    too_old = f" OR {created} <= %s" if with_age_limit else ""
    return (
        f"WITH RECURSIVE chain({names}) AS ("  # noqa: S608 - names from model metadata
        f"SELECT {names} FROM {meta.db_table} WHERE {pk} = %s "
        f"UNION SELECT {', '.join(f't.{c}' for c in cols)} FROM {meta.db_table} t "
        f"JOIN chain c ON t.{pk} = c.{parent}) "
        f"SELECT 1 FROM chain WHERE {revoked} IS NOT NULL OR {expires} <= %s{too_old} LIMIT 1"
    )


_ANCESTRY_SQL = {flag: _ancestry_sql(with_age_limit=flag) for flag in (False, True)}


def token_ancestors_live(token: ApiToken, *, now: datetime | None = None) -> bool:
    """Whether every token above this one (its parent, the parent's parent…) still works: a
    token dies with the token that created it, whether that is revoked or has run out."""
    if token.parent_id is None:
        return True
    moment = now or timezone.now()
    max_days = settings.API_TOKEN_MAX_LIFETIME_DAYS
    params: list[Any] = [token.parent_id, moment]
    if max_days > 0:
        params.append(moment - timedelta(days=max_days))
    with connection.cursor() as cursor:
        cursor.execute(_ANCESTRY_SQL[max_days > 0], params)
        return cursor.fetchone() is None


def token_revoked(token: ApiToken) -> bool:
    """Whether ``token`` has been revoked since it was loaded (read again from the database)."""
    return ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=False).exists()


def active_token_by_plaintext(plaintext: str) -> ApiToken | None:
    """The live token with this secret, or None (unknown, revoked, expired, older than the
    longest lifetime allowed, inactive user, or created with a token that no longer works)."""
    if not plaintext.startswith(f"{core.TOKEN_PREFIX}_"):
        return None
    digest = core.token_digest(plaintext)
    if connection.vendor == "postgresql":
        token = _token_by_digest_sql(digest)
    else:
        token = (
            ApiToken.objects.select_related("user")
            .filter(digest=digest, revoked_at__isnull=True)
            .first()
        )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if not token.is_active(now) or not token_ancestors_live(token, now=now):
        return None
    return token


# Every API request authenticates, so on PostgreSQL the token and its user come from one
# fixed statement (prepared once per connection) rather than a queryset compiled each time:
# the ORM's compiling cost four times PostgreSQL's work for this lookup. The SQL is built from
# model metadata; the digest is a parameter.
_TOKEN_FIELDS = ApiToken._meta.concrete_fields
_USER_FIELDS = User._meta.concrete_fields


def _token_sql() -> str:
    token, user, membership = ApiToken._meta, User._meta, Membership._meta
    user_groups, group = User.groups.through._meta, Group._meta
    on_group, of_user = user_groups.get_field("group").column, user_groups.get_field("user").column
    columns = [f"t.{f.column}" for f in _TOKEN_FIELDS] + [f"u.{f.column}" for f in _USER_FIELDS]
    # The user's team ids and group names ride along: every API read needs them to decide what
    # is visible (the teams, the platform roles).
    return (
        f"SELECT {', '.join(columns)}, "  # noqa: S608
        f"ARRAY(SELECT m.{membership.get_field('team').column} FROM {membership.db_table} m "
        f"WHERE m.{membership.get_field('user').column} = u.{user.pk.column}), "
        f"ARRAY(SELECT g.{group.get_field('name').column} FROM {user_groups.db_table} ug "
        f"JOIN {group.db_table} g ON g.{group.pk.column} = ug.{on_group} "
        f"WHERE ug.{of_user} = u.{user.pk.column}) "
        f"FROM {token.db_table} t JOIN {user.db_table} u "
        f"ON u.{user.pk.column} = t.{token.get_field('user').column} "
        f"WHERE t.{token.get_field('digest').column} = %s "
        f"AND t.{token.get_field('revoked_at').column} IS NULL"
    )


_TOKEN_SQL = _token_sql()


def _from_row(model: type[_M], fields: Sequence[Field[Any, Any]], values: Sequence[Any]) -> _M:
    """A model instance from raw column values, through the fields' own conversions."""
    converted = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


def _token_by_digest_sql(digest: str) -> ApiToken | None:
    with connection.cursor() as cursor:
        cursor.execute(_TOKEN_SQL, [digest])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(_TOKEN_FIELDS)
    token = _from_row(ApiToken, _TOKEN_FIELDS, row[:split])
    user = _from_row(User, _USER_FIELDS, row[split:-2])
    user._team_ids = sorted(row[-2])  # type: ignore[attr-defined]  # read by team_ids_of
    # Read by platform_roles.
    user._platform_roles = roles_from(superuser=user.is_superuser, group_names=row[-1])  # type: ignore[attr-defined]
    token.user = user
    return token


# --- password sign-in lockout -----------------------------------------------------------------

ADMIN_LOGIN = "admin-login"  # the rate-limit store's namespace for failed password sign-ins


def admin_login_rule() -> RateLimitItem:
    """ADMIN_LOGIN_MAX_FAILURES failures within ADMIN_LOGIN_LOCKOUT_SECONDS."""
    return failures_per_window(
        settings.ADMIN_LOGIN_MAX_FAILURES, settings.ADMIN_LOGIN_LOCKOUT_SECONDS
    )


def admin_login_keys(*, username: str, source_ip: str | None) -> list[str]:
    """What failures are counted against: the username at the client address (case-folded, so
    "Admin" and "admin" share one count), and the address whatever the username. Never the
    username alone: failures from elsewhere must not lock its owner out (the break-glass admin
    included); an address shared by everyone (one proxy) is the case for admin_signin_link."""
    address = source_ip or "unknown"
    return [f"user:{username.strip().casefold()}|ip:{address}", f"ip:{address}"]


def admin_login_lockout(*, username: str, source_ip: str | None) -> Decision:
    """Whether a password sign-in for ``username`` from ``source_ip`` may be tried now: refused
    (with the seconds to wait) while either has had too many recent failures;
    ``store_down`` when the rate-limit store cannot say."""
    limiter, rule = rate_limiter(), admin_login_rule()
    worst = Decision(allowed=True, retry_after=0)
    for key in admin_login_keys(username=username, source_ip=source_ip):
        decision = limiter.check(rule, key, namespace=ADMIN_LOGIN, exact=True)
        if decision.store_down:
            return decision
        if not decision.allowed and decision.retry_after > worst.retry_after:
            worst = decision
    return worst
