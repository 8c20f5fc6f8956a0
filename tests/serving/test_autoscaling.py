"""The scaling loop's pass on the database: samples recorded, scale-ups asked through the one
scaling service (they then wait in the scheduler's queue), idle endpoints scaled to zero."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from apps.serving.autoscaling import Reading, autoscale_pass
from apps.serving.models import EndpointSample
from apps.workloads import core
from apps.workloads.models import Workload
from tests.credentials.fakes import _fake_cluster  # noqa: F401
from tests.factories import ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_cluster")]


def endpoint(cast: Cast, **settings: Any) -> Workload:
    return WorkloadFactory(
        team=cast.team,
        owner=cast.lead,
        gpu_class=cast.gpu_class,
        image=ImageFactory(name="vLLM", reference="docker.io/vllm/vllm:1", kind="serving"),
        kind=core.KIND_INFERENCE,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        params={
            "endpoint": {
                "min_replicas": 1,
                "max_replicas": 4,
                "target_replicas": 1,
                "scale_metric": "rps",
                "scale_target": 10.0,
                "idle_minutes": None,
                **settings,
            }
        },
    )


def test_load_above_the_target_asks_for_more_replicas_and_records_the_sample(
    cast: Cast, settings: Any
) -> None:
    settings.SERVING_SCALE_COOLDOWN_SECONDS = 300
    w = endpoint(cast)
    now = timezone.now()
    result = autoscale_pass(now=now, read=lambda _: Reading(requests_per_second=32.0))
    assert result.scaled == [(w.pk, 4)]
    w.refresh_from_db()
    assert w.params["endpoint"]["target_replicas"] == 4 and w.replicas == 1
    sample = EndpointSample.objects.get(workload=w)
    assert (sample.replicas, sample.target, sample.requests_per_second) == (1, 4, 32.0)
    assert "32.0 requests/s" in sample.decision
    # The load falls at once: nothing happens within the cool-down.
    again = autoscale_pass(
        now=now + timedelta(seconds=60), read=lambda _: Reading(requests_per_second=1.0)
    )
    assert again.scaled == []
    # No data (the exporter is down): nothing changes either.
    later = autoscale_pass(now=now + timedelta(seconds=900), read=lambda _: Reading())
    assert later.scaled == []


def test_an_idle_endpoint_is_scaled_to_zero_and_says_so(cast: Cast, settings: Any) -> None:
    settings.SERVING_SCALE_COOLDOWN_SECONDS = 0
    w = endpoint(cast, min_replicas=0, idle_minutes=5)
    start = timezone.now()
    autoscale_pass(now=start, read=lambda _: Reading(requests_per_second=0.0))
    w.refresh_from_db()
    assert w.state == core.RUNNING
    autoscale_pass(
        now=start + timedelta(minutes=5), read=lambda _: Reading(requests_per_second=0.0)
    )
    w.refresh_from_db()
    assert w.state == core.SUSPENDED
    assert w.last_reason.startswith("Scaled to zero: Autoscaled: no requests for 5 min")


def test_old_samples_are_purged(cast: Cast) -> None:
    from apps.serving.autoscaling import endpoint_samples_purge

    w = endpoint(cast)
    now = timezone.now()
    for days in (40, 1):
        EndpointSample.objects.create(
            workload=w, at=now - timedelta(days=days), replicas=1, target=1
        )
    assert endpoint_samples_purge(before=now - timedelta(days=30)) == 1
    assert EndpointSample.objects.filter(workload=w).count() == 1
