"""The small cast reused across tests: an owner, a teammate, an outsider from another team,
a team lead and a platform admin — so every feature is also tested for what the outsider
must not see or do."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from apps.accounts.models import Membership, Team, User
from apps.catalog.models import GpuClass, Image
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    MembershipFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
)


@dataclass
class Cast:
    team: Team
    other_team: Team
    owner: User
    teammate: User
    lead: User
    outsider: User
    admin: User
    gpu_class: GpuClass
    image: Image


@pytest.fixture
def cast(db: None) -> Cast:
    team = TeamFactory(name="Vision")
    other_team = TeamFactory(name="NLP")
    owner = UserFactory(username="owner")
    teammate = UserFactory(username="teammate")
    lead = UserFactory(username="lead")
    outsider = UserFactory(username="outsider")
    admin = UserFactory(username="admin", is_staff=True, is_superuser=True)
    MembershipFactory(user=owner, team=team)
    MembershipFactory(user=teammate, team=team)
    MembershipFactory(user=lead, team=team, role=Membership.Role.LEAD)
    MembershipFactory(user=outsider, team=other_team)
    gpu_class = GpuClassFactory()
    TeamQuotaFactory(team=team, gpu_class=gpu_class)
    TeamQuotaFactory(team=other_team, gpu_class=gpu_class)
    return Cast(
        team=team,
        other_team=other_team,
        owner=owner,
        teammate=teammate,
        lead=lead,
        outsider=outsider,
        admin=admin,
        gpu_class=gpu_class,
        image=ImageFactory(),
    )
