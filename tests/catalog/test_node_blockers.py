"""Why a node takes no new work, on plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from apps.catalog import core

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def blockers(**kw: object) -> list[str]:
    values: dict[str, object] = {
        "schedulable": True,
        "ready": True,
        "health_verdict": "ok",
        "health_problems": [],
        "windows": [],
        "now": NOW,
    }
    values.update(kw)
    return core.node_blockers(**values)  # type: ignore[arg-type]


def test_a_healthy_ready_uncordoned_node_takes_work() -> None:
    assert blockers() == []
    assert blockers(health_verdict="warning") == []
    assert blockers(health_verdict="") == []  # never reported: not a reason to stop


def test_each_reason_is_named() -> None:
    assert "Cordoned" in blockers(schedulable=False)[0]
    assert "NotReady" in blockers(ready=False)[0]
    (failed,) = blockers(health_verdict="failed", health_problems=["GPU 3: XID 79."])
    assert "Health check failed" in failed and "XID 79" in failed


@given(start=st.integers(-7200, 7200), length=st.integers(1, 7200), drain=st.booleans())
def test_a_window_blocks_exactly_while_it_is_open(start: int, length: int, drain: bool) -> None:
    window = core.MaintenanceWindow(
        NOW + timedelta(seconds=start), NOW + timedelta(seconds=start + length), "BIOS", drain
    )
    reasons = blockers(windows=[window])
    assert bool(reasons) == (start <= 0 < start + length)
    if reasons:
        assert "BIOS" in reasons[0] and ("draining" in reasons[0]) == drain
