"""How many replicas an endpoint should run: a pure decision on plain numbers.

The rule is the Kubernetes horizontal autoscaler's, per metric: with a target ``t`` per
replica, ``desired = ceil(total_load / t)`` for requests per second, ``desired =
ceil(replicas × mean_utilisation / t)`` for GPU utilisation; a change within ``TOLERANCE`` of
the target is ignored, the result is kept between the endpoint's minimum (at least one while
it serves) and maximum. Two cool-downs keep it from flapping: after any change, no scale-up
for ``cooldown_up`` seconds and no scale-down for ``cooldown_down``; a scale-down also waits
until the load has stayed low that long (the highest desire over the window counts, like the
autoscaler's stabilisation window). An endpoint that may scale to zero goes to zero after
``idle_seconds`` without a single request. No data (Prometheus down, no samples yet): no change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

METRIC_RPS = "rps"
METRIC_GPU = "gpu"
TOLERANCE = 0.1


@dataclass(frozen=True)
class Policy:
    min_replicas: int
    max_replicas: int
    metric: str
    target: float
    idle_seconds: float | None = None  # None: never to zero
    cooldown_up: float = 60.0
    cooldown_down: float = 300.0


@dataclass(frozen=True)
class State:
    """What the loop remembers of an endpoint between passes."""

    replicas: int  # asked for now (its target)
    last_change_at: float | None = None
    idle_since: float | None = None  # first pass without requests (None: it had some)
    # (time, desired) of recent passes: a scale-down takes the highest over the window.
    recent: tuple[tuple[float, int], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Load:
    value: float | None  # total requests/s, or mean GPU utilisation in percent
    requests: float | None = None  # total requests/s, for idleness (None: unknown)


@dataclass(frozen=True)
class Decision:
    replicas: int
    reason: str
    state: State

    @property
    def changed(self) -> bool:
        return self.reason != ""


def desired_replicas(policy: Policy, replicas: int, value: float) -> int:
    """The replicas the load asks for, before bounds and cool-downs."""
    if policy.target <= 0:
        return replicas
    if policy.metric == METRIC_GPU:
        current = max(replicas, 1)
        ratio = value / policy.target
        if abs(ratio - 1.0) <= TOLERANCE:
            return current
        return math.ceil(current * ratio)
    wanted = value / policy.target
    if replicas > 0 and abs(wanted / replicas - 1.0) <= TOLERANCE:
        return replicas
    return math.ceil(wanted - 1e-9)


def decide(policy: Policy, state: State, load: Load, now: float) -> Decision:
    """The replicas to ask for now, why (empty: no change), and what to remember."""
    idle_since = state.idle_since
    if load.requests is not None:
        idle_since = (idle_since if idle_since is not None else now) if load.requests <= 0 else None
    floor = max(policy.min_replicas, 1)
    if load.value is None:
        kept = State(state.replicas, state.last_change_at, idle_since, state.recent)
        return Decision(state.replicas, "", kept)
    if state.replicas == 0 and not (load.requests or 0) > 0:
        # Scaled to zero stays there until a call comes (the call wakes it, not the loop).
        return Decision(0, "", State(0, state.last_change_at, idle_since, state.recent))
    raw = desired_replicas(policy, state.replicas, load.value)
    desired = min(max(raw, floor), policy.max_replicas)
    window = policy.cooldown_down
    recent = (*((t, d) for t, d in state.recent if now - t < window), (now, desired))
    since_change = math.inf if state.last_change_at is None else now - state.last_change_at

    def changed(replicas: int, reason: str) -> Decision:
        return Decision(replicas, reason, State(replicas, now, idle_since, ((now, replicas),)))

    if (
        policy.min_replicas == 0
        and policy.idle_seconds is not None
        and idle_since is not None
        and now - idle_since >= policy.idle_seconds
        and state.replicas > 0
    ):
        minutes = policy.idle_seconds / 60
        return changed(0, f"no requests for {minutes:g} min: scaled to zero")
    if desired > state.replicas and since_change >= policy.cooldown_up:
        return changed(desired, _why(policy, load.value, state.replicas, desired))
    if desired < state.replicas and since_change >= policy.cooldown_down:
        stable = max(d for _, d in recent)  # the highest desire over the window
        if stable < state.replicas:
            return changed(stable, _why(policy, load.value, state.replicas, stable))
    return Decision(
        state.replicas, "", State(state.replicas, state.last_change_at, idle_since, recent)
    )


def _why(policy: Policy, value: float, before: int, after: int) -> str:
    what = (
        f"{value:.1f} requests/s for a target of {policy.target:g} per replica"
        if policy.metric == METRIC_RPS
        else f"GPU utilisation {value:.0f}% for a target of {policy.target:g}%"
    )
    return f"{what}: {before} → {after} replicas"
