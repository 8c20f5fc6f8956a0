from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from apps.telemetry.models import UsageDay
from tests.api.conftest import Client
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def usage(cast: Cast, owner: object, team: object, day: date, hours: float, used: float) -> None:
    workload = WorkloadFactory(team=team, owner=owner, gpu_class=cast.gpu_class)
    UsageDay.objects.create(
        day=day,
        workload=workload,
        team=team,
        owner=owner,
        gpu_class=cast.gpu_class,
        allocated_gpu_seconds=hours * 3600,
        used_gpu_seconds=used * 3600,
        cost=Decimal(str(hours * 4.5)),
    )


def test_team_usage_sums_a_month_per_member_and_class(cast: Cast, api: Client) -> None:
    usage(cast, cast.owner, cast.team, date(2025, 1, 3), 10, 5)
    usage(cast, cast.owner, cast.team, date(2025, 1, 4), 6, 3)
    usage(cast, cast.teammate, cast.team, date(2025, 1, 5), 4, 4)
    usage(cast, cast.owner, cast.team, date(2025, 2, 1), 100, 0)  # next month
    usage(cast, cast.outsider, cast.other_team, date(2025, 1, 3), 50, 50)
    body = api(cast.teammate, ("read",)).get("/api/v1/teams/vision/usage/?month=2025-01").json()
    assert (body["start"], body["end"]) == ("2025-01-01", "2025-02-01")
    assert body["currency"] == "EUR"  # every cost is in the platform's currency
    assert body["rows"] == [
        {
            "team": "Vision",
            "owner": "owner",
            "gpu_class": "H100-80GB",
            "allocated_gpu_hours": 16.0,
            "used_gpu_hours": 8.0,
            "utilisation": 0.5,
            "cost": "72.00",
        },
        {
            "team": "Vision",
            "owner": "teammate",
            "gpu_class": "H100-80GB",
            "allocated_gpu_hours": 4.0,
            "used_gpu_hours": 4.0,
            "utilisation": 1.0,
            "cost": "18.00",
        },
    ]


def test_my_usage_is_only_mine(cast: Cast, api: Client) -> None:
    usage(cast, cast.owner, cast.team, date(2025, 1, 3), 10, 5)
    usage(cast, cast.teammate, cast.team, date(2025, 1, 3), 4, 4)
    rows = api(cast.owner).get("/api/v1/usage/?month=2025-01").json()["rows"]
    assert [(r["owner"], r["allocated_gpu_hours"]) for r in rows] == [("owner", 10.0)]


def test_bad_month_is_a_field_error(cast: Cast, api: Client) -> None:
    response = api(cast.owner).get("/api/v1/usage/?month=2025-13")
    assert response.status_code == 400
    assert "month" in response.json()["fields"]
