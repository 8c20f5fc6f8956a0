"""POST /api/v1/workloads/validate/: every rule of a submission, nothing recorded."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.plugins.cast import Cast

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
    assert response.json() == {
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
        "priority_class": "training",
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
