"""Capacity freed by a preemption is held, through the victims' grace period, for the workload
it was freed for: no other workload is admitted onto it meanwhile, and the victim, back in the
queue, comes before lower classes (the priority inversion of issue 27)."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import (
    CycleResult,
    Placement,
    Policy,
    PreemptedWorkload,
    RunningWorkload,
    Snapshot,
    WaitingWorkload,
)
from tests.scheduling.builders import H100, NOW, nodes, quota, running, snapshot, waiting

POLICY = Policy(
    min_runtime_seconds={"training": 0, "development": 0, "batch": 120}, grace_seconds=30
)


def as_running(w: WaitingWorkload, placement: Placement, *, at: object = NOW) -> RunningWorkload:
    return RunningWorkload(
        id=w.id,
        team=w.team,
        owner=w.owner,
        gpu_class=w.gpu_class,
        priority=w.priority,
        gpu_milli=w.gpu_milli,
        replicas=w.replicas,
        admitted_at=at,  # type: ignore[arg-type]
        placement=placement,
        cpu_milli=w.cpu_milli,
        memory_mib=w.memory_mib,
    )


def as_waiting(r: RunningWorkload) -> WaitingWorkload:
    return WaitingWorkload(
        r.id, r.team, r.owner, r.gpu_class, r.priority, r.gpu_milli, r.replicas, NOW, 1000, 1024
    )


def admitted(result: CycleResult) -> list[int]:
    return [a.workload_id for a in result.admissions]


def test_no_batch_job_takes_a_preempted_notebook_s_gpus_and_the_notebook_comes_first() -> None:
    """The found case: a lead's training job preempts a teammate's 8-GPU notebook and ends
    soon; during the notebook's 30 s grace the 8 GPUs are not given to a queued batch job, and
    the notebook, back in the queue, starts before it (instead of waiting for the batch job's
    minimum runtime)."""
    quotas = (quota("vision", 8000, 8000),)
    notebook = running("vision", "h100-0", tuple(range(8)), milli=8000, priority="development")
    notebook = replace(notebook, owner="member", name="notebook")
    lead = waiting("vision", 8000, priority="training", owner="lead", name="train")
    batch = waiting("vision", 8000, priority="batch", owner="member", name="sweep", age_s=60)

    first = schedule(snapshot(running=[notebook], waiting=[lead, batch], quotas=quotas), POLICY)
    assert [p.workload_id for p in first.preemptions] == [notebook.id]
    (admission,) = first.admissions
    assert admission.workload_id == lead.id and admission.waits_for == (notebook.id,)

    held = PreemptedWorkload(notebook.id, NOW, True, "development", held=notebook)
    # The training job ended within the notebook's grace: the GPUs look idle, yet they are held.
    for spent in (5, 29, 30):
        result = schedule(
            snapshot(
                now=NOW + timedelta(seconds=spent),
                waiting=[batch],
                preempted=[held],
                quotas=quotas,
            ),
            POLICY,
        )
        assert admitted(result) == [], spent
        (info,) = result.waiting
        assert "freed by preemption are held until the preempted workloads are gone" in info.reason
    assert [r.workload_id for r in result.requeues] == [notebook.id]

    # Back in the queue: ahead of the batch job, it gets its GPUs at once.
    back = replace(as_waiting(notebook), submitted_at=NOW + timedelta(seconds=30))
    after = schedule(
        snapshot(now=NOW + timedelta(seconds=31), waiting=[batch, back], quotas=quotas), POLICY
    )
    assert admitted(after) == [notebook.id]
    assert [w.workload_id for w in after.waiting] == [batch.id]


def test_what_the_victims_freed_beyond_the_beneficiary_s_need_is_not_given_to_a_lower_class() -> (
    None
):
    """The notebook held 8 GPUs, the training job needs 4: the other 4 stay the notebook's
    (its pods still terminate on them) until it has left, in this cycle and the next ones."""
    quotas = (quota("vision", 16000, 16000),)
    notebook = running("vision", "h100-0", tuple(range(8)), milli=8000, priority="development")
    lead = waiting("vision", 4000, priority="training", owner="lead")
    batch = waiting("vision", 4000, priority="batch", age_s=60)
    first = schedule(snapshot(running=[notebook], waiting=[lead, batch], quotas=quotas), POLICY)
    assert admitted(first) == [lead.id]
    (placement,) = [a.placement for a in first.admissions]
    later = schedule(
        snapshot(
            now=NOW + timedelta(seconds=10),
            running=[as_running(lead, placement)],
            waiting=[batch],
            preempted=[PreemptedWorkload(notebook.id, NOW, True, "development", held=notebook)],
            quotas=quotas,
        ),
        POLICY,
    )
    assert admitted(later) == []


# --- the property over random cycles ------------------------------------------------------

PRIORITIES = ("training", "development", "batch")


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Snapshot, random.Random]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    fleet = nodes(H100, draw(st.integers(1, 3)))
    quotas = tuple(quota(t, 8000, rng.choice([8000, 16000, 24000])) for t in ("a", "b"))
    held = []
    wid = 1
    for n in fleet:
        gpu = 0
        while gpu < 8:
            size = rng.choice([1, 2, 4, 8])
            if gpu + size > 8 or rng.random() < 0.15:
                gpu += 1
                continue
            held.append(
                replace(
                    running(
                        rng.choice(("a", "b")),
                        n.name,
                        tuple(range(gpu, gpu + size)),
                        milli=size * 1000,
                        priority=rng.choice(PRIORITIES),
                        wid=wid,
                        ran_s=rng.randint(0, 900),
                    ),
                    borrowed=rng.random() < 0.3,
                )
            )
            wid += 1
            gpu += size
    snap = snapshot(nodes=fleet, running=held, waiting=_arrivals(rng, 1000), quotas=quotas)
    return snap, rng


def _arrivals(rng: random.Random, start: int) -> list[WaitingWorkload]:
    return [
        waiting(
            rng.choice(("a", "b")),
            rng.choice([1000, 2000, 4000, 8000]),
            priority=rng.choice(("production", *PRIORITIES)),
            wid=start + i,
            age_s=rng.randint(0, 600),
        )
        for i in range(rng.randint(1, 8))
    ]


def _on(p: PreemptedWorkload, node: str, gpu: int) -> bool:
    placement = p.held.placement if p.held else None
    return any(r.node == node and gpu in r.gpus for r in placement.replicas) if placement else False


def _per_gpu(placement: Placement | None, out: dict[tuple[str, int], int], sign: int) -> None:
    for r in placement.replicas if placement else ():
        for g in r.gpus:
            out[(r.node, g)] += sign * r.units


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_no_workload_is_admitted_onto_capacity_held_for_a_preemption(
    case: tuple[Snapshot, random.Random],
) -> None:
    """Over random cycles within the victims' grace period: per GPU, what runs, what is
    admitted, and what the victims still hold beyond what their own beneficiary took never
    exceed the GPU; that is, nothing is admitted onto capacity a preemption freed but the
    workload it was freed for."""
    snap, rng = case
    result = schedule(snap, POLICY)
    by_id = {w.id: w for w in snap.waiting}
    live = {r.id: r for r in snap.running}
    victims = {p.workload_id: p.by_workload_id for p in result.preemptions}
    beneficiary = {a.workload_id: a.placement for a in result.admissions}
    for v in victims:
        live.pop(v)
    for a in result.admissions:
        live[a.workload_id] = as_running(by_id[a.workload_id], a.placement)
    preempted = [
        PreemptedWorkload(v, NOW, True, snap_r.priority, held=snap_r)
        for v in victims
        if (snap_r := next(r for r in snap.running if r.id == v))
    ]
    waiting_now = [w for w in snap.waiting if w.id not in beneficiary]
    for step in range(1, 3):
        # Some running work ends (the beneficiaries too, which frees their GPUs), more arrives.
        ended = {i for i in live if rng.random() < 0.3}
        for i in ended:
            live.pop(i)
        arrivals = _arrivals(rng, 1000 * (step + 1))
        cycle = replace(
            snap,
            now=NOW + timedelta(seconds=10 * step),
            running=tuple(live.values()),
            waiting=tuple(waiting_now + arrivals),
            preempted=tuple(preempted),
        )
        out = schedule(cycle, POLICY)
        assert not out.requeues  # all within the grace period
        used: dict[tuple[str, int], int] = defaultdict(int)
        gone = {p.workload_id for p in out.preemptions}
        for r in live.values():
            if r.id not in gone:
                _per_gpu(r.placement, used, 1)
        new_ids = {a.workload_id for a in out.admissions}
        for a in out.admissions:
            _per_gpu(a.placement, used, 1)
        held: dict[tuple[str, int], int] = defaultdict(int)
        for p in preempted:
            _per_gpu(p.held.placement if p.held else None, held, 1)
        for b, placement in beneficiary.items():
            if b in live and b not in gone:
                _per_gpu(placement, held, -1)  # what the beneficiary took of the victims' GPUs
        # Only a workload that preempted (the one that capacity is freed for) may be placed on
        # GPUs preempted workloads still hold, and it waits for every one of them.
        for a in out.admissions:
            for replica in a.placement.replicas:
                for g in replica.gpus:
                    on = [p.id for p in preempted if _on(p, replica.node, g)]
                    if on and held.get((replica.node, g), 0) > 0:
                        assert a.waits_for and set(on) <= set(a.waits_for), (a, on)
        quiet = {a.workload_id for a in out.admissions if not a.waits_for}
        plain: dict[tuple[str, int], int] = defaultdict(int)
        for a in out.admissions:
            if a.workload_id in quiet:
                _per_gpu(a.placement, plain, 1)
        for key, units in plain.items():
            assert used[key] + max(0, held.get(key, 0)) <= 1000 or units == 0, (key, new_ids)
        for a in out.admissions:
            live[a.workload_id] = as_running(
                {w.id: w for w in cycle.waiting}[a.workload_id], a.placement
            )
        for g in gone:
            live.pop(g, None)
        waiting_now = [w for w in cycle.waiting if w.id not in new_ids]
