from __future__ import annotations

import pytest

from apps.quotas import core


def test_valid_quota_has_no_errors() -> None:
    assert core.quota_errors(guaranteed_milli=2000, limit_milli=4000, per_user_cap_milli=1000) == {}


@pytest.mark.parametrize(
    ("g", "limit", "cap", "field"),
    [
        (4000, 2000, None, "limit_milli"),
        (-1, 2000, None, "guaranteed_milli"),
        (0, -5, None, "limit_milli"),
        (1000, 2000, 3000, "per_user_cap_milli"),
        (1000, 2000, 0, "per_user_cap_milli"),
    ],
)
def test_quota_errors(g: int, limit: int, cap: int | None, field: str) -> None:
    assert field in core.quota_errors(guaranteed_milli=g, limit_milli=limit, per_user_cap_milli=cap)


def test_overcommitted_guarantees_warn() -> None:
    warning = core.guarantee_overcommit_warning(
        class_name="H100", guarantees_milli=[16000, 20000], capacity_milli=32000
    )
    assert warning is not None
    assert "36 GPU" in warning and "32 GPU" in warning


def test_no_warning_within_capacity_or_when_capacity_unknown() -> None:
    assert (
        core.guarantee_overcommit_warning(
            class_name="H100", guarantees_milli=[32000], capacity_milli=32000
        )
        is None
    )
    assert (
        core.guarantee_overcommit_warning(
            class_name="H100", guarantees_milli=[99000], capacity_milli=0
        )
        is None
    )


@pytest.mark.parametrize(
    ("milli", "text"), [(1500, "1.5"), (250, "0.25"), (2000, "2"), (1, "0.001")]
)
def test_format_milli(milli: int, text: str) -> None:
    assert core.format_milli(milli) == text
