"""A request is charged what the cluster grants it, in quota usage, capacity and chargeback."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import GpuClass
from apps.telemetry import services as telemetry
from apps.telemetry.selectors import chargeback
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import gpu_class_capacity
from tests.factories import GpuClassFactory, TeamQuotaFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class SilentPrometheus:
    """No DCGM series at all: the workload is allocated but unmeasured."""

    def query(self, promql: str, at: datetime | None = None) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        return


def test_one_milli_of_a_four_slice_class_is_charged_a_whole_slice_everywhere(
    cast: Cast, api: Client
) -> None:
    sliced = GpuClassFactory(
        name="L4-24GB",
        sharing_mode=GpuClass.Sharing.TIMESLICE,
        timeslice_replicas=4,
        memory_mib=24576,
        hourly_cost=Decimal("2"),
        capacity_gpus=4,
    )
    TeamQuotaFactory(team=cast.team, gpu_class=sliced, guaranteed_milli=1000, limit_milli=2000)
    body = {
        "kind": "training",
        "name": "tiny",
        "gpu_class": sliced.name,
        "image": cast.image.name,
        "gpu_milli": 1,
        "command": ["python", "train.py"],
    }
    check = api(cast.owner).post("/api/v1/workloads/validate/", body, "json")
    assert check.status_code == 200, check.json()
    assert (check.json()["charged_milli"], check.json()["total_milli"]) == (250, 250)
    response = api(cast.owner).post("/api/v1/workloads/", body, "json")
    assert response.status_code == 201, response.json()
    assert (response.json()["gpu_milli"], response.json()["charged_milli"]) == (1, 250)
    assert response.json()["total_milli"] == 250

    Workload.objects.filter(pk=response.json()["id"]).update(
        state=core.RUNNING, started_at=T0 - timedelta(hours=1)
    )
    quotas = api(cast.owner).get("/api/v1/quotas/", {"gpu_class": sliced.name}).json()
    mine = [q for q in quotas if q["gpu_class"] == sliced.name]
    assert [q["used_milli"] for q in mine] == [250]
    (capacity,) = gpu_class_capacity(GpuClass.objects.filter(pk=sliced.pk))
    assert capacity.used_milli == 250

    prom = SilentPrometheus()
    for at in (T0, T0 + timedelta(seconds=400)):
        telemetry.telemetry_ingest(now=at, client=prom, pod_index={})  # type: ignore[arg-type]
    (row,) = chargeback([cast.team], date(2025, 3, 1), date(2025, 3, 2))
    # 60 s (the first pass's window) + 400 s on a quarter of a GPU.
    assert row.allocated_hours == pytest.approx(0.25 * 460 / 3600, rel=1e-3)
    assert row.cost == pytest.approx(Decimal("2") * Decimal(0.25 * 460 / 3600), abs=Decimal("0.01"))
