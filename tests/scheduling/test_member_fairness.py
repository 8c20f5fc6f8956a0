"""Fairness between the people of a team: within a team's share (and class), each member's
usage, decayed over time, orders their waiting work, so one person's flood of submissions
cannot starve a teammate. Class order and the teams' fair share stay above it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import Snapshot, WaitingWorkload
from apps.scheduling.fairshare import UsageInterval, decayed_member_usage, member_keys
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads import core as workload_core
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast
from tests.scheduling.builders import H100, NOW, nodes, quota, running, snapshot, waiting

QUOTAS = (quota("vision", 8000, 16000), quota("nlp", 8000, 16000))


def flood(owner: str, count: int, *, first_id: int, age_s: int = 600, **kw: object) -> list:
    """``count`` one-GPU workloads of ``owner``, oldest first, one second apart."""
    return [
        waiting("vision", 1000, owner=owner, age_s=age_s - i, wid=first_id + i, **kw)  # type: ignore[arg-type]
        for i in range(count)
    ]


def order(snap: Snapshot) -> list[int]:
    """The queue's order: on a class with no nodes every workload waits, by its position."""
    result = schedule(snap)
    assert not result.admissions
    return [w.workload_id for w in sorted(result.waiting, key=lambda w: w.position)]


def test_a_teammates_later_submission_goes_second_not_behind_the_flood() -> None:
    alice = flood("alice", 10, first_id=1)
    bob = waiting("vision", 1000, owner="bob", age_s=10, wid=100)
    got = order(snapshot(nodes=(), waiting=[*alice, bob], quotas=QUOTAS))
    assert got.index(100) == 1  # behind alice's first (same usage, older), before her second


def test_a_flood_and_a_teammate_share_the_free_gpus() -> None:
    """Eight GPUs free, alice floods ten one-GPU jobs, bob asks for three later: bob's three
    start with five of alice's, where age alone would give all eight to alice."""
    alice = flood("alice", 10, first_id=1)
    bob = flood("bob", 3, first_id=100, age_s=30)
    result = schedule(snapshot(nodes=nodes(H100, 1), waiting=[*alice, *bob], quotas=QUOTAS))
    admitted = {a.workload_id for a in result.admissions}
    assert {100, 101, 102} <= admitted
    assert len(admitted) == 8


def test_a_members_decayed_past_usage_sends_their_work_back() -> None:
    """Alice used four GPUs over the last hours: bob's one job goes before her first, and
    her flood interleaves with bob's work once bob's queued demand reaches her usage."""
    alice = flood("alice", 3, first_id=1)
    bob = flood("bob", 6, first_id=100, age_s=60)
    past = {("alice", "vision", H100.name): 4000.0}
    got = order(
        snapshot(nodes=(), waiting=[*alice, *bob], quotas=QUOTAS, member_past_usage_milli=past)
    )
    # bob's keys 0, 1000, 2000, 3000, 4000, 5000; alice's 4000, 5000, 6000: ties by age.
    assert got == [100, 101, 102, 103, 1, 104, 2, 105, 3]


def test_what_a_member_holds_now_counts_like_their_past() -> None:
    held = [running("vision", "h100-0", (g,), owner="alice", wid=50 + g) for g in range(2)]
    alice = flood("alice", 2, first_id=1)
    bob = flood("bob", 3, first_id=100, age_s=60)
    result = schedule(snapshot(nodes=nodes(H100, 1), running=held, waiting=[*alice, *bob]))
    # Alice holds two GPUs, six are free: all five fit, taken in members' order: bob's keys
    # 0, 1000, 2000 and alice's 2000, 3000 (alice's first older than bob's third).
    assert {a.workload_id for a in result.admissions} == {1, 2, 100, 101, 102}
    assert [a.workload_id for a in result.admissions] == [100, 101, 1, 102, 2]


def test_class_order_stays_above_members_usage() -> None:
    """Bob's batch job waits behind alice's training flood: the class comes first."""
    alice = flood("alice", 4, first_id=1)
    bob = waiting("vision", 1000, owner="bob", priority="batch", age_s=900, wid=100)
    got = order(snapshot(nodes=(), waiting=[bob, *alice], quotas=QUOTAS))
    assert got == [1, 2, 3, 4, 100]


def test_team_fair_share_stays_above_members_usage() -> None:
    """Carol's team nlp used more than vision: all of vision (alice's flood included) comes
    first, however little carol used herself."""
    alice = flood("alice", 3, first_id=1)
    carol = waiting("nlp", 1000, owner="carol", age_s=900, wid=100)
    past = {("vision", H100.name): 1000.0, ("nlp", H100.name): 6000.0}
    got = order(snapshot(nodes=(), waiting=[carol, *alice], quotas=QUOTAS, past_usage_milli=past))
    assert got == [1, 2, 3, 100]


def test_the_reason_says_teammates_who_used_less_go_first() -> None:
    alice = flood("alice", 3, first_id=1)
    bob = waiting("vision", 1000, owner="bob", age_s=10, wid=100)
    result = schedule(snapshot(nodes=(), waiting=[*alice, bob], quotas=QUOTAS))
    reasons = {w.workload_id: w.reason for w in result.waiting}
    assert "1 of them is vision teammates' work" in reasons[2]
    assert (
        "(alice: 1 GPU on average, counting their own waiting work ahead of this)" in (reasons[2])
    )
    assert "teammates" not in reasons[1]  # nobody ahead of it


def test_member_keys_count_the_owners_earlier_waiting_work() -> None:
    ws = [
        waiting("vision", 2000, owner="alice", age_s=30, wid=1),
        waiting("vision", 1000, owner="alice", age_s=20, wid=2),
        waiting("vision", 1000, owner="alice", age_s=40, wid=3, priority="batch"),
        waiting("vision", 1000, owner="bob", age_s=10, wid=4),
    ]
    keys = member_keys(ws, lambda owner, team, c: 500.0 if owner == "alice" else 0.0)
    # alice: training first (by age), her batch job after both.
    assert keys == {1: 500.0, 2: 2500.0, 3: 3500.0, 4: 0.0}


def test_decayed_member_usage_is_per_member_and_forgets() -> None:
    now = NOW
    intervals = [
        UsageInterval(
            "vision", "H100", 8000, now - timedelta(days=2), now - timedelta(days=1), owner="alice"
        ),
        UsageInterval("vision", "H100", 1000, now - timedelta(days=30), None, owner="bob"),
    ]
    usage = decayed_member_usage(intervals, now=now, half_life_seconds=6 * 3600)
    assert usage[("alice", "vision", "H100")] < 8000 * 0.07  # four half-lives ago and more
    assert abs(usage[("bob", "vision", "H100")] - 1000) < 1  # held all along


# --- the property: a flood never stands in front of all of a teammate's work -----------------


@st.composite
def floods(draw: st.DrawFn) -> tuple[list[WaitingWorkload], dict, int]:
    shapes = st.sampled_from([250, 500, 1000, 2000, 4000])
    n_flood = draw(st.integers(4, 30))
    n_mate = draw(st.integers(1, 3))
    flood_past = float(draw(st.integers(0, 8)) * 500)
    mate_past = float(draw(st.integers(0, 8)) * 500)
    ws = []
    for i in range(n_flood):
        ws.append(
            waiting(
                "vision", draw(shapes), owner="alice", age_s=draw(st.integers(0, 900)), wid=i + 1
            )
        )
    for j in range(n_mate):
        ws.append(
            waiting(
                "vision", draw(shapes), owner="bob", age_s=draw(st.integers(0, 900)), wid=1000 + j
            )
        )
    # Some other team's work mixed in, which must not change the members' order.
    for k in range(draw(st.integers(0, 4))):
        ws.append(
            waiting("nlp", 1000, owner="carol", age_s=draw(st.integers(0, 900)), wid=2000 + k)
        )
    past = {("alice", "vision", H100.name): flood_past, ("bob", "vision", H100.name): mate_past}
    return ws, past, n_flood


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(floods())
def test_a_flood_never_stands_in_front_of_all_of_a_teammates_work(
    case: tuple[list[WaitingWorkload], dict, int],
) -> None:
    """Whatever alice floods, bob's first workload waits behind only those of alice's whose
    owner's usage with her work ahead of them is at most bob's usage: once her flood asks for
    more than bob has used, it is behind bob's work, never all in front of it."""
    ws, past, n_flood = case
    got = order(snapshot(nodes=(), waiting=ws, quotas=QUOTAS, member_past_usage_milli=past))
    alice = sorted((w for w in ws if w.owner == "alice"), key=lambda w: (w.submitted_at, w.id))
    bob = sorted((w for w in ws if w.owner == "bob"), key=lambda w: (w.submitted_at, w.id))
    bob_usage = past[("bob", "vision", H100.name)]
    # alice's k-th workload goes with her usage plus what her k - 1 before it ask for.
    ahead_of_bob = 0
    key = past[("alice", "vision", H100.name)]
    for w in alice:
        if key <= bob_usage:
            ahead_of_bob += 1
        key += w.total_milli
    first_bob = got.index(bob[0].id)
    alice_before = sum(1 for wid in got[:first_bob] if wid < 1000)
    assert alice_before <= ahead_of_bob
    if ahead_of_bob < n_flood:  # the flood asks for more than bob used: part is behind him
        assert alice_before < n_flood
    # And bob's work keeps the order of his own submissions.
    assert [wid for wid in got if 1000 <= wid < 2000] == [w.id for w in bob]
    # The other team's work is still in its place relative to vision's as a whole.
    assert sorted(got) == sorted(w.id for w in ws)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 8), st.integers(8, 30), st.integers(1, 4))
def test_a_flood_leaves_a_teammate_their_half_of_the_free_gpus(
    free_gpus: int, n_flood: int, n_mate: int
) -> None:
    """Equal pasts, one-GPU jobs, ``free_gpus`` free: bob, however late, gets at least half of
    what is free (rounded down), or all he asked for."""
    alice = flood("alice", n_flood, first_id=1, age_s=900)
    bob = flood("bob", n_mate, first_id=1000, age_s=10)
    snap = snapshot(nodes=nodes(H100, 1, gpus=free_gpus), waiting=[*alice, *bob], quotas=QUOTAS)
    admitted = {a.workload_id for a in schedule(snap).admissions}
    assert len(admitted) == free_gpus
    assert len(admitted & {w.id for w in bob}) >= min(n_mate, free_gpus // 2)


# --- the snapshot the cycle reads ------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_snapshot_carries_each_members_decayed_usage(cast: Cast) -> None:
    now = timezone.now()
    WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        gpu_milli=2000,
        state=workload_core.SUCCEEDED,
        admitted_at=now - timedelta(hours=2),
        finished_at=now - timedelta(hours=1),
    )
    WorkloadFactory(
        team=cast.team,
        owner=cast.teammate,
        gpu_class=cast.gpu_class,
        gpu_milli=1000,
        state=workload_core.RUNNING,
        admitted_at=now - timedelta(days=30),
    )
    snap = scheduling_snapshot(now=now, half_life_seconds=3600)
    usage = snap.member_past_usage_milli
    owner = usage[("owner", cast.team.name, cast.gpu_class.name)]
    # Two GPUs from two hours to one hour ago, half-life one hour: 2000 · (1/2 − 1/4).
    assert abs(owner - 500) < 1
    assert abs(usage[("teammate", cast.team.name, cast.gpu_class.name)] - 1000) < 1
    # The team's usage is the sum of its members'.
    assert abs(snap.past_usage_milli[(cast.team.name, cast.gpu_class.name)] - 1500) < 1
