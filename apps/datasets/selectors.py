"""Reads of datasets: what a team has registered."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.accounts.models import Team
from apps.datasets.models import Dataset


def team_datasets(team: Team) -> QuerySet[Dataset]:
    """The team's datasets, by name: what its members see and may name in a request."""
    return Dataset.objects.filter(team=team).select_related("secret").order_by("name")


def team_dataset(team: Team, name: str) -> Dataset:
    """One of the team's datasets by name; ``Dataset.DoesNotExist`` (→ 404) otherwise."""
    return team_datasets(team).get(name=name)
