"""Checkpoint-aware preemption: among the victims the class rules allow, the cycle takes those
that lose the least work since their last reported checkpoint (docs/checkpoints.md), and tells
each owner how much was lost. The class rules themselves do not change."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import Policy, RunningWorkload
from apps.scheduling.preemption import (
    cheapest_set,
    cost_order,
    gpu_hours_lost,
    work_lost,
    work_since,
)
from tests.scheduling.builders import NOW, running, snapshot, waiting

NO_MIN_RUNTIME = Policy(min_runtime_seconds={})


def saved(r: RunningWorkload, ago_s: int, step: int | None = None) -> RunningWorkload:
    return replace(r, checkpoint_at=NOW - timedelta(seconds=ago_s), checkpoint_step=step)


def test_the_victim_that_checkpointed_last_is_preempted_not_the_newest() -> None:
    # Both batch, one GPU each: the newer one (30 min) reported no checkpoint, the older one
    # (2 h) saved 5 min ago. The old order took the newer one; it would lose 30 min, not 5.
    old = saved(running("vision", "h100-0", (0,), wid=10, priority="batch", ran_s=7200), 300, 820)
    new = running("vision", "h100-0", (1,), wid=11, priority="batch", ran_s=1800)
    rest = running("vision", "h100-0", tuple(range(2, 8)), milli=6000, wid=12, priority="training")
    ws = [waiting("vision", 1000, wid=20, priority="training")]

    result = schedule(snapshot(running=[old, new, rest], waiting=ws), NO_MIN_RUNTIME)

    (preemption,) = result.preemptions
    assert preemption.workload_id == 10
    assert (
        "Its last checkpoint was at step 820, 5 min ago: 0.08 GPU-hours of work since then are "
        "lost if it saves no new one." in preemption.reason
    )
    assert "It has" in preemption.reason.split("lost if it saves no new one.")[1]
    # Blind to checkpoints (the order before them): the newest, fewest GPU-hours since start.
    blind = [replace(r, checkpoint_at=None) for r in (old, new, rest)]
    before = schedule(snapshot(running=blind, waiting=ws), NO_MIN_RUNTIME)
    assert [p.workload_id for p in before.preemptions] == [11]
    assert "reported no checkpoint in the 30 min since it started" in before.preemptions[0].reason


def test_class_rules_come_first_a_fresh_checkpoint_does_not_shield_a_lower_class() -> None:
    batch = saved(running("vision", "h100-0", (0,), wid=10, priority="batch", ran_s=7200), 10)
    dev = running("vision", "h100-0", (1,), wid=11, priority="development", ran_s=600)
    rest = running("vision", "h100-0", tuple(range(2, 8)), milli=6000, wid=12, priority="training")
    ws = [waiting("vision", 1000, wid=20, priority="training")]
    result = schedule(snapshot(running=[batch, dev, rest], waiting=ws), NO_MIN_RUNTIME)
    assert [p.workload_id for p in result.preemptions] == [10]  # batch yields before development
    # Production never yields, however fresh its checkpoint; other teams' unborrowed work neither.
    prod = saved(running("vision", "h100-0", (0,), wid=13, priority="production"), 1)
    theirs = saved(running("nlp", "h100-0", (1,), wid=14, priority="batch"), 1)
    ws = [waiting("vision", 1000, wid=21, priority="training")]
    result = schedule(snapshot(running=[prod, theirs, rest], waiting=ws), NO_MIN_RUNTIME)
    assert result.preemptions == ()


def test_a_checkpoint_from_an_earlier_run_saves_nothing_of_this_one() -> None:
    # Requeued and admitted again 10 min ago; its last report is from the run before.
    r = saved(running("vision", "h100-0", (0,), ran_s=600, priority="batch"), 3600, 50)
    assert work_since(r) == r.admitted_at
    assert abs(gpu_hours_lost(r, NOW) - 600 / 3600) < 1e-9
    assert work_lost(r, NOW).startswith("It reported no checkpoint in the 10 min since it started")
    # One of this run: the work since then only, times its GPUs.
    four = saved(
        running("vision", "h100-0", (0, 1, 2, 3), milli=4000, ran_s=7200, priority="batch"), 1800
    )
    assert abs(gpu_hours_lost(four, NOW) - 4 * 0.5) < 1e-9
    assert work_lost(four, NOW) == (
        "Its last checkpoint was 30 min ago: 2.0 GPU-hours of work since then are lost if it "
        "saves no new one."
    )


# --- properties ----------------------------------------------------------------------------

victim_shape = st.tuples(
    st.sampled_from(["batch", "development", "training"]),
    st.integers(min_value=60, max_value=86_400),  # ran for
    st.one_of(st.none(), st.integers(min_value=0, max_value=86_400)),  # checkpoint ago
)


def victims_of(shapes: list[tuple[str, int, int | None]]) -> list[RunningWorkload]:
    out = []
    for i, (priority, ran_s, ago) in enumerate(shapes):
        r = running("vision", f"n{i}", (0,), wid=100 + i, priority=priority, ran_s=ran_s)
        out.append(r if ago is None else saved(r, ago))
    return out


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(victim_shape, min_size=1, max_size=12), need=st.integers(1, 12))
def test_property_checkpoint_aware_choice_loses_no_more_than_the_old_order_same_classes(
    shapes: list[tuple[str, int, int | None]], need: int
) -> None:
    """One-GPU victims, ``need`` of them: the chosen set takes the same classes as the order
    blind to checkpoints (class rules untouched), loses no more work than it, and within the
    last class it reaches takes exactly the victims that lose the least."""
    victims = victims_of(shapes)

    def fits(chosen: object) -> bool:
        return len(chosen) >= need  # type: ignore[arg-type]

    aware = cheapest_set(victims, fits, NOW)
    blind_victims = [replace(v, checkpoint_at=None) for v in victims]
    blind = cheapest_set(blind_victims, fits, NOW)
    if need > len(victims):
        assert aware is None and blind is None
        return
    assert aware is not None and blind is not None

    def classes(vs: list[RunningWorkload]) -> list[str]:
        return sorted(v.priority for v in vs)

    assert classes(aware) == classes(blind)
    by_id = {v.id: v for v in victims}
    lost_aware = sum(gpu_hours_lost(v, NOW) for v in aware)
    lost_blind = sum(gpu_hours_lost(by_id[v.id], NOW) for v in blind)  # the work really lost
    assert lost_aware <= lost_blind + 1e-9
    chosen = {v.id for v in aware}
    for priority in {v.priority for v in aware}:
        taken = [
            gpu_hours_lost(v, NOW) for v in victims if v.priority == priority and v.id in chosen
        ]
        left = [
            gpu_hours_lost(v, NOW) for v in victims if v.priority == priority and v.id not in chosen
        ]
        assert not left or max(taken) <= min(left) + 1e-9


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(victim_shape, min_size=1, max_size=12))
def test_property_cost_order_is_by_class_then_work_lost_since_the_checkpoint(
    shapes: list[tuple[str, int, int | None]],
) -> None:
    ordered = cost_order(victims_of(shapes), NOW)
    rank = {"batch": 0, "development": 1, "training": 2}
    keys = [(rank[v.priority], gpu_hours_lost(v, NOW)) for v in ordered]
    assert keys == sorted(keys)
    for v in ordered:  # never more than the work since it started
        assert gpu_hours_lost(v, NOW) <= (NOW - v.admitted_at).total_seconds() / 3600 + 1e-9
