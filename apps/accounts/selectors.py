from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model, QuerySet
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, Team, User

_M = TypeVar("_M", bound=Model)


def teams_of(user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def teams_visible_to(user: User) -> QuerySet[Team]:
    """The teams a user may see: their own; every team for platform admins."""
    return Team.objects.order_by("name") if user.is_staff else teams_of(user)


def team_for_user(user: User, slug: str) -> Team:
    """A team the user belongs to (any team for admins); ``Team.DoesNotExist`` (→ 404) else."""
    return teams_visible_to(user).get(slug=slug)


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
    platform admins and members of at least one team; not someone who belongs to no team."""
    return bool(user.is_staff) or Membership.objects.filter(user=user).exists()


def memberships_of(user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def tokens_of(user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def token_for_user(user: User, token_id: int) -> ApiToken:
    """The caller's own token; ``ApiToken.DoesNotExist`` (→ 404) for anyone else's."""
    return tokens_of(user).get(pk=token_id)


def active_token_by_plaintext(plaintext: str) -> ApiToken | None:
    """The live token with this secret, or None (unknown, revoked, expired, inactive user)."""
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
    if token.expires_at is not None and token.expires_at <= timezone.now():
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
    columns = [f"t.{f.column}" for f in _TOKEN_FIELDS] + [f"u.{f.column}" for f in _USER_FIELDS]
    # The user's team ids ride along: every API read needs them to decide what is visible.
    return (
        f"SELECT {', '.join(columns)}, "  # noqa: S608
        f"ARRAY(SELECT m.{membership.get_field('team').column} FROM {membership.db_table} m "
        f"WHERE m.{membership.get_field('user').column} = u.{user.pk.column}) "
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
    user = _from_row(User, _USER_FIELDS, row[split:-1])
    user._team_ids = sorted(row[-1])  # type: ignore[attr-defined]  # read by team_ids_of
    token.user = user
    return token
