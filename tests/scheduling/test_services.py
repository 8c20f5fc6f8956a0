"""The scheduling cycle on PostgreSQL: persisted decisions, events, hand-off, submit checks,
and admission serialised under real concurrency."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.scheduling import handoff
from apps.scheduling.services import _store_waiting, scheduling_cycle_run
from apps.scheduling.tasks import run_cycle
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_cancel, workload_submit
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    MembershipFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.plugins.cast import Cast
from tests.workloads.submitting import submit_fields

pytestmark = pytest.mark.postgres


def add_nodes(gpu_class: GpuClass, count: int = 1, gpus: int = 8, cluster: str = "hub") -> Cluster:
    hub, _ = Cluster.objects.get_or_create(name=cluster, defaults={"connection": "in_cluster"})
    for i in range(count):
        ClusterNode.objects.create(
            cluster=hub,
            name=f"{gpu_class.name.lower()}-{i}",
            gpu_class=gpu_class,
            gpu_count=gpus,
            gpu_uuids=[f"GPU-{i}-{g}" for g in range(gpus)],
            cpu_milli=192_000,
            memory_mib=2_000_000,
        )
    return hub


def submit(cast: Cast, **kw: object) -> Workload:
    args: dict = {
        "actor": cast.owner,
        "team": cast.team,
        "kind": "training",
        "name": "train",
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "gpu_milli": 1000,
        "replicas": 1,
        "command": ["python", "train.py"],
    }
    args.update(kw)
    return submit_fields(**args)


@pytest.mark.django_db
def test_cycle_admits_with_placement_events_and_borrowed_flag(cast: Cast) -> None:
    add_nodes(cast.gpu_class)
    small = submit(cast, gpu_milli=4000)
    big = submit(cast, gpu_milli=2000)
    run = scheduling_cycle_run()
    assert sorted(run.admitted) == sorted([small.pk, big.pk])
    small.refresh_from_db()
    big.refresh_from_db()
    assert small.state == core.ADMITTED and small.cluster is not None
    replica = small.placement["replicas"][0]
    assert replica["node"] == "h100-80gb-0" and len(replica["gpus"]) == 4
    assert replica["gpu_uuids"] == [f"GPU-0-{g}" for g in replica["gpus"]]
    assert (small.borrowed, big.borrowed) == (False, True)  # guarantee 4 GPU, limit 8
    assert [e.to_state for e in small.events.all()] == ["pending", "queued", "admitted"]


@pytest.mark.django_db
def test_waiting_workload_gets_position_reason_and_estimate(cast: Cast) -> None:
    add_nodes(cast.gpu_class)
    blocker = WorkloadFactory(
        team=cast.other_team,
        owner=cast.outsider,
        gpu_class=cast.gpu_class,
        gpu_milli=8000,
        state=core.RUNNING,
        admitted_at=timezone.now() - timedelta(minutes=30),
        max_runtime_seconds=3600,
        placement={
            "cluster": "hub",
            "replicas": [{"node": "h100-80gb-0", "gpus": list(range(8)), "units": 1000}],
        },
    )
    waiting = submit(cast)
    scheduling_cycle_run()
    waiting.refresh_from_db()
    assert waiting.state == core.QUEUED and waiting.queue_position == 1
    assert "No H100-80GB capacity free" in waiting.last_reason
    assert waiting.estimated_start_at is not None
    expected = blocker.admitted_at + timedelta(hours=1)
    assert abs((waiting.estimated_start_at - expected).total_seconds()) < 2


@pytest.mark.django_db
def test_preempted_workload_returns_to_the_queue_after_the_grace_period(
    cast: Cast, settings: object
) -> None:
    settings.SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = 0  # type: ignore[attr-defined]
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = 30  # type: ignore[attr-defined]
    add_nodes(cast.gpu_class)
    sweep = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        gpu_milli=8000,
        priority_class="batch",
        state=core.RUNNING,
        admitted_at=timezone.now() - timedelta(hours=1),
        placement={
            "cluster": "hub",
            "replicas": [{"node": "h100-80gb-0", "gpus": list(range(8)), "units": 1000}],
        },
    )
    train = submit(cast, gpu_milli=2000)
    now = timezone.now()
    run = scheduling_cycle_run(now=now)
    assert run.preempted == (sweep.pk,) and run.admitted == (train.pk,)
    sweep.refresh_from_db()
    assert (
        sweep.state == core.PREEMPTED
        and "within a team, training preempts batch" in sweep.last_reason
    )
    assert scheduling_cycle_run(now=now + timedelta(seconds=10)).requeued == ()
    assert scheduling_cycle_run(now=now + timedelta(seconds=31)).requeued == (sweep.pk,)
    sweep.refresh_from_db()
    assert sweep.state == core.QUEUED and sweep.placement == {}


@pytest.mark.django_db(transaction=True)
def test_decisions_are_handed_off_after_commit() -> None:
    gpu_class = GpuClassFactory()
    team = TeamFactory()
    owner = UserFactory()
    MembershipFactory(user=owner, team=team)
    TeamQuotaFactory(team=team, gpu_class=gpu_class)
    add_nodes(gpu_class)
    workload = workload_submit(
        actor=owner,
        team=team,
        gpu_class=gpu_class,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training", name="t", gpu_milli=1000, command=["python", "train.py"]
        ),
    )
    seen: list[handoff.Decisions] = []
    handoff.subscribe(seen.append)
    try:
        scheduling_cycle_run()
    finally:
        handoff.unsubscribe(seen.append)
    assert seen == [handoff.Decisions(admitted_ids=(workload.pk,), preempted_ids=())]


@pytest.mark.django_db
def test_run_cycle_task_calls_the_service(cast: Cast) -> None:
    add_nodes(cast.gpu_class)
    submit(cast)
    assert run_cycle.apply().get() == {
        "admitted": 1,
        "preempted": 0,
        "requeued": 0,
        "rejected": 0,
        "waiting": 0,
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kw", "field", "words"),
    [
        ({"gpu_milli": 500}, "gpu_milli", "whole GPUs only"),
        ({"gpu_milli": 5000, "replicas": 2}, "gpu_milli", "more than Vision's limit"),
        ({"gpu_milli": 16000}, "gpu_milli", "largest H100-80GB node has 8"),
    ],
)
def test_impossible_requests_are_refused_at_submit(
    cast: Cast, kw: dict, field: str, words: str
) -> None:
    add_nodes(cast.gpu_class)
    with pytest.raises(ValidationError) as info:
        submit(cast, **kw)
    assert words in info.value.message_dict[field][0]
    assert not Workload.objects.exists()


@pytest.mark.django_db
def test_request_above_the_per_user_cap_or_without_quota_is_refused(cast: Cast) -> None:
    quota = cast.team.quotas.get()
    quota.per_user_cap_milli = 2000
    quota.save()
    with pytest.raises(ValidationError) as info:
        submit(cast, gpu_milli=3000)
    assert "per-user cap" in info.value.message_dict["gpu_milli"][0]
    other = GpuClassFactory(name="L40S-48GB", sharing_mode="timeslice", timeslice_replicas=4)
    with pytest.raises(ValidationError) as info:
        submit(cast, gpu_class=other, gpu_milli=500)
    assert "no quota" in info.value.message_dict["gpu_class"][0]


@pytest.mark.django_db
def test_cycle_fails_a_queued_request_the_quota_no_longer_allows(cast: Cast) -> None:
    workload = submit(cast, gpu_milli=8000)
    cast.team.quotas.update(guaranteed_milli=0, limit_milli=4000)
    assert scheduling_cycle_run().rejected == (workload.pk,)
    workload.refresh_from_db()
    assert workload.state == core.FAILED and "limit of 4 GPU" in workload.last_reason


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_and_cycles_admit_exactly_what_the_quota_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """50 threads submit one GPU each and run a cycle, against a limit of 4 GPUs."""
    # 50 threads opening connections at once on a loaded 2-core machine can take longer than
    # production's 2 s connect timeout (DATABASE_CONNECT_TIMEOUT); the race is what is tested.
    monkeypatch.setitem(connection.settings_dict.setdefault("OPTIONS", {}), "connect_timeout", 20)
    gpu_class = GpuClassFactory()
    team = TeamFactory()
    image = ImageFactory()
    TeamQuotaFactory(team=team, gpu_class=gpu_class, guaranteed_milli=4000, limit_milli=4000)
    add_nodes(gpu_class, count=2)
    users = [UserFactory(username=f"racer{i}") for i in range(50)]
    for user in users:
        MembershipFactory(user=user, team=team)
    start = threading.Barrier(len(users))
    errors: list[BaseException] = []

    def race(user: object) -> None:
        try:
            start.wait()
            workload_submit(
                actor=user,
                team=team,
                gpu_class=gpu_class,
                image=image,
                request=WorkloadRequest.of(
                    kind="training", name="race", gpu_milli=1000, command=["python", "train.py"]
                ),
            )
            scheduling_cycle_run()
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    admitted = Workload.objects.filter(state=core.ADMITTED)
    assert admitted.count() == 4
    assert sum(w.total_milli for w in admitted) == 4000
    gpus = [
        (w.placement["replicas"][0]["node"], w.placement["replicas"][0]["gpus"][0])
        for w in admitted
    ]
    assert len(set(gpus)) == 4  # no GPU given twice
    queued = Workload.objects.filter(state=core.QUEUED)
    assert queued.count() == 46
    assert all(w.last_reason.startswith("Team quota reached") for w in queued)


def _blocker(cast: Cast) -> Workload:
    """The team's own production run on the only node, all of its limit: nothing preempts it."""
    return WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        gpu_milli=8000,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        admitted_at=timezone.now() - timedelta(minutes=30),
        max_runtime_seconds=3600,
        placement={
            "cluster": "hub",
            "replicas": [{"node": "h100-80gb-0", "gpus": list(range(8)), "units": 1000}],
        },
    )


@pytest.mark.django_db
def test_every_waiting_workload_gets_its_place_and_moves_up_when_one_leaves(cast: Cast) -> None:
    add_nodes(cast.gpu_class)
    _blocker(cast)
    waiting = [submit(cast, name=f"w{i}") for i in range(3)]
    scheduling_cycle_run()
    rows = Workload.objects.filter(pk__in=[w.pk for w in waiting]).order_by("pk")
    assert [(w.state, w.queue_position) for w in rows] == [
        (core.QUEUED, 1),
        (core.QUEUED, 2),
        (core.QUEUED, 3),
    ]
    for w in rows:
        assert w.last_reason and w.last_reason != "Queued for a GPU."
        assert w.estimated_start_at is not None and isinstance(w.scheduling_advice, list)
        assert [e.to_state for e in w.events.all()] == [core.PENDING, core.QUEUED]
    workload_cancel(actor=cast.owner, workload=Workload.objects.get(pk=waiting[0].pk))
    scheduling_cycle_run()
    rows = Workload.objects.filter(pk__in=[w.pk for w in waiting]).order_by("pk")
    assert [(w.state, w.queue_position) for w in rows] == [
        (core.CANCELLED, 1),  # its last place is kept, its reason is the cancel's
        (core.QUEUED, 1),
        (core.QUEUED, 2),
    ]
    assert rows[0].last_reason.startswith("Cancelled by")


@pytest.mark.django_db
def test_waiting_details_are_not_written_over_a_workload_that_left_the_queue(cast: Cast) -> None:
    left, stays = submit(cast, name="left"), submit(cast, name="stays")
    in_hand = list(Workload.objects.filter(pk__in=[left.pk, stays.pk]).order_by("pk"))
    workload_cancel(actor=cast.owner, workload=Workload.objects.get(pk=left.pk))
    estimate = timezone.now() + timedelta(hours=2)
    for position, w in enumerate(in_hand, start=4):
        w.queue_position, w.estimated_start_at = position, estimate
        w.last_reason, w.scheduling_advice = f"waits at {position}", [f"advice {position}"]
    _store_waiting(in_hand)
    left.refresh_from_db()
    stays.refresh_from_db()
    assert left.state == core.CANCELLED and left.queue_position is None
    assert left.last_reason.startswith("Cancelled by") and left.scheduling_advice == []
    assert stays.queue_position == 5 and stays.last_reason == "waits at 5"
    assert stays.scheduling_advice == ["advice 5"]
    assert abs((stays.estimated_start_at - estimate).total_seconds()) < 1e-3
