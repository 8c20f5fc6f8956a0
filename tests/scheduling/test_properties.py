"""Invariants of the scheduling cycle, over generated fleets, quotas and queues (hypothesis)."""

from __future__ import annotations

import gc
import random
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import (
    CycleResult,
    GpuClassSpec,
    Placement,
    Policy,
    ReplicaPlacement,
    RunningWorkload,
    Snapshot,
    WaitingWorkload,
)
from apps.scheduling.units import replica_demand, units_per_gpu
from tests.scheduling.builders import A100_HAMI, A100_MIG, CLASSES, H100, L40S, NOW, nodes, quota

TEAMS = ("a", "b", "c")
PRIORITIES = ("production", "training", "development", "batch")
SHAPES = {
    H100.name: [1000, 2000, 4000, 8000],
    A100_HAMI.name: [100, 250, 500, 1000, 2000],
    L40S.name: [250, 500, 1000],
    A100_MIG.name: [100, 250, 400],
}
POLICY = Policy(min_runtime_seconds={"training": 600, "development": 300, "batch": 0})


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, Snapshot]:
    fleet = (
        nodes(H100, draw(st.integers(1, 3)))
        + nodes(A100_HAMI, 1, gpus=4)
        + nodes(L40S, 1, gpus=2)
        + nodes(A100_MIG, 1, gpus=2)
    )
    capacity = {
        c.name: 1000 * sum(n.gpu_count for n in fleet if n.gpu_class == c.name) for c in CLASSES
    }
    quotas = []
    for c in CLASSES:
        left = capacity[c.name]
        for team in TEAMS:
            g = draw(st.integers(0, left // 1000)) * 1000
            left -= g
            limit = g + draw(st.integers(0, 3)) * 1000
            cap = draw(st.one_of(st.none(), st.integers(1, 4).map(lambda x: x * 1000)))
            quotas.append(
                quota(team, g, limit, gpu_class=c, cap=min(cap, limit) if cap and limit else None)
            )
    rng = random.Random(draw(st.integers(0, 2**32)))

    def workloads(n: int, start: int) -> list[WaitingWorkload]:
        out = []
        for i in range(start, start + n):
            c = rng.choice(CLASSES)
            milli = rng.choice(SHAPES[c.name])
            replicas = rng.choice([1, 1, 2, 3]) if milli >= 1000 else 1
            out.append(
                WaitingWorkload(
                    id=i,
                    team=rng.choice(TEAMS),
                    owner=rng.choice(["u1", "u2"]),
                    gpu_class=c.name,
                    priority=rng.choice(PRIORITIES),
                    gpu_milli=milli,
                    replicas=replicas,
                    submitted_at=NOW - timedelta(seconds=rng.randint(0, 900)),
                    cpu_milli=1000,
                    memory_mib=1024,
                    max_runtime_seconds=rng.choice([None, 3600]),
                )
            )
        return out

    first = Snapshot(
        NOW - timedelta(hours=1),
        CLASSES,
        fleet,
        (),
        tuple(workloads(draw(st.integers(0, 25)), 1)),
        tuple(quotas),
    )
    earlier = schedule(first, POLICY)
    by_id = {w.id: w for w in first.waiting}
    held = tuple(
        RunningWorkload(
            id=a.workload_id,
            team=by_id[a.workload_id].team,
            owner=by_id[a.workload_id].owner,
            gpu_class=by_id[a.workload_id].gpu_class,
            priority=by_id[a.workload_id].priority,
            gpu_milli=by_id[a.workload_id].gpu_milli,
            replicas=by_id[a.workload_id].replicas,
            admitted_at=NOW - timedelta(seconds=rng.randint(0, 3600)),
            placement=a.placement,
            borrowed=a.borrowed,
            cpu_milli=1000,
            memory_mib=1024,
        )
        for a in earlier.admissions
    )
    second = Snapshot(
        NOW, CLASSES, fleet, held, tuple(workloads(draw(st.integers(0, 25)), 1000)), tuple(quotas)
    )
    return first, second


def check_invariants(snap: Snapshot, result: CycleResult) -> None:
    classes = {c.name: c for c in snap.classes}
    preempted = {p.workload_id for p in result.preemptions}
    alive = [r for r in snap.running if r.id not in preempted]
    waiting = {w.id: w for w in snap.waiting}
    # Every waiting workload is decided: admitted, waiting with a reason, or rejected.
    decided = [a.workload_id for a in result.admissions] + [w.workload_id for w in result.waiting]
    decided += [r.workload_id for r in result.rejections]
    assert sorted(decided) == sorted(waiting)
    assert all(w.reason and w.position >= 1 for w in result.waiting)
    # Production is never preempted; preemptions name the workload that needs the capacity.
    running = {r.id: r for r in snap.running}
    for p in result.preemptions:
        assert running[p.workload_id].priority != "production"
        assert p.by_workload_id in {a.workload_id for a in result.admissions}
        assert p.rule and p.reason
    # Per GPU: never more than the whole GPU (1000 milli / R slots / each MIG instance once).
    used: dict[tuple[str, int], int] = defaultdict(int)
    vgpus: dict[tuple[str, int], int] = defaultdict(int)
    mig: set[tuple[str, int, int]] = set()
    usage: dict[tuple[str, str], int] = defaultdict(int)
    holders = [(r.gpu_class, r.placement, r.team, r.total_milli, r.replicas) for r in alive]
    for a in result.admissions:
        w = waiting[a.workload_id]
        holders.append((w.gpu_class, a.placement, w.team, w.total_milli, w.replicas))
        # Gangs whole: every replica placed, in one cluster, whole GPUs on one node each,
        # and one replica per node (the manifests demand it: pod anti-affinity on hostname).
        assert len(a.placement.replicas) == w.replicas
        assert len({r.node for r in a.placement.replicas}) == w.replicas
        demand = replica_demand(classes[w.gpu_class], w.gpu_milli)
        assert all(len(r.gpus) == demand.gpus for r in a.placement.replicas)
    for class_name, placement, team, total, _replicas in holders:
        usage[(team, class_name)] += total
        assert placement is not None
        for r in placement.replicas:
            for g in r.gpus:
                if r.mig_slot is not None:
                    assert (r.node, g, r.mig_slot) not in mig
                    mig.add((r.node, g, r.mig_slot))
                else:
                    used[(r.node, g)] += r.units
                    vgpus[(r.node, g)] += 1 if classes[class_name].hami_split_count else 0
    node_class = {n.name: classes[n.gpu_class] for n in snap.nodes}
    for (node, _g), units in used.items():
        assert units <= units_per_gpu(node_class[node])
    for (node, _g), count in vgpus.items():
        assert count <= (node_class[node].hami_split_count or 255)
    # No team above its limit.
    limits = {(q.team, q.gpu_class): q.limit_milli for q in snap.quotas}
    for key, total in usage.items():
        assert total <= limits.get(key, 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cycle_keeps_every_invariant(pair: tuple[Snapshot, Snapshot]) -> None:
    for snap in pair:
        check_invariants(snap, schedule(snap, POLICY))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_cycle_makes_no_reference_cycles_and_gives_the_collector_back(
    pair: tuple[Snapshot, Snapshot],
) -> None:
    """The cycle pauses Python's cyclic collector, which is sound because it makes no garbage
    only that collector could free: with it off, a cycle leaves none of its own objects for a
    full pass. (Other threads of the test process, e.g. a cluster client's, may leave garbage
    of theirs meanwhile: the collected objects are kept and only the scheduler's count.)"""
    for snap in pair:
        gc.collect()
        gc.disable()
        gc.garbage.clear()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            schedule(snap, POLICY)
            assert not gc.isenabled()  # was off: stays off
            gc.collect()
            ours = [o for o in gc.garbage if type(o).__module__.startswith("apps.scheduling")]
            assert ours == []
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        schedule(snap, POLICY)
        assert gc.isenabled()  # was on: on again


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_input_gives_the_same_output_whatever_the_order(
    pair: tuple[Snapshot, Snapshot],
) -> None:
    _first, snap = pair
    shuffled = replace(
        snap,
        waiting=tuple(reversed(snap.waiting)),
        running=tuple(reversed(snap.running)),
        quotas=tuple(reversed(snap.quotas)),
    )
    assert schedule(snap, POLICY) == schedule(snap, POLICY) == schedule(shuffled, POLICY)


@settings(max_examples=40, deadline=None)
@given(
    guaranteed=st.integers(1, 8),
    borrowed_jobs=st.integers(1, 8),
    ask=st.integers(1, 8),
    priority=st.sampled_from(PRIORITIES),
    victim_priority=st.sampled_from(("training", "development", "batch")),
)
def test_no_team_guarantee_is_taken_by_another(
    guaranteed: int, borrowed_jobs: int, ask: int, priority: str, victim_priority: str
) -> None:
    """Team a's guarantee is held by team b's borrowed jobs: asking within it, a gets it."""
    fleet = nodes(H100, 1)
    quotas = (quota("a", guaranteed * 1000, 8000), quota("b", (8 - guaranteed) * 1000, 8000))
    held = tuple(
        RunningWorkload(
            id=100 + i,
            team="b",
            owner="u",
            gpu_class=H100.name,
            priority=victim_priority,
            gpu_milli=1000,
            replicas=1,
            admitted_at=NOW - timedelta(hours=1),
            placement=None,
            borrowed=i >= 8 - guaranteed,
        )
        for i in range(min(8, (8 - guaranteed) + borrowed_jobs))
    )
    # Place them on GPUs 0..n-1 of the node.
    held = tuple(
        replace(r, placement=Placement("hub", (ReplicaPlacement("h100-0", (i,), 1000),)))
        for i, r in enumerate(held)
    )
    want = WaitingWorkload(1, "a", "u", H100.name, priority, 1000 * min(ask, guaranteed), 1, NOW)
    snap = Snapshot(NOW, CLASSES, fleet, held, (want,), quotas)
    result = schedule(snap, Policy(min_runtime_seconds={}))
    check_invariants(snap, result)
    assert [a.workload_id for a in result.admissions] == [1]
    assert all(p.rule for p in result.preemptions)
    victims = {p.workload_id for p in result.preemptions}
    assert all(r.borrowed or r.team == "a" for r in held if r.id in victims)


# --- gangs: one replica per node, whatever the shape and the sharing mode ---------------------

A100_FULL_MIG = replace(A100_MIG, name="A100-MIG-7g", mig_profiles=("7g.80gb",))
GANG_CLASSES = {  # class → GPUs per node in the generated fleet
    H100.name: (H100, 8),
    A100_HAMI.name: (A100_HAMI, 8),
    L40S.name: (L40S, 4),
    A100_FULL_MIG.name: (A100_FULL_MIG, 2),
}


def _held(gpu_class: GpuClassSpec, node: str, gpu: int, wid: int) -> RunningWorkload:
    """A production workload (never preempted) holding one whole GPU of ``node``."""
    if gpu_class.sharing_mode == "mig":
        replica = ReplicaPlacement(node, (gpu,), 0, mig_profile="7g.80gb", mig_slot=0)
    else:
        replica = ReplicaPlacement(node, (gpu,), units_per_gpu(gpu_class))
    return RunningWorkload(
        id=wid,
        team="ops",
        owner="u",
        gpu_class=gpu_class.name,
        priority="production",
        gpu_milli=1000,
        replicas=1,
        admitted_at=NOW - timedelta(hours=1),
        placement=Placement("hub", (replica,)),
        cpu_milli=1000,
        memory_mib=1024,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_admitted_gang_is_one_replica_per_node_with_room_else_it_waits_saying_how_many_nodes(
    data: st.DataObject,
) -> None:
    name = data.draw(st.sampled_from(sorted(GANG_CLASSES)))
    gpu_class, per_node = GANG_CLASSES[name]
    fleet = tuple(
        replace(n, mig_layout=("7g.80gb",) if gpu_class.sharing_mode == "mig" else ())
        for n in nodes(gpu_class, data.draw(st.integers(1, 5)), gpus=per_node)
    )
    held_gpus = {
        n.name: set(data.draw(st.sets(st.integers(0, per_node - 1), max_size=per_node)))
        for n in fleet
    }
    held = [
        _held(gpu_class, node, g, 100 + 10 * i + g)
        for i, (node, gpus) in enumerate(sorted(held_gpus.items()))
        for g in sorted(gpus)
    ]
    replicas = data.draw(st.integers(2, 6))
    gpus = 1 if gpu_class.sharing_mode == "mig" else data.draw(st.integers(1, per_node))
    gang = WaitingWorkload(1, "a", "u", name, "training", gpus * 1000, replicas, NOW, 1000, 1024)
    quotas = (
        quota("a", 0, 100_000, gpu_class=gpu_class),
        quota("ops", 100_000, 100_000, gpu_class=gpu_class),
    )
    snap = Snapshot(NOW, (*CLASSES, A100_FULL_MIG), fleet, tuple(held), (gang,), quotas)
    result = schedule(snap, POLICY)
    check_invariants(snap, result)
    room = sum(1 for n in fleet if per_node - len(held_gpus[n.name]) >= gpus)
    if room >= replicas:
        (admission,) = result.admissions
        placed = admission.placement.replicas
        assert len({r.node for r in placed}) == replicas  # pairwise distinct nodes
        for r in placed:  # each on GPUs of its node that were free
            assert len(r.gpus) == gpus and not set(r.gpus) & held_gpus[r.node]
    else:
        assert result.admissions == () and result.preemptions == ()
        (wait,) = result.waiting
        assert f"needs {replicas} nodes with " in wait.reason, wait.reason
        assert f"; {room} {'has' if room == 1 else 'have'} them now" in wait.reason, wait.reason
        if len(fleet) < replicas:
            assert "ask for fewer replicas with more GPUs each" in wait.reason
