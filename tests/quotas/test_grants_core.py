"""Quota requests and grants on plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from apps.quotas.core import (
    KIND_TEAM,
    KIND_USER,
    Grant,
    QuotaNumbers,
    grant_request_errors,
    may_decide,
    parse_gpus,
    with_grants,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
BASE = QuotaNumbers(4000, 8000, 2000)


def g(milli: int, start: int, end: int, user: str | None = None, team: str = "nlp") -> Grant:
    return Grant(team, "H100", milli, NOW + start * DAY, NOW + end * DAY, user)


def test_grants_count_from_their_start_until_their_end() -> None:
    grants = [g(16000, 1, 15)]
    at = lambda t: with_grants(BASE, grants, team="nlp", gpu_class="H100", now=t)  # noqa: E731
    assert at(NOW) == BASE
    assert at(NOW + DAY) == QuotaNumbers(20000, 24000, 2000)
    assert at(NOW + 15 * DAY - timedelta(seconds=1)).limit_milli == 24000
    assert at(NOW + 15 * DAY) == BASE  # expired by itself


def test_a_members_grant_raises_only_their_cap_and_never_above_the_limit() -> None:
    grants = [g(3000, 0, 2, user="ada"), g(9000, 0, 2, user="bob"), g(1000, 0, 2, team="vision")]
    ada = with_grants(BASE, grants, team="nlp", gpu_class="H100", now=NOW, user="ada")
    bob = with_grants(BASE, grants, team="nlp", gpu_class="H100", now=NOW, user="bob")
    eve = with_grants(BASE, grants, team="nlp", gpu_class="H100", now=NOW, user="eve")
    assert (ada.per_user_cap_milli, bob.per_user_cap_milli, eve.per_user_cap_milli) == (
        5000,
        8000,
        2000,
    )
    assert ada.limit_milli == 8000  # another team's grant does not count


@given(
    st.lists(
        st.tuples(st.integers(1, 20_000), st.integers(-5, 5), st.integers(1, 10), st.booleans()),
        max_size=10,
    ),
    st.integers(-6, 16),
)
def test_the_effective_quota_keeps_the_quota_rules(
    raw: list[tuple[int, int, int, bool]], day: int
) -> None:
    grants = [g(m, s, s + length, "ada" if mine else None) for m, s, length, mine in raw]
    q = with_grants(BASE, grants, team="nlp", gpu_class="H100", now=NOW + day * DAY, user="ada")
    assert q.guaranteed_milli >= BASE.guaranteed_milli
    assert q.limit_milli >= q.guaranteed_milli
    assert q.per_user_cap_milli is not None and q.per_user_cap_milli <= q.limit_milli


def test_parse_gpus_takes_up_to_three_decimals() -> None:
    assert parse_gpus("16") == 16000
    assert parse_gpus(" 0.25 ") == 250
    for bad in ["", "-1", "0", "1.0005", "nan", "inf", "1e9", "abc", "1,5"]:
        assert parse_gpus(bad) is None, bad


def errors(**kw: object) -> dict[str, str]:
    args: dict[str, object] = {
        "kind": KIND_TEAM,
        "amount_milli": 16000,
        "start": NOW,
        "end": NOW + 14 * DAY,
        "now": NOW,
        "justification": "deadline",
        "max_days": 90,
        "base": BASE,
    }
    args.update(kw)
    return grant_request_errors(**args)  # type: ignore[arg-type]


def test_request_errors_name_the_field_and_say_what_to_do() -> None:
    assert errors() == {}
    assert set(errors(amount_milli=0, end=NOW, justification=" ")) == {
        "amount",
        "ends_at",
        "justification",
    }
    assert "at most 90 days" in errors(end=NOW + 91 * DAY)["ends_at"]
    assert "past" in errors(start=NOW - 3 * DAY, end=NOW - DAY)["ends_at"]
    assert "no quota" in errors(base=None)["gpu_class"]
    assert "no per-user cap" in errors(kind=KIND_USER, base=QuotaNumbers(0, 4000))["kind"]
    assert "exceed the team's limit of 8 GPU" in errors(kind=KIND_USER, amount_milli=7000)["amount"]
    assert errors(kind=KIND_USER, amount_milli=6000) == {}
    assert "kind" in errors(kind="everything")


def test_leads_decide_member_caps_and_admins_decide_team_quotas() -> None:
    assert may_decide(kind=KIND_USER, is_admin=False, leads_team=True)
    assert not may_decide(kind=KIND_TEAM, is_admin=False, leads_team=True)
    assert not may_decide(kind=KIND_USER, is_admin=False, leads_team=False)
    assert may_decide(kind=KIND_TEAM, is_admin=True, leads_team=False)
