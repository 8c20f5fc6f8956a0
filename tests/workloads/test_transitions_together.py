"""``workloads_transition``: many state changes in one transaction (the admissions of a
scheduling cycle) write exactly what ``workload_transition`` one by one
writes — rows, events, the owners' notices — in one update per workload plus a few statements."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.notifications.models import Delivery, Notice, NotificationPreference
from apps.workloads import core as wl
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.services import Transition, workload_transition, workloads_transition
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

FINISHED = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
STARTED = datetime(2026, 12, 1, tzinfo=UTC)
GIVEN = {FINISHED, STARTED, datetime(2026, 11, 30, tzinfo=UTC)}  # compared as they are
STEPS = [  # from, to, reason, extra
    (wl.QUEUED, wl.ADMITTED, "Admitted on node-1.", {"borrowed": True, "queue_position": None}),
    (wl.STARTING, wl.RUNNING, "", {"started_at": STARTED}),
    (wl.RUNNING, wl.SUCCEEDED, "Completed", {"finished_at": FINISHED, "exit_code": 0}),
    (wl.RUNNING, wl.FAILED, "Exit code 137 (out of memory).", {"exit_code": 137}),
    (wl.STARTING, wl.RUNNING, "pod scheduled", {}),
]


def _workloads(cast: Cast, prefix: str) -> list[Workload]:
    return [
        WorkloadFactory(
            owner=cast.owner,
            team=cast.team,
            gpu_class=cast.gpu_class,
            image=cast.image,
            name=f"{prefix}-{i}",
            state=start,
            started_at=datetime(2026, 11, 30, tzinfo=UTC) if start == wl.RUNNING else None,
        )
        for i, (start, *_rest) in enumerate(STEPS)
    ]


def _written(workloads: list[Workload]) -> list[tuple[object, ...]]:
    """What the transitions wrote, without ids and times of writing."""
    out: list[tuple[object, ...]] = []
    for w in workloads:
        row = Workload.objects.get(pk=w.pk)
        events = list(
            WorkloadEvent.objects.filter(workload=w).values_list("from_state", "to_state", "reason")
        )
        notices = [
            (n.event, n.title.replace(w.name, "NAME"), n.body, n.link.replace(str(w.pk), "PK"),
             n.key == f"workload-event-{WorkloadEvent.objects.get(workload=w).pk}", n.in_portal,
             sorted(n.deliveries.values_list("channel", flat=True)))
            for n in Notice.objects.filter(link=f"/workloads/{w.pk}/")
        ]  # fmt: skip
        stamps = (row.admitted_at, row.started_at, row.finished_at)
        stamps = tuple(s if s in GIVEN else s is not None for s in stamps)
        out.append(
            (row.state, row.last_reason, row.exit_code, row.borrowed, stamps, events, notices)
        )
    return out


def test_together_writes_what_one_by_one_writes(cast: Cast) -> None:
    NotificationPreference.objects.create(
        user=cast.owner,
        portal_events=["admitted", "running", "finished", "failed"],
        webhook_events=["failed"],
        webhook_url="https://hooks.example.com/gpupaas",
    )
    alone, together = _workloads(cast, "alone"), _workloads(cast, "together")
    for w, (start, to, reason, extra) in zip(alone, STEPS, strict=True):
        assert workload_transition(
            workload=w, to_state=to, reason=reason, expected_from=start, extra=dict(extra)
        )
    moves = [
        Transition(workload=w, to_state=to, reason=reason, expected_from=start, extra=dict(extra))
        for w, (start, to, reason, extra) in zip(together, STEPS, strict=True)
    ]
    assert workloads_transition(moves) == [True] * len(STEPS)
    assert _written(together) == _written(alone)
    # The rows in hand follow, as with the single call.
    assert [w.state for w in together] == [to for _, to, *_ in STEPS]
    assert [w.state for w in together] == [w.state for w in alone]
    # Every notified step told the owner; the failure also went out by webhook.
    assert Notice.objects.filter(user=cast.owner).count() == 2 * len(STEPS)
    assert Delivery.objects.filter(channel="webhook").count() == 2


def test_a_lost_race_is_skipped_and_the_others_are_applied(cast: Cast) -> None:
    first, second = _workloads(cast, "race")[1:3]
    Workload.objects.filter(pk=first.pk).update(state=wl.CANCELLED)  # the user was quicker
    moves = [
        Transition(workload=first, to_state=wl.RUNNING, reason="", expected_from=wl.STARTING),
        Transition(
            workload=second, to_state=wl.SUCCEEDED, reason="Completed", expected_from=wl.RUNNING
        ),
    ]
    assert workloads_transition(moves) == [False, True]
    assert not WorkloadEvent.objects.filter(workload=first).exists()
    assert first.state == wl.STARTING  # the row in hand is left as it was read
    assert Workload.objects.get(pk=first.pk).state == wl.CANCELLED
    assert list(WorkloadEvent.objects.filter(workload=second).values_list("to_state", flat=True))
    assert Notice.objects.filter(link=f"/workloads/{second.pk}/").count() == 1
    assert not Notice.objects.filter(link=f"/workloads/{first.pk}/").exists()


def test_a_transition_not_allowed_writes_nothing(cast: Cast) -> None:
    good, bad = _workloads(cast, "bad")[1:3]
    moves = [
        Transition(workload=good, to_state=wl.RUNNING, reason="", expected_from=wl.STARTING),
        Transition(workload=bad, to_state=wl.QUEUED, reason="", expected_from=wl.SUCCEEDED),
    ]
    with pytest.raises(wl.TransitionError):
        workloads_transition(moves)
    assert Workload.objects.get(pk=good.pk).state == wl.STARTING
    assert not WorkloadEvent.objects.filter(workload__in=[good, bad]).exists()


def test_the_owner_is_not_told_about_what_they_did_themselves(cast: Cast) -> None:
    job = _workloads(cast, "own")[0]
    moves = [
        Transition(workload=job, to_state=wl.ADMITTED, reason="", actor=cast.owner),
    ]
    assert workloads_transition(moves) == [True]
    assert WorkloadEvent.objects.get(workload=job).actor == cast.owner
    assert not Notice.objects.exists()


def test_statements_grow_by_one_update_per_workload(cast: Cast) -> None:
    def statements(count: int) -> int:
        jobs = [
            WorkloadFactory(
                owner=cast.owner,
                team=cast.team,
                gpu_class=cast.gpu_class,
                image=cast.image,
                state=wl.RUNNING,
            )
            for _ in range(count)
        ]
        rows = list(
            Workload.objects.select_related("team", "owner", "gpu_class").filter(
                pk__in=[j.pk for j in jobs]
            )
        )
        moves = [
            Transition(workload=w, to_state=wl.SUCCEEDED, reason="Completed", extra={})
            for w in rows
        ]
        with CaptureQueriesContext(connection) as queries:
            assert all(workloads_transition(moves))
        return len(queries)

    five, fifteen = statements(5), statements(15)
    assert fifteen - five == 10
    assert five <= 5 + 8  # the updates, the events, who was told, preferences, the notices
