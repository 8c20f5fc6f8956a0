"""The workloads list: what each member of the cast sees, filters, pages in constant
queries, bulk cancel of only what the caller may cancel, and edit-and-resubmit."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.audit.models import AuditEvent
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import ImageFactory, WorkloadFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def _names(html: str) -> list[str]:
    import re

    return re.findall(r'<td data-label="Name"><a href="/workloads/\d+/">([^<]+)</a>', html)


@pytest.fixture
def listed(portal: Portal) -> Portal:
    cast = portal.cast
    portal.workload(name="mine-running", state=core.RUNNING)
    portal.workload(name="mates-queued", state=core.QUEUED, owner=cast.teammate)
    portal.workload(
        name="bert-done",
        state=core.SUCCEEDED,
        image=ImageFactory(name="HF", reference="ghcr.io/huggingface/transformers:4"),
        command=["accelerate", "launch", "ft.py"],
    )
    WorkloadFactory(
        name="theirs",
        team=cast.other_team,
        owner=cast.outsider,
        gpu_class=cast.gpu_class,
        image=portal.training_image,
        state=core.RUNNING,
    )
    return portal


def test_members_see_their_teams_and_admins_all(listed: Portal) -> None:
    cast = listed.cast
    mine = _names(listed.client(cast.owner).get("/workloads/").content.decode())
    assert sorted(mine) == ["bert-done", "mates-queued", "mine-running"]
    assert _names(listed.client(cast.outsider).get("/workloads/").content.decode()) == ["theirs"]
    assert len(_names(listed.client(cast.admin).get("/workloads/").content.decode())) == 4


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("q=huggingface", ["bert-done"]),
        ("q=ft.py", ["bert-done"]),
        ("state=finished", ["bert-done"]),
        ("state=waiting", ["mates-queued"]),
        ("owner=teammate", ["mates-queued"]),
        ("owner=me&sort=name", ["bert-done", "mine-running"]),
        ("team=nlp", []),  # not one of my teams: not offered, a form error, nothing shown
        ("created_from=2000-01-01&created_to=2000-01-02", []),
    ],
)
def test_filters(listed: Portal, query: str, names: list[str]) -> None:
    html = listed.client(listed.cast.owner).get(f"/workloads/?{query}").content.decode()
    found = _names(html)
    if query == "team=nlp":
        assert "theirs" not in html
        return
    assert sorted(found) == sorted(names) if "sort" not in query else found == names


def test_bad_filters_are_form_errors_not_500s(listed: Portal) -> None:
    client = listed.client(listed.cast.owner)
    response = client.get("/workloads/?created_from=2026-03-05&created_to=2026-03-01&sort=x")
    assert response.status_code == 400
    body = response.content.decode()
    assert "The last day comes before the first." in body
    assert "Select a valid choice" in body


def _queries(client: Any, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


def test_pages_take_the_same_queries_however_many_rows(listed: Portal) -> None:
    client = listed.client(listed.cast.owner)
    client.get("/workloads/")  # the session
    few = _queries(client, "/workloads/?sort=name")
    # Session, user, the form's teams and classes, team ids, the count, the page, the teams
    # the caller leads (once: the cancel boxes and the menu's overview link both ask), the
    # menu's memberships with their teams (has_team asks the same list), unread notices, the
    # caller's platform roles (their role groups, once).
    assert few == 11
    cast = listed.cast
    Workload.objects.bulk_create(
        [
            Workload(
                name=f"bulk-{i}",
                kind=core.KIND_TRAINING,
                state=core.SUCCEEDED,
                owner=cast.owner,
                team=cast.team,
                gpu_class=cast.gpu_class,
                image=listed.training_image,
                gpu_milli=1000,
                charged_milli=1000,
                priority_class=core.PRIORITY_TRAINING,
            )
            for i in range(300)
        ]
    )
    assert _queries(client, "/workloads/?page=4&sort=name") == few
    assert "Page 4 of 7" in client.get("/workloads/?page=4&sort=name").content.decode()


def test_bulk_cancel_cancels_only_what_i_may(listed: Portal) -> None:
    cast = listed.cast
    ids = {w.name: w.pk for w in Workload.objects.all()}
    client = listed.client(cast.teammate)
    response = client.post(
        "/workloads/cancel/",
        {"ids": [ids["mine-running"], ids["mates-queued"], ids["theirs"], "junk"]},
        follow=True,
    )
    states = dict(Workload.objects.values_list("name", "state"))
    assert states["mates-queued"] == core.CANCELLED  # the teammate's own
    assert states["mine-running"] == core.RUNNING  # the owner's: a teammate may not
    assert states["theirs"] == core.RUNNING  # another team's: not even seen
    body = response.content.decode()
    assert "Cancelled 1: mates-queued." in body
    assert "mine-running: Only the owner, a team lead or an admin may cancel" in body
    assert "theirs" not in body
    assert AuditEvent.objects.filter(action="workload.cancel").count() == 1


def test_a_lead_cancels_the_teams_workloads_in_one_go(listed: Portal) -> None:
    cast = listed.cast
    running = list(
        Workload.objects.filter(team=cast.team, state__in=[core.RUNNING, core.QUEUED]).values_list(
            "pk", flat=True
        )
    )
    listed.client(cast.lead).post("/workloads/cancel/", {"ids": running})
    assert set(Workload.objects.filter(pk__in=running).values_list("state", flat=True)) == {
        core.CANCELLED
    }


def test_checkboxes_only_where_cancelling_is_allowed(listed: Portal) -> None:
    cast = listed.cast
    html = listed.client(cast.teammate).get("/workloads/").content.decode()
    mates = Workload.objects.get(name="mates-queued").pk
    mine = Workload.objects.get(name="mine-running").pk
    done = Workload.objects.get(name="bert-done").pk
    assert f'id="tick-{mates}"' in html
    assert f'id="tick-{mine}"' not in html and f'id="tick-{done}"' not in html


def test_finished_workloads_can_be_edited_and_resubmitted(listed: Portal) -> None:
    done = Workload.objects.get(name="bert-done")
    client = listed.client(listed.cast.owner)
    html = client.get("/workloads/").content.decode()
    assert f'href="/workloads/{done.pk}/clone/" aria-label="Edit and resubmit bert-done"' in html
    form = client.get(f"/workloads/{done.pk}/clone/", follow=True).content.decode()
    assert "copied from" in form and 'value="bert-done' in form
