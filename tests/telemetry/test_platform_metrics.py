"""The platform's own metrics on /metrics (apps/telemetry/metrics.py): quota use, the queue,
the cost of idle GPUs, as the alerting rules read them."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from apps.telemetry.models import WorkloadUsage
from apps.workloads import core as wl
from tests.factories import GpuClassFactory, TeamFactory, TeamQuotaFactory, WorkloadFactory

pytestmark = pytest.mark.django_db


def _scrape(client: Client) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        if family.name.startswith("gpupaas_"):
            for sample in family.samples:
                found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = (
                    sample.value
                )
    return found


def test_quota_queue_and_idle_cost_are_exported(client: Client) -> None:
    h100 = GpuClassFactory(name="H100", hourly_cost=Decimal("2.50"))
    vision = TeamFactory(slug="vision")
    TeamQuotaFactory(team=vision, gpu_class=h100, limit_milli=4000)
    running = WorkloadFactory(team=vision, gpu_class=h100, replicas=2, state=wl.RUNNING)
    WorkloadFactory(team=vision, gpu_class=h100, state=wl.ADMITTED)
    WorkloadFactory(team=vision, gpu_class=h100, state=wl.SUCCEEDED)  # holds nothing
    waited = timezone.now() - timedelta(minutes=40)
    WorkloadFactory(team=vision, gpu_class=h100, state=wl.QUEUED, queued_at=waited)
    WorkloadFactory(team=vision, gpu_class=h100, state=wl.QUEUED, queued_at=timezone.now())
    WorkloadUsage.objects.create(workload=running, idle_since=timezone.now())

    metrics = _scrape(client)
    key = (("gpu_class", "H100"), ("team", "vision"))
    assert metrics["gpupaas_quota_limit_gpus"][key] == 4.0
    assert metrics["gpupaas_quota_used_gpus"][key] == 3.0  # 2 running + 1 admitted
    priority = running.priority_class
    qkey = (("gpu_class", "H100"), ("priority_class", priority))
    assert metrics["gpupaas_queued_workloads"][qkey] == 2
    assert 40 * 60 <= metrics["gpupaas_queue_wait_seconds_max"][qkey] < 45 * 60
    assert metrics["gpupaas_idle_cost_per_hour"][key] == pytest.approx(5.0)  # 2 GPUs × 2.50


def test_nothing_idle_nothing_queued_exports_no_such_series(client: Client) -> None:
    h100 = GpuClassFactory(name="H100")
    team = TeamFactory(slug="nlp")
    TeamQuotaFactory(team=team, gpu_class=h100, limit_milli=8000)
    metrics = _scrape(client)
    assert metrics["gpupaas_quota_used_gpus"][(("gpu_class", "H100"), ("team", "nlp"))] == 0.0
    assert "gpupaas_queue_wait_seconds_max" not in metrics
    assert "gpupaas_idle_cost_per_hour" not in metrics
