"""Quota grants and reservations in the scheduling cycle, on plain data."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.quotas.core import Grant
from apps.reservations.core import Booking
from apps.scheduling.core import schedule
from apps.scheduling.data import RULE_RECLAIM, Policy, RunningWorkload
from tests.scheduling.builders import H100, NOW, nodes, quota, running, snapshot, waiting

HOUR = timedelta(hours=1)


def grant(team: str, milli: int, start_h: float, end_h: float, user: str | None = None) -> Grant:
    return Grant(team, H100.name, milli, NOW + start_h * HOUR, NOW + end_h * HOUR, user)


def booking(team: str, milli: int, start_h: float, end_h: float) -> Booking:
    return Booking(1, team, H100.name, milli, NOW + start_h * HOUR, NOW + end_h * HOUR)


def test_an_active_team_grant_raises_the_limit_and_the_guarantee() -> None:
    ws = [waiting("vision", 2000, wid=i) for i in range(1, 4)]
    base = [quota("vision", 2000, 4000)]
    before = schedule(snapshot(waiting=ws, quotas=base))
    assert [a.workload_id for a in before.admissions] == [1, 2]
    assert [a.borrowed for a in before.admissions] == [False, True]
    during = schedule(snapshot(waiting=ws, quotas=base, grants=(grant("vision", 2000, -1, 1),)))
    assert [a.workload_id for a in during.admissions] == [1, 2, 3]
    assert [a.borrowed for a in during.admissions] == [False, False, True]
    after = schedule(snapshot(waiting=ws, quotas=base, grants=(grant("vision", 2000, -2, 0),)))
    assert [a.workload_id for a in after.admissions] == [1, 2]  # ended at NOW: end exclusive


def test_a_grant_for_one_member_raises_only_their_cap() -> None:
    base = [quota("vision", 4000, 8000, cap=2000)]
    ws = [waiting("vision", 4000, owner="ada", wid=1), waiting("vision", 4000, owner="bob", wid=2)]
    result = schedule(
        snapshot(waiting=ws, quotas=base, grants=(grant("vision", 2000, -1, 1, user="ada"),))
    )
    assert [a.workload_id for a in result.admissions] == [1]
    assert [r.workload_id for r in result.rejections] == [2]  # bob's cap is still 2


def test_when_a_grant_ends_work_above_the_guarantee_becomes_borrowed_not_stopped() -> None:
    held = [
        running("vision", "h100-0", (0, 1), milli=2000, wid=1, ran_s=7200),
        running("vision", "h100-0", (2, 3), milli=2000, wid=2, ran_s=3600, priority="batch"),
        running("vision", "h100-0", (4, 5), milli=2000, wid=3, ran_s=600),
    ]
    base = [quota("vision", 2000, 4000)]
    ended = (grant("vision", 4000, -48, 0),)
    result = schedule(snapshot(running=held, quotas=base, grants=ended))
    assert result.preemptions == ()
    # The lowest class goes first, then the newest: the batch job and #3 are now borrowed.
    assert sorted(result.borrowed_changes) == [(2, True), (3, True)]
    # And a team below its guarantee may now reclaim them, with notice.
    reclaim = schedule(
        snapshot(
            running=[
                r if r.id == 1 else RunningWorkload(**{**r.__dict__, "borrowed": True})
                for r in held
            ],
            waiting=[waiting("nlp", 4000, wid=9)],
            nodes=nodes(H100, 1, gpus=6),
            quotas=[*base, quota("nlp", 4000, 4000)],
            grants=ended,
        ),
        Policy(min_runtime_seconds={}),
    )
    assert {p.workload_id for p in reclaim.preemptions} == {2, 3}
    assert all(p.rule == RULE_RECLAIM and p.grace_seconds > 0 for p in reclaim.preemptions)


def test_reserved_capacity_is_held_for_the_team_during_the_window_only() -> None:
    # nlp borrows the whole node; vision reserved 4 GPUs from NOW.
    held = [
        running("nlp", "h100-0", (i,), milli=1000, wid=10 + i, borrowed=i >= 4, ran_s=3600)
        for i in range(8)
    ]
    ws = [waiting("vision", 1000, wid=i) for i in range(1, 5)]
    quotas = [quota("nlp", 4000, 8000), quota("vision", 0, 0)]
    result = schedule(
        snapshot(
            running=held, waiting=ws, quotas=quotas, reservations=(booking("vision", 4000, 0, 2),)
        )
    )
    assert sorted(a.workload_id for a in result.admissions) == [1, 2, 3, 4]
    assert sorted(p.workload_id for p in result.preemptions) == [14, 15, 16, 17]
    assert all(
        "vision's reservation of H100-80GB has begun, and it reclaims capacity that nlp borrowed"
        in p.reason
        for p in result.preemptions
    )
    before = schedule(
        snapshot(
            running=held, waiting=ws, quotas=quotas, reservations=(booking("vision", 4000, 1, 2),)
        )
    )
    assert before.admissions == () and before.preemptions == ()


@settings(max_examples=150, deadline=None)
@given(
    node_count=st.integers(min_value=1, max_value=3),
    reserved_gpus=st.integers(min_value=1, max_value=8),
    other_guarantee=st.integers(min_value=0, max_value=16),
    other_running=st.integers(min_value=0, max_value=24),
    asks=st.integers(min_value=1, max_value=8),
    other_classes=st.lists(
        st.sampled_from(["training", "development", "batch"]), min_size=24, max_size=24
    ),
    priority=st.sampled_from(["training", "development", "batch"]),
)
def test_a_reservation_is_available_to_its_team_at_window_start_within_one_cycle(
    node_count: int,
    reserved_gpus: int,
    other_guarantee: int,
    other_running: int,
    asks: int,
    other_classes: list[str],
    priority: str,
) -> None:
    """Whatever another team runs on it before the window (within its guarantee or borrowed,
    in any class below production), the first cycle of the window admits the reserving team's
    work up to the amount reserved: by preempting borrowers with their grace period, never
    anything within a guarantee. The borrowers here have run past their minimum runtime (at
    most ten minutes by default), which protects any running work from preemption."""
    capacity = node_count * 8
    reserved = min(reserved_gpus, capacity)
    guarantee = min(other_guarantee, capacity - reserved)  # bookings fit beside guarantees
    fleet = nodes(H100, node_count)
    held = []
    for i in range(min(other_running, capacity)):
        held.append(
            running(
                "nlp",
                fleet[i // 8].name,
                (i % 8,),
                wid=100 + i,
                borrowed=i >= guarantee,
                ran_s=3600,
                priority=other_classes[i],
            )
        )
    ws = [waiting("vision", 1000, wid=i + 1, priority=priority) for i in range(min(asks, reserved))]
    result = schedule(
        snapshot(
            nodes=fleet,
            running=held,
            waiting=ws,
            quotas=[quota("nlp", guarantee * 1000, capacity * 1000), quota("vision", 0, 0)],
            reservations=(booking("vision", reserved * 1000, 0, 4),),
        )
    )
    assert sorted(a.workload_id for a in result.admissions) == [w.id for w in ws]
    victims = {r.id: r for r in held}
    for p in result.preemptions:
        assert victims[p.workload_id].borrowed and p.grace_seconds > 0


@settings(max_examples=150, deadline=None)
@given(
    guarantee=st.integers(min_value=0, max_value=8),
    granted=st.integers(min_value=1, max_value=8),
    sizes=st.lists(st.integers(min_value=1, max_value=2), min_size=1, max_size=8),
    classes=st.lists(
        st.sampled_from(["production", "training", "development", "batch"]), min_size=8, max_size=8
    ),
)
def test_after_a_grant_expires_nothing_is_stopped_and_the_rest_fits_the_guarantee(
    guarantee: int, granted: int, sizes: list[int], classes: list[str]
) -> None:
    held, gpu = [], 0
    for i, size in enumerate(sizes):
        if gpu + size > 8:
            break
        held.append(
            running(
                "vision",
                "h100-0",
                tuple(range(gpu, gpu + size)),
                milli=size * 1000,
                wid=i + 1,
                ran_s=3600 + i,
                priority=classes[i],
            )
        )
        gpu += size
    result = schedule(
        snapshot(
            running=held,
            quotas=[quota("vision", guarantee * 1000, guarantee * 1000)],
            grants=(grant("vision", granted * 1000, -24, 0),),
        )
    )
    assert result.preemptions == () and result.rejections == ()
    now_borrowed = {i for i, b in result.borrowed_changes if b}
    within = sum(r.total_milli for r in held if r.id not in now_borrowed)
    production = sum(r.total_milli for r in held if r.priority == "production")
    assert within <= max(guarantee * 1000, production)
    assert all(r.priority != "production" for r in held if r.id in now_borrowed)
