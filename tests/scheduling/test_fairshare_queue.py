"""The fair-share queue gives exactly the order of one heap that re-queues workloads one by
one (the plain reading of fairshare.order_key with lazy re-sorting), on generated queues with
tied ratios, tied members' keys, tied ages and shares that grow and shrink while workloads
are considered; and a whole cycle decides the same with either queue."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling import core
from apps.scheduling.data import Snapshot
from apps.scheduling.fairshare import FairShareQueue, QueueEntry
from tests.scheduling.test_properties import POLICY, scenarios

Share = tuple[str, str]
Events = dict[int, list[tuple[Share, float]]]


class OneByOneQueue:
    """Every workload in one heap under the key it was last queued with; a popped workload
    whose team's ratio grew since is queued again under the new ratio."""

    def __init__(self, entries: Iterable[QueueEntry], ratio: Callable[[Share], float]) -> None:
        self._ratio = ratio
        self._heap = [
            (rank, ratio(share), member, ts, wid, share) for rank, share, member, ts, wid in entries
        ]
        heapq.heapify(self._heap)

    def pop(self) -> int | None:
        while self._heap:
            rank, stored, member, ts, wid, share = heapq.heappop(self._heap)
            current = self._ratio(share)
            if current > stored:
                heapq.heappush(self._heap, (rank, current, member, ts, wid, share))
                continue
            return wid
        return None

    def changed(self, share: Share) -> None:
        """Nothing to do: every workload is looked at again when it comes up."""


SHARES = [("a", "x"), ("b", "x"), ("c", "x"), ("a", "y")]
# Few distinct ratios, so that ties between shares (and returns to an earlier ratio) are common.
RATIOS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 1e12])


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[QueueEntry], dict[Share, float], Events]:
    n = draw(st.integers(0, 40))
    entries: list[QueueEntry] = [
        (
            draw(st.integers(0, 2)),
            draw(st.sampled_from(SHARES)),
            float(draw(st.sampled_from([0, 0, 500, 1000]))),  # members' keys, often tied
            float(draw(st.integers(0, 4))),  # tied ages: the id decides
            wid,
        )
        for wid in draw(st.permutations(range(1, n + 1)))
    ]
    start = {share: draw(RATIOS) for share in SHARES}
    # What happens while each workload is considered: shares whose ratio moves (up when an
    # admission charges the team, down when a preemption frees the team's GPUs).
    events = {
        wid: draw(st.lists(st.tuples(st.sampled_from(SHARES), RATIOS), max_size=3))
        for _rank, _share, _member, _ts, wid in entries
    }
    return entries, start, events


def drain(
    make: Callable[
        [Iterable[QueueEntry], Callable[[Share], float]], FairShareQueue | OneByOneQueue
    ],
    entries: list[QueueEntry],
    start: dict[Share, float],
    events: Events,
) -> list[int]:
    ratios = dict(start)
    queue = make(entries, ratios.__getitem__)
    order: list[int] = []
    while (wid := queue.pop()) is not None:
        order.append(wid)
        for share, ratio in events[wid]:
            ratios[share] = ratio
            queue.changed(share)
    return order


@settings(max_examples=600, deadline=None)
@given(queues())
def test_same_order_as_one_by_one_requeueing(
    case: tuple[list[QueueEntry], dict[Share, float], Events],
) -> None:
    entries, start, events = case
    expected = drain(OneByOneQueue, entries, start, events)
    got = drain(FairShareQueue, entries, start, events)
    assert got == expected
    assert sorted(got) == sorted(wid for _r, _s, _m, _t, wid in entries)


def test_a_tie_that_preempts_splits_the_run() -> None:
    """Team a admits (1), so its next workload (2) is found out of date and a's workloads are
    re-keyed from 0.0 to 1.0; then team b, queued under the same 0.0, reclaims from a (3) and
    brings a's ratio back to 0.0 before a's workload 4 came up under its old key: 4 goes
    next and 2 last, as with one-by-one re-queueing (re-keying all of a's run would give
    1, 3, 2, 4)."""
    a, b = ("a", "x"), ("b", "x")
    entries: list[QueueEntry] = [
        (0, a, 0.0, 0.0, 1),
        (0, a, 0.0, 0.0, 2),
        (0, b, 0.0, 0.0, 3),
        (0, a, 0.0, 0.0, 4),
    ]
    start = {a: 0.0, b: 0.0}
    events: Events = {1: [(a, 1.0)], 2: [], 3: [(a, 0.0)], 4: []}
    expected = drain(OneByOneQueue, entries, start, events)
    assert expected == [1, 3, 4, 2]
    assert drain(FairShareQueue, entries, start, events) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cycle_decides_the_same_with_one_by_one_requeueing(pair: tuple[Snapshot, Snapshot]) -> None:
    for snap in pair:
        fast = core.schedule(snap, POLICY)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(core, "FairShareQueue", OneByOneQueue)
            plain = core.schedule(snap, POLICY)
        assert fast == plain
