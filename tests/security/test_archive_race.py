"""The watch process logged an IntegrityError traceback for a duplicate archive row: the watch
and the reconcile pass archived the same ending at once. Both writers now store the ending once,
whoever comes second, without an error."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.db import connection

from apps.orchestration import cluster_reads
from apps.orchestration.models import WorkloadArchive
from apps.orchestration.services import archiving
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db(transaction=True)

EVENT = cluster_reads.ClusterEvent(
    time=datetime(2026, 12, 1, tzinfo=UTC),
    type="Normal",
    reason="Completed",
    message="Job completed",
    object="Job/wl-1",
    count=1,
)


def _at_once(*calls: Callable[[], None]) -> list[BaseException]:
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            barrier.wait()
            call()
        except BaseException as exc:  # the test reports every error
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return errors


def test_watch_and_reconcile_archiving_the_same_ending_at_once_store_it_once(cast: Cast) -> None:
    workloads: list[Workload] = [
        WorkloadFactory(team=cast.team, owner=cast.owner) for _ in range(12)
    ]
    for workload in workloads:
        errors = _at_once(
            lambda w=workload: archiving._store_events(w, [EVENT]),
            lambda w=workload: archiving._store_events(w, [EVENT]),
        )
        assert errors == []
        row = WorkloadArchive.objects.get(workload=workload)
        assert len(row.events) == 1
