"""Every portal page checks team ownership on the server: an outsider gets 404 for another
team's objects, whatever id or slug they put in the URL, and changes nothing."""

from __future__ import annotations

import pytest

from apps.workloads import core
from apps.workloads.models import RequestTemplate, Workload
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db

WORKLOAD_GETS = (
    "/workloads/{id}/",
    "/workloads/{id}/status/",
    "/workloads/{id}/events/",
    "/workloads/{id}/logs/",
    "/workloads/{id}/logs/download/",
    "/workloads/{id}/logs/stream/",
    "/workloads/{id}/open/",
)
WORKLOAD_POSTS = (
    "/workloads/{id}/cancel/",
    "/workloads/{id}/suspend/",
    "/workloads/{id}/resume/",
    "/workloads/{id}/clone/",
)


@pytest.fixture
def notebook(portal: Portal) -> Workload:
    return portal.workload(
        name="vision-secret-nb",
        kind="notebook",
        state=core.RUNNING,
        image=portal.notebook_image,
    )


@pytest.mark.parametrize("url", WORKLOAD_GETS)
def test_outsider_gets_404_for_another_teams_workload_pages(
    portal: Portal, notebook: Workload, url: str
) -> None:
    response = portal.client(portal.cast.outsider).get(url.format(id=notebook.pk))
    assert response.status_code == 404
    assert b"vision-secret-nb" not in response.content


@pytest.mark.parametrize("url", WORKLOAD_POSTS)
def test_outsider_gets_404_for_actions_on_another_teams_workload(
    portal: Portal, notebook: Workload, url: str
) -> None:
    before = Workload.objects.count()
    response = portal.client(portal.cast.outsider).post(url.format(id=notebook.pk))
    assert response.status_code == 404
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING
    assert Workload.objects.count() == before


@pytest.mark.parametrize("url", WORKLOAD_GETS + WORKLOAD_POSTS)
def test_guessed_ids_that_do_not_exist_are_404_too(portal: Portal, url: str) -> None:
    client = portal.client(portal.cast.owner)
    method = client.post if url in WORKLOAD_POSTS else client.get
    assert method(url.format(id=987654)).status_code == 404


def test_outsider_gets_404_for_another_teams_page(portal: Portal) -> None:
    client = portal.client(portal.cast.outsider)
    assert client.get(f"/teams/{portal.cast.team.slug}/").status_code == 404
    assert client.get("/teams/no-such-team/").status_code == 404
    # Their own team's page works, so the 404 is about ownership, not the page.
    assert client.get(f"/teams/{portal.cast.other_team.slug}/").status_code == 200


def test_outsider_gets_404_for_another_users_template(portal: Portal) -> None:
    template = RequestTemplate.objects.create(
        name="vision-template",
        owner=portal.cast.owner,
        team=portal.cast.team,
        kind="notebook",
        values={"name": "x"},
    )
    client = portal.client(portal.cast.outsider)
    assert client.get(f"/workloads/new/notebook/?template={template.pk}").status_code == 404
    assert client.post(f"/workloads/templates/{template.pk}/delete/").status_code == 404
    assert b"vision-template" not in client.get("/workloads/templates/").content
    assert RequestTemplate.objects.filter(pk=template.pk).exists()


def test_outsider_sees_nothing_of_another_team_on_the_dashboard(
    portal: Portal, notebook: Workload
) -> None:
    portal.workload(name="vision-waiting", state=core.QUEUED, queue_position=1)
    client = portal.client(portal.cast.outsider)
    for url in ("/", "/partials/dashboard/workloads/", "/partials/dashboard/capacity/"):
        body = client.get(url).content
        assert b"vision-secret-nb" not in body and b"vision-waiting" not in body
        assert b"Vision" not in body


def test_admin_sees_every_teams_pages(portal: Portal, notebook: Workload) -> None:
    client = portal.client(portal.cast.admin)
    assert client.get(f"/workloads/{notebook.pk}/").status_code == 200
    assert client.get(f"/teams/{portal.cast.team.slug}/").status_code == 200


def test_anonymous_users_are_sent_to_sign_in(portal: Portal, notebook: Workload) -> None:
    from django.test import Client

    for url in ("/", f"/workloads/{notebook.pk}/", f"/teams/{portal.cast.team.slug}/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


TEAM_GOVERNANCE_POSTS = (
    ("/teams/{slug}/policy/set/", {"max_gpus": "64"}),
    ("/teams/{slug}/budget/set/", {"month": "2026-11", "amount": "1", "thresholds": "50"}),
    ("/teams/{slug}/budget/approve/", {}),
)


def test_outsider_gets_404_for_another_teams_policy_and_budget(portal: Portal) -> None:
    from apps.audit.models import AuditEvent

    slug = portal.cast.team.slug
    client = portal.client(portal.cast.outsider)
    for url in (f"/teams/{slug}/policy/", f"/teams/{slug}/budget/"):
        assert client.get(url).status_code == 404, url
    before = AuditEvent.objects.count()
    for url, data in TEAM_GOVERNANCE_POSTS:
        assert client.post(url.format(slug=slug), data).status_code == 404, url
    assert AuditEvent.objects.count() == before
    other = portal.cast.other_team.slug
    assert client.get(f"/teams/{other}/policy/").status_code == 200
    assert client.get(f"/teams/{other}/budget/").status_code == 200


ENDPOINT_URLS = (
    ("get", "/workloads/{id}/endpoint/"),
    ("post", "/workloads/{id}/scale/"),
    ("post", "/workloads/{id}/wake/"),
    ("post", "/workloads/{id}/rollout/"),
    ("post", "/workloads/{id}/keys/"),
    ("post", "/workloads/{id}/keys/{key}/revoke/"),
)


@pytest.mark.parametrize(("method", "url"), ENDPOINT_URLS)
def test_outsider_gets_404_for_another_teams_endpoint(
    portal: Portal, method: str, url: str
) -> None:
    from apps.serving.models import EndpointKey

    endpoint = portal.workload(
        name="vision-secret-llm",
        kind=core.KIND_INFERENCE,
        state=core.SUSPENDED,
        params={"endpoint": {"min_replicas": 0, "max_replicas": 2, "target_replicas": 0}},
    )
    key = EndpointKey.objects.create(
        team=portal.cast.team, endpoint_id=endpoint.pk, name="k", lookup="x", digest="1" * 64
    )
    client = portal.client(portal.cast.outsider)
    path = url.format(id=endpoint.pk, key=key.pk)
    response = getattr(client, method)(path, {"replicas": "2", "name": "mine", "env": "A=1"})
    assert response.status_code == 404
    assert b"vision-secret-llm" not in response.content
    endpoint.refresh_from_db()
    key.refresh_from_db()
    assert endpoint.state == core.SUSPENDED and endpoint.params["endpoint"]["target_replicas"] == 0
    assert key.revoked_at is None and EndpointKey.objects.count() == 1
