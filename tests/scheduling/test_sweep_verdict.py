"""A sweep's verdict is the cycle's own decision for its trials: charged one trial at a time, at
most its parallelism at once, never as one unit of all its trials (plain data)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import Policy, Snapshot, WaitingWorkload
from apps.scheduling.verdict import PREEMPTS, REFUSED, STARTS, WAITS, preview
from tests.scheduling.builders import L40S, nodes, quota, running, snapshot, waiting

NO_MIN_RUNTIME = Policy(min_runtime_seconds={})
SWEEP = 9000


def sweep_request(trials: int, milli: int = 250, *, priority: str = "batch") -> WaitingWorkload:
    """A sweep as the preview receives it: replicas = its trials, one trial's charge."""
    return replace(
        waiting("vision", milli, trials, gpu_class=L40S, priority=priority, wid=1),
        charged_milli=milli,
    )


def submitted(state: Snapshot, request: WaitingWorkload, parallelism: int) -> Snapshot:
    """The snapshot once the sweep is submitted: its trials waiting, as the selector reads them."""
    trials = [
        replace(request, id=SWEEP + 1 + i, replicas=1, submitted_at=state.now, sweep=SWEEP)
        for i in range(request.replicas)
    ]
    return replace(
        state,
        waiting=(*state.waiting, *trials),
        parallelism={**state.parallelism, SWEEP: parallelism},
    )


def test_a_sweep_of_twenty_quarter_gpu_trials_five_at_once_starts_within_a_four_gpu_limit() -> None:
    # 20 × 0.25 = 5 GPU would exceed Vision's limit of 4; 5 at once × 0.25 = 1.25 GPU does not.
    state = snapshot(nodes=nodes(L40S, 2), quotas=[quota("vision", 2000, 4000, gpu_class=L40S)])
    verdict = preview(state, sweep_request(20), NO_MIN_RUNTIME, parallelism=5)
    assert verdict.outcome == STARTS, verdict.headline()
    assert (verdict.trials_at_once, verdict.trials_started) == (5, 5)
    assert "5 of the 5 trials that run at once" in verdict.headline()
    assert "limit" not in verdict.headline()
    # The cycle itself charges the same: five trials, 1.25 GPU against the quota.
    result = schedule(submitted(state, sweep_request(20), 5), NO_MIN_RUNTIME)
    assert len(result.admissions) == 5
    assert result.rejections == ()


def test_a_sweep_whose_one_trial_exceeds_the_limit_is_refused_with_the_trials_charge() -> None:
    state = snapshot(nodes=nodes(L40S, 1), quotas=[quota("vision", 0, 250, gpu_class=L40S)])
    verdict = preview(state, sweep_request(4, 500), NO_MIN_RUNTIME, parallelism=2)
    assert verdict.outcome == REFUSED
    assert "0.5 GPU" in verdict.reason


def test_a_sweep_that_cannot_start_waits_with_the_first_trials_reason() -> None:
    full = [running("nlp", "l40s-0", (i,), milli=1000, gpu_class=L40S) for i in range(8)]
    state = snapshot(
        nodes=nodes(L40S, 1),
        running=full,
        quotas=[quota("vision", 0, 4000, gpu_class=L40S), quota("nlp", 8000, 8000, gpu_class=L40S)],
    )
    verdict = preview(state, sweep_request(6), NO_MIN_RUNTIME, parallelism=3)
    assert verdict.outcome == WAITS
    assert verdict.position is not None and verdict.trials_at_once == 3


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, WaitingWorkload, int]:
    node_count = draw(st.integers(1, 2))
    fleet = nodes(L40S, node_count, gpus=draw(st.sampled_from([2, 4])))
    gpus = len(fleet) and fleet[0].gpu_count
    held = [
        running(
            draw(st.sampled_from(["vision", "nlp"])),
            fleet[draw(st.integers(0, node_count - 1))].name,
            (draw(st.integers(0, gpus - 1)),),
            milli=draw(st.sampled_from([250, 500, 1000])),
            gpu_class=L40S,
            priority=draw(st.sampled_from(["batch", "training", "development"])),
            wid=100 + i,
            units=draw(st.integers(1, 4)),
        )
        for i in range(draw(st.integers(0, 6)))
    ]
    queued = [
        replace(
            waiting(
                draw(st.sampled_from(["vision", "nlp"])),
                draw(st.sampled_from([250, 500, 1000])),
                gpu_class=L40S,
                priority=draw(st.sampled_from(["batch", "training"])),
                age_s=draw(st.integers(1, 3600)),
                wid=500 + i,
            ),
        )
        for i in range(draw(st.integers(0, 4)))
    ]
    limits = st.sampled_from([0, 250, 1000, 2000, 4000, 8000])
    vision_limit = draw(limits)
    state = snapshot(
        nodes=fleet,
        running=held,
        waiting=queued,
        quotas=[
            quota("vision", min(vision_limit, draw(limits)), vision_limit, gpu_class=L40S),
            quota("nlp", 1000, 4000, gpu_class=L40S),
        ],
    )
    trials = draw(st.integers(1, 12))
    request = sweep_request(
        trials,
        draw(st.sampled_from([250, 500, 1000])),
        priority=draw(st.sampled_from(["batch", "training"])),
    )
    return state, request, draw(st.integers(1, trials))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_a_sweeps_verdict_is_what_the_cycle_does_with_its_trials(
    scenario: tuple[Snapshot, WaitingWorkload, int],
) -> None:
    state, request, parallelism = scenario
    verdict = preview(state, request, NO_MIN_RUNTIME, parallelism=parallelism)
    result = schedule(submitted(state, request, parallelism), NO_MIN_RUNTIME)
    mine = range(SWEEP + 1, SWEEP + 1 + request.replicas)
    admitted = [a for a in result.admissions if a.workload_id in mine]
    refused = [r for r in result.rejections if r.workload_id in mine]
    # Accepted now, refused, or waiting: the same answer, for the same number of trials.
    if admitted:
        assert verdict.outcome in (STARTS, PREEMPTS)
        assert verdict.trials_started == len(admitted)
        assert set(verdict.nodes) == {n for a in admitted for n in a.placement.nodes}
    elif refused:
        assert verdict.outcome == REFUSED
        assert verdict.reason == refused[0].reason
    else:
        assert verdict.outcome == WAITS
    # Never more trials than the cap, each charged on its own against the quota.
    assert len(admitted) <= parallelism
    assert verdict.trials_at_once == min(parallelism, request.replicas)
    preempting = {p.by_workload_id for p in result.preemptions} & set(mine)
    assert (verdict.outcome == PREEMPTS) == bool(admitted and preempting)
