"""Fair share: the order in which waiting workloads are considered. Pure.

Order by priority class, then by the team's fair-share ratio in the GPU class — usage ÷
guarantee, lowest first — then, within the team, by its members' usage, then by age. Usage
is the current allocation plus a decayed average of past allocation, so a team that used a
lot yesterday does not starve the others today, and one that used a lot in the last hour
waits behind those that did not.

Between the members of a team the same holds person by person (:func:`member_keys`): each
waiting workload is keyed by its owner's usage of the team's class *plus* what the owner's
own work ahead of it in the queue asks for, as if that were running already. One person's
flood of submissions therefore interleaves with a teammate's work instead of standing in
front of all of it: a teammate's next workload goes before the flooder's first workload
whose key exceeds the teammate's (a fair-queueing virtual start, fixed for the cycle).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from apps.scheduling.data import WaitingWorkload, priority_rank

# A team without a guarantee in a class sorts after every team that has one.
NO_GUARANTEE = 1e12


@dataclass(frozen=True)
class UsageInterval:
    """``milli`` of ``gpu_class`` held by ``team`` (for ``owner``, when known) from ``start``
    to ``end`` (None: still)."""

    team: str
    gpu_class: str
    milli: int
    start: datetime
    end: datetime | None = None
    owner: str = ""


def _decayed_share(interval: UsageInterval, *, now: datetime, rate: float) -> float:
    """What ``interval`` adds to the decayed average: M·(e^(−λ·τ_end) − e^(−λ·τ_start))."""
    end = interval.end if interval.end is not None and interval.end < now else now
    if end <= interval.start:
        return 0.0
    ago_end = (now - end).total_seconds()
    ago_start = (now - interval.start).total_seconds()
    return interval.milli * (math.exp(-rate * ago_end) - math.exp(-rate * ago_start))


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
        share = _decayed_share(interval, now=now, rate=rate)
        if share:
            out[(interval.team, interval.gpu_class)] += share
    return dict(out)


def decayed_member_usage(
    intervals: Iterable[UsageInterval], *, now: datetime, half_life_seconds: float
) -> dict[tuple[str, str, str], float]:
    """The same average per (owner, team, class): what each member used of the team's share."""
    rate = math.log(2) / max(1.0, half_life_seconds)
    out: dict[tuple[str, str, str], float] = defaultdict(float)
    for interval in intervals:
        share = _decayed_share(interval, now=now, rate=rate)
        if share:
            out[(interval.owner, interval.team, interval.gpu_class)] += share
    return dict(out)


def member_keys(
    waiting: Iterable[WaitingWorkload], usage: Callable[[str, str, str], float]
) -> dict[int, float]:
    """Per waiting workload id: its place among its team's work of its class (lower first).

    ``usage(owner, team, class)`` is the owner's usage now (current allocation plus weighted
    decayed past). A workload's key is that plus the charge of the owner's own waiting work
    of the team and class that goes before it (higher class, or same class and older), so
    the owner's k-th workload sits where it would if the k − 1 before it were running."""
    mine: dict[tuple[str, str, str], list[WaitingWorkload]] = defaultdict(list)
    for w in waiting:
        mine[(w.owner, w.team, w.gpu_class)].append(w)
    out: dict[int, float] = {}
    for (owner, team, gpu_class), ws in mine.items():
        ws.sort(key=lambda w: (priority_rank(w.priority), w.submitted_at, w.id))
        ahead = usage(owner, team, gpu_class)
        for w in ws:
            out[w.id] = ahead
            ahead += w.total_milli
    return out


def share_ratio(usage_milli: float, guaranteed_milli: int) -> float:
    if guaranteed_milli <= 0:
        return NO_GUARANTEE + usage_milli
    return usage_milli / guaranteed_milli


def order_key(
    *,
    priority: str,
    ratio: float,
    submitted_at: datetime,
    workload_id: int,
    member_key: float = 0.0,
) -> tuple[int, float, float, float, int]:
    return (priority_rank(priority), ratio, member_key, submitted_at.timestamp(), workload_id)


# One waiting workload for the queue: (priority rank, (team, class), member key (member_keys),
# submitted timestamp, id).
QueueEntry = tuple[int, tuple[str, str], float, float, int]
# A workload's place inside its run: (member key, submitted timestamp, id).
_Item = tuple[float, float, int]


class _Run:
    """Workloads of one (rank, team, class), in (member key, submitted, id) order, that all
    sit in the queue under the same ratio: ``items[lo:hi]`` of the group's sorted list."""

    __slots__ = ("hi", "items", "lo", "prev", "rank", "ratio", "share")

    def __init__(
        self,
        rank: int,
        share: tuple[str, str],
        items: list[_Item],
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
        groups: dict[tuple[int, tuple[str, str]], list[_Item]] = defaultdict(list)
        for rank, share, member, submitted, workload_id in entries:
            groups[(rank, share)].append((member, submitted, workload_id))
        self._runs: list[_Run] = []
        self._by_group: dict[tuple[int, tuple[str, str]], list[_Run]] = defaultdict(list)
        self._heap: list[tuple[int, float, float, float, int, int]] = []
        for (rank, share), items in groups.items():
            items.sort()
            self._add(_Run(rank, share, items, 0, len(items), ratio(share)), push=False)
        heapq.heapify(self._heap)
        # The key of the workload taken last: the one being considered now.
        self._last: tuple[int, float, float, float, int] | None = None

    def _add(self, run: _Run, *, push: bool = True) -> None:
        serial = len(self._runs)
        self._runs.append(run)
        self._by_group[(run.rank, run.share)].append(run)
        member, submitted, workload_id = run.items[run.lo]
        entry = (run.rank, run.ratio, member, submitted, workload_id, serial)
        if push:
            heapq.heappush(self._heap, entry)
        else:
            self._heap.append(entry)

    def pop(self) -> int | None:
        """The id of the next workload to consider, or None when all have been."""
        heap, runs = self._heap, self._runs
        while heap:
            rank, stored, member, submitted, workload_id, serial = heap[0]
            run = runs[serial]
            if run.lo >= run.hi or run.ratio != stored or run.items[run.lo][2] != workload_id:
                heapq.heappop(heap)  # the run moved on since this entry was made
                continue
            current = self._ratio(run.share)
            if current > stored:  # the team's share grew since it was queued: re-key the run
                run.prev, run.ratio = stored, current
                heapq.heapreplace(heap, (rank, current, member, submitted, workload_id, serial))
                continue
            run.lo += 1
            run.prev = None
            if run.lo < run.hi:
                nm, ns, nid = run.items[run.lo]
                heapq.heapreplace(heap, (rank, stored, nm, ns, nid, serial))
            else:
                heapq.heappop(heap)
            self._last = (rank, stored, member, submitted, workload_id)
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
        rank, stored, member, submitted, workload_id = self._last
        for run in list(self._by_group.get((rank, share), ())):
            if run.prev != stored or run.lo >= run.hi:
                continue
            cut = bisect_right(run.items, (member, submitted, workload_id), run.lo, run.hi)
            run.prev = None
            if cut < run.hi:
                rest = _Run(rank, share, run.items, cut, run.hi, stored)
                run.hi = cut
                self._add(rest)
