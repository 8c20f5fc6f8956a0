"""Reads of credentials: which secrets a person sees and may use in a team."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.accounts.models import Team, User
from apps.credentials import core
from apps.credentials.models import Secret


def secrets_usable_by(user: User, team: Team) -> QuerySet[Secret]:
    """The team's secrets and the user's own personal ones in it: what they see and may refer
    to. Nobody sees another person's personal secrets, admins included."""
    return (
        Secret.objects.filter(team=team)
        .filter(Q(owner__isnull=True) | Q(owner=user))
        .select_related("owner")
        .order_by("name", "owner_id")
    )


def secret_for_user(user: User, team: Team, name: str, *, scope: str = "") -> Secret:
    """One secret the user sees, by name: their personal one first unless ``scope`` says which;
    ``Secret.DoesNotExist`` (→ 404) otherwise."""
    rows = secrets_usable_by(user, team).filter(name=name)
    if scope == core.SCOPE_TEAM:
        rows = rows.filter(owner__isnull=True)
    elif scope == core.SCOPE_PERSONAL:
        rows = rows.filter(owner=user)
    found = sorted(rows, key=lambda s: s.owner_id is None)  # personal first
    if not found:
        raise Secret.DoesNotExist(f"No secret {name} in {team.slug}.")
    return found[0]
