"""The scheduling cycle: a pure function from a snapshot to decisions.

``schedule(snapshot, policy)`` orders the waiting workloads by class, fair share and age
(fairshare.py); admits each one if its team's limit, its owner's cap and a placement allow
(placement.py) — a gang whole or not at all; otherwise looks for the cheapest legal
preemption (preemption.py); otherwise it waits, with a position, a reason and an
estimated start (estimate.py). Usage above a team's guarantee is *borrowed*: it runs on
capacity that is idle now and may be reclaimed by teams below their guarantee.

No ORM, no I/O, no clock: the same snapshot gives the same result.
"""

from __future__ import annotations

import gc
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from apps.quotas.core import format_milli
from apps.reservations.core import reserved_milli
from apps.scheduling import estimate, governance
from apps.scheduling.data import (
    BLOCK_CAPACITY,
    BLOCK_CLASS,
    BLOCK_GUARANTEE,
    BLOCK_QUOTA,
    BLOCK_USER,
    PRODUCTION,
    Admission,
    Blocked,
    CycleResult,
    Placement,
    Policy,
    Preemption,
    PreemptionEnd,
    Quota,
    Rejection,
    ReplicaPlacement,
    Requeue,
    RunningWorkload,
    Snapshot,
    TopologyAsk,
    TypicalRequest,
    Waiting,
    WaitingWorkload,
    priority_rank,
)
from apps.scheduling.fairshare import FairShareQueue, QueueEntry, member_keys, share_ratio
from apps.scheduling.fragmentation import default_typical, typical_from_requests
from apps.scheduling.placement import GpuPool, Pool, build_pools, place_gang
from apps.scheduling.preemption import (
    after_grace,
    cheapest_set,
    legal_rule,
    past_minimum_runtime,
    preemption_for,
)
from apps.scheduling.units import Demand, DemandError, replica_demand

HELD_REASON = (
    "{held} GPU of {gpu_class} freed by preemption {verb} held until the preempted workloads are "
    "gone (their grace period, at most {seconds} s more), for the workloads they were "
    "preempted for; this one could start on it otherwise."
)

PARALLELISM_REASON = (
    "Its sweep runs {running} trials at once (its parallelism cap); this trial starts when "
    "one of them ends."
)


def schedule(snapshot: Snapshot, policy: Policy | None = None) -> CycleResult:
    """Decide one cycle. See the module docstring."""
    with _collector_paused():
        return _Cycle(snapshot, policy or Policy()).run()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the cycle, and resume it after if it ran.

    A cycle allocates an object or more per waiting workload and frees nothing through
    reference cycles (tests/scheduling/test_properties.py checks), so the collector's full
    passes, which walk every object the process holds, find nothing: at ten times the fleet
    they were about a fifth of the cycle's CPU time (bench/README.md). Memory freed by reference
    counting is freed as before; cycles made meanwhile by other threads wait for the next pass.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class _Cycle:
    def __init__(self, snapshot: Snapshot, policy: Policy) -> None:
        self.s = snapshot
        self.policy = policy
        self.now = snapshot.now
        self.classes = {c.name: c for c in snapshot.classes}
        self.quotas: dict[tuple[str, str], Quota] = governance.effective_quotas(
            snapshot.quotas, snapshot.grants, snapshot.reservations, snapshot.now
        )
        self.usage: dict[tuple[str, str], int] = defaultdict(int)
        self.user_usage: dict[tuple[str, str, str], int] = defaultdict(int)
        self.running: dict[int, RunningWorkload] = {}
        self.pools = build_pools(snapshot.classes, snapshot.nodes, self._typical())
        self.admissions: list[Admission] = []
        self.admitted_running: list[RunningWorkload] = []
        self.preemptions: list[Preemption] = []
        self.blocked: list[Blocked] = []
        self.rejections: list[Rejection] = []
        self._waiting_count: dict[str, int] = defaultdict(int)
        self._seen_count: dict[str, int] = defaultdict(int)
        self._preempt_failed: set[tuple[object, ...]] = set()
        self._ratios: dict[tuple[str, str], float] = {}
        self._queue: FairShareQueue | None = None
        self._members: dict[int, float] = {}
        self._caps: dict[tuple[str, str, int, int, str], int | None] = {}
        self._demands: dict[tuple[str, int, int, int], Demand | str] = {}
        # Running workloads that may be preempted at all (not production, past their
        # minimum runtime), indexed the two ways the rules look them up.
        self._preemptible_own: dict[tuple[str, str], dict[int, RunningWorkload]] = defaultdict(dict)
        self._preemptible_borrowed: dict[str, dict[int, RunningWorkload]] = defaultdict(dict)
        # Trials of each sweep that hold GPUs, and waiting trials held back by the cap.
        self._sweep_active: dict[int, int] = defaultdict(int)
        self._capped: list[WaitingWorkload] = []
        # What preempted workloads still hold while their pods terminate (_hold): the exact
        # replicas charged to the pools, the quota they keep, and when each hold ends.
        self._held: list[tuple[RunningWorkload, tuple[ReplicaPlacement, ...]]] = []
        # Which holds (their places in ``_held``) were placed on each GPU, (cluster, node, GPU):
        # what a new admission shares with them, without a pass over every hold.
        self._held_on: dict[tuple[str | None, str, int], list[int]] = defaultdict(list)
        self._held_milli: dict[tuple[str, str], int] = defaultdict(int)
        self._held_user_milli: dict[tuple[str, str, str], int] = defaultdict(int)
        self._held_until: dict[str, float] = {}
        self._blocked_by_id: dict[int, Blocked] = {}

    # --- setup -----------------------------------------------------------------------
    def _typical(self) -> dict[str, tuple[TypicalRequest, ...]]:
        out: dict[str, tuple[TypicalRequest, ...]] = {}
        samples: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        workloads: list[RunningWorkload | WaitingWorkload] = [*self.s.running, *self.s.waiting]
        for w in workloads:
            gpus = 1 if w.gpu_milli < 1000 else math.ceil(w.gpu_milli / 1000)
            samples[w.gpu_class].append((min(w.gpu_milli, 1000), gpus, w.cpu_milli))
        for name in self.classes:
            if name in self.s.typical:
                out[name] = self.s.typical[name]
                continue
            observed = typical_from_requests(samples.get(name, []))
            # Few observations: lean on the prior so one request shape does not rule.
            total = sum(t.weight for t in observed)
            prior = default_typical() if total < 50 else ()
            out[name] = observed + prior
        return out

    def _charge_running(self) -> None:
        for p in self.s.preempted:
            if p.sweep is not None:
                self._sweep_active[p.sweep] += 1
        for r in sorted(self.s.running, key=lambda r: r.id):
            self.running[r.id] = r
            if r.sweep is not None:
                self._sweep_active[r.sweep] += 1
            if r.priority != PRODUCTION and past_minimum_runtime(
                r, now=self.now, policy=self.policy
            ):
                self._preemptible_own[(r.team, r.gpu_class)][r.id] = r
                if r.borrowed:
                    self._preemptible_borrowed[r.gpu_class][r.id] = r
            self.usage[(r.team, r.gpu_class)] += r.total_milli
            self.user_usage[(r.owner, r.team, r.gpu_class)] += r.total_milli
            pool = self._pool(r.gpu_class, r.placement.cluster if r.placement else None)
            if pool is not None and r.placement is not None:
                for replica in r.placement.replicas:
                    pool.take(replica, r.cpu_milli, r.memory_mib)
        for p in sorted(self.s.preempted, key=lambda p: p.id):
            if p.held is not None:
                spent = (self.now - p.preempted_at).total_seconds()
                self._hold(p.held, max(0.0, self.policy.grace_for(p.priority) - spent))

    def _hold(self, r: RunningWorkload, seconds: float) -> None:
        """Keep what preempted ``r`` held, its GPUs and its quota, away from every other
        workload until it leaves the preempted state: its pods still occupy the GPUs and count
        against its namespace's ResourceQuota through their grace period, and what its
        preemption freed is for the workload it was preempted for (admitted onto it in the
        cycle of the preemption), never for a lower class. Only what no one else holds is
        charged, so that the hold can be given back exactly (:meth:`_held_note`)."""
        key = (r.team, r.gpu_class)
        self.usage[key] += r.total_milli
        self._held_milli[key] += r.total_milli
        self.user_usage[(r.owner, r.team, r.gpu_class)] += r.total_milli
        self._held_user_milli[(r.owner, r.team, r.gpu_class)] += r.total_milli
        self._share_changed(key)
        self._held_until[r.gpu_class] = max(self._held_until.get(r.gpu_class, 0.0), seconds)
        pool = self._pool(r.gpu_class, r.placement.cluster if r.placement else None)
        taken: list[ReplicaPlacement] = []
        if pool is not None and r.placement is not None:
            gpu_pool = pool if isinstance(pool, GpuPool) else None
            for replica in r.placement.replicas:
                if gpu_pool is not None:
                    left = gpu_pool.node_free_units(replica.node)
                    gpus = tuple(g for g in replica.gpus if g < len(left) and left[g] > 0)
                    units = min([replica.units, *(left[g] for g in gpus)])
                    if not gpus or units <= 0:
                        continue
                    replica = replace(replica, gpus=gpus, units=units)
                pool.take(replica, r.cpu_milli, r.memory_mib)
                taken.append(replica)
        self._held.append((r, tuple(taken)))
        cluster = r.placement.cluster if r.placement else None
        for replica in r.placement.replicas if r.placement else ():
            for gpu in replica.gpus:
                self._held_on[(cluster, replica.node, gpu)].append(len(self._held) - 1)

    def _pool(self, class_name: str, cluster: str | None) -> Pool | None:
        for pool in self.pools.get(class_name, []):
            if pool.cluster == cluster:
                return pool
        return None

    # --- the cycle -------------------------------------------------------------------
    def run(self) -> CycleResult:
        self._charge_running()
        requeues = self._requeues()
        for r in requeues:  # back in the queue: its grace is over, it holds no GPU any more
            sweep = self._preempted_sweep.get(r.workload_id)
            if sweep is not None:
                self._sweep_active[sweep] -= 1
        by_id: dict[int, WaitingWorkload] = {}
        demands: dict[int, Demand] = {}
        for w in sorted(self.s.waiting, key=lambda w: w.id):
            problem = self._impossible(w)
            if problem is not None:
                self.rejections.append(Rejection(w.id, problem))
                continue
            demand = self._demand(w)
            assert isinstance(demand, Demand)  # _impossible said why otherwise
            demands[w.id] = demand
            by_id[w.id] = w
        # Class, then fair share, then the owner's usage within the team, then age
        # (fairshare.order_key); a team's workloads move back as its share grows while this
        # cycle admits.
        self._members = members = member_keys(by_id.values(), self._member_usage)
        entries: Iterator[QueueEntry] = (
            (
                priority_rank(w.priority),
                (w.team, w.gpu_class),
                members[w.id],
                w.submitted_at.timestamp(),
                w.id,
            )
            for w in by_id.values()
        )
        self._queue = FairShareQueue(entries, lambda share: self._ratio(*share))
        while (wid := self._queue.pop()) is not None:
            w = by_id[wid]
            if self._at_cap(w):
                self._capped.append(w)
                continue
            self._consider(w, demands[wid])
        self._queue = None  # it refers back to this cycle: no reference cycle is left behind
        waiting = estimate.waiting_details(
            now=self.now,
            blocked=self.blocked,
            running=[*self.running.values(), *self.admitted_running],
            pools=self.pools,
            classes=self.classes,
            quotas=self.quotas,
            usage=self.usage,
            user_usage=self.user_usage,
            policy=self.policy,
        )
        if self._held:
            self._blocked_by_id = {b.workload.id: b for b in self.blocked}
            notes = self._held_notes([info.workload_id for info in waiting])
            waiting = [
                info if (note := notes.get(info.workload_id)) is None
                else replace(info, reason=f"{info.reason} {note}")
                for info in waiting
            ]  # fmt: skip
        waiting.extend(self._capped_waiting(len(waiting)))
        return CycleResult(
            admissions=tuple(self.admissions),
            preemptions=tuple(self.preemptions),
            waiting=tuple(waiting),
            requeues=tuple(requeues),
            ended=tuple(self._ended()),
            borrowed_changes=tuple(self._borrowed_changes()),
            rejections=tuple(self.rejections),
        )

    def _held_candidate(self, workload_id: int) -> tuple[WaitingWorkload, Demand] | None:
        """A waiting workload that would be within its team's limit and its owner's cap if the
        preempted workloads' holds on its class were given back (so that whether it would be
        placed then says what keeps it waiting), with its demand; None otherwise."""
        blocked = self._blocked_by_id.get(workload_id)
        if blocked is None or blocked.kind not in (BLOCK_QUOTA, BLOCK_USER, BLOCK_CAPACITY):
            return None
        w = blocked.workload
        c = w.gpu_class
        key = (w.team, c)
        quota = self.quotas.get(key)
        limit = quota.limit_milli if quota else 0
        if self.usage[key] - self._held_milli[key] + w.total_milli > limit:
            return None
        cap = self._cap(quota, w.owner)
        user_key = (w.owner, w.team, c)
        mine = self.user_usage[user_key] - self._held_user_milli[user_key]
        if cap is not None and mine + w.total_milli > cap:
            return None
        demand = self._demand(w)
        return (w, demand) if isinstance(demand, Demand) else None

    def _held_notes(self, workload_ids: Sequence[int]) -> dict[int, str]:
        """Why waiting workloads are kept off capacity that preemption freed, when that is what
        keeps them waiting: within limit and cap (``_held_candidate``) and placed if the holds
        were given back. The holds of a class are given back once for all its candidates, and
        each trial placement is undone, so every candidate is tried on the same state; one
        trial answers for every candidate of the same shape."""
        by_class: dict[str, list[tuple[WaitingWorkload, Demand]]] = defaultdict(list)
        for workload_id in workload_ids:
            candidate = self._held_candidate(workload_id)
            if candidate is not None:
                by_class[candidate[0].gpu_class].append(candidate)
        notes: dict[int, str] = {}
        for c, candidates in by_class.items():
            held = [(r, taken) for r, taken in self._held if r.gpu_class == c]
            if not held:
                continue
            amount = sum(r.total_milli for r, _ in held)
            note = HELD_REASON.format(
                held=format_milli(amount),
                gpu_class=c,
                verb="are" if amount > 1000 else "is",
                seconds=math.ceil(self._held_until.get(c, 0.0)),
            )
            fits: dict[tuple[object, ...], bool] = {}
            self._give_back(held, release=True)
            try:
                for w, demand in candidates:
                    # What a trial depends on besides the pools' state (a burst cluster is
                    # open to a workload allowed to burst).
                    shape = (demand, w.replicas, w.topology, w.id in self.s.may_burst)
                    if shape not in fits:
                        trial = self._place(c, demand, w.replicas, w.id, ask=w.topology)
                        if trial is not None:
                            self._unplace(c, trial, demand)
                        fits[shape] = trial is not None
                    if fits[shape]:
                        notes[w.id] = note
            finally:
                self._give_back(held, release=False)
        return notes

    def _give_back(
        self, held: Sequence[tuple[RunningWorkload, tuple[ReplicaPlacement, ...]]], *, release: bool
    ) -> None:
        for r, taken in held:
            pool = self._pool(r.gpu_class, r.placement.cluster if r.placement else None)
            for replica in taken if pool is not None else ():
                if release:
                    pool.release(replica, r.cpu_milli, r.memory_mib)  # type: ignore[union-attr]
                else:
                    pool.take(replica, r.cpu_milli, r.memory_mib)  # type: ignore[union-attr]

    @property
    def _preempted_sweep(self) -> dict[int, int]:
        return {p.id: p.sweep for p in self.s.preempted if p.sweep is not None}

    def _at_cap(self, w: WaitingWorkload) -> bool:
        """A trial whose sweep already holds as many slots as its parallelism allows."""
        if w.sweep is None:
            return False
        cap = self.s.parallelism.get(w.sweep)
        return cap is not None and self._sweep_active[w.sweep] >= cap

    def _capped_waiting(self, ahead: int) -> list[Waiting]:
        """Trials held back by their sweep's cap wait behind everything else of the cycle."""
        return [
            Waiting(
                workload_id=w.id,
                position=ahead + i + 1,
                reason=PARALLELISM_REASON.format(running=self._sweep_active[w.sweep or 0]),
                estimated_start=None,
            )
            for i, w in enumerate(self._capped)
        ]

    def _ratio(self, team: str, class_name: str) -> float:
        """The team's fair-share ratio in the class, cached until its usage changes."""
        key = (team, class_name)
        ratio = self._ratios.get(key)
        if ratio is None:
            quota = self.quotas.get(key)
            usage = self.usage[key] + self.policy.past_usage_weight * (
                self.s.past_usage_milli.get(key, 0.0)
            )
            ratio = share_ratio(usage, quota.guaranteed_milli if quota else 0)
            self._ratios[key] = ratio
        return ratio

    def _member_usage(self, owner: str, team: str, class_name: str) -> float:
        """What ``owner`` uses of ``team``'s share of the class: held now plus decayed past."""
        key = (owner, team, class_name)
        past = self.s.member_past_usage_milli.get(key, 0.0)
        return self.user_usage[key] + self.policy.past_usage_weight * past

    def _share_changed(self, key: tuple[str, str]) -> None:
        """The usage of ``key`` changed: its ratio is computed again, and the queue learns."""
        self._ratios.pop(key, None)
        if self._queue is not None:
            self._queue.changed(key)

    def _cap(self, quota: Quota | None, owner: str) -> int | None:
        """``owner``'s per-user cap in effect, with the grants made to them (the grants and
        the clock are fixed for the cycle, so it is worked out once per quota and owner)."""
        if quota is None or quota.per_user_cap_milli is None:
            return None
        key = (quota.team, quota.gpu_class, quota.limit_milli, quota.per_user_cap_milli, owner)
        if key not in self._caps:
            self._caps[key] = governance.user_cap(quota, self.s.grants, owner=owner, now=self.now)
        return self._caps[key]

    def _demand(self, w: WaitingWorkload) -> Demand | str:
        """What one replica of ``w`` takes, or why its class cannot serve it; once per shape."""
        key = (w.gpu_class, w.gpu_milli, w.cpu_milli, w.memory_mib)
        found = self._demands.get(key)
        if found is None:
            try:
                found = replica_demand(
                    self.classes[w.gpu_class],
                    w.gpu_milli,
                    cpu_milli=w.cpu_milli,
                    memory_mib=w.memory_mib,
                )
            except DemandError as exc:
                found = str(exc)
            self._demands[key] = found
        return found

    def _requeues(self) -> list[Requeue]:
        return [r for r in self._after_grace() if isinstance(r, Requeue)]

    def _ended(self) -> list[PreemptionEnd]:
        return [r for r in self._after_grace() if isinstance(r, PreemptionEnd)]

    def _after_grace(self) -> list[Requeue | PreemptionEnd]:
        return after_grace(self.s.preempted, now=self.now, policy=self.policy)

    def _impossible(self, w: WaitingWorkload) -> str | None:
        """Why ``w`` can never run as asked, or None. Submission refuses these up front."""
        gpu_class = self.classes.get(w.gpu_class)
        if gpu_class is None:
            return f"The GPU class {w.gpu_class} no longer exists."
        demand = self._demand(w)
        if isinstance(demand, str):
            return demand
        quota = self.quotas.get((w.team, w.gpu_class))
        limit = quota.limit_milli if quota else 0
        if w.total_milli > limit:
            return (
                f"It asks for {format_milli(w.total_milli)} GPU of {w.gpu_class}, more than "
                f"{w.team}'s limit of {format_milli(limit)} GPU."
            )
        cap = self._cap(quota, w.owner)
        if cap is not None and w.total_milli > cap:
            return (
                f"It asks for {format_milli(w.total_milli)} GPU of {w.gpu_class}, more than "
                f"the per-user cap of {format_milli(cap)} GPU."
            )
        pools = self.pools.get(w.gpu_class, [])
        most = max((p.max_gpus_per_node() for p in pools), default=0)
        if pools and demand.gpus > most:
            return (
                f"One replica needs {demand.gpus} GPUs on one node; the largest "
                f"{w.gpu_class} node has {most}."
            )
        return None

    def _consider(self, w: WaitingWorkload, demand: Demand) -> None:
        c = w.gpu_class
        self._seen_count[c] += 1
        gpu_class = self.classes[c]
        quota = self.quotas.get((w.team, c))
        limit = quota.limit_milli if quota else 0
        used = self.usage[(w.team, c)]
        amount = w.total_milli
        kind: str | None = None
        if not gpu_class.enabled:
            kind = BLOCK_CLASS
        elif w.priority == PRODUCTION and used + amount > (quota.guaranteed_milli if quota else 0):
            kind = BLOCK_GUARANTEE
        elif used + amount > limit:
            kind = BLOCK_QUOTA
        elif (cap := self._cap(quota, w.owner)) is not None and (
            self.user_usage[(w.owner, w.team, c)] + amount > cap
        ):
            kind = BLOCK_USER
        placement = None
        if kind is None:
            placement = self._place(c, demand, w.replicas, w.id, ask=w.topology)
            if placement is None:
                kind = BLOCK_CAPACITY
        if placement is not None:
            self._admit(w, placement, victims=[])
            return
        preemptible_block = (BLOCK_QUOTA, BLOCK_CAPACITY, BLOCK_GUARANTEE)
        if kind in preemptible_block and self._try_preemption(w, demand, kind):
            return
        position = self._waiting_count[c] + 1
        self._waiting_count[c] = position
        self.blocked.append(
            Blocked(
                w,
                kind or BLOCK_CAPACITY,
                position,
                position - 1,
                "",
                member_milli=self._members.get(w.id, 0.0),
            )
        )

    def _place(
        self,
        class_name: str,
        demand: Demand,
        replicas: int,
        workload_id: int | None = None,
        *,
        ask: TopologyAsk | None = None,
    ) -> Placement | None:
        """Hub and spoke clusters first; a burst cluster only for a workload allowed to burst
        this cycle (``Snapshot.may_burst``), and never to make room by preemption. A gang's
        topology ask goes to its placement (placement.place_gang)."""
        pools = self.pools.get(class_name, [])
        burst = self.s.burst_clusters
        home = [p for p in pools if p.cluster not in burst]
        placed = self._place_in(home, demand, replicas, ask)
        if placed is None and workload_id is not None and workload_id in self.s.may_burst:
            placed = self._place_in([p for p in pools if p.cluster in burst], demand, replicas, ask)
        return placed

    def _place_in(
        self, pools: list[Pool], demand: Demand, replicas: int, ask: TopologyAsk | None = None
    ) -> Placement | None:
        if replicas == 1:
            best = None
            best_pool = None
            for pool in pools:
                choice = pool.find(demand)
                if choice is not None and (best is None or choice[0] < best[0]):
                    best, best_pool = choice, pool
            if best is None or best_pool is None:
                return None
            return Placement(best_pool.cluster, (best_pool.commit(best, demand),))
        # A gang runs in one cluster: all replicas there, or try the next cluster.
        for pool in pools:
            placed = place_gang(pool, demand, replicas, ask)
            if placed is not None:
                return Placement(pool.cluster, placed)
        return None

    def _unplace(self, class_name: str, placement: Placement, demand: Demand) -> None:
        pool = self._pool(class_name, placement.cluster)
        if pool is not None:
            for replica in placement.replicas:
                pool.release(replica, demand.cpu_milli, demand.memory_mib)

    def _admit(
        self, w: WaitingWorkload, placement: Placement, victims: Sequence[RunningWorkload]
    ) -> None:
        c = w.gpu_class
        quota = self.quotas.get((w.team, c))
        guaranteed = quota.guaranteed_milli if quota else 0
        used = self.usage[(w.team, c)]
        borrowed = used + w.total_milli > guaranteed
        self.usage[(w.team, c)] = used + w.total_milli
        self._share_changed((w.team, c))
        self.user_usage[(w.owner, w.team, c)] += w.total_milli
        nodes = ", ".join(placement.nodes)
        reason = f"Admitted on {placement.cluster}: {nodes}."
        if victims:
            reason += (
                f" It starts when {len(victims)} preempted workload(s) have released their GPUs "
                f"(grace period up to {max(self.policy.grace_for(v.priority) for v in victims)}"
                " s)."
            )
        if borrowed:
            reason += (
                f" Above {w.team}'s guarantee of {format_milli(guaranteed)} GPU it runs on "
                "borrowed capacity, which teams below their guarantee may reclaim."
            )
        self.admissions.append(
            Admission(w.id, placement, borrowed, reason, waits_for=tuple(v.id for v in victims))
        )
        if w.sweep is not None:
            self._sweep_active[w.sweep] += 1
        self.admitted_running.append(
            RunningWorkload(
                id=w.id,
                team=w.team,
                owner=w.owner,
                gpu_class=c,
                priority=w.priority,
                gpu_milli=w.gpu_milli,
                charged_milli=w.charged_milli,
                replicas=w.replicas,
                admitted_at=self.now,
                placement=placement,
                borrowed=borrowed,
                cpu_milli=w.cpu_milli,
                memory_mib=w.memory_mib,
                max_runtime_seconds=w.max_runtime_seconds,
                name=w.name,
                sweep=w.sweep,
            )
        )

    # --- preemption ------------------------------------------------------------------
    def _try_preemption(self, w: WaitingWorkload, demand: Demand, kind: str) -> bool:
        c = w.gpu_class
        quota = self.quotas.get((w.team, c))
        limit = quota.limit_milli if quota else 0
        guaranteed = quota.guaranteed_milli if quota else 0
        cap = self._cap(quota, w.owner)
        used = self.usage[(w.team, c)]
        user_used = self.user_usage[(w.owner, w.team, c)]
        amount = w.total_milli
        reclaiming = used + amount <= guaranteed
        memo = (w.team, c, w.priority, reclaiming, demand, w.replicas, kind)
        if memo in self._preempt_failed:
            return False
        rules: dict[int, str] = {}
        candidates: list[RunningWorkload] = []
        pool = list(self._preemptible_own.get((w.team, c), {}).values())
        if kind != BLOCK_QUOTA and reclaiming:
            pool += [v for v in self._preemptible_borrowed.get(c, {}).values() if v.team != w.team]
        for victim in pool:
            rule = legal_rule(w, victim, reclaiming=reclaiming, now=self.now, policy=self.policy)
            if rule is not None:
                rules[victim.id] = rule
                candidates.append(victim)
        if not candidates:
            self._preempt_failed.add(memo)
            return False

        # Production runs only on the guarantee: its own team's lower classes may make room.
        ceiling = guaranteed if w.priority == PRODUCTION else limit

        def fits(victims: Sequence[RunningWorkload]) -> bool:
            own = sum(v.total_milli for v in victims if v.team == w.team)
            if used - own + amount > ceiling:
                return False
            mine = sum(v.total_milli for v in victims if v.owner == w.owner and v.team == w.team)
            if cap is not None and user_used - mine + amount > cap:
                return False
            self._release_all(victims)
            trial = self._place(c, demand, w.replicas, ask=w.topology)
            if trial is not None:
                self._unplace(c, trial, demand)
            self._retake_all(victims)
            return trial is not None

        victims = cheapest_set(candidates, fits, self.now)
        if victims is None:
            self._preempt_failed.add(memo)
            return False
        self._release_all(victims)
        placement = self._place(c, demand, w.replicas, ask=w.topology)
        if placement is None:  # cannot happen: fits() just placed it
            self._retake_all(victims)
            return False
        for victim in victims:
            del self.running[victim.id]
            self._preemptible_own[(victim.team, c)].pop(victim.id, None)
            self._preemptible_borrowed[c].pop(victim.id, None)
            self.usage[(victim.team, c)] -= victim.total_milli
            self._share_changed((victim.team, c))
            self.user_usage[(victim.owner, victim.team, c)] -= victim.total_milli
            self.preemptions.append(self._preemption(victim, w, rules[victim.id]))
        self._preempt_failed.clear()
        self._admit(w, placement, victims)
        # Placed where workloads preempted earlier still terminate (it preempted the one they
        # were preempted for): it waits for them too.
        shared = {
            i
            for replica in placement.replicas
            for gpu in replica.gpus
            for i in self._held_on.get((placement.cluster, replica.node, gpu), ())
        }
        earlier = tuple(self._held[i][0].id for i in sorted(shared))
        if earlier:
            last = self.admissions[-1]
            self.admissions[-1] = replace(last, waits_for=(*last.waits_for, *earlier))
        # What the victims freed and ``w`` does not use stays theirs until they are gone: no
        # lower class is admitted onto it meanwhile (it is what they come back to).
        for victim in victims:
            self._hold(victim, float(self.policy.grace_for(victim.priority)))
        return True

    def _release_all(self, victims: Sequence[RunningWorkload]) -> None:
        for v in victims:
            pool = self._pool(v.gpu_class, v.placement.cluster if v.placement else None)
            if pool is not None and v.placement is not None:
                for replica in v.placement.replicas:
                    pool.release(replica, v.cpu_milli, v.memory_mib)

    def _retake_all(self, victims: Sequence[RunningWorkload]) -> None:
        for v in victims:
            pool = self._pool(v.gpu_class, v.placement.cluster if v.placement else None)
            if pool is not None and v.placement is not None:
                for replica in v.placement.replicas:
                    pool.take(replica, v.cpu_milli, v.memory_mib)

    def _preemption(self, victim: RunningWorkload, w: WaitingWorkload, rule: str) -> Preemption:
        return preemption_for(
            victim,
            w,
            rule,
            reservation_begun=reserved_milli(
                self.s.reservations, team=w.team, gpu_class=w.gpu_class, now=self.now
            )
            > 0,
            grace_seconds=self.policy.grace_for(victim.priority),
            now=self.now,
        )

    # --- borrowed flags --------------------------------------------------------------
    def _borrowed_changes(self) -> list[tuple[int, bool]]:
        within: dict[tuple[str, str], int] = defaultdict(int)
        borrowed: dict[tuple[str, str], list[RunningWorkload]] = defaultdict(list)
        everyone = [*self.running.values(), *self.admitted_running]
        # Within a guarantee that shrank (a grant or reservation ended): borrowed from now on.
        demoted = governance.over_guarantee(everyone, self.quotas)
        changes: list[tuple[int, bool]] = [(i, True) for i in sorted(demoted)]
        for r in everyone:
            if r.borrowed or r.id in demoted:
                borrowed[(r.team, r.gpu_class)].append(r)
            else:
                within[(r.team, r.gpu_class)] += r.total_milli
        admitted_ids = {r.id for r in self.admitted_running}
        for key in sorted(borrowed):
            quota = self.quotas.get(key)
            guaranteed = quota.guaranteed_milli if quota else 0
            for r in sorted(
                borrowed[key],
                key=lambda r: (priority_rank(r.priority), r.admitted_at.timestamp(), r.id),
            ):
                if r.id not in demoted and within[key] + r.total_milli <= guaranteed:
                    within[key] += r.total_milli
                    if r.id not in admitted_ids:
                        changes.append((r.id, False))
        return changes


PREVIEW_ID = -1  # the candidate of a preview: no stored workload has this id


def preview_preemptions(
    snapshot: Snapshot, candidate: WaitingWorkload, policy: Policy | None = None
) -> tuple[Preemption, ...]:
    """What admitting ``candidate`` now would preempt: the cycle run on the snapshot with the
    candidate waiting in it (id :data:`PREVIEW_ID`, submitted last), and of its preemptions
    only those made for the candidate. Others' preemptions, and the candidate waiting, give
    nothing. The caller persists nothing: this is the dry run a door asks before submitting."""
    probe = replace(candidate, id=PREVIEW_ID)
    trial = replace(snapshot, waiting=(*snapshot.waiting, probe))
    result = schedule(trial, policy)
    return tuple(p for p in result.preemptions if p.by_workload_id == PREVIEW_ID)
