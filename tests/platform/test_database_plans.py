"""Statements a connection repeats are prepared (parsed once) but planned for the values of each
execution: a generic plan, made for average values, is wrong for data as skewed as workloads
(one person owning thousands): the dashboard's list took 76 ms with it and 0.4 ms without."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from apps.workloads.models import Workload

pytestmark = pytest.mark.django_db


def test_the_database_options_prepare_and_plan_each_execution() -> None:
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["server_side_binding"] is True
    assert options["prepare_threshold"] == 5
    assert "plan_cache_mode=force_custom_plan" in options["options"]


def test_a_statement_run_many_times_is_prepared_and_never_given_a_generic_plan() -> None:
    for owner in range(1, 21):
        list(Workload.objects.filter(owner_id=owner).order_by("-created_at", "-id")[:50])
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_custom_plan"
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s AND statement LIKE %s",
            ['%FROM "workloads_workload"%', '%"owner_id" = $1%'],
        )
        rows = cursor.fetchall()
    assert rows, "the repeated statement was not prepared"
    generic, custom = rows[0]
    assert generic == 0
    assert custom >= 10
