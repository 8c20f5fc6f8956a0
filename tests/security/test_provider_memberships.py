"""A lead could delete a team membership the identity provider manages (204), although changing
its role was refused: the same refusal now holds for removal, at every door."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from rest_framework.test import APIClient

from apps.accounts.models import Membership
from apps.accounts.services import membership_remove
from tests.factories import MembershipFactory, UserFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def _provider_member(cast: Cast) -> Membership:
    member: Membership = MembershipFactory(
        user=UserFactory(username="grouped"), team=cast.team, source=Membership.Source.IDP
    )
    return member


def test_lead_cannot_delete_a_membership_the_identity_provider_manages(cast: Cast) -> None:
    membership = _provider_member(cast)
    client = APIClient()
    client.force_authenticate(cast.lead)
    response = client.delete(f"/api/v1/teams/{cast.team.slug}/members/grouped/")
    assert response.status_code == 403, response.content
    assert "identity provider" in response.json()["message"]
    assert Membership.objects.filter(pk=membership.pk).exists()
    with pytest.raises(PermissionDenied, match="identity provider"):
        membership_remove(actor=cast.lead, membership=membership)


def test_admin_may_still_remove_a_membership_the_identity_provider_manages(cast: Cast) -> None:
    membership = _provider_member(cast)
    membership_remove(actor=cast.admin, membership=membership)
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_lead_may_still_remove_a_manual_membership(cast: Cast) -> None:
    client = APIClient()
    client.force_authenticate(cast.lead)
    response = client.delete(f"/api/v1/teams/{cast.team.slug}/members/teammate/")
    assert response.status_code == 204
