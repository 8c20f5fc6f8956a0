from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.orchestration.cluster_reads import LogsUnavailable
from apps.workloads import core
from apps.workloads.models import IdempotencyKey, Workload
from tests.api.conftest import Client
from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def job(cast: Cast, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "training",
        "name": "resnet",
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
    }
    body.update(overrides)
    return body


def workload_of(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
    }
    values.update(kw)
    return WorkloadFactory(**values)


# --- submit ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "extra", "priority"),
    [
        (
            "notebook",
            {"command": [], "gpu_milli": 1000, "idle_timeout_seconds": 3600},
            "development",
        ),
        ("training", {"replicas": 2, "gpu_milli": 2000, "max_runtime_seconds": 3600}, "training"),
        ("sweep", {"grid": {"lr": ["0.1", "0.01"], "bs": ["32"]}}, "batch"),
    ],
)
def test_submit_each_kind_records_a_pending_workload(
    cast: Cast, api: Client, kind: str, extra: dict[str, Any], priority: str
) -> None:
    response = api(cast.owner).post("/api/v1/workloads/", job(cast, kind=kind, **extra), "json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert response["Location"] == f"/api/v1/workloads/{body['id']}/"
    assert body["kind"] == kind
    assert body["state"] == core.PENDING
    assert body["team"] == cast.team.slug
    assert body["owner"] == "owner"
    assert body["priority_class"] == priority
    workload = Workload.objects.get(pk=body["id"])
    assert workload.owner == cast.owner
    assert workload.total_milli == body["total_milli"]
    if kind == "sweep":
        assert workload.params == {"grid": {"lr": ["0.1", "0.01"], "bs": ["32"]}, "parallelism": 2}
        assert workload.trials.count() == 2


def test_submit_needs_team_when_user_is_in_several(cast: Cast, api: Client) -> None:
    MembershipFactory(user=cast.owner, team=cast.other_team)
    client = api(cast.owner)
    response = client.post("/api/v1/workloads/", job(cast), "json")
    assert response.status_code == 400
    assert "nlp" in response.json()["fields"]["team"][0]
    response = client.post("/api/v1/workloads/", job(cast, team=cast.other_team.slug), "json")
    assert response.status_code == 201
    assert response.json()["team"] == cast.other_team.slug


def test_submit_into_another_teams_name_is_refused(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, team=cast.other_team.slug), "json"
    )
    assert response.status_code == 400
    assert response.json()["fields"]["team"] == ["You are not a member of a team “nlp”."]
    assert not Workload.objects.exists()


def test_submit_reports_each_broken_rule_in_its_field(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, gpu_milli=1500, priority_class="production"), "json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert set(body["fields"]) >= {"gpu_milli", "priority_class"}
    assert "whole GPUs" in body["fields"]["gpu_milli"][0]
    assert "gpu_milli:" in body["message"]


def test_submit_with_unknown_class_and_image_names_both(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, gpu_class="Z9", image="nope"), "json"
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"gpu_class", "image"}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"kind": "sweep"}, "grid"),
        ({"grid": {"lr": ["1"]}}, "grid"),
        ({"command": []}, "command"),
        ({"kind": "notebook"}, "command"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"kind": "inference"}, "image"),  # an endpoint needs a serving image
        ({"kind": "serving"}, "kind"),
    ],
)
def test_submit_shape_errors_name_the_field(
    cast: Cast, api: Client, overrides: dict[str, Any], field: str
) -> None:
    response = api(cast.owner).post("/api/v1/workloads/", job(cast, **overrides), "json")
    assert response.status_code == 400
    assert field in response.json()["fields"]


def test_malformed_json_gets_the_error_shape(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/workloads/", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert response.json()["fields"] == {}


# --- idempotency -----------------------------------------------------------------------------


def test_retried_post_with_same_idempotency_key_returns_the_same_workload(
    cast: Cast, api: Client
) -> None:
    client = api(cast.owner)
    first = client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert first["Idempotent-Replayed"] == "false"
    assert again["Idempotent-Replayed"] == "true"
    assert Workload.objects.count() == 1


def test_idempotency_key_reused_with_another_body_is_422(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="k-1")
    response = client.post(
        "/api/v1/workloads/", job(cast, name="other"), "json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_reused"
    assert Workload.objects.count() == 1


def test_idempotency_keys_are_per_user(cast: Cast, api: Client) -> None:
    a = api(cast.owner).post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="same")
    b = api(cast.teammate).post(
        "/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="same"
    )
    assert a.json()["id"] != b.json()["id"]
    assert b.json()["owner"] == "teammate"


def test_expired_idempotency_key_submits_again(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    first = client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="old")
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(days=2))
    again = client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="old")
    assert again.json()["id"] != first.json()["id"]
    assert again["Idempotent-Replayed"] == "false"
    assert IdempotencyKey.objects.get().workload_id == again.json()["id"]


def test_refused_submission_does_not_burn_the_key(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    bad = client.post(
        "/api/v1/workloads/", job(cast, gpu_milli=1500), "json", HTTP_IDEMPOTENCY_KEY="k"
    )
    assert bad.status_code == 400
    assert not IdempotencyKey.objects.exists()
    good = client.post("/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="k2")
    assert good.status_code == 201


def test_invalid_idempotency_key_is_refused(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/workloads/", job(cast), "json", HTTP_IDEMPOTENCY_KEY="x" * 300
    )
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["fields"]


# --- list ------------------------------------------------------------------------------------


def test_list_shows_my_teams_workloads_newest_first_and_not_other_teams(
    cast: Cast, api: Client
) -> None:
    mine = workload_of(cast)
    teammates = workload_of(cast, owner=cast.teammate)
    workload_of(cast, owner=cast.outsider, team=cast.other_team)
    response = api(cast.owner, ("read",)).get("/api/v1/workloads/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [w["id"] for w in body["results"]] == [teammates.pk, mine.pk]


def test_admin_lists_every_team(cast: Cast, api: Client) -> None:
    workload_of(cast)
    workload_of(cast, owner=cast.outsider, team=cast.other_team)
    assert api(cast.admin).get("/api/v1/workloads/").json()["count"] == 2


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=running", {"run"}),
        ("state=running,queued", {"run", "wait"}),
        ("kind=notebook", {"nb"}),
        ("owner=me", {"run", "nb"}),
        ("owner=teammate", {"wait"}),
        ("search=RU", {"run"}),
        ("priority_class=development", {"nb"}),
        ("gpu_class=H100-80GB", {"run", "wait", "nb"}),
        ("team=vision&kind=training", {"run", "wait"}),
    ],
)
def test_list_filters_combine(cast: Cast, api: Client, query: str, expected: set[str]) -> None:
    workload_of(cast, name="run", state=core.RUNNING)
    workload_of(cast, name="wait", state=core.QUEUED, owner=cast.teammate)
    workload_of(
        cast,
        name="nb",
        kind=core.KIND_NOTEBOOK,
        state=core.PENDING,
        priority_class=core.PRIORITY_DEVELOPMENT,
    )
    response = api(cast.owner).get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 200
    assert {w["name"] for w in response.json()["results"]} == expected


def test_list_refuses_unknown_state_naming_the_choices(cast: Cast, api: Client) -> None:
    response = api(cast.owner).get("/api/v1/workloads/?state=running,sleeping")
    assert response.status_code == 400
    assert "sleeping" in response.json()["fields"]["state"][0]


def test_list_pages(cast: Cast, api: Client) -> None:
    for _ in range(5):
        workload_of(cast)
    client = api(cast.owner)
    first = client.get("/api/v1/workloads/?page_size=2").json()
    assert first["count"] == 5
    assert len(first["results"]) == 2
    assert first["previous"] is None
    last = client.get(first["next"].replace("http://testserver", "")).json()
    assert last["previous"] is not None
    third = client.get("/api/v1/workloads/?page_size=2&page=3").json()
    assert len(third["results"]) == 1
    assert third["next"] is None
    assert client.get("/api/v1/workloads/?page=9").status_code == 404


def test_list_page_size_is_capped(cast: Cast, api: Client, settings: Any) -> None:
    settings.API_MAX_PAGE_SIZE = 3
    for _ in range(4):
        workload_of(cast)
    assert len(api(cast.owner).get("/api/v1/workloads/?page_size=1000").json()["results"]) == 3


def test_list_query_count_does_not_grow_with_rows(
    cast: Cast, api: Client, django_assert_max_num_queries: Any
) -> None:
    for _ in range(30):
        workload_of(cast)
    client = api(cast.owner)
    client.get("/api/v1/workloads/")  # token last-use write happens once a minute
    with django_assert_max_num_queries(2):  # token (with team ids, roles); count with the page
        assert len(client.get("/api/v1/workloads/").json()["results"]) == 30


# --- retrieve and actions --------------------------------------------------------------------


def test_teammate_can_read_but_not_cancel(cast: Cast, api: Client) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    client = api(cast.teammate)
    assert client.get(f"/api/v1/workloads/{workload.pk}/").json()["id"] == workload.pk
    response = client.post(f"/api/v1/workloads/{workload.pk}/cancel/", {}, "json")
    assert response.status_code == 403
    assert "owner, a team lead or an admin" in response.json()["message"]
    workload.refresh_from_db()
    assert workload.state == core.RUNNING


@pytest.mark.parametrize("who", ["owner", "lead", "admin"])
def test_owner_lead_and_admin_cancel(cast: Cast, api: Client, who: str) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    response = api(getattr(cast, who)).post(
        f"/api/v1/workloads/{workload.pk}/cancel/", {"reason": "wrong data"}, "json"
    )
    assert response.status_code == 200
    assert response.json()["state"] == core.CANCELLED
    assert response.json()["last_reason"] == "wrong data"


def test_delete_removes_the_workload_from_lists_and_teammates_may_not(
    cast: Cast, api: Client
) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    denied = api(cast.teammate).delete(f"/api/v1/workloads/{workload.pk}/")
    assert denied.status_code == 403
    owner = api(cast.owner)
    assert owner.delete(f"/api/v1/workloads/{workload.pk}/").status_code == 204
    assert owner.get(f"/api/v1/workloads/{workload.pk}/").status_code == 404
    assert workload.pk not in [w["id"] for w in owner.get("/api/v1/workloads/").json()["results"]]
    workload.refresh_from_db()
    assert workload.state == core.CANCELLED
    assert workload.deleted_at is not None


def test_cancelling_a_finished_workload_is_a_conflict(cast: Cast, api: Client) -> None:
    workload = workload_of(cast, state=core.SUCCEEDED)
    response = api(cast.owner).post(f"/api/v1/workloads/{workload.pk}/cancel/")
    assert response.status_code == 409
    assert response.json() == {
        "code": "conflict",
        "message": "The workload has already succeeded; nothing to cancel.",
        "fields": {},
    }


def test_suspend_and_resume_a_notebook(cast: Cast, api: Client) -> None:
    notebook = workload_of(
        cast, kind=core.KIND_NOTEBOOK, state=core.RUNNING, priority_class="development"
    )
    client = api(cast.owner)
    suspended = client.post(f"/api/v1/workloads/{notebook.pk}/suspend/")
    assert suspended.status_code == 200
    assert suspended.json()["state"] == core.SUSPENDED
    resumed = client.post(f"/api/v1/workloads/{notebook.pk}/resume/")
    assert resumed.status_code == 200
    assert resumed.json()["state"] == core.QUEUED


def test_suspending_a_training_job_is_a_conflict(cast: Cast, api: Client) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    response = api(cast.owner).post(f"/api/v1/workloads/{workload.pk}/suspend/")
    assert response.status_code == 409
    assert "Only notebooks" in response.json()["message"]


def test_clone_submits_a_copy_once_per_key(cast: Cast, api: Client) -> None:
    original = workload_of(cast, state=core.FAILED, name="run")
    client = api(cast.teammate)
    first = client.post(
        f"/api/v1/workloads/{original.pk}/clone/", {}, "json", HTTP_IDEMPOTENCY_KEY="c"
    )
    again = client.post(
        f"/api/v1/workloads/{original.pk}/clone/", {}, "json", HTTP_IDEMPOTENCY_KEY="c"
    )
    assert first.status_code == 201
    assert first.json()["id"] == again.json()["id"] != original.pk
    assert first.json()["name"] == "run (copy)"
    assert first.json()["owner"] == "teammate"
    assert Workload.objects.count() == 2


def test_events_list_state_changes_and_say_why_cluster_events_are_missing(
    cast: Cast, api: Client
) -> None:
    client = api(cast.owner)
    created = client.post("/api/v1/workloads/", job(cast), "json").json()
    client.post(f"/api/v1/workloads/{created['id']}/cancel/")
    body = client.get(f"/api/v1/workloads/{created['id']}/events/").json()
    assert [(e["from_state"], e["to_state"]) for e in body["events"]] == [
        ("", "pending"),
        ("pending", "cancelled"),
    ]
    assert body["events"][0]["actor"] == "owner"
    assert body["cluster_events"] == []
    assert "not been placed" in body["cluster_events_unavailable"]


# --- logs ------------------------------------------------------------------------------------


def test_logs_of_an_unplaced_workload_are_a_409_with_the_reason(cast: Cast, api: Client) -> None:
    workload = workload_of(cast)
    response = api(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/?tail=10")
    assert response.status_code == 409
    assert response.json() == {
        "code": "logs_unavailable",
        "message": "The workload has not been placed on a cluster yet.",
        "fields": {},
    }


def test_logs_stream_lines_and_end_with_the_reason_when_the_cluster_drops(
    cast: Cast, api: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    seen: dict[str, Any] = {}

    def fake_logs(**kwargs: Any) -> Iterator[str]:
        seen.update(kwargs)
        yield "2025-01-01T00:00:00Z epoch 1"
        yield "2025-01-01T00:00:01Z epoch 2"
        raise LogsUnavailable("The cluster cannot be reached; try again in a moment.")

    monkeypatch.setattr("apps.api.views.workloads.logs.workload_logs", fake_logs)
    response = api(cast.owner, ("read",)).get(
        f"/api/v1/workloads/{workload.pk}/logs/?tail=5&follow=true&replica=1"
    )
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    text = b"".join(response.streaming_content).decode()  # type: ignore[arg-type]
    assert text.splitlines() == [
        "2025-01-01T00:00:00Z epoch 1",
        "2025-01-01T00:00:01Z epoch 2",
        "[gpupaas] log stream ended: The cluster cannot be reached; try again in a moment.",
    ]
    assert seen == {"workload": workload, "tail_lines": 5, "follow": True, "replica": 1}


def test_logs_tail_out_of_range_is_a_field_error(cast: Cast, api: Client) -> None:
    workload = workload_of(cast)
    response = api(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/?tail=0")
    assert response.status_code == 400
    assert "tail" in response.json()["fields"]


def test_admin_may_submit_into_any_team(cast: Cast, api: Client) -> None:
    team = TeamFactory(name="Robotics")
    TeamQuotaFactory(team=team, gpu_class=cast.gpu_class)
    response = api(cast.admin).post("/api/v1/workloads/", job(cast, team=team.slug), "json")
    assert response.status_code == 201
    assert response.json()["team"] == "robotics"
    assert response.json()["owner"] == "admin"


def test_list_rows_equal_the_serializer(cast: Cast, api: Client) -> None:
    """The list builds its rows without the serializer (for speed); the shapes must not drift."""
    workload = workload_of(
        cast, state=core.QUEUED, env={"A": "1"}, params={"grid": {"x": ["1"]}}, replicas=2,
        gpu_milli=2000, last_reason="team quota reached", max_runtime_seconds=600,
    )  # fmt: skip
    Workload.objects.filter(pk=workload.pk).update(queued_at=timezone.now())
    client = api(cast.owner)
    [row] = client.get("/api/v1/workloads/").json()["results"]
    assert row == client.get(f"/api/v1/workloads/{workload.pk}/").json()
    assert row["queued_at"].endswith("Z")


def test_list_shows_exactly_the_workloads_of_the_callers_teams(cast: Cast, api: Client) -> None:
    MembershipFactory(user=cast.lead, team=cast.other_team)
    mine = {workload_of(cast, team=cast.team, owner=cast.owner).pk for _ in range(2)}
    theirs = {workload_of(cast, team=cast.other_team, owner=cast.outsider).pk for _ in range(2)}
    expected = {
        cast.owner: mine,
        cast.teammate: mine,
        cast.lead: mine | theirs,  # a member of both teams
        cast.outsider: theirs,
        cast.admin: mine | theirs,
    }
    for user, ids in expected.items():
        listed = {w["id"] for w in api(user).get("/api/v1/workloads/").json()["results"]}
        assert listed == ids, user
