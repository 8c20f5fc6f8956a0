"""The API asks before a submission preempts running work of yours or your teammates': the dry
run lists it, a submission or clone without ``confirm_preemption`` is a 409 naming it."""

from __future__ import annotations

from typing import Any

import pytest

from apps.workloads import core
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.plugins.cast import Cast
from tests.preemption import one_node, running_on_every_gpu

pytestmark = pytest.mark.django_db


def body(cast: Cast, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": "training",
        "name": "big-train",
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 8000,
        "command": ["torchrun", "train.py"],
    }
    values.update(overrides)
    return values


@pytest.fixture
def notebook(cast: Cast) -> Workload:
    """The teammate's development notebook on every GPU of the only node."""
    return running_on_every_gpu(
        one_node(cast.gpu_class), name="big", team=cast.team, owner=cast.teammate
    )


def expected(cast: Cast, notebook: Workload) -> dict[str, Any]:
    return {
        "id": notebook.pk,
        "name": "big",
        "kind": "notebook",
        "owner": "teammate",
        "team": cast.team.slug,
        "gpus": "8 GPUs H100-80GB",
        "total_milli": 8000,
        "yours": False,
        "same_team": True,
    }


def test_dry_run_names_what_the_request_would_preempt(
    cast: Cast, api: Client, notebook: Workload
) -> None:
    response = api(cast.owner).post("/api/v1/workloads/validate/", body(cast), "json")
    assert response.status_code == 200, response.json()
    assert response.json()["would_preempt"] == [expected(cast, notebook)]
    assert response.json()["confirmation_needed"] is True
    assert Workload.objects.count() == 1


def test_submission_that_would_preempt_a_teammate_is_409_until_confirmed(
    cast: Cast, api: Client, notebook: Workload
) -> None:
    client = api(cast.owner)
    refused = client.post("/api/v1/workloads/", body(cast), "json", HTTP_IDEMPOTENCY_KEY="k1")
    assert refused.status_code == 409, refused.json()
    assert refused.json()["code"] == "would_preempt"
    assert (
        f"#{notebook.pk} notebook “big” (teammate, 8 GPUs H100-80GB)" in refused.json()["message"]
    )
    assert refused.json()["would_preempt"] == [expected(cast, notebook)]
    assert not Workload.objects.filter(name="big-train").exists()

    confirmed = client.post(
        "/api/v1/workloads/", body(cast, confirm_preemption=True), "json", HTTP_IDEMPOTENCY_KEY="k2"
    )
    assert confirmed.status_code == 201, confirmed.json()
    assert confirmed.json()["state"] == core.PENDING
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING  # the scheduling cycle preempts, not the submission


def test_clone_that_would_preempt_a_teammate_is_409_until_confirmed(
    cast: Cast, api: Client, notebook: Workload
) -> None:
    original = Workload.objects.create(
        name="old-train",
        kind="training",
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        gpu_milli=8000,
        charged_milli=8000,
        command=["torchrun", "train.py"],
        state=core.SUCCEEDED,
    )
    url = f"/api/v1/workloads/{original.pk}/clone/"
    refused = api(cast.owner).post(url, {}, "json")
    assert refused.status_code == 409
    assert refused.json()["would_preempt"][0]["id"] == notebook.pk
    confirmed = api(cast.owner).post(url, {"confirm_preemption": True}, "json")
    assert confirmed.status_code == 201
    assert confirmed.json()["name"] == "old-train (copy)"


def test_another_teams_borrowed_work_is_named_without_saying_whose(cast: Cast, api: Client) -> None:
    theirs = running_on_every_gpu(
        one_node(cast.gpu_class),
        name="nlp-secret",
        team=cast.other_team,
        owner=cast.outsider,
        borrowed=True,
    )
    client = api(cast.owner)
    dry = client.post("/api/v1/workloads/validate/", body(cast, gpu_milli=2000), "json")
    assert dry.json()["would_preempt"] == [
        {
            "id": None,
            "name": None,
            "kind": "notebook",
            "owner": None,
            "team": cast.other_team.slug,
            "gpus": "8 GPUs H100-80GB",
            "total_milli": 8000,
            "yours": False,
            "same_team": False,
        }
    ]
    assert dry.json()["confirmation_needed"] is False
    assert "nlp-secret" not in dry.content.decode()
    submitted = client.post("/api/v1/workloads/", body(cast, gpu_milli=2000), "json")
    assert submitted.status_code == 201
    theirs.refresh_from_db()
    assert theirs.state == core.RUNNING


def waiting_queue(cast: Cast, count: int) -> None:
    """``count`` waiting requests of another team on the class: the queue a dry run reads."""
    for n in range(count):
        Workload.objects.create(
            name=f"queued-{n}",
            kind="training",
            owner=cast.outsider,
            team=cast.other_team,
            gpu_class=cast.gpu_class,
            image=cast.image,
            gpu_milli=1000,
            charged_milli=1000,
            command=["python", "train.py"],
            state=core.QUEUED,
        )


def submit_rows_read(cast: Cast, api: Client, name: str) -> int:
    """Rows PostgreSQL returned to the statements of one API submission."""
    from django.db import connection

    rows = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal rows
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("SELECT"):
            rows += max(0, context["cursor"].rowcount)
        return result

    client = api(cast.owner)
    with connection.execute_wrapper(count):
        response = client.post("/api/v1/workloads/", body(cast, name=name, gpu_milli=1000), "json")
    assert response.status_code == 201, response.json()
    return rows


def test_a_submission_that_can_stop_no_teammate_does_not_read_the_whole_queue(
    cast: Cast, api: Client
) -> None:
    """Nothing of the team runs on the class that the request's class may preempt, so no
    teammate can be stopped: the submission answers without the dry run, and what it reads
    does not grow with the queue (a dry run reads every live workload)."""
    one_node(cast.gpu_class)
    running_on_every_gpu(
        one_node(cast.gpu_class, "h100-1"),
        name="theirs",
        team=cast.other_team,
        owner=cast.outsider,
        borrowed=True,
    )
    # The team's own running work is of a higher class than the request: it cannot be stopped.
    running_on_every_gpu(
        one_node(cast.gpu_class, "h100-2"),
        name="ours",
        team=cast.team,
        owner=cast.teammate,
        priority_class=Workload.Priority.PRODUCTION,
        kind=Workload.Kind.INFERENCE,
    )
    small = submit_rows_read(cast, api, "first")
    waiting_queue(cast, 60)
    large = submit_rows_read(cast, api, "second")
    assert 0 < small == large


@pytest.mark.parametrize("teammate_class", ["development", "batch", "training", "production"])
def test_the_api_asks_exactly_when_the_full_dry_run_names_a_teammate(
    cast: Cast, api: Client, teammate_class: str
) -> None:
    """The short way and the scheduler's whole dry run agree: a training request asks first
    exactly when the dry run names the teammate's work (a lower class), never otherwise."""
    node = one_node(cast.gpu_class)
    running_on_every_gpu(
        node,
        name="big",
        team=cast.team,
        owner=cast.teammate,
        priority_class=teammate_class,
        kind=Workload.Kind.INFERENCE if teammate_class == "production" else Workload.Kind.NOTEBOOK,
    )
    dry = api(cast.owner).post("/api/v1/workloads/validate/", body(cast), "json").json()
    response = api(cast.owner).post("/api/v1/workloads/", body(cast), "json")
    expect_ask = teammate_class in ("development", "batch")
    assert dry["confirmation_needed"] is expect_ask
    assert response.status_code == (409 if expect_ask else 201), response.json()
