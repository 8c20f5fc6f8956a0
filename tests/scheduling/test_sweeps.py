"""A sweep's trials over plain data: each trial its own unit, at most ``parallelism`` of a sweep
holding GPUs in any cycle, charged one by one, preempted one by one."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from apps.scheduling.core import schedule
from apps.scheduling.data import (
    GpuClassSpec,
    Policy,
    PreemptedWorkload,
    RunningWorkload,
    WaitingWorkload,
)
from tests.scheduling.builders import H100, L40S, NOW, nodes, quota, running, snapshot, waiting

NO_MIN_RUNTIME = Policy(min_runtime_seconds={})
SWEEP = 900


def trials(
    count: int, milli: int = 250, *, gpu_class: GpuClassSpec = L40S, sweep: int = SWEEP
) -> list[WaitingWorkload]:
    return [
        replace(
            waiting("vision", milli, gpu_class=gpu_class, priority="batch", wid=sweep + 1 + i),
            sweep=sweep,
            charged_milli=250 if gpu_class is L40S else None,
        )
        for i in range(count)
    ]


def as_running(w: WaitingWorkload, placement: object) -> RunningWorkload:
    return RunningWorkload(
        id=w.id,
        team=w.team,
        owner=w.owner,
        gpu_class=w.gpu_class,
        priority=w.priority,
        gpu_milli=w.gpu_milli,
        charged_milli=w.charged_milli,
        replicas=1,
        admitted_at=NOW,
        placement=placement,  # type: ignore[arg-type]
        cpu_milli=w.cpu_milli,
        memory_mib=w.memory_mib,
        sweep=w.sweep,
    )


def test_no_cycle_lets_more_trials_of_a_sweep_run_than_its_parallelism() -> None:
    waiting_trials = trials(20)
    by_id = {w.id: w for w in waiting_trials}
    quotas = [quota("vision", 4000, 8000, gpu_class=L40S)]
    run: list[RunningWorkload] = []
    finished: list[int] = []
    most = 0
    for _ in range(40):
        result = schedule(
            snapshot(
                nodes=nodes(L40S, 1),
                running=run,
                waiting=waiting_trials,
                quotas=quotas,
                parallelism={SWEEP: 4},
            )
        )
        for a in result.admissions:
            run.append(as_running(by_id[a.workload_id], a.placement))
        admitted = {a.workload_id for a in result.admissions}
        waiting_trials = [w for w in waiting_trials if w.id not in admitted]
        most = max(most, len(run))
        assert len(run) <= 4
        # Every trial left waiting says why: its sweep's cap.
        for info in result.waiting:
            assert "parallelism cap" in info.reason
        # The oldest running trial ends; its slot frees for the next cycle.
        if run:
            finished.append(run.pop(0).id)
        if not waiting_trials and not run:
            break
    assert most == 4
    assert sorted(finished) == sorted(by_id)


def test_each_trial_is_charged_on_its_own_against_the_quota() -> None:
    # Three slices fit the limit; the fourth trial waits for quota although the cap allows it.
    result = schedule(
        snapshot(
            nodes=nodes(L40S, 1),
            waiting=trials(6),
            quotas=[quota("vision", 500, 750, gpu_class=L40S)],
            parallelism={SWEEP: 4},
        )
    )
    assert len(result.admissions) == 3
    reasons = [w.reason for w in result.waiting]
    assert len(reasons) == 3
    assert all(r.startswith("Team quota reached") for r in reasons)


def test_a_preempted_trial_in_its_grace_period_still_holds_a_slot() -> None:
    ws = trials(4)
    held = [
        replace(running("vision", "l40s-0", (i,), milli=250, gpu_class=L40S), sweep=SWEEP)
        for i in range(3)
    ]
    preempted = PreemptedWorkload(
        id=1234, preempted_at=NOW, requeue=True, priority="batch", sweep=SWEEP
    )
    base = {
        "nodes": nodes(L40S, 1),
        "running": held,
        "waiting": ws,
        "quotas": [quota("vision", 4000, 8000, gpu_class=L40S)],
        "parallelism": {SWEEP: 4},
    }
    assert schedule(snapshot(**base, preempted=(preempted,))).admissions == ()
    later = replace(preempted, preempted_at=NOW - timedelta(hours=1))
    result = schedule(snapshot(**base, preempted=(later,)))
    assert [r.workload_id for r in result.requeues] == [1234]
    assert len(result.admissions) == 1


def test_a_higher_class_preempts_one_trial_not_the_whole_sweep() -> None:
    held = [
        replace(running("vision", "h100-0", (i,), priority="batch"), sweep=SWEEP) for i in range(8)
    ]
    job = waiting("vision", 1000, priority="training", wid=1)
    result = schedule(
        snapshot(
            nodes=nodes(H100, 1),
            running=held,
            waiting=[job],
            quotas=[quota("vision", 8000, 8000)],
            parallelism={SWEEP: 8},
        ),
        NO_MIN_RUNTIME,
    )
    assert [a.workload_id for a in result.admissions] == [1]
    assert len(result.preemptions) == 1
    assert result.preemptions[0].workload_id in {r.id for r in held}


def test_trials_of_other_sweeps_and_plain_workloads_are_not_capped_by_a_sweep() -> None:
    mine = trials(3, sweep=900)
    theirs = trials(3, sweep=950)
    plain = waiting("vision", 250, gpu_class=L40S, wid=5)
    result = schedule(
        snapshot(
            nodes=nodes(L40S, 1),
            waiting=[*mine, *theirs, plain],
            quotas=[quota("vision", 4000, 8000, gpu_class=L40S)],
            parallelism={900: 1, 950: 2},
        )
    )
    admitted = {a.workload_id for a in result.admissions}
    assert len(admitted & {w.id for w in mine}) == 1
    assert len(admitted & {w.id for w in theirs}) == 2
    assert 5 in admitted
