"""A refused page explains itself to a signed-in person: a teammate following a direct notebook
link learns whose notebook it is and whom to ask; an outsider gets a 404 that names nothing of
the other team, only their own team's leads; the API and signed-out visitors keep their
answers."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts.models import Membership
from apps.workloads import core
from tests.factories import MembershipFactory, UserFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def notebook(portal: Portal) -> object:
    return portal.workload(
        name="bert-finetune",
        kind=core.KIND_NOTEBOOK,
        state=core.RUNNING,
        image=portal.notebook_image,
    )


def test_a_teammate_on_a_direct_notebook_link_learns_whose_it_is_and_whom_to_ask(
    portal: Portal,
) -> None:
    cast = portal.cast
    cast.lead.email = "lead@example.com"
    cast.lead.save()
    nb = notebook(portal)
    page = portal.client(cast.teammate).get(f"/workloads/{nb.pk}/open/")  # type: ignore[attr-defined]
    assert page.status_code == 403
    html = page.content.decode()
    assert "<h1>403 Forbidden</h1>" not in html
    assert "You may not do this with the notebook “bert-finetune”" in html
    assert "Only the notebook&#x27;s owner and platform admins may open it." in html
    assert "It belongs to <strong>Owner</strong> of the team <strong>Vision</strong>." in html
    assert 'href="mailto:lead@example.com"' in html
    assert "clone it" in html


def test_an_outsider_on_the_same_link_learns_nothing_of_the_other_team(portal: Portal) -> None:
    cast = portal.cast
    nlp_lead = UserFactory(username="nlp-lead", email="nlp-lead@example.com")
    MembershipFactory(user=nlp_lead, team=cast.other_team, role=Membership.Role.LEAD)
    nb = notebook(portal)
    for url in (f"/workloads/{nb.pk}/open/", f"/workloads/{nb.pk}/"):  # type: ignore[attr-defined]
        page = portal.client(cast.outsider).get(url)
        assert page.status_code == 404
        html = page.content.decode()
        assert "bert-finetune" not in html and "Vision" not in html and "Owner" not in html
        assert "Nothing to show here" in html
        assert "a team you are not a member of" in html
        assert "<strong>NLP</strong>" in html and "nlp-lead@example.com" in html
    # The same page for an address that never existed: nothing tells the two apart.
    missing = portal.client(cast.outsider).get("/workloads/999999/open/")
    assert missing.status_code == 404
    assert "Nothing to show here" in missing.content.decode()


def test_a_member_on_a_lead_page_is_told_the_team_and_its_leads(portal: Portal) -> None:
    cast = portal.cast
    page = portal.client(cast.owner).post(f"/teams/{cast.team.slug}/policy/set/", {})
    assert page.status_code == 403
    html = page.content.decode()
    assert "Its leads can help" in html and "lead" in html


def test_a_person_without_a_team_is_pointed_to_getting_one(portal: Portal) -> None:
    loner = UserFactory(username="loner")
    page = portal.client(loner).get("/teams/vision/")
    assert page.status_code == 404
    assert "You are not in a team yet" in page.content.decode()


def test_the_api_and_signed_out_visitors_keep_their_answers(portal: Portal) -> None:
    api = portal.client(portal.cast.outsider).get("/api/v1/no-such-thing/")
    assert api.status_code == 404 and "Nothing to show here" not in api.content.decode()
    anonymous = Client().get("/no-such-page/")
    assert anonymous.status_code == 404
    assert "Your teams" not in anonymous.content.decode()
