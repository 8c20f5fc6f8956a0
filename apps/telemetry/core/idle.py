"""Idle decisions on plain data: the idle policy of a workload, and when an idle workload is
warned, suspended or flagged."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

# --- idle decisions -----------------------------------------------------------------------

KIND_NOTEBOOK = "notebook"
FLAGGED_KINDS = frozenset({"training", "sweep"})


@dataclass(frozen=True)
class IdlePolicy:
    enabled: bool
    threshold: float  # 0–1
    warn_after: timedelta
    suspend_after: timedelta
    flag_after: timedelta


def with_idle_timeout(policy: IdlePolicy, *, kind: str, timeout_seconds: int | None) -> IdlePolicy:
    """The policy for one workload that has an idle timeout of its own (asked for in its
    request, or its team policy's default): a notebook is suspended after it (and warned no
    later), a training job or sweep flagged after it. Without one, the policy as it is."""
    if not timeout_seconds or timeout_seconds <= 0:
        return policy
    timeout = timedelta(seconds=timeout_seconds)
    if kind == KIND_NOTEBOOK:
        return replace(policy, suspend_after=timeout, warn_after=min(policy.warn_after, timeout))
    if kind in FLAGGED_KINDS:
        return replace(policy, flag_after=timeout)
    return policy


@dataclass(frozen=True)
class IdleState:
    idle_since: datetime | None = None
    warned_at: datetime | None = None
    flagged_at: datetime | None = None


@dataclass(frozen=True)
class IdleDecision:
    idle_since: datetime | None
    warn: bool = False
    suspend: bool = False
    flag: bool = False
    busy_again: bool = False  # the streak ended: open warnings and flags are resolved


def idle_decide(
    *,
    kind: str,
    utilisation: float | None,
    policy: IdlePolicy,
    state: IdleState,
    window_start: datetime,
    now: datetime,
    activity_at: datetime | None = None,
) -> IdleDecision:
    """What the idle policy does after one window.

    No measurement means no idea: the streak ends and nothing is done (a notebook is never
    culled on missing data). A GPU at or above the threshold ends the streak, and so does a
    notebook's Jupyter activity in the window (``activity_at``: its last use as Jupyter
    reports it; someone editing, running cells or reading a notebook uses it, GPU or not).
    A notebook is
    warned once it has been idle for ``warn_after``, and suspended only after it was warned in
    an earlier window and has been idle for ``suspend_after``. Training jobs and sweeps are
    flagged once, after ``flag_after``. Other kinds (inference) are never acted on.
    """
    had_streak = state.idle_since is not None or state.warned_at or state.flagged_at
    used_in_jupyter = (
        kind == KIND_NOTEBOOK and activity_at is not None and activity_at > window_start
    )
    if utilisation is None or utilisation >= policy.threshold or used_in_jupyter:
        return IdleDecision(idle_since=None, busy_again=bool(had_streak))
    idle_since = state.idle_since or window_start
    idle_for = now - idle_since
    if not policy.enabled:
        return IdleDecision(idle_since=idle_since)
    if kind == KIND_NOTEBOOK:
        if state.warned_at is None:
            return IdleDecision(idle_since=idle_since, warn=idle_for >= policy.warn_after)
        suspend = idle_for >= policy.suspend_after and state.warned_at < now
        return IdleDecision(idle_since=idle_since, suspend=suspend)
    if kind in FLAGGED_KINDS and state.flagged_at is None:
        return IdleDecision(idle_since=idle_since, flag=idle_for >= policy.flag_after)
    return IdleDecision(idle_since=idle_since)


def describe_minutes(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} seconds"
    if seconds < 2 * 3600:
        return f"{seconds // 60} minutes"
    return f"{seconds / 3600:.1f} hours"
