"""Opting out of requeue, from every door, and what a preempted opted-out workload becomes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core
from apps.workloads.models import Workload
from gpupaas_cli import spec
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast
from tests.scheduling.test_services import add_nodes, submit


def test_the_cli_spec_says_requeue_false_and_refuses_anything_but_a_boolean() -> None:
    base = {"kind": "job", "name": "a", "gpu_class": "A100", "image": "pt", "gpu": 1}
    assert spec.build_request({**base, "requeue": False}, {})["requeue_on_preemption"] is False
    assert spec.build_request(base, {"requeue": False})["requeue_on_preemption"] is False
    assert "requeue_on_preemption" not in spec.build_request(base, {})
    with pytest.raises(spec.SpecError, match="requeue must be true"):
        spec.build_request({**base, "requeue": "no"}, {})


@pytest.mark.django_db
def test_the_api_and_the_portal_record_the_opt_out_and_default_to_requeue(cast: Cast) -> None:
    _, token = api_token_create(actor=cast.owner, name="t", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body: dict[str, Any] = {
        "kind": "training",
        "name": "resnet",
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
    }
    opted = api.post("/api/v1/workloads/", {**body, "requeue_on_preemption": False}, "json")
    assert opted.status_code == 201, opted.json()
    assert opted.json()["requeue_on_preemption"] is False
    assert api.post("/api/v1/workloads/", body, "json").json()["requeue_on_preemption"] is True
    bad = api.post("/api/v1/workloads/", {**body, "requeue_on_preemption": "maybe"}, "json")
    assert bad.status_code == 400 and "requeue_on_preemption" in bad.json()["fields"]

    portal = Client()
    portal.force_login(cast.owner)
    form = {
        "action": "submit",
        "name": "from-portal",
        "team": str(cast.team.pk),
        "gpu_class": str(cast.gpu_class.pk),
        "image": str(cast.image.pk),
        "gpu_milli": "1000",
        "replicas": "1",
        "command": "python train.py",
    }
    portal.post("/workloads/new/training/", {**form, "requeue_on_preemption": "no"})
    portal.post("/workloads/new/training/", {**form, "name": "kept"})
    recorded = dict(
        Workload.objects.filter(name__in=("from-portal", "kept")).values_list(
            "name", "requeue_on_preemption"
        )
    )
    assert recorded == {"from-portal": False, "kept": True}


@pytest.mark.django_db
def test_a_preempted_workload_that_opted_out_ends_after_its_grace_period(
    cast: Cast, settings: Any
) -> None:
    settings.SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = 0
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = None  # the classes' own: batch has 30 s
    add_nodes(cast.gpu_class)
    sweep = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        gpu_milli=8000,
        priority_class="batch",
        requeue_on_preemption=False,
        state=core.RUNNING,
        admitted_at=timezone.now() - timedelta(hours=1),
        placement={
            "cluster": "hub",
            "replicas": [{"node": "h100-80gb-0", "gpus": list(range(8)), "units": 1000}],
        },
    )
    submit(cast, gpu_milli=2000)
    now = timezone.now()
    scheduling_cycle_run(now=now)
    sweep.refresh_from_db()
    assert sweep.state == core.PREEMPTED
    assert "It has 30 s to save a checkpoint; you chose not to requeue it" in sweep.last_reason
    scheduling_cycle_run(now=now + timedelta(seconds=10))
    sweep.refresh_from_db()
    assert sweep.state == core.PREEMPTED
    run = scheduling_cycle_run(now=now + timedelta(seconds=31))
    assert run.requeued == ()
    sweep.refresh_from_db()
    assert sweep.state == core.FAILED
    assert "you chose not to requeue it: it ends here" in sweep.last_reason
