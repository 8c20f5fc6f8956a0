from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from apps.accounts.models import Membership
from apps.accounts.roles import ROLE_LABELS, Act, Role, may
from apps.accounts.selectors import memberships_of, platform_may, platform_roles
from apps.notifications.selectors import unread_count
from apps.telemetry.selectors.overview import may_see_overview


def menu_memberships(user: Any) -> list[Membership]:
    """The user's memberships with their teams, by team name, for the menu: one query."""
    if user is None or not user.is_authenticated:
        return []
    return list(memberships_of(user))


def has_team(user: Any, memberships: Sequence[Membership]) -> bool:
    """Whether the team pages lead anywhere for ``user``: a team member, or an admin."""
    if user is None or not user.is_authenticated:
        return False
    return bool(memberships) or platform_may(user, Act.SEE_TEAMS)


class PlatformRoles:
    """What the signed-in person's platform roles let them do, for templates:
    ``{% if platform.may.GOVERN_TEAMS %}`` (an ``Act``'s name), ``platform.labels``. Read from
    the roles when a template first asks (one query, shared with every other door)."""

    def __init__(self, user: Any) -> None:
        self._user = user

    def _held(self) -> frozenset[Role]:
        user = self._user
        return platform_roles(user) if user is not None and user.is_authenticated else frozenset()

    @property
    def may(self) -> dict[str, bool]:
        held = self._held()
        return {act.name: may(held, act) for act in Act}

    @property
    def labels(self) -> list[str]:
        held = self._held()
        return [ROLE_LABELS[role] for role in Role if role in held]


def portal(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    # Read only where the navigation is drawn, once for both its uses: one query then.
    memberships = SimpleLazyObject(lambda: menu_memberships(user))
    return {
        "has_team": lambda: has_team(user, memberships),  # type: ignore[arg-type]
        "menu_memberships": memberships,
        "platform": PlatformRoles(user),
        "oidc_enabled": settings.OIDC_ENABLED,
        "dev_login_enabled": settings.DEV_LOGIN_ENABLED,
        # Counted only when a page shows it (the menu of a signed-in user).
        "notice_unread": SimpleLazyObject(
            lambda: unread_count(request.user) if request.user.is_authenticated else 0
        ),
        "currency": settings.PLATFORM_CURRENCY,
        # Asked only when a page draws the navigation (a template calls it); the led teams'
        # ids are read once per request, the workloads list's cancel boxes use them too.
        "sees_overview": lambda: (request.user.is_authenticated and may_see_overview(request.user)),
    }
