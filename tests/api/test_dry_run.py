"""POST /api/v1/workloads/validate/: every rule of a submission, nothing recorded."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.plugins.cast import Cast
from tests.preemption import one_node, running_on_every_gpu

pytestmark = pytest.mark.django_db

URL = "/api/v1/workloads/validate/"


def body(cast: Cast, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": "training",
        "name": "resnet",
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 2000,
        "replicas": 2,
        "command": ["python", "train.py"],
    }
    values.update(overrides)
    return values


def test_dry_run_answers_what_would_be_charged_and_records_nothing(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(URL, body(cast), "json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    verdict = answer.pop("verdict")
    assert verdict["outcome"] == "waits"  # no node of the class is known yet
    assert answer == {
        "valid": True,
        "kind": "training",
        "name": "resnet",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 2000,
        "charged_milli": 2000,
        "replicas": 2,
        "total_milli": 4000,
        "parallelism": None,
        "at_once_milli": 4000,
        "priority_class": "training",
        "hourly_cost": f"{4 * cast.gpu_class.hourly_cost:.2f}",
        "currency": "EUR",
        "would_preempt": [],
        "confirmation_needed": False,
    }
    assert not Workload.objects.exists()
    assert not AuditEvent.objects.filter(action="workload.submit").exists()


def test_dry_run_of_a_sweep_charges_every_point_of_the_grid(cast: Cast, api: Client) -> None:
    grid = {"lr": ["0.1", "0.01"], "bs": ["32", "64"]}
    response = api(cast.owner).post(
        URL, body(cast, kind="sweep", gpu_milli=1000, replicas=None, grid=grid), "json"
    )
    assert response.status_code == 200, response.json()
    assert (response.json()["replicas"], response.json()["total_milli"]) == (4, 4000)
    assert response.json()["priority_class"] == "batch"


def test_dry_run_of_a_sweep_above_the_limit_in_all_within_it_at_once_is_not_refused(
    cast: Cast, api: Client
) -> None:
    # 12 trials × 1 GPU = 12 GPU, more than the limit of 8; 3 at once × 1 GPU = 3 GPU is within
    # it, and each trial is charged on its own: the verdict is the cycle's for its trials.
    grid = {"lr": ["0.1", "0.01", "0.001"], "bs": ["8", "16", "32", "64"]}
    response = api(cast.owner).post(
        URL,
        body(cast, kind="sweep", gpu_milli=1000, replicas=None, grid=grid, parallelism=3),
        "json",
    )
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert (answer["replicas"], answer["parallelism"], answer["at_once_milli"]) == (12, 3, 3000)
    verdict = answer["verdict"]
    assert verdict["outcome"] != "refused", verdict
    assert "limit" not in verdict["headline"]
    assert verdict["trials_at_once"] == 3


def test_dry_run_refuses_exactly_as_a_submission_does(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    for bad in (
        body(cast, gpu_milli=1500, priority_class="production"),
        body(cast, kind="sweep", grid={"ñ": ["1"]}, replicas=None),
        body(cast, env={"LD_PRELOAD": "libhook.so"}),
        body(cast, gpu_milli=8000, replicas=4),  # above the team's limit
    ):
        checked = client.post(URL, bad, "json")
        submitted = client.post("/api/v1/workloads/", bad, "json")
        assert checked.status_code == submitted.status_code == 400
        assert checked.json() == submitted.json()
    assert not Workload.objects.exists()


def test_dry_run_applies_the_role(cast: Cast, api: Client) -> None:
    production = body(cast, priority_class="production")
    member = api(cast.owner).post(URL, production, "json")
    assert member.status_code == 400
    assert member.json()["fields"] == {
        "priority_class": [
            "You may not use the production class for a training job; choose one of: "
            "training, development, batch."
        ]
    }
    lead = api(cast.lead).post(URL, production, "json")
    assert lead.status_code == 200
    assert lead.json()["priority_class"] == "production"


def test_outsider_dry_run_into_another_team_is_refused(cast: Cast, api: Client) -> None:
    response = api(cast.outsider).post(URL, body(cast, team=cast.team.slug), "json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"team": ["You are not a member of a team “vision”."]}


def test_create_with_dry_run_true_answers_the_verdict_and_creates_nothing(
    cast: Cast, api: Client
) -> None:
    one_node(cast.gpu_class)
    client = api(cast.owner)
    created = client.post("/api/v1/workloads/?dry_run=true", body(cast, replicas=1), "json")
    checked = client.post(URL, body(cast, replicas=1), "json")
    assert created.status_code == checked.status_code == 200, created.json()
    assert created.json() == checked.json()
    verdict = created.json()["verdict"]
    node = f"{cast.gpu_class.name.lower()}-0"
    assert verdict["outcome"] == "starts"
    assert verdict["nodes"] == [node]
    assert verdict["headline"].startswith(f"Starts now on {node}")
    assert not Workload.objects.exists()


def test_dry_run_verdict_waits_with_position_reason_and_estimate(cast: Cast, api: Client) -> None:
    running_on_every_gpu(
        one_node(cast.gpu_class),
        team=cast.team,
        owner=cast.teammate,
        kind=Workload.Kind.TRAINING,
        priority_class=Workload.Priority.TRAINING,
        max_runtime_seconds=3 * 3600,  # admitted 2 h ago: frees its GPUs in about 1 h
    )
    response = api(cast.owner).post(
        "/api/v1/workloads/?dry_run=true", body(cast, replicas=1), "json"
    )
    assert response.status_code == 200, response.json()
    verdict = response.json()["verdict"]
    assert verdict["outcome"] == "waits"
    assert verdict["queue_position"] == 1
    assert 55 * 60 <= verdict["estimated_wait_seconds"] <= 65 * 60
    assert verdict["headline"].startswith("Waits: #1, about 1 h")
    assert verdict["reason"].startswith("Team quota reached")
    assert "because team quota reached" in verdict["headline"]
    assert Workload.objects.count() == 1


def test_dry_run_verdict_would_preempt_names_the_victims(cast: Cast, api: Client) -> None:
    notebook = running_on_every_gpu(
        one_node(cast.gpu_class), name="big", team=cast.team, owner=cast.teammate
    )
    response = api(cast.owner).post("/api/v1/workloads/?dry_run=1", body(cast, replicas=1), "json")
    assert response.status_code == 200, response.json()
    verdict = response.json()["verdict"]
    assert verdict["outcome"] == "preempts"
    assert verdict["headline"].startswith(f"Would preempt: #{notebook.pk} notebook “big”")
    assert Workload.objects.count() == 1


def test_dry_run_flag_that_is_not_a_boolean_is_a_400(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post("/api/v1/workloads/?dry_run=maybe", body(cast), "json")
    assert response.status_code == 400
    assert "dry_run" in response.json()["fields"]
    assert not Workload.objects.exists()


def test_dry_run_of_a_refused_request_is_the_same_400(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    bad = body(cast, gpu_milli=8000, replicas=4)
    checked = client.post("/api/v1/workloads/?dry_run=true", bad, "json")
    submitted = client.post("/api/v1/workloads/", bad, "json")
    assert checked.status_code == submitted.status_code == 400
    assert checked.json() == submitted.json()
