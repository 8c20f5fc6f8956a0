from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from apps.audit.models import AuditEvent
from apps.catalog.models import Image
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_cancel,
    workload_transition,
    workloads_queue,
)
from tests.factories import ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast
from tests.workloads.submitting import submit_fields

pytestmark = pytest.mark.django_db


def submit(cast: Cast, **kw: object) -> Workload:
    args: dict = {
        "actor": cast.owner,
        "team": cast.team,
        "kind": "training",
        "name": "train",
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "gpu_milli": 1000,
        "replicas": 2,
        "command": ["python", "train.py"],
    }
    args.update(kw)
    return submit_fields(**args)


def test_submit_records_pending_workload_event_and_audit(cast: Cast) -> None:
    workload = submit(cast)
    assert workload.state == core.PENDING
    assert workload.priority_class == core.PRIORITY_TRAINING
    assert workload.total_milli == 2000
    assert [e.to_state for e in workload.events.all()] == [core.PENDING]
    assert AuditEvent.objects.filter(action="workload.submit", object_id=str(workload.pk)).exists()


def test_outsider_cannot_submit_for_another_team(cast: Cast) -> None:
    with pytest.raises(PermissionDenied):
        submit(cast, actor=cast.outsider)
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"gpu_milli": -1}, "gpu_milli"),
        ({"gpu_milli": 250, "replicas": 2}, "replicas"),
        ({"priority_class": "production"}, "priority_class"),
        ({"kind": "notebook", "replicas": 1}, "image"),
    ],
)
def test_submit_refuses_bad_requests_with_field_messages(cast: Cast, kw: dict, field: str) -> None:
    cast.image.kind = Image.Kind.TRAINING
    cast.image.save()
    with pytest.raises(ValidationError) as info:
        submit(cast, **kw)
    assert field in info.value.message_dict
    assert not Workload.objects.exists()


def test_lead_may_use_production(cast: Cast) -> None:
    workload = submit(
        cast,
        actor=cast.lead,
        kind="training",
        priority_class="production",
        image=ImageFactory(name="srv", kind=Image.Kind.ANY),
        replicas=1,
    )
    assert workload.priority_class == "production"


def test_transition_is_claimed_once(cast: Cast) -> None:
    workload = submit(cast)
    stale = Workload.objects.get(pk=workload.pk)
    assert workload_transition(workload=workload, to_state=core.QUEUED, reason="In line.")
    # A second worker that read the same row loses the race instead of writing twice.
    assert not workload_transition(workload=stale, to_state=core.QUEUED, reason="In line.")
    assert workload.events.filter(to_state=core.QUEUED).count() == 1
    workload.refresh_from_db()
    assert workload.queued_at is not None
    assert workload.last_reason == "In line."


def test_illegal_transition_raises(cast: Cast) -> None:
    workload = submit(cast)
    with pytest.raises(core.TransitionError):
        workload_transition(workload=workload, to_state=core.RUNNING, reason="x")


def test_owner_teammate_lead_outsider_cancel_matrix(cast: Cast) -> None:
    for actor, allowed in [
        (cast.outsider, False),
        (cast.teammate, False),
        (cast.lead, True),
    ]:
        workload = submit(cast)
        if allowed:
            workload_cancel(actor=actor, workload=workload)
            workload.refresh_from_db()
            assert workload.state == core.CANCELLED
        else:
            with pytest.raises(PermissionDenied):
                workload_cancel(actor=actor, workload=workload)
            workload.refresh_from_db()
            assert workload.state == core.PENDING


def test_cancel_twice_explains(cast: Cast) -> None:
    workload = submit(cast)
    workload_cancel(actor=cast.owner, workload=workload)
    with pytest.raises(ValidationError, match="already cancelled"):
        workload_cancel(actor=cast.owner, workload=workload)


def test_outsider_gets_404_for_workload_page(cast: Cast) -> None:
    workload = WorkloadFactory(
        owner=cast.owner, team=cast.team, gpu_class=cast.gpu_class, image=cast.image
    )
    outsider = Client()
    outsider.force_login(cast.outsider)
    assert outsider.get(f"/workloads/{workload.pk}/").status_code == 404
    assert outsider.get("/workloads/999999/").status_code == 404
    teammate = Client()
    teammate.force_login(cast.teammate)
    assert teammate.get(f"/workloads/{workload.pk}/").status_code == 200


def notebook(cast: Cast, state: str = core.RUNNING) -> Workload:
    image = ImageFactory(name="nb", kind=Image.Kind.NOTEBOOK)
    return WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=image,
        kind=core.KIND_NOTEBOOK,
        priority_class=core.PRIORITY_DEVELOPMENT,
        state=state,
    )


def test_suspend_and_resume_a_notebook(cast: Cast) -> None:
    from apps.workloads.services import workload_resume, workload_suspend

    nb = notebook(cast)
    workload_suspend(actor=cast.owner, workload=nb)
    nb.refresh_from_db()
    assert nb.state == core.SUSPENDED
    assert "files are kept" in nb.last_reason
    workload_resume(actor=cast.owner, workload=nb)
    nb.refresh_from_db()
    assert nb.state == core.QUEUED
    assert [e.to_state for e in nb.events.all()][-2:] == [core.SUSPENDED, core.QUEUED]


def test_outsider_cannot_suspend_or_resume(cast: Cast) -> None:
    from apps.workloads.services import workload_resume, workload_suspend

    nb = notebook(cast)
    with pytest.raises(PermissionDenied):
        workload_suspend(actor=cast.outsider, workload=nb)
    nb.state = core.SUSPENDED
    nb.save()
    with pytest.raises(PermissionDenied):
        workload_resume(actor=cast.outsider, workload=nb)


def test_only_running_notebooks_can_be_suspended(cast: Cast) -> None:
    from apps.workloads.services import workload_suspend

    job = WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
    )
    with pytest.raises(ValidationError, match="Only notebooks"):
        workload_suspend(actor=cast.owner, workload=job)
    with pytest.raises(ValidationError, match="queued cannot be suspended"):
        workload_suspend(actor=cast.owner, workload=notebook(cast, state=core.QUEUED))


def test_clone_resubmits_the_same_request(cast: Cast) -> None:
    from apps.workloads.services import workload_clone

    original = submit(cast, env={"A": "1"}, command=["python", "train.py"])
    copy = workload_clone(actor=cast.teammate, workload=original)
    assert copy.pk != original.pk
    assert copy.owner == cast.teammate
    assert (copy.gpu_milli, copy.replicas, copy.command, copy.env) == (
        1000,
        2,
        ["python", "train.py"],
        {"A": "1"},
    )
    assert copy.state == core.PENDING
    assert copy.name == "train (copy)"
    with pytest.raises(PermissionDenied):
        workload_clone(actor=cast.outsider, workload=original)


def test_delete_cancels_hides_and_keeps_the_row_for_accounting(cast: Cast) -> None:
    from apps.workloads.selectors import workloads_visible_to
    from apps.workloads.services import workload_delete

    running = WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
    )
    with pytest.raises(PermissionDenied):
        workload_delete(actor=cast.outsider, workload=running)
    workload_delete(actor=cast.owner, workload=running)
    row = Workload.objects.get(pk=running.pk)
    assert row.state == core.CANCELLED
    assert row.deleted_at is not None
    assert running.pk not in {w.pk for w in workloads_visible_to(cast.owner)}
    assert AuditEvent.objects.filter(action="workload.delete", object_id=str(running.pk)).exists()


def test_clone_of_a_sweep_charges_every_point_of_its_grid(cast: Cast) -> None:
    from apps.workloads.services import workload_clone

    # Recorded before the rule: one replica for a grid of four points.
    old = WorkloadFactory(
        owner=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        kind=core.KIND_SWEEP,
        priority_class=core.PRIORITY_BATCH,
        params={"grid": {"lr": ["0.1", "0.01"], "bs": ["32", "64"]}},
    )
    copy = workload_clone(actor=cast.owner, workload=old)
    assert (copy.replicas, copy.total_milli) == (4, 4000)
    # Its trials run four at once by default (the rules record the cap), each its own unit.
    assert copy.params == {**old.params, "parallelism": 4}
    assert copy.trials.count() == 4


# --- queueing many at once ---------------------------------------------------------------


def test_queueing_moves_every_pending_workload_with_one_event_each(cast: Cast) -> None:
    first, second = submit(cast, name="first"), submit(cast, name="second")
    moved = workloads_queue(workloads=[first, second], reason="Queued for a GPU.")
    assert sorted(moved) == sorted([first.pk, second.pk])
    for workload in (first, second):
        in_hand = (workload.state, workload.queued_at)
        workload.refresh_from_db()
        assert (workload.state, workload.queued_at) == in_hand
        assert workload.state == core.QUEUED and workload.queued_at is not None
        assert workload.last_reason == "Queued for a GPU."
        events = list(workload.events.values_list("from_state", "to_state", "reason"))
        assert events == [
            ("", core.PENDING, events[0][2]),
            (core.PENDING, core.QUEUED, "Queued for a GPU."),
        ]
    # Queued already: nothing moves twice, no second event.
    assert workloads_queue(workloads=[first, second], reason="again") == []
    assert first.events.count() == 2


def test_queueing_leaves_a_workload_that_changed_meanwhile(cast: Cast) -> None:
    stale = submit(cast, name="stale")
    fresh = submit(cast, name="fresh")
    # Cancelled by its owner after the caller read it as pending.
    workload_cancel(actor=cast.owner, workload=Workload.objects.get(pk=stale.pk))
    assert stale.state == core.PENDING  # the copy in hand
    assert workloads_queue(workloads=[stale, fresh], reason="Queued for a GPU.") == [fresh.pk]
    stale.refresh_from_db()
    assert stale.state == core.CANCELLED
    assert not stale.events.filter(to_state=core.QUEUED).exists()


def test_queueing_a_sweeps_trials_moves_the_sweep_too(cast: Cast) -> None:
    sweep = submit(cast, kind=core.KIND_SWEEP, name="grid", replicas=None, grid={"lr": ["1", "2"]})
    trials = list(sweep.trials.order_by("pk"))
    assert [t.state for t in trials] == [core.PENDING, core.PENDING]
    moved = workloads_queue(workloads=trials, reason="Queued for a GPU.")
    assert sorted(moved) == [t.pk for t in trials]
    assert set(sweep.trials.values_list("state", flat=True)) == {core.QUEUED}
    sweep.refresh_from_db()
    assert sweep.state == core.QUEUED
