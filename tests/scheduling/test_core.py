"""The scheduling cycle over plain data: quotas, borrowing, fair share, preemption, reasons."""

from __future__ import annotations

from datetime import timedelta

from apps.scheduling.core import schedule
from apps.scheduling.data import (
    RULE_PRIORITY,
    RULE_RECLAIM,
    Policy,
    PreemptedWorkload,
)
from apps.scheduling.fairshare import UsageInterval, decayed_usage
from tests.scheduling.builders import (
    A100_HAMI,
    H100,
    L40S,
    NOW,
    nodes,
    quota,
    running,
    snapshot,
    waiting,
)

NO_MIN_RUNTIME = Policy(min_runtime_seconds={})


def admitted_ids(result: object) -> list[int]:
    return [a.workload_id for a in result.admissions]  # type: ignore[attr-defined]


def test_admits_within_limit_and_marks_usage_above_guarantee_borrowed() -> None:
    ws = [waiting("vision", 2000, wid=i, age_s=10 - i) for i in range(1, 5)]
    result = schedule(snapshot(waiting=ws, quotas=[quota("vision", 4000, 6000)]))
    assert admitted_ids(result) == [1, 2, 3]
    assert [a.borrowed for a in result.admissions] == [False, False, True]
    assert "borrowed" in result.admissions[2].reason
    (wait,) = result.waiting
    assert wait.workload_id == 4 and wait.reason.startswith("Team quota reached")


def test_higher_class_goes_first_then_lower_share_ratio_then_age() -> None:
    ws = [
        waiting("vision", 4000, priority="batch", wid=1, age_s=100),
        waiting("vision", 4000, priority="training", wid=2, age_s=1),
        waiting("nlp", 4000, priority="training", wid=3, age_s=0),
    ]
    past = {("vision", H100.name): 4000.0}  # vision used a lot recently
    result = schedule(snapshot(waiting=ws, past_usage_milli=past))
    assert admitted_ids(result) == [3, 2]
    assert result.waiting[0].workload_id == 1


def test_decayed_usage_forgets_yesterday() -> None:
    yesterday = UsageInterval(
        "vision", "H100", 8000, NOW - timedelta(hours=30), NOW - timedelta(hours=24)
    )
    last_hour = UsageInterval("nlp", "H100", 8000, NOW - timedelta(hours=1), None)
    usage = decayed_usage([yesterday, last_hour], now=NOW, half_life_seconds=6 * 3600)
    assert usage[("vision", "H100")] < 0.07 * 8000
    assert usage[("nlp", "H100")] > usage[("vision", "H100")]
    always = UsageInterval("a", "H100", 1000, NOW - timedelta(days=365), None)
    assert abs(decayed_usage([always], now=NOW, half_life_seconds=3600)[("a", "H100")] - 1000) < 1


def test_team_below_guarantee_reclaims_borrowed_capacity_newest_lowest_class_first() -> None:
    held = [
        running("nlp", "h100-0", (0, 1, 2, 3), milli=4000, wid=10, ran_s=7200),
        running("nlp", "h100-0", (4, 5), milli=2000, wid=11, borrowed=True, ran_s=3600),
        running(
            "nlp", "h100-0", (6, 7), milli=2000, wid=12, borrowed=True, ran_s=600, priority="batch"
        ),
    ]
    ws = [waiting("vision", 2000, wid=20)]
    result = schedule(snapshot(running=held, waiting=ws), NO_MIN_RUNTIME)
    (p,) = result.preemptions
    assert (p.workload_id, p.by_workload_id, p.rule) == (12, 20, RULE_RECLAIM)
    assert "vision is below its guarantee" in p.reason and p.requeue
    assert admitted_ids(result) == [20] and not result.admissions[0].borrowed


def test_guaranteed_workloads_of_another_team_are_never_preempted() -> None:
    held = [running("nlp", "h100-0", tuple(range(8)), milli=8000, wid=10)]
    result = schedule(
        snapshot(
            running=held,
            waiting=[waiting("vision", 1000, wid=20)],
            quotas=[quota("vision", 4000, 8000), quota("nlp", 8000, 8000)],
        ),
        NO_MIN_RUNTIME,
    )
    assert result.preemptions == () and result.admissions == ()
    assert "No H100-80GB capacity free" in result.waiting[0].reason


def test_within_a_team_training_preempts_development_but_never_production() -> None:
    held = [
        running("vision", "h100-0", (0, 1, 2, 3), milli=4000, wid=10, priority="production"),
        running("vision", "h100-0", (4, 5, 6, 7), milli=4000, wid=11, priority="development"),
    ]
    ws = [waiting("vision", 4000, wid=20, priority="training")]
    result = schedule(snapshot(running=held, waiting=ws), NO_MIN_RUNTIME)
    assert [(p.workload_id, p.rule) for p in result.preemptions] == [(11, RULE_PRIORITY)]
    assert "training preempts development" in result.preemptions[0].reason
    # A second training job finds only production left: it waits.
    held2 = [held[0], running("vision", "h100-0", (4, 5, 6, 7), milli=4000, wid=12)]
    result2 = schedule(snapshot(running=held2, waiting=ws), NO_MIN_RUNTIME)
    assert result2.preemptions == ()


def test_minimum_runtime_protects_a_workload_that_just_started() -> None:
    held = [
        running("vision", "h100-0", tuple(range(8)), milli=8000, wid=10, priority="batch", ran_s=30)
    ]
    ws = [waiting("vision", 1000, wid=20, priority="training")]
    policy = Policy(min_runtime_seconds={"batch": 120})
    assert schedule(snapshot(running=held, waiting=ws), policy).preemptions == ()
    later = schedule(snapshot(running=held, waiting=ws, now=NOW + timedelta(seconds=120)), policy)
    assert [p.workload_id for p in later.preemptions] == [10]


def test_cheapest_set_spares_victims_that_are_not_needed() -> None:
    held = [
        running("vision", "h100-0", (0,), wid=10, priority="batch", ran_s=100),
        running(
            "vision",
            "h100-0",
            (1, 2, 3, 4, 5, 6, 7),
            milli=7000,
            wid=11,
            priority="batch",
            ran_s=50,
        ),
    ]
    ws = [waiting("vision", 1000, wid=20, priority="training")]
    result = schedule(snapshot(running=held, waiting=ws), NO_MIN_RUNTIME)
    # Fewest GPU-hours lost: the 1-GPU job (0.03 GPU-h) before the 7-GPU one (0.1 GPU-h).
    assert [p.workload_id for p in result.preemptions] == [10]


def test_preempted_workload_is_requeued_after_the_grace_period_unless_opted_out() -> None:
    preempted = (
        PreemptedWorkload(1, NOW - timedelta(seconds=40), requeue=True),
        PreemptedWorkload(2, NOW - timedelta(seconds=10), requeue=True),
        PreemptedWorkload(3, NOW - timedelta(seconds=40), requeue=False),
    )
    result = schedule(snapshot(preempted=preempted), Policy(grace_seconds=30))
    assert [r.workload_id for r in result.requeues] == [1]
    # The one that opted out ends after its grace period instead of waiting forever.
    assert [e.workload_id for e in result.ended] == [3]


def test_each_class_waits_its_own_grace_period_and_the_message_names_it() -> None:
    preempted = (
        PreemptedWorkload(1, NOW - timedelta(seconds=100), requeue=True, priority="training"),
        PreemptedWorkload(2, NOW - timedelta(seconds=100), requeue=True, priority="batch"),
        PreemptedWorkload(3, NOW - timedelta(seconds=130), requeue=True, priority="training"),
    )
    policy = Policy(grace_seconds={"training": 120, "batch": 30})
    assert [r.workload_id for r in schedule(snapshot(preempted=preempted), policy).requeues] == [
        2,
        3,
    ]
    held = [
        running("vision", "h100-0", tuple(range(8)), milli=8000, wid=10, priority="development")
    ]
    result = schedule(
        snapshot(running=held, waiting=[waiting("vision", 1000, wid=20)]),
        Policy(min_runtime_seconds={}, grace_seconds={"training": 120, "development": 45}),
    )
    (preemption,) = result.preemptions
    assert preemption.grace_seconds == 45
    assert "It has 45 s to save a checkpoint, then returns to the queue." in preemption.reason


def test_opted_out_victim_is_told_it_will_not_return_to_the_queue() -> None:
    held = [
        running(
            "vision", "h100-0", tuple(range(8)), milli=8000, wid=10, priority="batch", requeue=False
        )
    ]
    result = schedule(
        snapshot(running=held, waiting=[waiting("vision", 1000, wid=20)]), NO_MIN_RUNTIME
    )
    assert not result.preemptions[0].requeue
    assert "chose not to requeue" in result.preemptions[0].reason


def test_waiting_workloads_get_position_reason_and_estimate_from_max_runtimes() -> None:
    held = [
        running(
            "nlp",
            "h100-0",
            tuple(range(8)),
            milli=8000,
            wid=10,
            max_runtime_seconds=7200,
            ran_s=3600,
        )
    ]
    ws = [waiting("vision", 1000, wid=20, age_s=5), waiting("vision", 2000, wid=21, age_s=1)]
    result = schedule(
        snapshot(
            running=held, waiting=ws, quotas=[quota("vision", 0, 8000), quota("nlp", 8000, 8000)]
        )
    )
    first, second = result.waiting
    assert (first.position, second.position) == (1, 2)
    assert "nobody ahead of you" in first.reason and "1 ahead of you" in second.reason
    assert first.estimated_start == NOW + timedelta(hours=1)
    assert second.estimated_start == NOW + timedelta(hours=1)


def test_without_max_runtimes_there_is_no_estimate_and_the_reason_says_so() -> None:
    held = [running("nlp", "h100-0", tuple(range(8)), milli=8000, wid=10)]
    result = schedule(
        snapshot(
            running=held,
            waiting=[waiting("vision", 1000)],
            quotas=[quota("vision", 0, 8000), quota("nlp", 8000, 8000)],
        )
    )
    assert result.waiting[0].estimated_start is None
    assert "no maximum runtime" in result.waiting[0].reason


def test_advice_names_a_fraction_elsewhere_that_would_start_now() -> None:
    held = [running("nlp", "h100-0", tuple(range(8)), milli=8000, wid=10)]
    fleet = nodes(H100, 1) + nodes(A100_HAMI, 1)
    quotas = [
        quota("vision", 0, 8000),
        quota("nlp", 8000, 8000),
        quota("vision", 0, 4000, gpu_class=A100_HAMI),
    ]
    result = schedule(
        snapshot(running=held, nodes=fleet, waiting=[waiting("vision", 1000)], quotas=quotas)
    )
    # The same amount on a class that can serve it (a fraction only if the class shares GPUs).
    assert result.waiting[0].advice == (
        "1 GPU of A100-HAMi would start now: vision has room in its quota there.",
    )
    (suggestion,) = result.waiting[0].suggestions
    assert (suggestion.gpu_class, suggestion.gpu_milli) == ("A100-HAMi", 1000)


def test_advice_for_a_team_at_its_limit_points_to_a_class_where_it_has_room() -> None:
    fleet = nodes(H100, 1) + nodes(L40S, 1, gpus=4)
    quotas = [quota("vision", 1000, 1000), quota("vision", 0, 4000, gpu_class=L40S)]
    held = [running("vision", "h100-0", (0,), wid=10)]
    result = schedule(
        snapshot(running=held, nodes=fleet, quotas=quotas, waiting=[waiting("vision", 1000)])
    )
    (advice,) = result.waiting[0].advice
    assert advice == "1 GPU of L40S-48GB would start now: vision has room in its quota there."


def test_advice_for_a_team_at_its_limit_everywhere_says_when_it_starts() -> None:
    fleet = nodes(H100, 1) + nodes(L40S, 1, gpus=4)
    quotas = [quota("vision", 1000, 1000), quota("vision", 0, 0, gpu_class=L40S)]
    held = [running("vision", "h100-0", (0,), wid=10)]
    result = schedule(
        snapshot(running=held, nodes=fleet, quotas=quotas, waiting=[waiting("vision", 1000)])
    )
    (advice,) = result.waiting[0].advice
    assert advice.startswith("Your team is at its limit for H100-80GB")
    assert result.waiting[0].suggestions == ()


def test_impossible_requests_are_rejected_not_queued_forever() -> None:
    ws = [
        waiting("vision", 16000, wid=1),  # above the limit
        waiting("vision", 1000, gpu_class=L40S, wid=2),  # no quota at all
        waiting("vision", 2000, gpu_class=H100, wid=3, replicas=1),  # fine
    ]
    result = schedule(snapshot(waiting=ws, nodes=nodes(H100, 1) + nodes(L40S, 1, gpus=4)))
    assert sorted(r.workload_id for r in result.rejections) == [1, 2]
    assert "limit" in result.rejections[0].reason
    assert admitted_ids(result) == [3]


def test_multi_node_gang_is_admitted_whole_or_waits() -> None:
    held = [running("nlp", "h100-1", (0,), wid=10)]
    gang = waiting("vision", 8000, replicas=2, wid=20)
    fleet = nodes(H100, 2)
    quotas = [quota("vision", 16000, 16000), quota("nlp", 0, 8000)]
    result = schedule(snapshot(running=held, waiting=[gang], nodes=fleet, quotas=quotas))
    assert result.admissions == () and "2 replicas × 8 GPU, all at once" in result.waiting[0].reason
    free = schedule(snapshot(waiting=[gang], nodes=fleet, quotas=quotas))
    (admission,) = free.admissions
    assert sorted(r.node for r in admission.placement.replicas) == ["h100-0", "h100-1"]


def test_gang_that_fits_on_one_node_still_gets_one_node_per_replica() -> None:
    gang = waiting("vision", 4000, replicas=2, wid=20)
    result = schedule(snapshot(waiting=[gang], nodes=nodes(H100, 2)))
    (admission,) = result.admissions
    assert sorted(r.node for r in admission.placement.replicas) == ["h100-0", "h100-1"]
    assert admission.reason.startswith("Admitted on hub: h100-0, h100-1.")


def test_gang_waits_saying_how_many_nodes_it_needs_and_how_many_have_room() -> None:
    held = [running("nlp", "h100-3", (0, 1, 2, 3, 4, 5, 6), milli=7000, wid=10)]
    quotas = [quota("vision", 8000, 16000), quota("nlp", 8000, 8000)]
    gang = waiting("vision", 2000, replicas=4, wid=20)
    result = schedule(snapshot(running=held, waiting=[gang], nodes=nodes(H100, 4), quotas=quotas))
    assert result.admissions == ()
    assert result.waiting[0].reason == (
        "No H100-80GB capacity free for 4 replicas × 2 GPU, all at once: it needs 4 nodes "
        "with 2 free H100-80GB GPUs each (one replica per node, in one cluster); 3 have them "
        "now; nobody ahead of you. No estimate yet: the work it waits for has no maximum runtime."
    )
    too_many = waiting("vision", 1000, replicas=5, wid=21)
    alone = schedule(snapshot(waiting=[too_many], nodes=nodes(H100, 4), quotas=quotas))
    assert "needs 5 nodes with 1 free H100-80GB GPU each" in alone.waiting[0].reason
    assert alone.waiting[0].reason.endswith(
        "4 have them now, and H100-80GB has 4 nodes in all: ask for fewer replicas with more "
        "GPUs each; nobody ahead of you."
    )
    assert alone.waiting[0].estimated_start is None


def test_borrowed_flag_is_cleared_once_the_workload_is_within_the_guarantee() -> None:
    held = [running("vision", "h100-0", (0, 1), milli=2000, wid=10, borrowed=True)]
    result = schedule(snapshot(running=held))
    assert result.borrowed_changes == ((10, False),)


def test_same_snapshot_gives_the_same_result() -> None:
    ws = [
        waiting(t, m, wid=i, age_s=i)
        for i, (t, m) in enumerate(
            [("vision", 500), ("nlp", 250), ("vision", 1000), ("nlp", 2000)], 1
        )
    ]
    fleet = nodes(A100_HAMI, 2)
    quotas = [quota(t, 2000, 8000, gpu_class=A100_HAMI) for t in ("vision", "nlp")]
    ws = [w.__class__(**{**w.__dict__, "gpu_class": A100_HAMI.name}) for w in ws]
    first = schedule(snapshot(waiting=ws, nodes=fleet, quotas=quotas))
    assert first == schedule(snapshot(waiting=list(reversed(ws)), nodes=fleet, quotas=quotas))


def test_waiting_for_cpu_beside_free_gpus_says_so_instead_of_no_gpu_capacity() -> None:
    """GPUs free on the class but no node with the CPUs one replica asks for beside them: the
    reason names what is missing (the benchmark's HAMi jobs on a node out of CPUs)."""
    fleet = nodes(H100, 1, cpu_milli=4_000)
    first = waiting("vision", 1000, wid=1, cpu_milli=4_000)
    second = waiting("vision", 1000, wid=2, cpu_milli=4_000, age_s=-1)
    result = schedule(snapshot(waiting=[first, second], nodes=fleet))
    assert [a.workload_id for a in result.admissions] == [1]
    assert result.waiting[0].reason.startswith(
        "7 GPU of H100-80GB is free in all, but no node has room for 1 GPU together with 4 CPUs and"
    )
