"""For every waiting workload: position, a reason a person can read, an estimated start,
and advice on what would start it sooner. Pure.

Estimates come from the running workloads' maximum runtimes: a running workload frees
its GPUs at the latest when its maximum runtime is reached. Capacity freed over time is
given to the queue in order, so a workload's estimate is the moment enough has been
freed for it and for those ahead of it in its GPU class (its team's own running work,
when its team is at its limit). A workload whose wait depends on work with no maximum
runtime gets no estimate, and the reason says so.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import accumulate
from typing import TYPE_CHECKING

from apps.catalog import core as catalog_core
from apps.catalog.resources import ResourceMappingError, charged_milli
from apps.quotas.core import format_milli
from apps.scheduling.data import (
    BLOCK_CAPACITY,
    BLOCK_CLASS,
    BLOCK_GUARANTEE,
    BLOCK_QUOTA,
    BLOCK_USER,
    Blocked,
    GpuClassSpec,
    Policy,
    Quota,
    RunningWorkload,
    Suggestion,
    Waiting,
    WaitingWorkload,
)
from apps.scheduling.placement import fitting_nodes
from apps.scheduling.units import DemandError, replica_demand

if TYPE_CHECKING:
    from apps.scheduling.placement import Pool


class _Ends:
    """Moments at which milli-GPU is freed, sorted, with running totals."""

    def __init__(self, items: Iterable[tuple[float, int]], unknown: int) -> None:
        pairs = sorted(items)
        self.times = [t for t, _ in pairs]
        self.freed = list(accumulate(m for _, m in pairs))
        self.unknown = unknown

    def when(self, need: int) -> float | None:
        """The first moment at which at least ``need`` milli has been freed."""
        if need <= 0:
            return self.times[0] if self.times else None
        i = bisect_left(self.freed, need)
        return self.times[i] if i < len(self.times) else None


def _ends_of(running: Iterable[RunningWorkload]) -> tuple[list[tuple[float, int]], int]:
    items: list[tuple[float, int]] = []
    unknown = 0
    for r in running:
        if r.max_runtime_seconds is None:
            unknown += r.total_milli
        else:
            items.append((r.admitted_at.timestamp() + r.max_runtime_seconds, r.total_milli))
    return items, unknown


def waiting_details(
    *,
    now: datetime,
    blocked: Sequence[Blocked],
    running: Sequence[RunningWorkload],
    pools: Mapping[str, Sequence[Pool]],
    classes: Mapping[str, GpuClassSpec],
    quotas: Mapping[tuple[str, str], Quota],
    usage: Mapping[tuple[str, str], int],
    user_usage: Mapping[tuple[str, str, str], int],
    policy: Policy,
) -> list[Waiting]:
    by_class: dict[str, list[RunningWorkload]] = defaultdict(list)
    by_team: dict[tuple[str, str], list[RunningWorkload]] = defaultdict(list)
    by_user: dict[tuple[str, str, str], list[RunningWorkload]] = defaultdict(list)
    for r in running:
        by_class[r.gpu_class].append(r)
        by_team[(r.team, r.gpu_class)].append(r)
        by_user[(r.owner, r.team, r.gpu_class)].append(r)
    ends_cache: dict[object, _Ends] = {}

    def ends(key: object, members: list[RunningWorkload]) -> _Ends:
        if key not in ends_cache:
            items, unknown = _ends_of(members)
            ends_cache[key] = _Ends(items, unknown)
        return ends_cache[key]

    free_now = {name: sum(p.free_milli() for p in ps) for name, ps in pools.items()}
    ahead_demand: dict[str, int] = defaultdict(int)
    advisor = _Advisor(
        pools=pools, classes=classes, quotas=quotas, usage=usage, user_usage=user_usage
    )
    out: list[Waiting] = []
    base = now.timestamp()
    # Blocked work seen so far per (team, class, priority), and per owner of it: how many of a
    # teammate's workloads of the same class wait ahead of one (members' order, fairshare.py).
    team_seen: dict[tuple[str, str, str], int] = defaultdict(int)
    own_seen: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for n, b in enumerate(blocked):
        w = b.workload
        c = w.gpu_class
        teammates_ahead = (
            team_seen[(w.team, c, w.priority)] - own_seen[(w.owner, w.team, c, w.priority)]
        )
        team_seen[(w.team, c, w.priority)] += 1
        own_seen[(w.owner, w.team, c, w.priority)] += 1
        quota = quotas.get((w.team, c))
        amount = w.total_milli
        at: float | None = None
        unknown = False
        open_ended = False  # what it waits for includes work with no maximum runtime
        advice: tuple[str, ...] = ()
        suggestions: tuple[Suggestion, ...] = ()
        if b.kind == BLOCK_CLASS:
            reason = f"{c} is not offered at the moment; it waits until an admin enables it."
        elif b.kind == BLOCK_GUARANTEE:
            guaranteed = quota.guaranteed_milli if quota else 0
            used = usage.get((w.team, c), 0)
            if amount > guaranteed:
                # No amount of waiting helps: the request is larger than the whole guarantee.
                reason = (
                    f"Production work runs only on guaranteed quota: this needs "
                    f"{format_milli(amount)} GPU of {c}, more than {w.team}'s whole guarantee "
                    f"of {format_milli(guaranteed)} GPU; it cannot start until an admin raises "
                    "the guarantee (or ask for a lower class, which may borrow)."
                )
            else:
                reason = (
                    f"Production work runs only on guaranteed quota: {w.team} uses "
                    f"{format_milli(used)} of its {format_milli(guaranteed)} GPU guarantee on "
                    f"{c}, and this needs {format_milli(amount)} more; it starts when the "
                    "team's running production work there leaves room, or an admin raises "
                    "the guarantee."
                )
            # What holds the guarantee is production work, which has no maximum runtime.
            unknown, open_ended = True, True
        elif b.kind == BLOCK_QUOTA:
            limit = quota.limit_milli if quota else 0
            used = usage.get((w.team, c), 0)
            reason = (
                f"Team quota reached: {w.team} uses {format_milli(used)} of its "
                f"{format_milli(limit)} GPU limit on {c}, and this needs "
                f"{format_milli(amount)} more."
            )
            team_ends = ends((w.team, c), by_team[(w.team, c)])
            at = team_ends.when(used + amount - limit)
            unknown, open_ended = at is None, team_ends.unknown > 0
        elif b.kind == BLOCK_USER:
            cap = quota.per_user_cap_milli if quota and quota.per_user_cap_milli else 0
            mine = user_usage.get((w.owner, w.team, c), 0)
            reason = (
                f"Per-user cap reached: {w.owner} uses {format_milli(mine)} of the "
                f"{format_milli(cap)} GPU each member of {w.team} may use on {c}."
            )
            user_ends = ends((w.owner, w.team, c), by_user[(w.owner, w.team, c)])
            at = user_ends.when(mine + amount - cap)
            unknown, open_ended = at is None, user_ends.unknown > 0
        else:
            shape = _shape(w.gpu_milli, w.replicas)
            ahead = "nobody" if b.ahead == 0 else f"{b.ahead}"
            gang, too_few_nodes = (
                _gang_room(w, pools.get(c, ()), classes.get(c)) if w.replicas > 1 else ("", False)
            )
            reason = f"No {c} capacity free for {shape}{gang}; {ahead} ahead of you."
            if not gang and free_now.get(c, 0) >= amount:
                # GPUs are free in all, but no node has them beside the CPU and memory one
                # replica asks for (or they are split over several GPUs and nodes).
                reason = (
                    f"{format_milli(free_now[c])} GPU of {c} is free in all, but no node has "
                    f"room for {shape} together with {w.cpu_milli / 1000:g} CPUs and "
                    f"{w.memory_mib // 1024} GiB of memory per replica; {ahead} ahead of you."
                )
            if teammates_ahead > 0:
                reason += " " + _members_order(w, teammates_ahead, b.member_milli)
            if not too_few_nodes:  # else no amount of freed GPUs starts it: no estimate
                class_ends = ends(c, by_class[c])
                need = ahead_demand[c] + amount - free_now.get(c, 0)
                at = class_ends.when(need)
                unknown, open_ended = at is None, class_ends.unknown > 0
                ahead_demand[c] += amount
        if unknown and b.kind != BLOCK_CLASS:
            # The estimate and the reason come from the same sums: say which one is missing.
            reason += (
                " No estimate yet: the work it waits for has no maximum runtime."
                if open_ended
                else " No estimate: even when all running work ends, not enough is freed for "
                "it and those ahead of it."
            )
        estimated = None if at is None else datetime.fromtimestamp(max(at, base), tz=now.tzinfo)
        if n < policy.advice_limit:
            advice, suggestions = advisor.advise(b)
        out.append(Waiting(w.id, b.position, reason, estimated, advice, suggestions))
    return out


def _members_order(w: WaitingWorkload, teammates_ahead: int, member_milli: float) -> str:
    """Why teammates' work of the same class goes first: whoever used less lately."""
    of_them = "1 of them is" if teammates_ahead == 1 else f"{teammates_ahead} of them are"
    return (
        f"{of_them} {w.team} teammates' work: within the team, whoever has used less of "
        f"{w.gpu_class} lately goes first ({w.owner}: {format_milli(round(member_milli))} GPU "
        "on average, counting their own waiting work ahead of this)."
    )


def _gang_room(
    w: WaitingWorkload, pools: Sequence[Pool], gpu_class: GpuClassSpec | None
) -> tuple[str, bool]:
    """Why a gang does not fit, in nodes: it needs one node per replica, each with room for a
    replica, in one cluster ("needs 4 nodes with 2 free H100-80GB GPUs each; 3 have them").
    Also whether no cluster has that many nodes of the class at all."""
    if gpu_class is None:
        return "", False
    try:
        demand = replica_demand(
            gpu_class, w.gpu_milli, cpu_milli=w.cpu_milli, memory_mib=w.memory_mib
        )
    except DemandError:
        return "", False
    have = max((len(fitting_nodes(p, demand, w.replicas)) for p in pools), default=0)
    if demand.mig_profile:
        each = f"a free {demand.mig_profile} instance of {gpu_class.name}"
    else:
        each = f"{demand.gpus} free {gpu_class.name} GPU{'s' if demand.gpus != 1 else ''}"
    text = (
        f": it needs {w.replicas} nodes with {each} each (one replica per node, in one "
        f"cluster); {have} {'has' if have == 1 else 'have'} them now"
    )
    nodes = max((p.node_count() for p in pools), default=0)
    if nodes < w.replicas:
        text += (
            f", and {gpu_class.name} has {nodes} node{'s' if nodes != 1 else ''} in all: "
            "ask for fewer replicas with more GPUs each"
        )
    return text, nodes < w.replicas


def _shape(gpu_milli: int, replicas: int) -> str:
    if replicas > 1:
        return f"{replicas} replicas × {format_milli(gpu_milli)} GPU, all at once"
    if gpu_milli > 1000:
        return f"{format_milli(gpu_milli)} GPU on one node"
    return f"{format_milli(gpu_milli)} GPU"


class _Advisor:
    """What would start a waiting workload sooner: another class, a smaller request. Every
    suggestion is checked the way the cycle admits: the class can express the amount for the
    request's shape, the team's quota and the per-user cap have room for what it is charged,
    and a node has room for it now (after this cycle's admissions)."""

    def __init__(
        self,
        *,
        pools: Mapping[str, Sequence[Pool]],
        classes: Mapping[str, GpuClassSpec],
        quotas: Mapping[tuple[str, str], Quota],
        usage: Mapping[tuple[str, str], int],
        user_usage: Mapping[tuple[str, str, str], int],
    ) -> None:
        self.pools = pools
        self.classes = classes
        self.quotas = quotas
        self.usage = usage
        self.user_usage = user_usage
        self._fits: dict[tuple[object, ...], bool] = {}
        self._memo: dict[tuple[object, ...], tuple[tuple[str, ...], tuple[Suggestion, ...]]] = {}

    def _headroom(self, team: str, owner: str, class_name: str) -> int:
        quota = self.quotas.get((team, class_name))
        if quota is None:
            return 0
        room = quota.limit_milli - self.usage.get((team, class_name), 0)
        if quota.per_user_cap_milli is not None:
            mine = self.user_usage.get((owner, team, class_name), 0)
            room = min(room, quota.per_user_cap_milli - mine)
        return room

    def starts_now(self, w: WaitingWorkload, class_name: str, gpu_milli: int) -> bool:
        """Whether one replica of ``gpu_milli`` on ``class_name``, for ``w``'s team and owner,
        would be admitted now."""
        room = self._headroom(w.team, w.owner, class_name)
        key = (class_name, gpu_milli, w.cpu_milli, w.memory_mib, room)
        if key in self._fits:
            return self._fits[key]
        result = False
        gpu_class = self.classes.get(class_name)
        if gpu_class is not None and gpu_class.enabled and shape_fits(gpu_class, gpu_milli):
            demand = replica_demand(
                gpu_class, gpu_milli, cpu_milli=w.cpu_milli, memory_mib=w.memory_mib
            )
            if room >= charged_milli(gpu_milli, gpu_class):
                result = any(p.find(demand) is not None for p in self.pools.get(class_name, []))
        self._fits[key] = result
        return result

    def advise(self, b: Blocked) -> tuple[tuple[str, ...], tuple[Suggestion, ...]]:
        w = b.workload
        memo = (b.kind, w.team, w.owner, w.gpu_class, w.gpu_milli, w.replicas, w.cpu_milli)
        if memo in self._memo:
            return self._memo[memo]
        tips: list[str] = []
        suggestions: list[Suggestion] = []
        others = sorted(name for name in self.classes if name != w.gpu_class)
        tries: list[tuple[str, int]] = []
        if w.replicas == 1 and b.kind in (BLOCK_QUOTA, BLOCK_CAPACITY):
            if b.kind == BLOCK_CAPACITY and w.gpu_milli >= 2000:
                # Fewer whole GPUs on the same class, then the same amount elsewhere.
                tries.append((w.gpu_class, (w.gpu_milli // 2000) * 1000))
            elif b.kind == BLOCK_CAPACITY and w.gpu_milli == 1000:
                tries.append((w.gpu_class, 500))
            tries += [(name, w.gpu_milli) for name in others]
        for name, milli in tries:
            if len(suggestions) >= 2:
                break
            if self.starts_now(w, name, milli):
                if name == w.gpu_class:
                    text = f"Ask for {format_milli(milli)} GPU instead: it would start now."
                else:
                    text = (
                        f"{format_milli(milli)} GPU of {name} would start now: {w.team} has "
                        "room in its quota there."
                    )
                suggestions.append(Suggestion(name, milli, text))
        tips.extend(s.text for s in suggestions)
        if b.kind == BLOCK_QUOTA and not suggestions:
            tips.append(
                f"Your team is at its limit for {w.gpu_class}: it starts when your team's "
                "running work there ends, or a team lead can stop some of it."
            )
        elif b.kind == BLOCK_USER:
            tips.append("Ask a team lead to raise the per-user cap, or stop one of your workloads.")
        result = (tuple(tips), tuple(suggestions))
        self._memo[memo] = result
        return result


def shape_fits(gpu_class: GpuClassSpec, gpu_milli: int) -> bool:
    """Whether ``gpu_class`` can serve one replica of ``gpu_milli`` as asked: whole GPUs for a
    ``whole`` class, at most one GPU and a profile for ``mig``, whole GPUs above one GPU."""
    if gpu_milli > 1000 and gpu_milli % 1000:
        return False
    if gpu_class.sharing_mode == catalog_core.SHARING_WHOLE and gpu_milli % 1000:
        return False
    try:
        replica_demand(gpu_class, gpu_milli)
        charged_milli(gpu_milli, gpu_class)
    except (DemandError, ResourceMappingError):
        return False
    return True
