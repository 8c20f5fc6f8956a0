"""The admin shows amounts as the portal does: GPUs instead of milli-GPU, GiB instead of MiB,
GPU-hours, percentages and costs with their currency, never raw floats."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.test import Client

from apps.adminsite.admin.formatting import cost, gib, gpu_hours, gpus, percent
from apps.telemetry.models import UsageDay, WorkloadUsage
from apps.web.templatetags.gpus import gib_text
from apps.web.templatetags.money import money_text
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast


def test_the_admin_formats_amounts_as_the_portal_does() -> None:
    assert gpus(2500) == "2.5" and gpus(None) == "—"
    assert gib(81559) == gib_text(81559) == "79.6 GiB"
    assert gib(141312) == "138 GiB"
    assert cost(Decimal("4.5")) == money_text(Decimal("4.5")) == "4.50 EUR"
    assert gpu_hours(5400) == "1.50"
    assert percent(0.8734) == "87%"


@pytest.mark.django_db
def test_admin_lists_show_gpus_gib_hours_and_costs(admin_client: Client, cast: Cast) -> None:
    html = admin_client.get("/admin/catalog/gpuclass/").content.decode()
    assert "79.6 GiB" in html and "4.50 EUR" in html
    assert ">81559<" not in html
    html = admin_client.get("/admin/quotas/teamquota/").content.decode()
    assert "guaranteed (gpus)" in html.lower()
    assert ">4000<" not in html
    workload = WorkloadFactory(
        team=cast.team, owner=cast.owner, gpu_class=cast.gpu_class, gpu_milli=2000
    )
    html = admin_client.get("/admin/workloads/workload/").content.decode()
    assert "GPUs per replica" in html and ">2<" in html and ">2000<" not in html
    WorkloadUsage.objects.create(
        workload=workload,
        allocated_gpu_seconds=5400,
        used_gpu_seconds=1800,
        last_utilisation=0.8734,
    )
    html = admin_client.get("/admin/telemetry/workloadusage/").content.decode()
    assert "1.50" in html and "0.50" in html and "87%" in html
    assert "0.8734" not in html
    UsageDay.objects.create(
        day=date(2026, 11, 2),
        workload=workload,
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        allocated_gpu_seconds=7200,
        used_gpu_seconds=3600,
        cost=Decimal("9.0000"),
    )
    html = admin_client.get("/admin/telemetry/usageday/").content.decode()
    assert "9.00 EUR" in html and "9.0000" not in html and "2.00" in html
