"""Right-sizing advice from a known usage history (pure)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.quotas.advice import Interval, advise, hourly_load, percentile

DAYS = 14
HOURS = DAYS * 24


def history(burst_hours_per_day: int, share: float) -> list[Interval]:
    """4 GPUs held all the time, 8 more for the first hours of each day; ``share`` used."""
    shares = dict.fromkeys(range(DAYS), share)
    held = [Interval(0, HOURS, 4000, shares)]
    for day in range(DAYS):
        start = day * 24 + 9
        held.append(Interval(start, start + burst_hours_per_day, 8000, shares))
    return held


def test_hourly_load_weights_partial_hours_and_each_days_measured_share() -> None:
    allocated, used = hourly_load(
        [Interval(0.5, 2.0, 1000, {0: 0.25}), Interval(23.0, 25.0, 2000, {1: 1.0})], 26
    )
    assert allocated[:3] == [500.0, 1000.0, 0.0]
    assert used[:2] == [125.0, 250.0]
    # Day 0 has no measurement for the second workload: counted as used in full.
    assert (allocated[23], used[23], allocated[24], used[24]) == (2000.0, 2000.0, 2000.0, 2000.0)


def test_a_team_that_holds_4_and_bursts_to_12_for_an_hour_a_day() -> None:
    allocated, used = hourly_load(history(1, 0.5), HOURS)
    advice = advise(
        allocated=allocated, used=used, current_guaranteed_milli=8000, current_limit_milli=16000
    )
    e = advice.evidence
    assert (e.hours, e.active_hours) == (336, 336)
    assert e.allocated_gpu_hours == 4 * 336 + 8 * 14  # 1,456 GPU-hours held
    assert e.used_gpu_hours == 728  # half of it
    # 95th percentile of 336 hours is the 320th smallest: 14 burst hours lie above it.
    assert (e.p95_used_milli, e.p95_allocated_milli, e.peak_allocated_milli) == (2000, 4000, 12000)
    assert (advice.guaranteed_milli, advice.limit_milli) == (2000, 5000)
    assert advice.changes
    assert "at most 2 GPU were in use" in advice.reason and "peak 12" in advice.reason


def test_longer_bursts_raise_the_limit_and_the_guarantee() -> None:
    allocated, used = hourly_load(history(2, 0.75), HOURS)
    advice = advise(
        allocated=allocated, used=used, current_guaranteed_milli=9000, current_limit_milli=15000
    )
    # 28 burst hours: the 320th smallest is a burst hour (12 GPUs held, 9 used).
    assert advice.evidence.p95_allocated_milli == 12000
    assert (advice.guaranteed_milli, advice.limit_milli) == (9000, 15000)
    assert not advice.changes


def test_too_little_history_gives_no_suggestion() -> None:
    allocated, used = hourly_load([Interval(0, 10, 1000, {})], HOURS)
    advice = advise(
        allocated=allocated, used=used, current_guaranteed_milli=0, current_limit_milli=1000
    )
    assert advice.guaranteed_milli is None and advice.limit_milli is None
    assert "Only 10 h" in advice.reason and not advice.changes


def test_fractions_are_rounded_up_to_the_step() -> None:
    allocated = [250.0] * 48
    advice = advise(
        allocated=allocated,
        used=allocated,
        current_guaranteed_milli=0,
        current_limit_milli=0,
        step_milli=500,
    )
    assert (advice.guaranteed_milli, advice.limit_milli) == (500, 500)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(min_value=0, max_value=64_000), min_size=24, max_size=200),
    st.floats(min_value=0, max_value=1),
)
def test_the_guarantee_covers_p95_use_and_the_limit_is_never_below_it(
    held: list[int], share: float
) -> None:
    allocated = [float(h) for h in held]
    used = [h * share for h in allocated]
    advice = advise(
        allocated=allocated, used=used, current_guaranteed_milli=0, current_limit_milli=0
    )
    if advice.guaranteed_milli is None:
        assert sum(1 for a in allocated if a > 0) < 24
        return
    assert advice.limit_milli is not None
    assert advice.guaranteed_milli >= percentile(used) - 1e-6
    assert advice.limit_milli >= max(advice.guaranteed_milli, percentile(allocated))
    assert advice.guaranteed_milli % 1000 == 0 and advice.limit_milli % 1000 == 0
