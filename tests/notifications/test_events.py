"""Workload changes tell their owner: admitted, running, finished, failed, preempted,
suspended — not what the owner did themselves, and a sweep's trials only through the sweep."""

from __future__ import annotations

import pytest

from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import workload_cancel, workload_suspend, workload_transition
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def _workload(cast: Cast, **kwargs: object) -> Workload:
    defaults: dict[str, object] = {
        "owner": cast.owner,
        "team": cast.team,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "state": wl.QUEUED,
    }
    defaults.update(kwargs)
    workload: Workload = WorkloadFactory(**defaults)
    return workload


def _told(cast: Cast) -> list[tuple[str, str]]:
    return [
        (n.event, n.title) for n in Notice.objects.filter(user=cast.owner).order_by("created", "id")
    ]


def test_a_training_job_tells_its_owner_each_step(cast: Cast) -> None:
    job = _workload(cast, name="resnet")
    for state, reason in [
        (wl.ADMITTED, "Admitted on node-1."),
        (wl.RUNNING, ""),
        (wl.PREEMPTED, "Preempted by a production workload of NLP."),
        (wl.QUEUED, "Back in the queue."),
        (wl.ADMITTED, "Admitted on node-2."),
        (wl.RUNNING, ""),
        (wl.FAILED, "Exit code 137 (out of memory)."),
    ]:
        assert workload_transition(workload=job, to_state=state, reason=reason)
    assert _told(cast) == [
        (NoticeEvent.ADMITTED, "Training job resnet was admitted"),
        (NoticeEvent.RUNNING, "Training job resnet is running"),
        (NoticeEvent.PREEMPTED, "Training job resnet was preempted"),
        (NoticeEvent.ADMITTED, "Training job resnet was admitted"),
        (NoticeEvent.RUNNING, "Training job resnet is running"),
        (NoticeEvent.FAILED, "Training job resnet failed"),
    ]
    failed = Notice.objects.get(user=cast.owner, event=NoticeEvent.FAILED)
    assert failed.body == "Exit code 137 (out of memory)."
    assert failed.link == f"/workloads/{job.pk}/"
    assert failed.team == cast.team
    assert not Notice.objects.exclude(user=cast.owner).exists()


def test_finishing_is_told_as_finished(cast: Cast) -> None:
    job = _workload(cast, state=wl.RUNNING)
    workload_transition(workload=job, to_state=wl.SUCCEEDED, reason="Exit code 0.")
    assert [e for e, _ in _told(cast)] == [NoticeEvent.FINISHED]


def test_what_the_owner_did_is_not_told_back(cast: Cast) -> None:
    job = _workload(cast, state=wl.RUNNING)
    workload_cancel(actor=cast.owner, workload=job)
    notebook = _workload(cast, kind=wl.KIND_NOTEBOOK, state=wl.RUNNING, command=[])
    workload_suspend(actor=cast.owner, workload=notebook)
    assert _told(cast) == []


def test_a_lead_suspending_my_notebook_tells_me(cast: Cast) -> None:
    notebook = _workload(cast, kind=wl.KIND_NOTEBOOK, state=wl.RUNNING, command=[], name="nb")
    workload_suspend(actor=cast.lead, workload=notebook)
    assert _told(cast) == [(NoticeEvent.SUSPENDED, "Notebook nb was suspended")]


def test_a_lost_race_tells_nobody(cast: Cast) -> None:
    job = _workload(cast)
    stale = Workload.objects.get(pk=job.pk)
    assert workload_transition(workload=job, to_state=wl.ADMITTED, reason="")
    assert not workload_transition(workload=stale, to_state=wl.ADMITTED, reason="")
    assert len(_told(cast)) == 1


def test_a_sweep_tells_about_itself_not_each_trial(cast: Cast) -> None:
    sweep = _workload(cast, kind=wl.KIND_SWEEP, name="lr-search")
    trials = [_workload(cast, sweep=sweep, name=f"lr-search-{i}") for i in range(3)]
    for trial in trials:
        workload_transition(workload=trial, to_state=wl.ADMITTED, reason="")
        workload_transition(workload=trial, to_state=wl.RUNNING, reason="")
    for trial in trials:
        workload_transition(workload=trial, to_state=wl.SUCCEEDED, reason="Exit code 0.")
    assert _told(cast) == [
        (NoticeEvent.RUNNING, "Batch sweep lr-search is running"),
        (NoticeEvent.FINISHED, "Batch sweep lr-search finished"),
    ]
    assert Notice.objects.get(event=NoticeEvent.FINISHED).body == "All 3 trials succeeded."
