"""The scaling decision on plain numbers: bounds, tolerance, cool-downs, scale to zero."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from apps.serving import core

RPS = core.Policy(
    min_replicas=1, max_replicas=8, metric="rps", target=10.0, cooldown_up=60, cooldown_down=300
)


def step(policy: core.Policy, state: core.State, rps: float, now: float) -> core.Decision:
    return core.decide(policy, state, core.Load(value=rps, requests=rps), now)


def test_load_above_the_target_scales_up_at_once_and_down_only_after_the_cool_down() -> None:
    d = step(RPS, core.State(replicas=1), rps=35, now=0)
    assert d.replicas == 4 and "35.0 requests/s" in d.reason
    # The load drops at once: no scale-down before the cool-down.
    d = step(RPS, d.state, rps=5, now=30)
    assert (d.replicas, d.reason) == (4, "")
    d = step(RPS, d.state, rps=5, now=299)
    assert d.replicas == 4
    d = step(RPS, d.state, rps=5, now=301)
    assert d.replicas == 1


def test_a_short_dip_inside_the_window_does_not_scale_down() -> None:
    state = step(RPS, core.State(replicas=1), rps=40, now=0).state
    for t, rps in ((100, 40), (200, 40), (290, 2)):
        state = step(RPS, state, rps=rps, now=t).state
    # Past the cool-down, but the window still saw 4 replicas' worth of load.
    d = step(RPS, state, rps=2, now=310)
    assert d.replicas == 4


def test_within_tolerance_nothing_changes_and_no_data_changes_nothing() -> None:
    assert step(RPS, core.State(replicas=3), rps=31, now=0).reason == ""
    d = core.decide(RPS, core.State(replicas=3), core.Load(value=None), now=0)
    assert (d.replicas, d.reason) == (3, "")


def test_bounds_hold_and_gpu_utilisation_scales_by_ratio() -> None:
    assert step(RPS, core.State(replicas=1), rps=1000, now=0).replicas == 8
    gpu = core.Policy(min_replicas=2, max_replicas=6, metric="gpu", target=50.0)
    d = core.decide(gpu, core.State(replicas=2), core.Load(value=100.0), now=0)
    assert d.replicas == 4 and "GPU utilisation 100%" in d.reason


def test_an_idle_endpoint_that_may_scale_to_zero_does_so_after_its_idle_period() -> None:
    policy = core.Policy(
        min_replicas=0,
        max_replicas=2,
        metric="rps",
        target=10,
        idle_seconds=600,
        cooldown_up=0,
        cooldown_down=0,
    )
    d = step(policy, core.State(replicas=1), rps=0, now=0)
    assert d.replicas == 1 and d.state.idle_since == 0
    d = step(policy, d.state, rps=0, now=599)
    assert d.replicas == 1
    d = step(policy, d.state, rps=0, now=600)
    assert d.replicas == 0 and "scaled to zero" in d.reason
    # At zero it stays there while no call comes; the first calls bring it back.
    assert step(policy, d.state, rps=0, now=900).replicas == 0
    assert step(policy, d.state, rps=15, now=930).replicas == 2
    # One request in between restarts the idle clock.
    d = step(policy, core.State(replicas=1, idle_since=0), rps=0.5, now=500)
    assert d.state.idle_since is None


@given(
    loads=st.lists(st.floats(min_value=0, max_value=500), min_size=1, max_size=60),
    start=st.integers(min_value=1, max_value=8),
)
def test_replicas_stay_in_bounds_and_change_at_most_once_per_cool_down_downwards(
    loads: list[float], start: int
) -> None:
    state = core.State(replicas=start)
    downs: list[float] = []
    for i, rps in enumerate(loads):
        now = i * 30.0
        d = step(RPS, state, rps, now)
        assert RPS.min_replicas <= d.replicas <= RPS.max_replicas
        if d.replicas < state.replicas:
            downs.append(now)
        state = d.state
    assert all(b - a >= RPS.cooldown_down for a, b in pairwise(downs))
