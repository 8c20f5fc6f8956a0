from __future__ import annotations

from itertools import pairwise

import pytest

from apps.catalog.core import GpuClassSpec
from apps.workloads import core, rules


def test_happy_path_transitions_are_legal() -> None:
    path = [core.PENDING, core.QUEUED, core.ADMITTED, core.STARTING, core.RUNNING, core.SUCCEEDED]
    for current, target in pairwise(path):
        core.check_transition(current, target)


@pytest.mark.parametrize("terminal", sorted(core.TERMINAL_STATES))
def test_terminal_states_never_change(terminal: str) -> None:
    for target in core.TRANSITIONS:
        with pytest.raises(core.TransitionError):
            core.check_transition(terminal, target)


def test_preempted_goes_back_to_the_queue() -> None:
    core.check_transition(core.RUNNING, core.PREEMPTED)
    core.check_transition(core.PREEMPTED, core.QUEUED)


def test_pending_cannot_jump_to_running() -> None:
    with pytest.raises(core.TransitionError, match="pending cannot become running"):
        core.check_transition(core.PENDING, core.RUNNING)


@pytest.mark.parametrize(
    ("attacker", "victim", "allowed"),
    [
        ("production", "training", True),
        ("production", "batch", True),
        ("training", "development", True),
        ("development", "batch", True),
        ("training", "production", False),
        ("batch", "development", False),
        ("training", "training", False),
        ("production", "production", False),
    ],
)
def test_who_preempts_whom_follows_the_design_table(
    attacker: str, victim: str, allowed: bool
) -> None:
    assert core.may_preempt(attacker, victim) is allowed


@pytest.mark.parametrize(
    ("kind", "milli", "replicas", "field"),
    [
        ("training", 0, 1, "gpu_milli"),
        ("training", -500, 1, "gpu_milli"),
        ("training", 1500, 1, "gpu_milli"),
        ("training", 2.5, 1, "gpu_milli"),
        ("training", 500, 2, "replicas"),
        ("training", 1000, 0, "replicas"),
        ("notebook", 1000, 2, "replicas"),
    ],
)
def test_request_errors_explain_bad_amounts(
    kind: str, milli: int, replicas: int, field: str
) -> None:
    errors = rules.amount_problems(kind, milli, replicas)
    assert field in errors
    assert errors[field]


@pytest.mark.parametrize(("milli", "replicas"), [(250, 1), (1000, 4), (8000, 2), (1000, 1)])
def test_request_errors_accept_fractions_and_whole_gpus(milli: int, replicas: int) -> None:
    request = rules.WorkloadRequest(
        kind="training", name="x", gpu_milli=milli, replicas=replicas, command=("python",)
    )
    assert rules.amount_problems(request.kind, request.gpu_milli, request.replicas) == {}
    h100 = GpuClassSpec("H100", "whole", 81559)
    assert rules.charge_of(request, h100).total_milli == -(-milli // 1000) * 1000 * replicas


def test_only_leads_and_admins_may_use_production() -> None:
    assert "production" not in core.allowed_priorities(is_lead=False, is_admin=False)
    assert "production" in core.allowed_priorities(is_lead=True, is_admin=False)
    assert "production" in core.allowed_priorities(is_lead=False, is_admin=True)
