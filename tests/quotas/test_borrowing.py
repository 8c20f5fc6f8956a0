"""Who borrows from whom: pure arithmetic on plain numbers."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.quotas.core import UNASSIGNED, borrowing


def test_unassigned_capacity_lends_first_then_the_largest_idle_guarantee() -> None:
    pairs = borrowing(
        guaranteed={"vision": 4000, "nlp": 4000, "speech": 2000},
        used={"vision": 7000, "nlp": 1000, "speech": 1500},
        capacity_milli=11000,
    )
    # 3 GPUs borrowed by Vision: 1 from the unassigned GPU, 2 from NLP's idle 3 (larger
    # than Speech's idle 0.5).
    assert pairs == [("vision", UNASSIGNED, 1000), ("vision", "nlp", 2000)]


def test_nobody_borrows_within_guarantees() -> None:
    assert borrowing(guaranteed={"a": 2000}, used={"a": 2000}, capacity_milli=4000) == []


def test_borrowing_beyond_known_capacity_is_attributed_to_unassigned() -> None:
    assert borrowing(guaranteed={"a": 1000}, used={"a": 3000}, capacity_milli=0) == [
        ("a", UNASSIGNED, 2000)
    ]


amounts = st.integers(min_value=0, max_value=20_000)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(st.sampled_from("abcdef"), st.tuples(amounts, amounts), max_size=6),
    st.integers(min_value=0, max_value=100_000),
)
def test_pairs_add_up_to_what_each_team_borrows_and_never_lend_more_than_is_idle(
    teams: dict[str, tuple[int, int]], capacity: int
) -> None:
    guaranteed = {t: g for t, (g, _) in teams.items()}
    used = {t: u for t, (_, u) in teams.items()}
    pairs = borrowing(guaranteed=guaranteed, used=used, capacity_milli=capacity)
    for team in teams:
        taken = sum(m for b, _, m in pairs if b == team)
        assert taken == max(0, used[team] - guaranteed[team])
        lent = sum(m for _, lender, m in pairs if lender == team)
        assert lent <= max(0, guaranteed[team] - used[team])
        assert not (taken and lent)
    assert all(m > 0 and b != lender for b, lender, m in pairs)
