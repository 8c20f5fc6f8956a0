"""Dashboard, workload page, team page and profile with the Django test client."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.accounts import core as accounts_core
from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster, ClusterNode
from apps.workloads import core
from apps.workloads.models import Workload, WorkloadEvent
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


# --- dashboard ------------------------------------------------------------------------------


def test_dashboard_lists_my_workloads_with_live_updates(portal: Portal) -> None:
    mine = portal.workload(name="mine", state=core.RUNNING)
    portal.workload(name="teammates", owner=portal.cast.teammate, state=core.RUNNING)
    page = html(portal.client(portal.cast.owner).get("/"))
    assert f'href="/workloads/{mine.pk}/">mine</a>' in page
    assert "teammates" not in page.split('id="waiting-title"')[0]
    assert 'hx-get="/partials/dashboard/workloads/" hx-trigger="every 2s"' in page
    assert "htmx.min.js" in page


def test_dashboard_partial_shows_the_new_state(portal: Portal) -> None:
    workload = portal.workload(name="nb", kind="notebook", state=core.STARTING)
    client = portal.client(portal.cast.owner)
    assert "Starting" in html(client.get("/partials/dashboard/workloads/"))
    Workload.objects.filter(pk=workload.pk).update(state=core.RUNNING)
    partial = html(client.get("/partials/dashboard/workloads/"))
    assert "<html" not in partial
    assert '<span class="state state-running">Running</span>' in partial
    assert 'id="dashboard-live"' in partial  # the poller replaces itself and keeps polling


def test_dashboard_shows_quota_bars_used_within_guarantee_borrowed_and_limit(
    portal: Portal,
) -> None:
    # Quota of the cast: 4 GPUs guaranteed, 8 limit; 5 running = 4 within + 1 borrowed.
    portal.workload(gpu_milli=1000, replicas=5, state=core.RUNNING)
    page = html(portal.client(portal.cast.owner).get("/partials/dashboard/capacity/"))
    assert (
        'aria-label="H100-80GB: 4 GPU used within the guarantee of 4, 1 borrowed, limit 8"' in page
    )
    assert '<rect class="qbar-in" x="0" y="0" height="10" width="50.0">' in page
    assert '<rect class="qbar-borrowed" x="50.0" y="0" height="10" width="12.5">' in page
    assert '<line class="qbar-mark" x1="50.0" x2="50.0"' in page


def test_dashboard_shows_free_capacity_per_class_from_the_inventory(portal: Portal) -> None:
    cluster = Cluster.objects.create(name="sim", kubeconfig_path="/nonexistent")
    for i in range(2):
        ClusterNode.objects.create(
            cluster=cluster, name=f"h100-{i}", gpu_class=portal.cast.gpu_class, gpu_count=8
        )
    portal.workload(gpu_milli=2000, replicas=3, state=core.RUNNING)
    page = html(portal.client(portal.cast.owner).get("/"))
    section = page.split('id="capacity-title"')[1]
    assert "<strong>10</strong> GPU" in section
    assert "16 GPU on 2 nodes" in section


def test_dashboard_shows_what_is_waiting_with_position_and_estimated_start(
    portal: Portal,
) -> None:
    start = timezone.now() + timedelta(minutes=42)
    waiting = portal.workload(
        name="big-train",
        owner=portal.cast.teammate,
        state=core.QUEUED,
        queue_position=3,
        estimated_start_at=start,
        last_reason="No H100-80GB free; 2 ahead of you.",
    )
    page = html(portal.client(portal.cast.owner).get("/"))
    section = page.split('id="waiting-title"')[1]
    assert f'href="/workloads/{waiting.pk}/">big-train</a>' in section
    assert "#3" in section
    assert "No H100-80GB free; 2 ahead of you." in section
    assert "in about 41\xa0minutes" in section or "in about 42\xa0minutes" in section


def test_user_without_team_is_sent_to_the_no_team_page(portal: Portal) -> None:
    from tests.factories import UserFactory

    loner = UserFactory(username="loner")
    response = portal.client(loner).get("/")
    assert response.status_code == 302 and response["Location"] == "/accounts/no-team/"
    assert portal.client(loner).get("/workloads/new/notebook/").status_code == 302


# --- workload page --------------------------------------------------------------------------


def test_waiting_workload_page_shows_position_reason_estimate_and_advice(portal: Portal) -> None:
    workload = portal.workload(
        state=core.QUEUED,
        queue_position=2,
        estimated_start_at=timezone.now() + timedelta(hours=1),
        last_reason="Team quota reached: 8 of 8 H100-80GB in use.",
        scheduling_advice=["Ask for 0.5 GPU of A100-80GB-MIG: it is free now."],
    )
    WorkloadEvent.objects.create(
        workload=workload, from_state="pending", to_state="queued", reason="Queued for a GPU."
    )
    page = html(portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/"))
    assert 'id="queue-position">#2<' in page
    assert "Team quota reached: 8 of 8 H100-80GB in use." in page
    assert 'id="estimated-start"><time' in page
    assert "Ask for 0.5 GPU of A100-80GB-MIG: it is free now." in page
    assert "pending → <strong>queued</strong>" in page
    assert f'hx-get="/workloads/{workload.pk}/status/" hx-trigger="every 2s"' in page


def test_running_workload_page_shows_placement_and_stops_nothing_while_live(
    portal: Portal,
) -> None:
    cluster = Cluster.objects.create(name="sim", kubeconfig_path="/nonexistent")
    workload = portal.workload(
        state=core.RUNNING,
        cluster=cluster,
        gpu_milli=2000,
        placement={"cluster": "sim", "replicas": [{"node": "h100-1", "gpus": [2, 3]}]},
    )
    page = html(portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/"))
    assert 'id="placement-cluster">sim<' in page
    assert '<td class="mono">h100-1</td><td>GPU 2, GPU 3</td>' in page
    assert "2 × H100-80GB" in page


def test_finished_workload_page_stops_polling(portal: Portal) -> None:
    workload = portal.workload(state=core.SUCCEEDED)
    page = html(portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/status/"))
    assert "hx-trigger" not in page
    assert 'id="action-cancel"' not in page


def test_notebook_actions_follow_its_state_and_the_viewer(portal: Portal) -> None:
    running = portal.workload(kind="notebook", state=core.RUNNING, image=portal.notebook_image)
    owner = html(portal.client(portal.cast.owner).get(f"/workloads/{running.pk}/"))
    assert all(f'id="action-{a}"' in owner for a in ("open", "suspend", "cancel", "clone"))
    assert 'id="action-resume"' not in owner
    teammate = html(portal.client(portal.cast.teammate).get(f"/workloads/{running.pk}/"))
    assert 'id="action-open"' not in teammate and 'id="action-cancel"' not in teammate
    assert "Only its owner and platform admins can open this notebook." in teammate
    lead = html(portal.client(portal.cast.lead).get(f"/workloads/{running.pk}/"))
    assert 'id="action-cancel"' in lead and 'id="action-open"' not in lead


def test_owner_suspends_and_resumes_a_notebook(portal: Portal) -> None:
    workload = portal.workload(kind="notebook", state=core.RUNNING, image=portal.notebook_image)
    client = portal.client(portal.cast.owner)
    response = client.post(f"/workloads/{workload.pk}/suspend/")
    assert response.status_code == 302
    workload.refresh_from_db()
    assert workload.state == core.SUSPENDED
    page = html(client.get(f"/workloads/{workload.pk}/"))
    assert "suspended; its files are kept." in page
    assert 'id="action-resume"' in page
    client.post(f"/workloads/{workload.pk}/resume/")
    workload.refresh_from_db()
    assert workload.state == core.QUEUED


def test_owner_cancels_and_clones(portal: Portal) -> None:
    workload = portal.workload(name="to-cancel", state=core.QUEUED)
    client = portal.client(portal.cast.owner)
    client.post(f"/workloads/{workload.pk}/cancel/")
    workload.refresh_from_db()
    assert workload.state == core.CANCELLED
    response = client.post(f"/workloads/{workload.pk}/clone/")
    # Clone opens the form filled in (tests/portal/test_clone_and_preemption.py).
    assert response["Location"] == f"/workloads/new/training/?clone={workload.pk}"
    assert not Workload.objects.filter(name="to-cancel (copy)").exists()


def test_teammate_cannot_cancel_someone_elses_workload(portal: Portal) -> None:
    workload = portal.workload(state=core.RUNNING)
    client = portal.client(portal.cast.teammate)
    response = client.post(f"/workloads/{workload.pk}/cancel/", follow=True)
    workload.refresh_from_db()
    assert workload.state == core.RUNNING
    assert "Only the owner, a team lead or an admin may cancel" in response.content.decode()


def test_cancel_redirects_only_to_a_local_next(portal: Portal) -> None:
    workload = portal.workload(state=core.RUNNING)
    client = portal.client(portal.cast.owner)
    response = client.post(
        f"/workloads/{workload.pk}/cancel/", {"next": "https://evil.example.com/"}
    )
    assert response["Location"] == f"/workloads/{workload.pk}/"


def test_events_and_logs_say_why_when_not_placed_yet(portal: Portal) -> None:
    workload = portal.workload(state=core.QUEUED)
    client = portal.client(portal.cast.owner)
    assert "not been placed on a cluster yet" in html(
        client.get(f"/workloads/{workload.pk}/events/")
    )
    assert "not been placed on a cluster yet" in html(client.get(f"/workloads/{workload.pk}/logs/"))
    stream = client.get(f"/workloads/{workload.pk}/logs/stream/")
    assert stream["Content-Type"] == "text/event-stream"
    body = b"".join(stream.streaming_content).decode()  # type: ignore[attr-defined]
    assert body.startswith("event: unavailable\ndata: ")


# --- opening a notebook ---------------------------------------------------------------------


def test_only_owner_and_admin_may_open_a_notebook(portal: Portal, settings: Any) -> None:
    settings.NOTEBOOK_HOST = ""
    settings.NOTEBOOK_WILDCARD_HOST = ""
    workload = portal.workload(kind="notebook", state=core.RUNNING, image=portal.notebook_image)
    url = f"/workloads/{workload.pk}/open/"
    assert portal.client(portal.cast.teammate).get(url).status_code == 403
    assert portal.client(portal.cast.lead).get(url).status_code == 403
    assert portal.client(portal.cast.outsider).get(url).status_code == 404
    owner = html(portal.client(portal.cast.owner).get(url))
    assert "not published through an ingress" in owner
    assert f"/notebooks/{portal.cast.team.namespace}/{workload.pk}/" in owner
    assert "not published through an ingress" in html(portal.client(portal.cast.admin).get(url))


def test_without_an_ingress_host_open_shows_how_to_port_forward(
    portal: Portal, settings: Any
) -> None:
    settings.NOTEBOOK_HOST = ""
    settings.NOTEBOOK_WILDCARD_HOST = ""
    workload = portal.workload(kind="notebook", state=core.RUNNING, image=portal.notebook_image)
    ns = portal.cast.team.namespace
    Workload.objects.filter(pk=workload.pk).update(
        k8s_objects=[
            {"kind": "Service", "name": "nb-svc", "namespace": ns},
            {"kind": "Secret", "name": "nb-token", "namespace": ns},
        ]
    )
    page = html(portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/open/"))
    assert f"kubectl -n {ns} port-forward service/nb-svc 8888:80" in page
    assert f"http://127.0.0.1:8888/notebooks/{ns}/{workload.pk}/" in page
    assert f"kubectl -n {ns} get secret nb-token" in page


def test_open_redirects_to_the_notebook_with_a_ticket_not_the_token(
    portal: Portal, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.NOTEBOOK_HOST = "notebooks.example.com"
    settings.NOTEBOOK_WILDCARD_HOST = ""
    workload = portal.workload(kind="notebook", state=core.RUNNING, image=portal.notebook_image)
    ns = portal.cast.team.namespace
    Workload.objects.filter(pk=workload.pk).update(
        k8s_objects=[{"kind": "Ingress", "name": f"wl-{workload.pk}", "namespace": ns}]
    )
    read = []
    monkeypatch.setattr(
        "apps.web.views.notebooks.notebook_token", lambda w: read.append(w.pk) or "s3cret"
    )
    response = portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/open/")
    assert response.status_code == 302
    assert response["Location"].startswith(
        f"https://notebooks.example.com/notebooks/{ns}/{workload.pk}/?gpupaas-ticket="
    )
    assert "s3cret" not in response["Location"]
    assert response["Cache-Control"] == "no-store"
    assert read == [workload.pk]
    assert "s3cret" not in str(Workload.objects.filter(pk=workload.pk).values().get())


def test_opening_a_notebook_that_is_not_running_explains_why(portal: Portal) -> None:
    workload = portal.workload(kind="notebook", state=core.SUSPENDED, image=portal.notebook_image)
    page = html(portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/open/"))
    assert "The notebook is suspended, not running." in page


def test_only_notebooks_can_be_opened(portal: Portal) -> None:
    workload = portal.workload(state=core.RUNNING)
    assert (
        portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/open/").status_code == 404
    )


# --- team page ------------------------------------------------------------------------------


def test_team_page_shows_members_quotas_and_workloads(portal: Portal) -> None:
    portal.workload(name="owners-job", state=core.RUNNING)
    page = html(portal.client(portal.cast.lead).get(f"/teams/{portal.cast.team.slug}/"))
    for username in ("owner", "teammate", "lead"):
        assert f'<span class="muted">{username}</span>' in page
    assert "outsider" not in page
    assert "H100-80GB: 1 GPU used within the guarantee of 4" in page
    assert "owners-job" in page
    assert 'aria-label="Cancel owners-job"' in page


def test_team_page_filters_workloads(portal: Portal) -> None:
    portal.workload(name="running-train", state=core.RUNNING)
    portal.workload(name="old-train", state=core.SUCCEEDED)
    portal.workload(
        name="teammates-nb", kind="notebook", owner=portal.cast.teammate, state=core.RUNNING
    )
    client = portal.client(portal.cast.lead)
    url = f"/teams/{portal.cast.team.slug}/"
    active = html(client.get(url, {"state": "active"}))
    assert "running-train" in active and "teammates-nb" in active and "old-train" not in active
    notebooks = html(client.get(url, {"kind": "notebook"}))
    assert "teammates-nb" in notebooks and "running-train" not in notebooks
    by_owner = html(client.get(url, {"owner": portal.cast.teammate.pk}))
    assert "teammates-nb" in by_owner and "running-train" not in by_owner
    finished = html(client.get(url, {"state": "finished"}))
    assert "old-train" in finished and "running-train" not in finished


def test_team_page_pages_through_every_workload_and_keeps_the_filter(portal: Portal) -> None:
    """No workload is out of reach: 50 a page, newest first, the filter kept from page to
    page; an owner who left the team still appears in the owner filter once."""
    from apps.web.views.accounts import TEAM_WORKLOADS_PER_PAGE as per_page

    for n in range(per_page + 7):
        portal.workload(name=f"job-{n:03d}", state=core.RUNNING)
    portal.workload(name="done-job", state=core.SUCCEEDED)
    portal.workload(name="leavers-job", owner=portal.cast.outsider, state=core.SUCCEEDED)
    client = portal.client(portal.cast.lead)
    url = f"/teams/{portal.cast.team.slug}/"
    first = html(client.get(url, {"state": "active"}))
    assert f"job-{per_page + 6:03d}" in first and "job-007" in first and "job-006" not in first
    assert "Page 1 of 2" in first and "done-job" not in first
    assert "?state=active&amp;page=2" in first
    second = html(client.get(url, {"state": "active", "page": 2}))
    assert "job-006" in second and "job-000" in second and "job-007" not in second
    assert "?state=active&amp;page=1" in second and "done-job" not in second
    beyond = html(client.get(url, {"state": "active", "page": "999"}))
    assert "Page 2 of 2" in beyond
    garbage = client.get(url, {"page": "<script>"})
    assert garbage.status_code == 200 and "Page 1 of 2" in html(garbage)
    assert html(client.get(url)).count(f">{portal.cast.outsider}</option>") == 1


def test_lead_cancels_a_teammates_workload_from_the_team_page(portal: Portal) -> None:
    workload = portal.workload(owner=portal.cast.teammate, state=core.RUNNING)
    client = portal.client(portal.cast.lead)
    team_url = f"/teams/{portal.cast.team.slug}/?state=active"
    response = client.post(f"/workloads/{workload.pk}/cancel/", {"next": team_url})
    assert response["Location"] == team_url
    workload.refresh_from_db()
    assert workload.state == core.CANCELLED
    assert workload.events.last().actor == portal.cast.lead  # type: ignore[union-attr]


def test_members_see_the_team_page_read_only(portal: Portal) -> None:
    portal.workload(name="owners-job", state=core.RUNNING)
    page = html(portal.client(portal.cast.teammate).get(f"/teams/{portal.cast.team.slug}/"))
    assert "owners-job" in page
    assert "/cancel/" not in page


# --- profile and tokens ---------------------------------------------------------------------


def test_profile_shows_identity_teams_and_tokens(portal: Portal) -> None:
    api_token_create(
        actor=portal.cast.owner, name="cli", scopes=[accounts_core.SCOPE_READ], expires_at=None
    )
    page = html(portal.client(portal.cast.owner).get("/accounts/profile/"))
    assert f'href="/teams/{portal.cast.team.slug}/">Vision</a>' in page
    assert "You have 1 active token" in page
    assert 'href="/accounts/tokens/"' in page


def test_every_page_has_labelled_navigation_and_a_skip_link(portal: Portal) -> None:
    workload = portal.workload()
    client = portal.client(portal.cast.owner)
    for url in (
        "/",
        "/workloads/new/notebook/",
        f"/workloads/{workload.pk}/",
        f"/teams/{portal.cast.team.slug}/",
        "/accounts/profile/",
        "/accounts/tokens/",
        "/workloads/templates/",
        "/workloads/sizing/",
    ):
        page = html(client.get(url))
        assert '<a class="skip" href="#main">' in page, url
        assert '<nav aria-label="Main">' in page, url
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page


def test_logs_tail_and_live_follow_stream_the_containers_lines(
    portal: Portal, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = portal.workload(state=core.RUNNING)
    calls: list[dict[str, Any]] = []

    def fake_logs(**kw: Any) -> Any:
        calls.append(kw)
        yield from ["epoch 1 loss 0.9", "epoch 2 loss <0.5>"]

    monkeypatch.setattr("apps.web.views.workloads.logs.workload_logs", fake_logs)
    client = portal.client(portal.cast.owner)
    tail = html(client.get(f"/workloads/{workload.pk}/logs/"))
    assert "epoch 1 loss 0.9\nepoch 2 loss &lt;0.5&gt;\n</pre>" in tail
    stream = client.get(f"/workloads/{workload.pk}/logs/stream/")
    body = b"".join(stream.streaming_content).decode()  # type: ignore[attr-defined]
    assert body == (
        'event: line\ndata: "epoch 1 loss 0.9"\n\n'
        'event: line\ndata: "epoch 2 loss <0.5>"\n\n'
        'event: end\ndata: "The log stream ended (the container stopped)."\n\n'
    )
    assert [c.get("follow", False) for c in calls] == [False, True]
    assert stream["Cache-Control"] == "no-store"
