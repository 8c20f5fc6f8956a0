from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.accounts.models import Team
from apps.accounts.services import team_create, team_update
from apps.audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_team_create_derives_namespace_and_records_audit() -> None:
    team = team_create(actor=None, name="Vision & Robotics", idp_group="g-vision")
    assert team.slug == "vision-robotics"
    assert team.namespace == "team-vision-robotics"
    assert AuditEvent.objects.filter(action="team.create", object_id=str(team.pk)).exists()


@pytest.mark.parametrize(
    ("first", "second"), [("ML Ops", "ML_Ops"), ("R&D", "R.D"), ("Über", "Uber")]
)
def test_names_that_escape_to_the_same_namespace_are_refused(first: str, second: str) -> None:
    team_create(actor=None, name=first)
    with pytest.raises(ValidationError) as info:
        team_create(actor=None, name=second)
    assert "already belongs to team" in str(info.value.message_dict["slug"])
    assert Team.objects.count() == 1


def test_same_name_in_other_case_is_refused() -> None:
    team_create(actor=None, name="Vision")
    with pytest.raises(ValidationError) as info:
        team_create(actor=None, name="VISION", slug="vision-2")
    assert "already exists" in str(info.value.message_dict["name"])


def test_explicit_bad_slug_is_refused_with_reason() -> None:
    with pytest.raises(ValidationError) as info:
        team_create(actor=None, name="Vision", slug="Not_A_Label")
    assert "lower-case letters" in str(info.value.message_dict["slug"])


def test_rename_keeps_slug_and_namespace() -> None:
    team = team_create(actor=None, name="Vision")
    team_update(actor=None, team=team, name="Computer Vision", idp_group="g", idp_lead_group="")
    team.refresh_from_db()
    assert (team.name, team.slug, team.namespace) == ("Computer Vision", "vision", "team-vision")


def test_admin_form_shows_namespace_clash_and_saves_nothing(admin_client: Client) -> None:
    team_create(actor=None, name="ML Ops")
    response = admin_client.post(
        "/admin/accounts/team/add/",
        {
            "name": "ML_Ops",
            "slug": "",
            "idp_group": "",
            "idp_lead_group": "",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "quotas-TOTAL_FORMS": "0",
            "quotas-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "already belongs to team" in response.content.decode()
    assert Team.objects.count() == 1


def test_admin_creates_team_through_the_service(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/accounts/team/add/",
        {
            "name": "Speech",
            "slug": "",
            "idp_group": "g-speech",
            "idp_lead_group": "",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "quotas-TOTAL_FORMS": "0",
            "quotas-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    team = Team.objects.get(name="Speech")
    assert team.namespace == "team-speech"
    assert AuditEvent.objects.filter(action="team.create", object_id=str(team.pk)).exists()
