"""The preemption dry run over plain data: what admitting one more request would stop."""

from __future__ import annotations

from apps.scheduling.core import PREVIEW_ID, preview_preemptions, schedule
from apps.scheduling.data import RULE_PRIORITY, RULE_RECLAIM, Policy
from tests.scheduling.builders import quota, running, snapshot, waiting

NO_MIN_RUNTIME = Policy(min_runtime_seconds={})


def test_request_needing_a_teammates_notebook_gpus_lists_the_notebook() -> None:
    held = [
        running("vision", "h100-0", tuple(range(8)), milli=8000, wid=12, priority="development"),
    ]
    state = snapshot(running=held, quotas=[quota("vision", 8000, 16000)])
    job = waiting("vision", 8000, priority="training", owner="bob")
    found = preview_preemptions(state, job, NO_MIN_RUNTIME)
    assert [(p.workload_id, p.by_workload_id, p.rule) for p in found] == [
        (12, PREVIEW_ID, RULE_PRIORITY)
    ]


def test_request_that_fits_lists_nothing() -> None:
    held = [running("vision", "h100-0", (0, 1, 2, 3), milli=4000, wid=12, priority="development")]
    state = snapshot(running=held)
    assert preview_preemptions(state, waiting("vision", 4000), NO_MIN_RUNTIME) == ()


def test_request_that_would_only_wait_lists_nothing() -> None:
    # Production is never preempted: the training job waits, nothing is stopped.
    held = [
        running("vision", "h100-0", tuple(range(8)), milli=8000, wid=12, priority="production"),
    ]
    state = snapshot(running=held, quotas=[quota("vision", 8000, 16000)])
    assert preview_preemptions(state, waiting("vision", 1000), NO_MIN_RUNTIME) == ()


def test_reclaim_of_another_teams_borrowed_capacity_is_listed_with_its_rule() -> None:
    held = [
        running("nlp", "h100-0", tuple(range(8)), milli=8000, wid=30, borrowed=True),
    ]
    state = snapshot(running=held, quotas=[quota("vision", 4000, 8000), quota("nlp", 4000, 8000)])
    found = preview_preemptions(state, waiting("vision", 2000), NO_MIN_RUNTIME)
    assert [(p.workload_id, p.rule) for p in found] == [(30, RULE_RECLAIM)]


def test_preemptions_made_for_other_waiting_work_are_not_the_requests() -> None:
    held = [
        running("vision", "h100-0", (0, 1, 2, 3), milli=4000, wid=12, priority="development"),
        running("vision", "h100-0", (4, 5, 6, 7), milli=4000, wid=13, priority="development"),
    ]
    older = waiting("vision", 4000, wid=40, priority="training", age_s=600)
    state = snapshot(running=held, waiting=[older], quotas=[quota("vision", 8000, 16000)])
    found = preview_preemptions(state, waiting("vision", 4000, priority="training"), NO_MIN_RUNTIME)
    assert len(found) == 1 and found[0].by_workload_id == PREVIEW_ID
    ahead = schedule(state, NO_MIN_RUNTIME).preemptions
    assert {p.workload_id for p in ahead}.isdisjoint({p.workload_id for p in found})


def test_preview_leaves_the_snapshot_as_it_was() -> None:
    held = [
        running("vision", "h100-0", tuple(range(8)), milli=8000, wid=12, priority="development"),
    ]
    state = snapshot(running=held, quotas=[quota("vision", 8000, 16000)])
    before = schedule(state, NO_MIN_RUNTIME)
    assert preview_preemptions(state, waiting("vision", 8000), NO_MIN_RUNTIME)
    assert state.waiting == ()
    assert schedule(state, NO_MIN_RUNTIME) == before
