"""Fair share: the order in which waiting workloads are considered. Pure.

Order by priority class, then by the team's fair-share ratio in the GPU class — usage ÷
guarantee, lowest first — then by age. Usage is the current allocation plus a decayed
average of past allocation, so a team that used a lot yesterday does not starve the
others today, and one that used a lot in the last hour waits behind those that did not.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from apps.scheduling.data import priority_rank

# A team without a guarantee in a class sorts after every team that has one.
NO_GUARANTEE = 1e12


@dataclass(frozen=True)
class UsageInterval:
    """``milli`` of ``gpu_class`` held by ``team`` from ``start`` to ``end`` (None: still)."""

    team: str
    gpu_class: str
    milli: int
    start: datetime
    end: datetime | None = None


def decayed_usage(
    intervals: Iterable[UsageInterval], *, now: datetime, half_life_seconds: float
) -> dict[tuple[str, str], float]:
    """Exponentially weighted average allocation (milli-GPU) per (team, class).

    Weight of an instant τ seconds ago: λ·e^(−λτ), λ = ln 2 / half-life, so the weights
    integrate to one and a team that always held M milli has an average of M. An interval
    from τ_start to τ_end seconds ago contributes M·(e^(−λ·τ_end) − e^(−λ·τ_start)).
    """
    rate = math.log(2) / max(1.0, half_life_seconds)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for interval in intervals:
        end = interval.end if interval.end is not None and interval.end < now else now
        if end <= interval.start:
            continue
        ago_end = (now - end).total_seconds()
        ago_start = (now - interval.start).total_seconds()
        share = math.exp(-rate * ago_end) - math.exp(-rate * ago_start)
        out[(interval.team, interval.gpu_class)] += interval.milli * share
    return dict(out)


def share_ratio(usage_milli: float, guaranteed_milli: int) -> float:
    if guaranteed_milli <= 0:
        return NO_GUARANTEE + usage_milli
    return usage_milli / guaranteed_milli


def order_key(
    *, priority: str, ratio: float, submitted_at: datetime, workload_id: int
) -> tuple[int, float, float, int]:
    return (priority_rank(priority), ratio, submitted_at.timestamp(), workload_id)


# One waiting workload for the queue: (priority rank, (team, class), submitted timestamp, id).
QueueEntry = tuple[int, tuple[str, str], float, int]


class _Run:
    """Workloads of one (rank, team, class), in (submitted, id) order, that all sit in the
    queue under the same ratio: ``items[lo:hi]`` of the group's sorted list."""

    __slots__ = ("hi", "items", "lo", "prev", "rank", "ratio", "share")

    def __init__(
        self,
        rank: int,
        share: tuple[str, str],
        items: list[tuple[float, int]],
        lo: int,
        hi: int,
        ratio: float,
    ) -> None:
        self.rank = rank
        self.share = share
        self.items = items
        self.lo = lo
        self.hi = hi
        self.ratio = ratio
        # The ratio the run sat under before its last re-keying, while items of it may still
        # be due under that ratio (see FairShareQueue.changed).
        self.prev: float | None = None


class FairShareQueue:
    """Waiting workloads in fair-share order (:func:`order_key`), re-ordered as the teams'
    ratios change while the cycle admits and preempts.

    The order it gives is exactly that of one heap holding every workload under the key it
    was last queued with, where a popped workload whose team's ratio has grown since is
    queued again under the new ratio and a workload whose ratio did not grow is taken. That
    heap re-queues workloads one by one, as many times as their team's ratio grows before
    their turn: work that grows with the waiting workloads times the changes of the shares.
    Here the workloads of one (rank, team, class) are kept sorted once and move together as
    a *run*: the heap holds one entry per run, and a run whose head is found out of date is
    re-keyed whole. That is what the one-by-one heap does as well, unless the team's ratio
    changes again before the rest of the run's old keys come up — which can only happen
    while a workload queued under exactly the run's old ratio is taken (a tie of ratios)
    and preempts from, or admits for, the run's team; :meth:`changed` then splits the run at
    that workload, so the part not yet due keeps its old key.
    """

    def __init__(
        self, entries: Iterable[QueueEntry], ratio: Callable[[tuple[str, str]], float]
    ) -> None:
        self._ratio = ratio
        groups: dict[tuple[int, tuple[str, str]], list[tuple[float, int]]] = defaultdict(list)
        for rank, share, submitted, workload_id in entries:
            groups[(rank, share)].append((submitted, workload_id))
        self._runs: list[_Run] = []
        self._by_group: dict[tuple[int, tuple[str, str]], list[_Run]] = defaultdict(list)
        self._heap: list[tuple[int, float, float, int, int]] = []
        for (rank, share), items in groups.items():
            items.sort()
            self._add(_Run(rank, share, items, 0, len(items), ratio(share)), push=False)
        heapq.heapify(self._heap)
        # The key of the workload taken last: the one being considered now.
        self._last: tuple[int, float, float, int] | None = None

    def _add(self, run: _Run, *, push: bool = True) -> None:
        serial = len(self._runs)
        self._runs.append(run)
        self._by_group[(run.rank, run.share)].append(run)
        submitted, workload_id = run.items[run.lo]
        entry = (run.rank, run.ratio, submitted, workload_id, serial)
        if push:
            heapq.heappush(self._heap, entry)
        else:
            self._heap.append(entry)

    def pop(self) -> int | None:
        """The id of the next workload to consider, or None when all have been."""
        heap, runs = self._heap, self._runs
        while heap:
            rank, stored, submitted, workload_id, serial = heap[0]
            run = runs[serial]
            if run.lo >= run.hi or run.ratio != stored or run.items[run.lo][1] != workload_id:
                heapq.heappop(heap)  # the run moved on since this entry was made
                continue
            current = self._ratio(run.share)
            if current > stored:  # the team's share grew since it was queued: re-key the run
                run.prev, run.ratio = stored, current
                heapq.heapreplace(heap, (rank, current, submitted, workload_id, serial))
                continue
            run.lo += 1
            run.prev = None
            if run.lo < run.hi:
                following = run.items[run.lo]
                heapq.heapreplace(heap, (rank, stored, following[0], following[1], serial))
            else:
                heapq.heappop(heap)
            self._last = (rank, stored, submitted, workload_id)
            return workload_id
        self._last = None
        return None

    def changed(self, share: tuple[str, str]) -> None:
        """The ratio of ``share`` may have changed while the last popped workload is
        considered. A run of that share and the same rank that was re-keyed away from exactly
        the last workload's ratio still has workloads that one-by-one re-queueing would have
        reached only after this one, under the old key: they split off and keep it."""
        if self._last is None:
            return
        rank, stored, submitted, workload_id = self._last
        for run in list(self._by_group.get((rank, share), ())):
            if run.prev != stored or run.lo >= run.hi:
                continue
            cut = bisect_right(run.items, (submitted, workload_id), run.lo, run.hi)
            run.prev = None
            if cut < run.hi:
                rest = _Run(rank, share, run.items, cut, run.hi, stored)
                run.hi = cut
                self._add(rest)
