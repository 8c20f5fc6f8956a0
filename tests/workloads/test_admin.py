"""The workload admin stays fast at 10,000 rows: a fixed number of queries per page."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import UserFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def make(cast: Cast, n: int) -> None:
    owners = [cast.owner, cast.teammate, *[UserFactory() for _ in range(5)]]
    states = [core.RUNNING, core.QUEUED, core.SUCCEEDED, core.FAILED]
    Workload.objects.bulk_create(
        [
            WorkloadFactory.build(
                owner=owners[i % len(owners)],
                team=cast.team,
                gpu_class=cast.gpu_class,
                image=cast.image,
                state=states[i % len(states)],
            )
            for i in range(n)
        ],
        batch_size=2000,
    )


def queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_changelist_queries_do_not_grow_with_rows(admin_client: Client, cast: Cast) -> None:
    make(cast, 20)
    small = queries(admin_client, "/admin/workloads/workload/")
    make(cast, 10_000 - 20)
    assert Workload.objects.count() == 10_000
    large = queries(admin_client, "/admin/workloads/workload/")
    filtered = queries(
        admin_client, "/admin/workloads/workload/?state__exact=running&kind__exact=training"
    )
    assert large == small
    assert filtered <= small + 1
    assert small < 20


def test_state_filter_uses_an_index(cast: Cast) -> None:
    make(cast, 3000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workloads_workload")
        sql, params = (
            Workload.objects.filter(state=core.RUNNING)
            .order_by("-created_at")[:100]
            .query.sql_with_params()
        )
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index" in plan, plan


def test_admin_cancel_action(admin_client: Client, cast: Cast) -> None:
    running = WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
    )
    done = WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.SUCCEEDED,
    )
    response = admin_client.post(
        "/admin/workloads/workload/",
        {"action": "cancel", "_selected_action": [running.pk, done.pk]},
        follow=True,
    )
    assert "Cancelled 1 workload(s)." in response.content.decode()
    running.refresh_from_db()
    done.refresh_from_db()
    assert running.state == core.CANCELLED
    assert done.state == core.SUCCEEDED
    assert running.events.filter(to_state=core.CANCELLED).exists()
