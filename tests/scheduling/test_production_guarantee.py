"""Production (inference endpoints) runs only on the team's guarantee: never borrowed, so
never reclaimable; a team's lower classes may be preempted to make room within it."""

from __future__ import annotations

from apps.scheduling.core import schedule
from tests.scheduling.builders import quota, running, snapshot, waiting


def test_production_above_the_guarantee_waits_with_a_reason_even_below_the_limit() -> None:
    result = schedule(
        snapshot(
            running=[running("vision", "h100-0", (0, 1, 2, 3), milli=4000, priority="production")],
            waiting=[waiting(priority="production", wid=9)],
            quotas=[quota("vision", 4000, 8000)],
        )
    )
    assert result.admissions == () and result.preemptions == ()
    (wait,) = result.waiting
    assert wait.reason.startswith(
        "Production work runs only on guaranteed quota: vision uses 4 of its 4"
    )


def test_production_larger_than_the_whole_guarantee_says_waiting_cannot_help() -> None:
    """Found with the admission bench: 8-GPU production Jobs of a team guaranteed 6 waited for
    ever, told they would start 'when the team's running endpoints leave room'."""
    result = schedule(
        snapshot(
            waiting=[waiting(priority="production", milli=8000, wid=9)],
            quotas=[quota("vision", 6000, 24000)],
        )
    )
    (wait,) = result.waiting
    assert "needs 8 GPU" in wait.reason and "more than vision's whole guarantee of 6 GPU" in (
        wait.reason
    )
    assert "cannot start until an admin raises the guarantee" in wait.reason
    assert "endpoints" not in wait.reason


def test_production_within_the_guarantee_is_admitted_and_not_borrowed() -> None:
    result = schedule(snapshot(waiting=[waiting(priority="production", milli=2000, wid=9)]))
    (admission,) = result.admissions
    assert admission.borrowed is False


def test_production_preempts_its_teams_training_to_stay_within_the_guarantee() -> None:
    training = running("vision", "h100-0", (0, 1, 2, 3), milli=4000, priority="training", wid=5)
    result = schedule(
        snapshot(
            running=[training],
            waiting=[waiting(priority="production", milli=1000, wid=9)],
            quotas=[quota("vision", 4000, 8000)],
        )
    )
    assert [p.workload_id for p in result.preemptions] == [5]
    assert [a.workload_id for a in result.admissions] == [9]


def test_nothing_preempts_production() -> None:
    endpoint = running("vision", "h100-0", (0,), milli=1000, priority="production", wid=5)
    result = schedule(
        snapshot(
            running=[endpoint],
            waiting=[waiting(priority="training", milli=1000, wid=9)],
            quotas=[quota("vision", 1000, 1000)],
        )
    )
    assert result.preemptions == () and result.admissions == ()
