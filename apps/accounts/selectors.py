from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, Team, User


def teams_of(user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).order_by("name")


def teams_visible_to(user: User) -> QuerySet[Team]:
    """The teams a user may see: their own; every team for platform admins."""
    return Team.objects.order_by("name") if user.is_staff else teams_of(user)


def team_for_user(user: User, slug: str) -> Team:
    """A team the user belongs to (any team for admins); ``Team.DoesNotExist`` (→ 404) else."""
    return teams_visible_to(user).get(slug=slug)


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
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=core.token_digest(plaintext), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return None
    return token
